package schedule

import (
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// DST cases: weekly rules are wall-clock rules. At spring-forward the skipped wall
// slots never occur; at fall-back the repeated hour is the same wall slots again. The
// expected instants are written in UTC so that the test does not depend on the code
// under test's zone arithmetic.
func TestDST(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, m, s int) time.Time { return time.Date(y, mo, d, h, m, s, 0, time.UTC) }
	type check struct {
		t        time.Time
		mode     string
		next     time.Time
		nextMode string
	}
	tests := []struct {
		name   string
		tz     string
		rules  []string
		checks []check
	}{
		{
			// Berlin 2026-03-29: 02:00 CET (01:00 UTC) jumps to 03:00 CEST.
			name: "berlin spring forward skips the 02:00 hour",
			tz:   "Europe/Berlin",
			rules: []string{
				"sun 01:00-02:00 cluster",
				"sun 02:00-03:00 maint",
				"sun 03:00-04:00 desktop",
			},
			checks: []check{
				{utc(2026, 3, 28, 23, 30, 0), "local", utc(2026, 3, 29, 0, 0, 0), "cluster"},
				{utc(2026, 3, 29, 0, 30, 0), "cluster", utc(2026, 3, 29, 1, 0, 0), "desktop"}, // maint never happens
				{utc(2026, 3, 29, 0, 59, 59), "cluster", utc(2026, 3, 29, 1, 0, 0), "desktop"},
				{utc(2026, 3, 29, 1, 0, 0), "desktop", utc(2026, 3, 29, 2, 0, 0), "local"},
				// A week later the same rules see a normal night.
				{utc(2026, 4, 4, 23, 30, 0), "cluster", utc(2026, 4, 5, 0, 0, 0), "maint"},
			},
		},
		{
			name:  "berlin rule spanning spring forward is an hour shorter",
			tz:    "Europe/Berlin",
			rules: []string{"sat 22:00-04:00 cluster"},
			checks: []check{
				{utc(2026, 3, 28, 20, 0, 0), "local", utc(2026, 3, 28, 21, 0, 0), "cluster"}, // 22:00 CET
				{utc(2026, 3, 28, 22, 0, 0), "cluster", utc(2026, 3, 29, 2, 0, 0), "local"},  // 04:00 CEST
			},
		},
		{
			name:  "berlin spring forward inside a mode keeps it",
			tz:    "Europe/Berlin",
			rules: []string{"sun 01:30-02:30 maint", "sun 02:30-05:00 maint"},
			checks: []check{
				{utc(2026, 3, 29, 0, 40, 0), "maint", utc(2026, 3, 29, 3, 0, 0), "local"},
			},
		},
		{
			// Berlin 2026-10-25: 03:00 CEST (01:00 UTC) falls back to 02:00 CET.
			name: "berlin fall back repeats the 02:00 hour",
			tz:   "Europe/Berlin",
			rules: []string{
				"sun 01:00-02:00 cluster",
				"sun 02:00-03:00 maint",
				"sun 03:00-04:00 desktop",
			},
			checks: []check{
				{utc(2026, 10, 24, 23, 30, 0), "cluster", utc(2026, 10, 25, 0, 0, 0), "maint"},
				{utc(2026, 10, 25, 0, 30, 0), "maint", utc(2026, 10, 25, 2, 0, 0), "desktop"}, // two real hours of maint
				{utc(2026, 10, 25, 1, 30, 0), "maint", utc(2026, 10, 25, 2, 0, 0), "desktop"},
				{utc(2026, 10, 25, 2, 0, 0), "desktop", utc(2026, 10, 25, 3, 0, 0), "local"},
			},
		},
		{
			name:  "berlin fall back: a half-hour slot happens twice",
			tz:    "Europe/Berlin",
			rules: []string{"sun 02:00-02:30 maint"},
			checks: []check{
				{utc(2026, 10, 25, 0, 20, 0), "maint", utc(2026, 10, 25, 0, 30, 0), "local"},
				{utc(2026, 10, 25, 0, 30, 0), "local", utc(2026, 10, 25, 1, 0, 0), "maint"},
				{utc(2026, 10, 25, 1, 0, 0), "maint", utc(2026, 10, 25, 1, 30, 0), "local"},
				{utc(2026, 10, 25, 1, 30, 0), "local", utc(2026, 11, 1, 1, 0, 0), "maint"}, // next Sunday, CET
			},
		},
		{
			// New York 2026-03-08: 02:00 EST (07:00 UTC) jumps to 03:00 EDT.
			name:  "new york spring forward",
			tz:    "America/New_York",
			rules: []string{"sun 01:00-03:00 maint", "mon-fri 08:00-17:00 desktop"},
			checks: []check{
				{utc(2026, 3, 8, 5, 30, 0), "local", utc(2026, 3, 8, 6, 0, 0), "maint"},
				{utc(2026, 3, 8, 6, 30, 0), "maint", utc(2026, 3, 8, 7, 0, 0), "local"},
				{utc(2026, 3, 8, 7, 0, 0), "local", utc(2026, 3, 9, 12, 0, 0), "desktop"}, // 08:00 EDT
				{utc(2026, 3, 6, 23, 0, 0), "local", utc(2026, 3, 8, 6, 0, 0), "maint"},   // across the weekend
			},
		},
		{
			// New York 2026-11-01: 02:00 EDT (06:00 UTC) falls back to 01:00 EST.
			name:  "new york fall back",
			tz:    "America/New_York",
			rules: []string{"sun 01:00-03:00 maint", "mon-fri 08:00-17:00 desktop"},
			checks: []check{
				{utc(2026, 11, 1, 4, 59, 59), "local", utc(2026, 11, 1, 5, 0, 0), "maint"},
				{utc(2026, 11, 1, 5, 30, 0), "maint", utc(2026, 11, 1, 8, 0, 0), "local"}, // three real hours
				{utc(2026, 11, 1, 6, 30, 0), "maint", utc(2026, 11, 1, 8, 0, 0), "local"},
				{utc(2026, 10, 30, 20, 0, 0), "desktop", utc(2026, 10, 30, 21, 0, 0), "local"},
				{utc(2026, 10, 30, 21, 0, 0), "local", utc(2026, 11, 1, 5, 0, 0), "maint"},
				{utc(2026, 11, 1, 8, 0, 0), "local", utc(2026, 11, 2, 13, 0, 0), "desktop"}, // 08:00 EST
			},
		},
		{
			// Kathmandu is UTC+05:45 all year: 08:00 local is 02:15 UTC.
			name:  "kathmandu odd offset",
			tz:    "Asia/Kathmandu",
			rules: []string{"mon-fri 08:00-18:00 desktop", "sat 23:50-00:10 maint"},
			checks: []check{
				{utc(2026, 12, 1, 2, 14, 59), "local", utc(2026, 12, 1, 2, 15, 0), "desktop"},
				{utc(2026, 12, 1, 2, 15, 0), "desktop", utc(2026, 12, 1, 12, 15, 0), "local"},
				{utc(2026, 12, 5, 18, 4, 59), "local", utc(2026, 12, 5, 18, 5, 0), "maint"},
				{utc(2026, 12, 5, 18, 5, 0), "maint", utc(2026, 12, 5, 18, 25, 0), "local"}, // sat 23:50 -> sun 00:10
			},
		},
		{
			name:  "kolkata half-hour offset",
			tz:    "Asia/Kolkata",
			rules: []string{"daily 00:00-00:10 maint"},
			checks: []check{
				{utc(2026, 12, 1, 18, 20, 0), "local", utc(2026, 12, 1, 18, 30, 0), "maint"},
				{utc(2026, 12, 1, 18, 30, 0), "maint", utc(2026, 12, 1, 18, 40, 0), "local"},
			},
		},
		{
			// Lord Howe Island shifts by 30 minutes: 2026-10-04 02:00 -> 02:30 (15:30 UTC).
			name:  "lord howe half-hour DST",
			tz:    "Australia/Lord_Howe",
			rules: []string{"sun 02:00-02:30 maint", "sun 02:30-02:40 cluster"},
			checks: []check{
				{utc(2026, 10, 3, 15, 20, 0), "local", utc(2026, 10, 3, 15, 30, 0), "cluster"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSite(tc.tz)
			addPool(s, "p", tc.rules...)
			addHost(s, "h", "p")
			e := mustCompile(t, s)
			ref := newRef(t, s)
			for _, c := range tc.checks {
				d := e.AtHost(&s.Hosts[0], c.t)
				if d.Mode != c.mode || !d.Next.Equal(c.next) || d.NextMode != c.nextMode {
					t.Errorf("at %s (%s): got %s until %s then %s; want %s until %s then %s",
						c.t.Format(time.RFC3339), c.t.In(e.Location()).Format(time.RFC3339), d.Mode, fmtT(d.Next, time.UTC), d.NextMode,
						c.mode, fmtT(c.next, time.UTC), c.nextMode)
				}
				if msg := checkAgainstRef(e, ref, &s.Hosts[0], c.t); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// An exception across a DST change is in real time: it lasts as long as its instants say.
func TestDSTException(t *testing.T) {
	s := baseSite("Europe/Berlin")
	addPool(s, "p", "daily 00:00-24:00 desktop")
	addHost(s, "h", "p")
	start := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC) // 02:00 CEST
	end := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC)  // 02:30 CET, after the fall back
	addException(s, "x", "maintenance", "maint", start, end, model.Target{Pool: "p"})
	e := mustCompile(t, s)
	d := e.AtHost(&s.Hosts[0], start.Add(-time.Second))
	if d.Mode != "desktop" || !d.Next.Equal(start) || d.NextMode != "maint" {
		t.Errorf("before: %+v", d)
	}
	d = e.AtHost(&s.Hosts[0], start.Add(time.Hour)) // 02:00 CET
	if d.Mode != "maint" || !d.Next.Equal(end) || d.NextMode != "desktop" {
		t.Errorf("during: %+v", d)
	}
	d = e.AtHost(&s.Hosts[0], end)
	if d.Mode != "desktop" || !d.Next.IsZero() || d.NextMode != "" {
		t.Errorf("after: %+v", d)
	}
}
