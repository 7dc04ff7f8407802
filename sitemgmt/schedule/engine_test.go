package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// baseSite is a valid site with modes but no pools or hosts.
func baseSite(tz string) *model.Site {
	return &model.Site{
		Name:        "test",
		Timezone:    tz,
		DefaultMode: "local",
		Images: []model.Image{
			{Name: "desk", Kind: model.ImageDesktop},
			{Name: "bio", Kind: model.ImageCourseVM},
		},
		Modes: []model.Mode{
			{Name: "desktop", Kind: model.KindDesktop, Image: "desk"},
			{Name: "cluster", Kind: model.KindCluster, Image: "desk"},
			{Name: "local", Kind: model.KindLocalDisk},
			{Name: "maint", Kind: model.KindMaintenance},
			{Name: "course-bio101", Kind: model.KindCourseVM, Image: "desk", VM: "bio"},
			{Name: "exam", Kind: model.KindDesktop, Image: "desk"},
		},
	}
}

func addPool(s *model.Site, name string, rules ...string) {
	s.Pools = append(s.Pools, model.Pool{Name: name, Weekly: rules})
}

func addHost(s *model.Site, name, pool string, rules ...string) {
	i := len(s.Hosts) + 1
	s.Hosts = append(s.Hosts, model.Host{Name: name, Pool: pool, Weekly: rules,
		MAC: fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255)})
}

func addException(s *model.Site, name string, kind model.ExceptionKind, mode string, start, end time.Time, targets ...model.Target) {
	s.Exceptions = append(s.Exceptions, model.Exception{Name: name, Kind: kind, Mode: mode, Start: start, End: end, Targets: targets})
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustCompile(t testing.TB, s *model.Site) *Engine {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	e, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return e
}

// smallSite is the fixture of the engine tests. lab-a has a working week with nights,
// a Saturday slot and a Sunday->Monday maintenance window; lab-b runs the cluster every
// night; lab-c has no rules.
func smallSite(t testing.TB) (*model.Site, *time.Location) {
	loc := mustLoc(t, "Europe/Berlin")
	at := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, loc) }
	s := baseSite("Europe/Berlin")
	addPool(s, "lab-a",
		"mon-fri 08:00-18:00 desktop",
		"mon-thu 18:00-08:00 cluster",
		"fri 18:00-22:00 cluster",
		"sat 10:00-16:00 desktop",
		"sun 22:00-06:00 maint")
	addPool(s, "lab-b", "daily 22:00-06:00 cluster")
	addPool(s, "lab-c")
	addHost(s, "pc001", "lab-a")
	addHost(s, "pc002", "lab-a", "wed 10:00-12:00 course-bio101")
	addHost(s, "pc003", "lab-b")
	addHost(s, "pc004", "lab-c")
	addHost(s, "pc005", "lab-c")
	addException(s, "exam-2026-12", "exam", "exam", at(12, 1, 9, 0), at(12, 1, 12, 0), model.Target{Pool: "lab-a"})
	addException(s, "repair-pc002", "maintenance", "maint", at(12, 1, 10, 0), at(12, 1, 11, 0), model.Target{Host: "pc002"})
	addException(s, "xmas", "holiday", "local", at(12, 24, 0, 0), at(12, 27, 0, 0), model.Target{Pool: "lab-b"}, model.Target{Pool: "lab-b"})
	addException(s, "pc005-course", "lecture", "course-bio101", at(12, 10, 14, 0), at(12, 10, 16, 0), model.Target{Host: "pc005"})
	return s, loc
}

