package idlelogout

import (
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	at := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Minute))) }
	limit := 30 * time.Minute // warning 5 minutes before
	for _, c := range []struct {
		name string
		in   Input
		want Plan
	}{
		{"off", Input{Now: at(60), LastInput: t0, Graphical: 1}, Plan{}},
		{"nobody in a graphical session", Input{Now: at(60), LastInput: t0, Limit: limit}, Plan{}},
		{"nobody left after a warning", Input{Now: at(60), LastInput: t0, Limit: limit, Warned: at(25)}, Plan{Reset: true}},
		{"in use", Input{Now: at(10), LastInput: at(9), Graphical: 1, Limit: limit}, Plan{Wake: at(34)}},
		{"the warning is due", Input{Now: at(25), LastInput: t0, Graphical: 1, Limit: limit}, Plan{Warn: true, Wake: at(30)}},
		{"warned, waiting", Input{Now: at(27), LastInput: t0, Graphical: 1, Limit: limit, Warned: at(25)}, Plan{Wake: at(30)}},
		{"warned, time is up", Input{Now: at(30), LastInput: t0, Graphical: 1, Limit: limit, Warned: at(25)}, Plan{Logout: true}},
		{"input after the warning", Input{Now: at(28), LastInput: at(27), Graphical: 1, Limit: limit, Warned: at(25)}, Plan{Reset: true, Wake: at(52)}},
		// The limit learnt late (a policy change, an agent restart): the full warning first.
		{"late: warn now, log out a lead later", Input{Now: at(90), LastInput: t0, Graphical: 2, Limit: limit}, Plan{Warn: true, Wake: at(95)}},
		{"late: warned, waiting the lead", Input{Now: at(93), LastInput: t0, Graphical: 2, Limit: limit, Warned: at(90)}, Plan{Wake: at(95)}},
		{"late: the lead is over", Input{Now: at(95), LastInput: t0, Graphical: 2, Limit: limit, Warned: at(90)}, Plan{Logout: true}},
		// A short limit: the warning is half of it.
		{"short limit", Input{Now: at(1), LastInput: t0, Graphical: 1, Limit: 2 * time.Minute}, Plan{Warn: true, Wake: at(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.in)
			if c.want.Warn != got.Warn || got.Warn && got.Text == "" {
				t.Errorf("warn %v %q, want %v", got.Warn, got.Text, c.want.Warn)
			}
			got.Text = ""
			if got != c.want {
				t.Errorf("Decide = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestText(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 25, 0, 0, time.UTC)
	got := Text(now, now.Add(5*time.Minute), 30*time.Minute)
	for _, want := range []string{"for 30 minutes", "ends in 5 minutes (at 14:30)", "press a key to stay"} {
		if !strings.Contains(got, want) {
			t.Errorf("Text = %q, no %q", got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		time.Second: "1 second", 45 * time.Second: "45 seconds", time.Minute: "1 minute",
		150 * time.Second: "2 minutes 30 seconds", 90 * time.Minute: "1 hour 30 minutes", 2 * time.Hour: "2 hours",
	} {
		if got := words(d); got != want {
			t.Errorf("words(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestWarning(t *testing.T) {
	for limit, want := range map[time.Duration]time.Duration{
		2 * time.Minute: time.Minute, 10 * time.Minute: 5 * time.Minute, 2 * time.Hour: MaxWarning,
	} {
		if got := Warning(limit); got != want {
			t.Errorf("Warning(%s) = %s, want %s", limit, got, want)
		}
	}
}
