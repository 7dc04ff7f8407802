package schedule

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Zones with DST, odd offsets and half-hour DST shifts. All have whole-minute offsets
// in the years used, which the minute-stepping reference relies on.
var testZones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "Asia/Kathmandu", "Asia/Kolkata",
	"Australia/Lord_Howe", "America/St_Johns", "Pacific/Chatham", "Australia/Sydney",
}

var testModes = []string{"desktop", "cluster", "local", "maint", "course-bio101", "exam"}

// ruleText builds a rule's text from numbers, using the various spellings of days and
// of a midnight end.
func ruleText(style, day1, day2 int, mask uint8, start, length int, spell24 bool, mode string) string {
	var days string
	switch style % 4 {
	case 0:
		days = dayNames[day1%7]
	case 1:
		a, b := day1%7, day2%7
		if a == b {
			b = (a + 1 + day2%6) % 7
		}
		days = dayNames[a] + "-" + dayNames[b]
	case 2:
		var ds []string
		for d := 0; d < 7; d++ {
			if mask&(1<<d) != 0 {
				ds = append(ds, strings.ToUpper(dayNames[d][:1])+dayNames[d][1:])
			}
		}
		if len(ds) == 0 {
			ds = []string{"sun"}
		}
		days = strings.Join(ds, ",")
	default:
		days = "daily"
	}
	start %= slotsPerDay
	length = 1 + length%slotsPerDay
	if length == slotsPerDay && start != 0 {
		length--
	}
	end := (start + length) % slotsPerDay
	endS := clock(end * slotMinutes)
	if end == 0 && spell24 {
		endS = "24:00"
	}
	return fmt.Sprintf("%s  %s-%s\t%s", days, clock(start*slotMinutes), endS, mode)
}

// randomSite builds a valid site whose rules and exceptions do not overlap (candidates
// that would overlap are dropped, using the reference's coverage), around base.
func randomSite(rng *rand.Rand, tz string, base time.Time) *model.Site {
	s := baseSite(tz)
	s.DefaultMode = testModes[rng.IntN(len(testModes))]
	loc, _ := time.LoadLocation(tz)
	randRules := func(n int) []string {
		var out []string
		var used [7][144]bool
		for range n {
			long := rng.IntN(4) == 0
			length := rng.IntN(36)
			if long {
				length = rng.IntN(144)
			}
			txt := ruleText(rng.IntN(4), rng.IntN(7), rng.IntN(7), uint8(rng.IntN(128)), rng.IntN(144), length, rng.IntN(2) == 0, testModes[rng.IntN(len(testModes))])
			r, err := ParseRule(txt)
			if err != nil {
				panic(err)
			}
			ok := true
			for d := 0; d < 7 && ok; d++ {
				for m := 0; m < 144; m++ {
					if refCovers(r, d, m*10) && used[d][m] {
						ok = false
						break
					}
				}
			}
			if !ok {
				continue
			}
			for d := 0; d < 7; d++ {
				for m := 0; m < 144; m++ {
					if refCovers(r, d, m*10) {
						used[d][m] = true
					}
				}
			}
			out = append(out, txt)
		}
		return out
	}
	npools := 1 + rng.IntN(3)
	for p := range npools {
		addPool(s, fmt.Sprintf("p%d", p), randRules(rng.IntN(6))...)
	}
	nhosts := 1 + rng.IntN(6)
	for h := range nhosts {
		var rules []string
		if rng.IntN(2) == 0 {
			rules = randRules(rng.IntN(4))
		}
		addHost(s, fmt.Sprintf("h%d", h), fmt.Sprintf("p%d", rng.IntN(npools)), rules...)
	}
	// Exceptions on the local 10-minute grid, within a few days of base.
	type iv struct{ a, b time.Time }
	taken := map[model.Target][]iv{}
	for i := range rng.IntN(6) {
		lb := base.In(loc)
		st := time.Date(lb.Year(), lb.Month(), lb.Day(), 0, 0, 0, 0, loc).Add(time.Duration(rng.IntN(6*144)-2*144) * 10 * time.Minute)
		if model.ValidateSlotTime("x", st, loc) != nil {
			continue
		}
		en := st.Add(time.Duration(1+rng.IntN(3*144)) * 10 * time.Minute)
		if rng.IntN(3) == 0 {
			en = st.Add(time.Duration(1+rng.IntN(12)) * 10 * time.Minute)
		}
		var tg model.Target
		if rng.IntN(2) == 0 {
			tg.Pool = fmt.Sprintf("p%d", rng.IntN(npools))
		} else {
			tg.Host = fmt.Sprintf("h%d", rng.IntN(nhosts))
		}
		ok := true
		for _, x := range taken[tg] {
			if st.Before(x.b) && x.a.Before(en) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		taken[tg] = append(taken[tg], iv{st, en})
		addException(s, fmt.Sprintf("x%d", i), "other", testModes[rng.IntN(len(testModes))], st, en, tg)
	}
	return s
}

// transitionsNear returns the zone's transitions in the year of t (for instants to test).
func transitionsNear(loc *time.Location, year int) []time.Time {
	var out []time.Time
	t := time.Date(year, 1, 1, 0, 0, 0, 0, loc)
	for range 4 {
		_, end := t.ZoneBounds()
		if end.IsZero() || end.Year() > year {
			break
		}
		out = append(out, end)
		t = end
	}
	return out
}

func TestEngineMatchesReference(t *testing.T) {
	sites, instants := 150, 25
	if testing.Short() {
		sites = 30
	}
	for seed := range uint64(sites) {
		rng := rand.New(rand.NewPCG(seed, 0x5ced))
		// Base: mostly a DST transition of the zone in 2026, else a random hour.
		tz := testZones[rng.IntN(len(testZones))]
		loc := mustLoc(t, tz)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(365*24)) * time.Hour)
		if tr := transitionsNear(loc, 2026); len(tr) > 0 && rng.IntN(3) != 0 {
			base = tr[rng.IntN(len(tr))]
		}
		s := randomSite(rng, tz, base)
		e := mustCompile(t, s)
		ref := newRef(t, s)
		var xs []time.Time
		for _, x := range s.Exceptions {
			xs = append(xs, x.Start, x.End)
		}
		for i := range instants {
			var at time.Time
			switch {
			case i%5 == 0 && len(xs) > 0:
				at = xs[rng.IntN(len(xs))].Add(time.Duration(rng.IntN(3)-1) * time.Second)
			case i%5 == 1:
				at = base.Add(time.Duration(rng.IntN(7200)-3600) * time.Second)
			default:
				at = base.Add(time.Duration(rng.Int64N(int64(6*24*time.Hour))) - 3*24*time.Hour)
			}
			if rng.IntN(4) == 0 {
				at = at.Add(time.Duration(rng.IntN(1e9)))
			}
			for h := range s.Hosts {
				if msg := checkAgainstRef(e, ref, &s.Hosts[h], at); msg != "" {
					t.Fatalf("seed %d, zone %s: %s\nsite pools %+v\nhosts %+v\nexceptions %+v", seed, s.Timezone, msg, s.Pools, s.Hosts, s.Exceptions)
				}
			}
		}
	}
}