func TestEngineSmallSite(t *testing.T) {
	s, loc := smallSite(t)
	e := mustCompile(t, s)
	at := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, loc) }
	never := time.Time{}
	const (
		aDesk  = `pool lab-a weekly "mon-fri 08:00-18:00 desktop"`
		aNight = `pool lab-a weekly "mon-thu 18:00-08:00 cluster"`
		aMaint = `pool lab-a weekly "sun 22:00-06:00 maint"`
		exam   = `pool lab-a exception "exam-2026-12" (exam)`
		def    = "site default"
	)
	tests := []struct {
		name     string
		host     string
		t        time.Time
		mode     string
		level    Level
		rule     string
		next     time.Time
		nextMode string
	}{
		{"pool weekly", "pc001", at(11, 30, 9, 0), "desktop", LevelPoolWeekly, aDesk, at(11, 30, 18, 0), "cluster"},
		{"site default before first rule", "pc001", at(11, 30, 7, 59).Add(59 * time.Second), "local", LevelSiteDefault, def, at(11, 30, 8, 0), "desktop"},
		{"rule start inclusive", "pc001", at(11, 30, 8, 0), "desktop", LevelPoolWeekly, aDesk, at(11, 30, 18, 0), "cluster"},
		{"sunday rule wraps into monday", "pc001", at(11, 30, 5, 0), "maint", LevelPoolWeekly, aMaint, at(11, 30, 6, 0), "local"},
		{"sunday->monday wrap, sunday side", "pc001", at(12, 6, 23, 0), "maint", LevelPoolWeekly, aMaint, at(12, 7, 6, 0), "local"},
		{"overnight wrap", "pc001", at(11, 30, 23, 0), "cluster", LevelPoolWeekly, aNight, at(12, 1, 8, 0), "desktop"},
		{"overnight wrap, next morning", "pc001", at(12, 1, 7, 50), "cluster", LevelPoolWeekly, aNight, at(12, 1, 8, 0), "desktop"},
		{"weekly until exception", "pc001", at(12, 1, 8, 30), "desktop", LevelPoolWeekly, aDesk, at(12, 1, 9, 0), "exam"},
		{"exception start inclusive", "pc001", at(12, 1, 9, 0), "exam", LevelPoolException, exam, at(12, 1, 12, 0), "desktop"},
		{"exception last instant", "pc001", at(12, 1, 12, 0).Add(-time.Nanosecond), "exam", LevelPoolException, exam, at(12, 1, 12, 0), "desktop"},
		{"exception end exclusive", "pc001", at(12, 1, 12, 0), "desktop", LevelPoolWeekly, aDesk, at(12, 1, 18, 0), "cluster"},
		{"pool exception over host weekly", "pc002", at(12, 1, 9, 30), "exam", LevelPoolException, exam, at(12, 1, 10, 0), "maint"},
		{"host exception over pool exception", "pc002", at(12, 1, 10, 0), "maint", LevelHostException, `host pc002 exception "repair-pc002" (maintenance)`, at(12, 1, 11, 0), "exam"},
		{"host weekly over pool weekly", "pc002", at(12, 2, 10, 30), "course-bio101", LevelHostWeekly, `host pc002 weekly "wed 10:00-12:00 course-bio101"`, at(12, 2, 12, 0), "desktop"},
		{"pool weekly around host weekly", "pc002", at(12, 2, 9, 0), "desktop", LevelPoolWeekly, aDesk, at(12, 2, 10, 0), "course-bio101"},
		{"host without rules unaffected", "pc001", at(12, 2, 10, 30), "desktop", LevelPoolWeekly, aDesk, at(12, 2, 18, 0), "cluster"},
		{"friday evening", "pc001", at(12, 4, 23, 0), "local", LevelSiteDefault, def, at(12, 5, 10, 0), "desktop"},
		{"saturday to sunday night", "pc001", at(12, 5, 17, 0), "local", LevelSiteDefault, def, at(12, 6, 22, 0), "maint"},
		{"daily night", "pc003", at(12, 3, 23, 0), "cluster", LevelPoolWeekly, `pool lab-b weekly "daily 22:00-06:00 cluster"`, at(12, 4, 6, 0), "local"},
		{"night interrupted by holiday", "pc003", at(12, 23, 23, 0), "cluster", LevelPoolWeekly, `pool lab-b weekly "daily 22:00-06:00 cluster"`, at(12, 24, 0, 0), "local"},
		{"holiday", "pc003", at(12, 24, 12, 0), "local", LevelPoolException, `pool lab-b exception "xmas" (holiday)`, at(12, 27, 0, 0), "cluster"},
		// Same mode across the holiday's start: the walk must look through it.
		{"default into holiday of same mode", "pc003", at(12, 23, 12, 0), "local", LevelSiteDefault, def, at(12, 23, 22, 0), "cluster"},
		{"no rules at all", "pc004", at(12, 1, 9, 0), "local", LevelSiteDefault, def, never, ""},
		{"before host exception", "pc005", at(12, 10, 13, 0), "local", LevelSiteDefault, def, at(12, 10, 14, 0), "course-bio101"},
		{"host exception", "pc005", at(12, 10, 15, 0), "course-bio101", LevelHostException, `host pc005 exception "pc005-course" (lecture)`, at(12, 10, 16, 0), "local"},
		{"after last exception", "pc005", at(12, 10, 16, 0), "local", LevelSiteDefault, def, never, ""},
	}
	ref := newRef(t, s)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := e.At(tc.host, tc.t)
			if err != nil {
				t.Fatal(err)
			}
			want := Decision{Mode: tc.mode, Level: tc.level, Rule: tc.rule, Next: tc.next, NextMode: tc.nextMode}
			if d.Mode != want.Mode || d.Level != want.Level || d.Rule != want.Rule || !d.Next.Equal(want.Next) || d.NextMode != want.NextMode {
				t.Errorf("At(%s, %s) =\n  %+v\nwant\n  %+v", tc.host, tc.t.Format(time.RFC3339Nano), d, want)
			}
			// The deciding exception's kind travels with the decision (boot menus lock
			// or open on it); these fixtures name it in the rule text.
			wantKind := model.ExceptionKind("")
			if tc.level == LevelHostException || tc.level == LevelPoolException {
				wantKind = model.ExceptionKind(tc.rule[strings.LastIndex(tc.rule, "(")+1 : len(tc.rule)-1])
			}
			if d.ExceptionKind != wantKind {
				t.Errorf("At(%s, %s).ExceptionKind = %q, want %q", tc.host, tc.t.Format(time.RFC3339), d.ExceptionKind, wantKind)
			}
			if h := s.Host(tc.host); e.AtHost(h, tc.t) != d {
				t.Errorf("AtHost differs from At")
			}
			if msg := checkAgainstRef(e, ref, s.Host(tc.host), tc.t); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestEngineUnknownHost(t *testing.T) {
	s, loc := smallSite(t)
	e := mustCompile(t, s)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, loc)
	_, err := e.At("nope", now)
	var ie *model.InvalidError
	if !errors.As(err, &ie) || ie.Msg != `unknown host "nope"` {
		t.Fatalf("At(nope) error = %v, want unknown host", err)
	}
	want := Decision{Mode: "local", Level: LevelSiteDefault, Rule: "site default (unknown host)"}
	if d := e.AtUnknown(now); d != want {
		t.Errorf("AtUnknown = %+v, want %+v", d, want)
	}
	if d := e.AtHost(&model.Host{Name: "added-later", Pool: "lab-a"}, now); d != want {
		t.Errorf("AtHost(unknown) = %+v, want %+v", d, want)
	}
	s.UnknownMode = "maint"
	e = mustCompile(t, s)
	want = Decision{Mode: "maint", Level: LevelSiteDefault, Rule: "site unknown-host mode"}
	if d := e.AtUnknown(now); d != want {
		t.Errorf("AtUnknown with unknownMode = %+v, want %+v", d, want)
	}
	if e.Location().String() != "Europe/Berlin" {
		t.Errorf("Location = %v", e.Location())
	}
}

