package synth

import (
	"testing"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
)

// The generated site must be one the site manager accepts, or the benchmarks measure
// error paths.
func TestSiteIsValid(t *testing.T) {
	s := Site(10000, 200, 1)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Compile(s); err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 10000 || len(s.Pools) != 200 || len(s.BootServers) != 10 {
		t.Fatalf("got %d hosts %d pools %d servers", len(s.Hosts), len(s.Pools), len(s.BootServers))
	}
}
