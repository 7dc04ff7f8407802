package schedule

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// largeSite is 10,000 hosts in 200 pools: five kinds of pool schedule with varied
// times, every 20th host with rules of its own (few distinct sets, so tables are
// shared), pool exams and host repairs around and after the instant.
func largeSite(tb testing.TB) (*model.Site, time.Time) {
	loc := mustLoc(tb, "Europe/Berlin")
	now := time.Date(2026, 12, 1, 10, 5, 0, 0, loc) // a Tuesday
	grid := now.Truncate(10 * time.Minute)
	rng := rand.New(rand.NewPCG(10000, 200))
	s := baseSite("Europe/Berlin")
	for p := range 200 {
		var rules []string
		switch p % 5 {
		case 0:
			rules = []string{"mon-fri 08:00-18:00 desktop", "mon-thu 18:00-08:00 cluster", "fri 18:00-24:00 cluster", "sat,sun 00:00-24:00 cluster"}
		case 1:
			rules = []string{"daily 22:00-06:00 cluster", fmt.Sprintf("mon-fri %02d:00-20:00 desktop", 7+p%3)}
		case 2:
			rules = []string{
				fmt.Sprintf("mon-fri %02d:00-%02d:30 desktop", 7+p%3, 16+p%4),
				fmt.Sprintf("wed %02d:00-%02d:00 course-bio101", 20+p%2, 22),
				"sat-mon 01:00-05:00 maint",
			}
		case 3:
			// no rules: site default
		case 4:
			rules = []string{"mon 10:00-12:00 course-bio101", "tue 10:10-10:20 exam", "tue 14:00-16:00 course-bio101",
				"thu 08:00-10:00 exam", "fri 12:00-13:00 maint", "sun 20:00-04:00 cluster"}
		}
		addPool(s, fmt.Sprintf("lab-%03d", p), rules...)
	}
	own := [][]string{
		{"sat 10:00-12:00 maint"},
		{"tue 10:00-11:00 course-bio101", "thu 16:00-18:00 course-bio101"},
		{"daily 03:00-04:00 maint"},
		{fmt.Sprintf("mon-fri 12:%02d-13:00 local", 10*rng.IntN(6))},
	}
	for i := range 10000 {
		pool := fmt.Sprintf("lab-%03d", i/50)
		var rules []string
		if i%20 == 7 {
			rules = own[rng.IntN(len(own))]
		}
		addHost(s, fmt.Sprintf("pc%05d", i), pool, rules...)
	}
	for i := range 30 {
		st := grid.Add(time.Duration(rng.IntN(14*144)-144) * 10 * time.Minute)
		en := st.Add(time.Duration(1+rng.IntN(36)) * 10 * time.Minute)
		addException(s, fmt.Sprintf("exam-%02d", i), "exam", "exam", st, en, model.Target{Pool: fmt.Sprintf("lab-%03d", 7*i%200)})
	}
	for i := range 100 {
		st := grid.Add(time.Duration(rng.IntN(3*144)-144) * 10 * time.Minute)
		en := st.Add(time.Duration(1+rng.IntN(144)) * 10 * time.Minute)
		addException(s, fmt.Sprintf("repair-%03d", i), "maintenance", "maint", st, en, model.Target{Host: fmt.Sprintf("pc%05d", 97*i%10000)})
	}
	return s, now
}

func evalAll(e *Engine, s *model.Site, at time.Time) int {
	changes := 0
	for i := range s.Hosts {
		if !e.AtHost(&s.Hosts[i], at).Next.IsZero() {
			changes++
		}
	}
	return changes
}

func BenchmarkAtHostAll10k(b *testing.B) {
	s, now := largeSite(b)
	e := mustCompile(b, s)
	b.ReportAllocs()
	for b.Loop() {
		evalAll(e, s, now)
	}
}

func BenchmarkCompile10k(b *testing.B) {
	s, _ := largeSite(b)
	if err := s.Validate(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLargeSite checks a sample of the benchmark site against the reference. Its speed is
// measured by BenchmarkAtHostAll10k and `make bench`, not asserted here: timed tests on a
// shared 2-core machine are noise.
func TestLargeSite(t *testing.T) {
	s, now := largeSite(t)
	e := mustCompile(t, s)
	ref := newRef(t, s)
	for i := 0; i < len(s.Hosts); i += 101 {
		for _, at := range []time.Time{now, now.Add(3*time.Hour + 7*time.Minute), now.Add(-26 * time.Hour)} {
			if msg := checkAgainstRef(e, ref, &s.Hosts[i], at); msg != "" {
				t.Fatal(msg)
			}
		}
	}
}