func TestLevelString(t *testing.T) {
	want := []string{"host exception", "pool exception", "host weekly", "pool weekly", "site default"}
	for i, l := range []Level{LevelHostException, LevelPoolException, LevelHostWeekly, LevelPoolWeekly, LevelSiteDefault} {
		if l.String() != want[i] {
			t.Errorf("Level %d = %q, want %q", int(l), l.String(), want[i])
		}
	}
	if Level(0).String() != "Level(0)" {
		t.Errorf("zero level = %q", Level(0).String())
	}
}

func TestCompileErrors(t *testing.T) {
	loc := mustLoc(t, "Europe/Berlin")
	at := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, loc) }
	tests := []struct {
		name     string
		edit     func(s *model.Site)
		want     string // exact message; "" = no error
		conflict bool
	}{
		{"pool rules overlap", func(s *model.Site) {
			addPool(s, "lab-a", "mon-fri 08:00-18:00 desktop", "wed 10:00-12:00 course-bio101")
		}, `pool lab-a: weekly rules "mon-fri 08:00-18:00 desktop" and "wed 10:00-12:00 course-bio101" overlap on wed 10:00`, true},
		{"overnight rule overlaps next day", func(s *model.Site) {
			addPool(s, "lab-a", "mon-fri 18:00-08:00 cluster", "sat,sun 00:00-24:00 cluster")
		}, `pool lab-a: weekly rules "mon-fri 18:00-08:00 cluster" and "sat,sun 00:00-24:00 cluster" overlap on sat 00:00`, true},
		{"sunday wraps to monday", func(s *model.Site) {
			addPool(s, "lab-a", "sun 22:00-06:00 maint", "MON  05:00-07:00 desktop")
		}, `pool lab-a: weekly rules "sun 22:00-06:00 maint" and "MON  05:00-07:00 desktop" overlap on mon 05:00`, true},
		{"identical rules", func(s *model.Site) {
			addPool(s, "lab-a", "daily 00:00-24:00 desktop", "daily 00:00-24:00 desktop")
		}, `pool lab-a: weekly rules "daily 00:00-24:00 desktop" and "daily 00:00-24:00 desktop" overlap on mon 00:00`, true},
		{"host rules overlap", func(s *model.Site) {
			addPool(s, "lab-a")
			addHost(s, "pc001", "lab-a", "tue 10:00-11:00 maint", "tue 09:00-10:10 desktop")
		}, `host pc001: weekly rules "tue 10:00-11:00 maint" and "tue 09:00-10:10 desktop" overlap on tue 10:00`, true},
		{"adjacent rules do not overlap", func(s *model.Site) {
			addPool(s, "lab-a", "mon-fri 08:00-18:00 desktop", "mon-fri 18:00-08:00 cluster", "sat 08:00-09:00 maint")
		}, "", false},
		{"host rule over pool rule is precedence, not overlap", func(s *model.Site) {
			addPool(s, "lab-a", "daily 00:00-24:00 desktop")
			addHost(s, "pc001", "lab-a", "daily 00:00-24:00 cluster")
		}, "", false},
		{"unknown mode", func(s *model.Site) {
			addPool(s, "lab-a", "mon 08:00-09:00 nosuch")
		}, `pool lab-a: weekly rule "mon 08:00-09:00 nosuch": unknown mode "nosuch"`, false},
		{"host rule unknown mode", func(s *model.Site) {
			addPool(s, "lab-a")
			addHost(s, "pc001", "lab-a", "mon 08:00-09:00 nosuch")
		}, `host pc001: weekly rule "mon 08:00-09:00 nosuch": unknown mode "nosuch"`, false},
		{"rule does not parse", func(s *model.Site) {
			addPool(s, "lab-a", "mon 08:05-09:00 desktop")
		}, `pool lab-a: invalid weekly rule "mon 08:05-09:00 desktop": time "08:05" is not a multiple of 10 minutes (use :00, :10, ... :50)`, false},
		{"pool exceptions overlap", func(s *model.Site) {
			addPool(s, "lab-a")
			addException(s, "exam-1", "exam", "exam", at(1, 9), at(1, 12), model.Target{Pool: "lab-a"})
			addException(s, "exam-2", "exam", "exam", at(1, 11), at(1, 13), model.Target{Pool: "lab-a"})
		}, `pool lab-a: exceptions "exam-1" and "exam-2" overlap from 2026-12-01 11:00 CET to 2026-12-01 12:00 CET`, true},
		{"host exceptions overlap", func(s *model.Site) {
			addPool(s, "lab-a")
			addHost(s, "pc001", "lab-a")
			addException(s, "b-long", "maintenance", "maint", at(1, 0), at(3, 0), model.Target{Pool: "lab-a"}, model.Target{Host: "pc001"})
			addException(s, "a-short", "exam", "exam", at(2, 9), at(2, 10), model.Target{Host: "pc001"})
		}, `host pc001: exceptions "b-long" and "a-short" overlap from 2026-12-02 09:00 CET to 2026-12-02 10:00 CET`, true},
		{"adjacent exceptions", func(s *model.Site) {
			addPool(s, "lab-a")
			addException(s, "exam-1", "exam", "exam", at(1, 9), at(1, 12), model.Target{Pool: "lab-a"})
			addException(s, "exam-2", "exam", "exam", at(1, 12), at(1, 13), model.Target{Pool: "lab-a"})
		}, "", false},
		{"host and pool exception at once is precedence", func(s *model.Site) {
			addPool(s, "lab-a")
			addHost(s, "pc001", "lab-a")
			addException(s, "exam-1", "exam", "exam", at(1, 9), at(1, 12), model.Target{Pool: "lab-a"})
			addException(s, "fix", "maintenance", "maint", at(1, 9), at(1, 12), model.Target{Host: "pc001"})
		}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSite("Europe/Berlin")
			tc.edit(s)
			if err := s.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			_, err := Compile(s)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			var ie *model.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Compile error = %v (%T), want *model.InvalidError %q", err, err, tc.want)
			}
			if ie.Msg != tc.want || ie.Conflict != tc.conflict {
				t.Errorf("Compile error = %q (conflict %v)\nwant          %q (conflict %v)", ie.Msg, ie.Conflict, tc.want, tc.conflict)
			}
		})
	}
}

