package schedule

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func TestRulesGridRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []string
		want  []string // RulesOf(GridOf(rules)); nil: rules themselves
	}{
		{name: "empty"},
		{name: "one", rules: []string{"mon 08:00-10:00 desktop"}},
		{name: "weekdays", rules: []string{"mon-fri 08:00-18:00 desktop"}},
		{name: "days merged", rules: []string{"mon 08:00-18:00 desktop", "tue 08:00-18:00 desktop", "wed 08:00-18:00 desktop"},
			want: []string{"mon-wed 08:00-18:00 desktop"}},
		{name: "adjacent runs merged", rules: []string{"mon 08:00-10:00 desktop", "mon 10:00-12:00 desktop"},
			want: []string{"mon 08:00-12:00 desktop"}},
		{name: "daily", rules: []string{"daily 00:00-24:00 desktop"}},
		{name: "daily spelt out", rules: []string{"mon-sun 07:00-09:00 cluster"}, want: []string{"daily 07:00-09:00 cluster"}},
		{name: "wrap past midnight", rules: []string{"mon-fri 22:00-06:00 cluster"}},
		{name: "wrap sunday into monday", rules: []string{"sun 20:00-02:00 cluster"}},
		{name: "wrap written as two days", rules: []string{"fri 22:00-24:00 cluster", "sat 00:00-03:00 cluster"},
			want: []string{"fri 22:00-03:00 cluster"}},
		{name: "a day and more is not joined", rules: []string{"mon 14:00-24:00 x", "tue 00:00-16:00 x"}},
		{name: "full days are not joined", rules: []string{"sat 00:00-24:00 local-disk", "sun 00:00-24:00 local-disk"},
			want: []string{"sat,sun 00:00-24:00 local-disk"}},
		{name: "example lab-a", rules: []string{"mon,tue,thu,fri 07:00-20:00 desktop", "wed 07:00-10:00 desktop", "wed 10:00-12:00 course-bio101", "wed 12:00-20:00 desktop"}},
		{name: "modes side by side", rules: []string{"mon-fri 08:00-12:00 desktop", "mon-fri 12:00-14:00 course", "sat 08:00-12:00 desktop"},
			want: []string{"mon-sat 08:00-12:00 desktop", "mon-fri 12:00-14:00 course"}},
		{name: "week-end range", rules: []string{"fri-mon 10:00-11:00 x"}, want: []string{"fri-mon 10:00-11:00 x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := GridOf(tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			got := RulesOf(g)
			want := tc.want
			if want == nil {
				want = tc.rules
			}
			if len(want) == 0 && len(got) == 0 {
				return
			}
			if !sameSet(got, want) {
				t.Errorf("RulesOf = %q, want %q", got, want)
			}
			g2, err := GridOf(got)
			if err != nil {
				t.Fatalf("rules %q: %v", got, err)
			}
			if g2 != g {
				t.Errorf("grid from %q differs from the grid of %q", got, tc.rules)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestGridOfWrapAndErrors(t *testing.T) {
	g, err := GridOf([]string{"sun 23:00-01:00 cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if g[6][23*6] != "cluster" || g[6][143] != "cluster" || g[0][0] != "cluster" || g[0][5] != "cluster" || g[0][6] != "" || g[6][137] != "" {
		t.Errorf("sun 23:00-01:00 does not cover sun 23:00..mon 01:00 only")
	}
	for _, tc := range []struct{ rules []string }{
		{[]string{"mon 08:00-10:00 a", "mon 09:00-11:00 b"}},
		{[]string{"sun 23:00-01:00 a", "mon 00:00-02:00 b"}},
		{[]string{"xyz 08:00-10:00 a"}},
		{[]string{"mon 08:05-10:00 a"}},
	} {
		if _, err := GridOf(tc.rules); err == nil {
			t.Errorf("GridOf(%q) accepted", tc.rules)
		}
	}
}

// Random grids: the rules give back the grid exactly, and no rule is one the grid could
// merge with another of the same days.
func TestRulesOfRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	modes := []string{"", "desktop", "cluster", "course"}
	for i := 0; i < 300; i++ {
		var g WeekGrid
		// Blocks of random length, so runs, wraps and equal days occur.
		ws := 0
		for ws < slotsPerWeek {
			n := 1 + rng.Intn(60)
			m := modes[rng.Intn(len(modes))]
			for k := 0; k < n && ws < slotsPerWeek; k++ {
				*g.at(ws) = m
				ws++
			}
		}
		if i%3 == 0 { // copy Monday to other days: day lists
			for d := 1; d < 5; d++ {
				g[d] = g[0]
			}
		}
		rules := RulesOf(g)
		g2, err := GridOf(rules)
		if err != nil {
			t.Fatalf("grid %d: rules %q: %v", i, rules, err)
		}
		if g2 != g {
			t.Fatalf("grid %d: rules %q do not give the grid back", i, rules)
		}
		if again := RulesOf(g2); !reflect.DeepEqual(again, rules) {
			t.Fatalf("grid %d: not stable: %q then %q", i, rules, again)
		}
	}
}

func TestPlanRulesKeepsBookings(t *testing.T) {
	old := []string{"mon-fri 08:00-18:00 desktop", "sat 10:00-12:00 course", "sun 10:00-12:00 course"}
	booked := func(r string) bool { return strings.Contains(r, "course") }
	g, err := GridOf(old)
	if err != nil {
		t.Fatal(err)
	}
	// Unchanged: the same rules come back (the bookings as written, not merged to sat,sun).
	if got := PlanRules(g, old, booked); !sameSet(got, old) {
		t.Errorf("unchanged grid: %q, want %q", got, old)
	}
	// Sunday's booking cut short, Monday extended: the booking goes, the desktop rule is
	// re-made for the new grid.
	g[6][60] = ""
	for s := 18 * 6; s < 20*6; s++ {
		g[0][s] = "desktop"
	}
	got := PlanRules(g, old, booked)
	want := []string{"sat 10:00-12:00 course", "mon 08:00-20:00 desktop", "tue-fri 08:00-18:00 desktop", "sun 10:10-12:00 course"}
	if !sameSet(got, want) {
		t.Errorf("changed grid: %q, want %q", got, want)
	}
	if g2, _ := GridOf(got); g2 != g {
		t.Errorf("planned rules %q do not give the grid", got)
	}
}

func TestPlanRulesKeepsSpelling(t *testing.T) {
	old := []string{"Mon-Fri 8:00-18:00 desktop", "sat 10:00-12:00 desktop"}
	g, err := GridOf(old)
	if err != nil {
		t.Fatal(err)
	}
	g[5][60] = "cluster"
	got := PlanRules(g, old, nil)
	want := []string{"Mon-Fri 8:00-18:00 desktop", "sat 10:00-10:10 cluster", "sat 10:10-12:00 desktop"}
	if !sameSet(got, want) {
		t.Errorf("PlanRules = %q, want %q", got, want)
	}
}
