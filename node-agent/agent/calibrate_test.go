package agent

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// A cluster-mode PC nobody has used since it booted an hour ago, without a profile:
// the tick freezes the guest and runs the calibration; the guest stays frozen while it
// runs and is thawed after; the heartbeat carries the profile until the configuration
// echoes it, and the controller starts from it.
func TestCalibrationFreezesGuestAndReportsProfile(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	now := t0
	uptime := filepath.Join(t.TempDir(), "uptime")
	writeFile(t, uptime, "3600.00 7000.00\n")
	be := &fakeBackend{}
	started, release := make(chan bool), make(chan struct{})
	var gotTarget float64
	run := func(ctx context.Context, target float64) (wire.InterferenceProfile, error) {
		gotTarget = target
		started <- be.frozen
		select {
		case <-release:
		case <-ctx.Done():
			return wire.InterferenceProfile{}, ctx.Err()
		}
		return wire.InterferenceProfile{CanaryNs: 2500, CPUSlowdown: 0.004, MemorySlowdown: 0.03,
			WakeupP99AloneUs: 60, WakeupP99GuestUs: 80, StartCap: 0.5, Harvest: 0.6}, nil
	}
	site := &fakeSite{}
	a, err := New(Options{Site: site, MAC: testMAC, StateDir: t.TempDir(), ImageRoot: t.TempDir(),
		HostCPUs: 4, HostMemMB: 8192, Signals: newFakeSignals(t0), Uptime: uptime, Calibrate: run,
		Backends: map[model.GuestBackend]guest.Backend{model.BackendContainer: be},
		Now:      func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := guestConfig(model.DefaultPolicy())
	cfg.Mode, cfg.Kind = "cluster", model.KindCluster
	a.apply(ctx, cfg, "api")
	if !be.running || be.frozen {
		t.Fatalf("cluster mode: guest running %v frozen %v, want running", be.running, be.frozen)
	}

	a.tick(ctx)
	select {
	case frozen := <-started:
		if !frozen {
			t.Fatal("the calibration runs with the guest not frozen")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no calibration started (last reason %q)", a.cal.reason)
	}
	if gotTarget != 0.01 {
		t.Errorf("calibration target %v, want the policy's 1%%", gotTarget)
	}
	// A tick during the run keeps the guest frozen and starts no second run.
	now = now.Add(30 * time.Second)
	a.tick(ctx)
	if !be.frozen || a.dec.Action != model.ActionFreeze {
		t.Fatalf("during the run: frozen %v, action %s; want frozen", be.frozen, a.dec.Action)
	}
	if hb := a.LastHeartbeat(); hb.Interference != nil {
		t.Fatalf("heartbeat carries a profile before the run ended: %+v", hb.Interference)
	}

	close(release)
	select {
	case r := <-a.cal.done:
		a.calibrated(ctx, r)
	case <-time.After(5 * time.Second):
		t.Fatal("the calibration did not end")
	}
	if be.frozen || !be.running || a.dec.Action != model.ActionRun {
		t.Fatalf("after the run: running %v frozen %v action %s; want running, thawed", be.running, be.frozen, a.dec.Action)
	}
	hb := a.LastHeartbeat()
	p := hb.Interference
	if p == nil || p.StartCap != 0.5 || !p.Measured.Equal(now) || p.Backend != string(model.BackendContainer) || p.CPUs <= 0 {
		t.Fatalf("heartbeat profile %+v, want the run's, stamped now with this host's environment and the config's backend", p)
	}
	// Not due again while the profile is on its way; still sent.
	now = now.Add(time.Minute)
	a.tick(ctx)
	select {
	case <-started:
		t.Fatal("a second calibration while the first one's profile is pending")
	default:
	}
	if a.LastHeartbeat().Interference == nil {
		t.Fatal("the profile is no longer sent before the configuration echoed it")
	}

	// The site manager echoes it: no longer sent; the controller starts from it.
	echo := *cfg
	echo.Interference = p
	a.apply(ctx, &echo, "api")
	a.tick(ctx)
	if got := a.LastHeartbeat().Interference; got != nil {
		t.Fatalf("profile still sent after the configuration carries it: %+v", got)
	}
	if got := a.control.ctl.Config().StartCap; got != 0.5 {
		t.Errorf("controller StartCap %v, want the profile's 0.5", got)
	}
	select {
	case <-started:
		t.Fatal("calibrated again with a current profile")
	default:
	}
}

// Calibration off (no Calibrate): nothing runs, nothing is frozen.
func TestCalibrationOff(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	uptime := filepath.Join(t.TempDir(), "uptime")
	writeFile(t, uptime, "3600.00 7000.00\n")
	be := &fakeBackend{}
	a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), ImageRoot: t.TempDir(),
		HostCPUs: 4, HostMemMB: 8192, Signals: newFakeSignals(t0), Uptime: uptime,
		Backends: map[model.GuestBackend]guest.Backend{model.BackendContainer: be},
		Now:      func() time.Time { return t0 }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := guestConfig(model.DefaultPolicy())
	cfg.Mode, cfg.Kind = "cluster", model.KindCluster
	a.apply(context.Background(), cfg, "api")
	a.tick(context.Background())
	if be.frozen || a.cal.running {
		t.Fatal("calibration off, but the guest was frozen for one")
	}
}

// While a run is in progress the guest is frozen instead of running or throttled;
// evicting and freezing stand; without a run every action stands.
func TestCalibrationDecision(t *testing.T) {
	cal := newCalibration(nil, "/proc/uptime", time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tc := range []struct {
		running bool
		in, out model.GuestAction
	}{
		{false, model.ActionRun, model.ActionRun},
		{false, model.ActionThrottle, model.ActionThrottle},
		{true, model.ActionRun, model.ActionFreeze},
		{true, model.ActionThrottle, model.ActionFreeze},
		{true, model.ActionFreeze, model.ActionFreeze},
		{true, model.ActionEvict, model.ActionEvict},
	} {
		cal.running = tc.running
		if got := cal.Decision(tc.in); got != tc.out {
			t.Errorf("running %v: Decision(%s) = %s, want %s", tc.running, tc.in, got, tc.out)
		}
	}
	if cal.Enabled() || cal.Pending(guestConfig(model.DefaultPolicy())) != nil {
		t.Error("calibration off: enabled, or a profile pending")
	}
}