// Compile is documented to reject, not panic on, sites that did not pass Validate.
func TestCompileInvalidSites(t *testing.T) {
	for name, edit := range map[string]func(s *model.Site){
		"nil modes":        func(s *model.Site) { s.Modes = nil },
		"bad timezone":     func(s *model.Site) { s.Timezone = "Mars/Olympus" },
		"empty timezone":   func(s *model.Site) { s.Timezone = "" },
		"bad unknown mode": func(s *model.Site) { s.UnknownMode = "nosuch" },
		"duplicate mode":   func(s *model.Site) { s.Modes = append(s.Modes, s.Modes[0]) },
		"duplicate pool":   func(s *model.Site) { addPool(s, "lab-a") },
		"duplicate host":   func(s *model.Site) { addHost(s, "pc001", "lab-a") },
		"host in no pool":  func(s *model.Site) { addHost(s, "pc099", "nowhere") },
		"exception mode":   func(s *model.Site) { s.Exceptions[0].Mode = "nosuch" },
		"exception order":  func(s *model.Site) { s.Exceptions[0].End = s.Exceptions[0].Start },
		"no targets":       func(s *model.Site) { s.Exceptions[0].Targets = nil },
		"empty target":     func(s *model.Site) { s.Exceptions[0].Targets = []model.Target{{}} },
		"both target":      func(s *model.Site) { s.Exceptions[0].Targets = []model.Target{{Pool: "lab-a", Host: "pc001"}} },
		"unknown pool":     func(s *model.Site) { s.Exceptions[0].Targets = []model.Target{{Pool: "x"}} },
		"unknown host":     func(s *model.Site) { s.Exceptions[0].Targets = []model.Target{{Host: "x"}} },
	} {
		s, _ := smallSite(t)
		edit(s)
		e, err := Compile(s)
		if err == nil || e != nil {
			t.Errorf("%s: Compile = %v, %v; want an error", name, e, err)
			continue
		}
		var ie *model.InvalidError
		if !errors.As(err, &ie) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q is not a one-line *model.InvalidError", name, err)
		}
	}
	if _, err := Compile(nil); err == nil {
		t.Error("Compile(nil): no error")
	}
}

