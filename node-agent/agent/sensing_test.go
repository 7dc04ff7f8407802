package agent

import (
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/sensor"
)

// Observe folds events into the observation: input moves LastInput forward only; a
// login is activity except for the sessions present at start; the last logout is kept
// for the calibration.
func TestSensingObserve(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sess := func(s, local, remote int) sensor.Event {
		return sensor.Event{Kind: sensor.KindSessions, Time: at(s), Sessions: sensor.Sessions{Local: local, Remote: remote}}
	}
	s := sensing{m: newMetrics(func() (float64, float64) { return 0, 0 })}
	for i, tc := range []struct {
		ev                    sensor.Event
		lastInput, lastLogout time.Time
		sessions              int
	}{
		{sess(1, 1, 0), time.Time{}, time.Time{}, 1}, // present at start: not news
		{sensor.Event{Kind: sensor.KindInput, Time: at(5)}, at(5), time.Time{}, 1},
		{sensor.Event{Kind: sensor.KindInput, Time: at(3)}, at(5), time.Time{}, 1}, // late: no step back
		{sess(10, 1, 1), at(10), time.Time{}, 2},                                   // an ssh login is activity
		{sess(20, 0, 0), at(10), at(20), 0},                                        // the last one leaves
		{sensor.Event{Kind: sensor.KindPressure, Time: at(21), Value: 12}, at(10), at(20), 0},
	} {
		s.Observe(tc.ev)
		if o := s.At(at(30)); !o.LastInput.Equal(tc.lastInput) || !s.LastLogout().Equal(tc.lastLogout) || s.Sessions() != tc.sessions {
			t.Fatalf("event %d (%s): lastInput %v lastLogout %v sessions %d; want %v %v %d",
				i, tc.ev.Kind, o.LastInput, s.LastLogout(), s.Sessions(), tc.lastInput, tc.lastLogout, tc.sessions)
		}
	}
	if s.Pressure() != 12 {
		t.Errorf("pressure %v, want 12", s.Pressure())
	}
}
