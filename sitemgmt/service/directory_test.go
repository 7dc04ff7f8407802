package service

import (
	"errors"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestStaleOnlyByOutage(t *testing.T) {
	wall := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	api := wall.Add(72 * time.Hour) // a demo's shifted clock
	down := func(ago time.Duration) DirectoryHealth {
		return DirectoryHealth{DownSince: wall.Add(-ago), Err: "down"}
	}
	for _, tc := range []struct {
		name    string
		lastHB  time.Duration // heartbeat age on the API's clock
		dir     DirectoryHealth
		holdsUp bool
	}{
		{"directory reachable", 10 * time.Minute, DirectoryHealth{Reachable: true, LastOK: wall}, false},
		{"no outage recorded", 10 * time.Minute, DirectoryHealth{}, false},
		{"fresh when the outage began", 10 * time.Minute, down(9 * time.Minute), true},
		{"just fresh when the outage began", 10 * time.Minute, down(10*time.Minute - wire.StaleAfter), true},
		{"already stale when the outage began", 10 * time.Minute, down(10*time.Minute - wire.StaleAfter - time.Second), false},
		{"long outage, fresh at its start", 20 * time.Hour, down(20*time.Hour - time.Minute), true},
	} {
		got := staleOnlyByOutage(api.Add(-tc.lastHB), api, tc.dir, wall)
		if got != tc.holdsUp {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.holdsUp)
		}
	}
}

func TestDirectoryState(t *testing.T) {
	var d directoryState
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	d.note(nil, t0)
	d.note(errors.New("connection refused"), t0.Add(time.Minute))
	d.note(errors.New("busy"), t0.Add(2*time.Minute))
	if h := d.get(); h.Reachable || !h.DownSince.Equal(t0.Add(time.Minute)) || h.Err != "busy" || !h.LastOK.Equal(t0) {
		t.Fatalf("during the outage: %+v", h)
	}
	d.note(nil, t0.Add(3*time.Minute))
	if h := d.get(); !h.Reachable || !h.DownSince.IsZero() || h.Err != "" || !h.LastOK.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("after recovery: %+v", h)
	}
}