// Hosts with equal rules share one week table, hosts without rules or exceptions share
// everything: that is what keeps 10,000 hosts cheap.
func TestSharing(t *testing.T) {
	s := baseSite("UTC")
	addPool(s, "lab-a", "mon-fri 08:00-18:00 desktop")
	addPool(s, "lab-b", "mon-fri 08:00-18:00 desktop")
	addHost(s, "a1", "lab-a")
	addHost(s, "a2", "lab-a")
	addHost(s, "a3", "lab-a", "sat 10:00-12:00 maint", "sun 10:00-12:00 maint")
	addHost(s, "a4", "lab-a", "sun 10:00-12:00 maint", "SAT 10:00-12:00 maint")
	addHost(s, "a5", "lab-a")
	addHost(s, "b1", "lab-b", "sat 10:00-12:00 maint", "sun 10:00-12:00 maint")
	addException(s, "x", "other", "maint", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), model.Target{Host: "a5"})
	e := mustCompile(t, s)
	h := e.hosts
	if h["a1"] != h["a2"] {
		t.Error("plain hosts of one pool do not share")
	}
	if h["a3"] == h["a4"] || h["a3"].table != h["a4"].table {
		t.Error("hosts with equal rules should share the table but not the host texts")
	}
	if h["a3"].table == h["b1"].table {
		t.Error("hosts of different pools share a table")
	}
	if h["a5"] == h["a1"] || h["a5"].table != h["a1"].table {
		t.Error("a host with exceptions should have its own state but share the table")
	}
	d := e.AtHost(&s.Hosts[3], time.Date(2026, 1, 3, 11, 0, 0, 0, time.UTC)) // Saturday
	if d.Rule != `host a4 weekly "sat 10:00-12:00 maint"` {
		t.Errorf("shared table names rule %q", d.Rule)
	}
}

func TestAtHostDoesNotAllocate(t *testing.T) {
	s, loc := smallSite(t)
	e := mustCompile(t, s)
	now := time.Date(2026, 12, 1, 9, 30, 0, 0, loc)
	for i := range s.Hosts {
		h := &s.Hosts[i]
		if n := testing.AllocsPerRun(100, func() { e.AtHost(h, now) }); n != 0 {
			t.Errorf("AtHost(%s) allocates %v times", h.Name, n)
		}
	}
}

// The engine is shared by all request handlers; run with -race to check it stays read-only.
func TestConcurrentUse(t *testing.T) {
	s, loc := smallSite(t)
	e := mustCompile(t, s)
	done := make(chan Decision)
	for g := range 4 {
		go func() {
			var d Decision
			for i := range 200 {
				d = e.AtHost(&s.Hosts[(g+i)%len(s.Hosts)], time.Date(2026, 12, 1, i%24, 0, 0, 0, loc))
			}
			done <- d
		}()
	}
	for range 4 {
		if d := <-done; d.Mode == "" {
			t.Error("empty decision")
		}
	}
}
