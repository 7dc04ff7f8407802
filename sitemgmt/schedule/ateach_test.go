package schedule_test

import (
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
)

// AtEach gives every host the decision AtHost gives it, in the site's order, at instants
// across a week with lectures, exams and a holiday.
func TestAtEachIsAtHost(t *testing.T) {
	site := synth.Site(2000, 40, 3)
	eng, err := schedule.Compile(site)
	if err != nil {
		t.Fatal(err)
	}
	for at := time.Date(2026, 12, 1, 0, 0, 0, 0, eng.Location()); at.Before(time.Date(2026, 12, 25, 0, 0, 0, 0, eng.Location())); at = at.Add(97 * time.Minute) {
		n := 0
		eng.AtEach(at, func(i int, d schedule.Decision) {
			if i != n {
				t.Fatalf("index %d, want %d", i, n)
			}
			n++
			if want := eng.AtHost(&site.Hosts[i], at); d != want {
				t.Fatalf("%s at %v: AtEach %+v, AtHost %+v", site.Hosts[i].Name, at, d, want)
			}
		})
		if n != len(site.Hosts) {
			t.Fatalf("AtEach called %d times for %d hosts", n, len(site.Hosts))
		}
	}
}
