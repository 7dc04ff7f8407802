package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"mon-fri 08:00-18:00 desktop", "sat,sun 00:00-24:00 cluster", "mon-fri 18:00-08:00 cluster",
		"daily 22:00-06:00 cluster", "wed 10:00-12:00 course-bio101", "fri-mon 06:00-07:00 m",
		"MON,Wed 8:00-00:00 x", "mon 08:05-09:00 a", "mon 24:00-01:00 a", "mon 01:00-01:00 a",
		"mon-mon 01:00-02:00 a", "daily,mon 01:00-02:00 a", "mon 01:00-02:00 a b", "", "\t", "mon\n01:00-02:00 a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			var ie *model.InvalidError
			if !errors.As(err, &ie) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("ParseRule(%q): error %q is not a one-line *model.InvalidError", s, err)
			}
			return
		}
		if r.Text != r.String() {
			t.Fatalf("ParseRule(%q).Text = %q, String() = %q", s, r.Text, r.String())
		}
		again, err := ParseRule(r.Text)
		if err != nil || again != r {
			t.Fatalf("ParseRule(%q) = %+v, but its canonical form %q parses to %+v, %v", s, r, r.Text, again, err)
		}
		if r.Start < 0 || r.Start > 1430 || r.Start%10 != 0 || r.End < 10 || r.End > 1440 || r.End%10 != 0 || r.Start == r.End {
			t.Fatalf("ParseRule(%q): bad times %d-%d", s, r.Start, r.End)
		}
		if r.Days == [7]bool{} {
			t.Fatalf("ParseRule(%q): no days", s)
		}
		if model.ValidName("mode", r.Mode) != nil {
			t.Fatalf("ParseRule(%q): bad mode %q", s, r.Mode)
		}
		n := 0
		r.eachSlot(func(int) bool { n++; return true })
		days := 0
		for _, d := range r.Days {
			if d {
				days++
			}
		}
		if n != days*r.length() {
			t.Fatalf("ParseRule(%q): covers %d slots, want %d", s, n, days*r.length())
		}
	})
}

// fuzzBytes hands out the fuzzer's bytes, then zeros.
type fuzzBytes struct {
	b []byte
	i int
}

func (f *fuzzBytes) n() int {
	if f.i >= len(f.b) {
		return 0
	}
	f.i++
	return int(f.b[f.i-1])
}

func (f *fuzzBytes) n16() int { return f.n()<<8 | f.n() }

// fuzzSite decodes bytes into a small site (2 pools, 3 hosts at most, a few rules and
// exceptions, which may overlap) and an instant near a DST transition or a random day.
func fuzzSite(data []byte) (*model.Site, time.Time) {
	in := &fuzzBytes{b: data}
	tz := testZones[in.n()%len(testZones)]
	loc, _ := time.LoadLocation(tz)
	s := baseSite(tz)
	s.DefaultMode = testModes[in.n()%len(testModes)]
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Add(time.Duration(in.n16()%365) * 24 * time.Hour)
	if tr := transitionsNear(loc, 2026); len(tr) > 0 {
		if k := in.n(); k%4 != 0 {
			base = tr[k%len(tr)]
		}
	}
	rules := func() []string {
		var out []string
		for range in.n() % 4 {
			out = append(out, ruleText(in.n(), in.n(), in.n(), uint8(in.n()), in.n(), in.n(), in.n()%2 == 0, testModes[in.n()%len(testModes)]))
		}
		return out
	}
	npools := 1 + in.n()%2
	for p := range npools {
		addPool(s, fmt.Sprintf("p%d", p), rules()...)
	}
	nhosts := 1 + in.n()%3
	for h := range nhosts {
		addHost(s, fmt.Sprintf("h%d", h), fmt.Sprintf("p%d", in.n()%npools), rules()...)
	}
	lb := base.In(loc)
	midnight := time.Date(lb.Year(), lb.Month(), lb.Day(), 0, 0, 0, 0, loc)
	for i := range in.n() % 5 {
		st := midnight.Add(time.Duration(in.n16()%(6*144)-3*144) * 10 * time.Minute)
		en := st.Add(time.Duration(1+in.n16()%(2*144)) * 10 * time.Minute)
		var tg model.Target
		if k := in.n(); k%2 == 0 {
			tg.Pool = fmt.Sprintf("p%d", k/2%npools)
		} else {
			tg.Host = fmt.Sprintf("h%d", k/2%nhosts)
		}
		addException(s, fmt.Sprintf("x%d", i), "other", testModes[in.n()%len(testModes)], st, en, tg)
	}
	at := base.Add(time.Duration(in.n16()%(6*24*60)-3*24*60)*time.Minute + time.Duration(in.n()%60)*time.Second)
	if in.n()%2 == 1 {
		at = at.Add(time.Duration(in.n16()) * time.Microsecond)
	}
	return s, at
}

func FuzzEngine(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 0, 0, 1, 1, 2, 0, 3, 0, 0, 1, 2, 3})
	f.Add([]byte("some bytes to decode into a site with rules and exceptions"))
	f.Add([]byte{2, 0, 0, 10, 3, 1, 3, 1, 1, 0, 48, 60, 0, 0, 2, 4, 0, 0, 0, 100, 50, 1, 2, 2, 1, 0, 0, 0, 255, 255, 4, 0, 10, 0, 5, 1, 0, 20, 0, 6, 3, 2, 1, 0, 0, 0})
	f.Add([]byte{7, 5, 1, 100, 1, 2, 3, 3, 6, 0, 70, 30, 1, 3, 2, 1, 1, 200, 9, 140, 0, 0, 2, 0, 3, 1, 0, 0, 0, 0, 0, 3, 3, 1, 2, 0, 0, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, at := fuzzSite(data)
		e, err := Compile(s) // must not panic, valid or not
		if s.Validate() != nil {
			return
		}
		ref := newRef(t, s)
		overlap := ref.overlap()
		if err != nil {
			var ie *model.InvalidError
			if !overlap || !errors.As(err, &ie) || !ie.Conflict {
				t.Fatalf("Compile: %v (reference overlap: %v)", err, overlap)
			}
			return
		}
		if overlap {
			t.Fatalf("Compile accepted overlapping rules or exceptions: pools %+v hosts %+v exceptions %+v", s.Pools, s.Hosts, s.Exceptions)
		}
		for h := range s.Hosts {
			if msg := checkAgainstRef(e, ref, &s.Hosts[h], at); msg != "" {
				t.Fatalf("%s\nzone %s pools %+v\nhosts %+v\nexceptions %+v", msg, s.Timezone, s.Pools, s.Hosts, s.Exceptions)
			}
		}
	})
}
