package calibrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

var (
	now  = time.Date(2026, 12, 5, 23, 0, 0, 0, time.UTC)
	here = Env{Kernel: "6.8.0-45-generic", CPUModel: "Intel(R) Core(TM) i5-8500 CPU @ 3.00GHz", CPUs: 6, Cgroup: "v2", Backend: "container"}
)

func profile(measured time.Time, e Env) *wire.InterferenceProfile {
	p := &wire.InterferenceProfile{Measured: measured, CPUSlowdown: 0.02, MemorySlowdown: 0.09, StartCap: 0.4, Harvest: 0.7}
	e.Stamp(p)
	return p
}

func cluster(p *wire.InterferenceProfile) *wire.AgentConfig {
	return &wire.AgentConfig{Mode: "cluster", Kind: model.KindCluster, Guest: &wire.AgentGuest{}, Interference: p,
		Policy: model.DefaultPolicy()}
}

// idle is a snapshot of a host in a cluster mode that nobody used since boot an hour ago.
func idle(cfg *wire.AgentConfig) Snapshot {
	return Snapshot{Config: cfg, Env: here, Boot: now.Add(-time.Hour)}
}

func TestDue(t *testing.T) {
	fresh := profile(now.Add(-24*time.Hour), here)
	with := func(f func(*Snapshot)) Snapshot {
		s := idle(cluster(fresh))
		f(&s)
		return s
	}
	other := func(f func(*Env)) *wire.InterferenceProfile {
		e := here
		f(&e)
		return profile(now.Add(-24*time.Hour), e)
	}
	for _, tc := range []struct {
		name   string
		s      Snapshot
		due    bool
		reason string
	}{
		{"current profile", idle(cluster(fresh)), false, "is current"},
		{"never calibrated", idle(cluster(nil)), true, "no calibration yet"},
		{"no configuration", with(func(s *Snapshot) { s.Config = nil }), false, "no configuration"},
		{"desktop mode", with(func(s *Snapshot) { s.Config.Kind, s.Config.Interference = model.KindDesktop, nil }), false, "not a cluster mode"},
		{"cluster mode without guest", with(func(s *Snapshot) { s.Config.Guest, s.Config.Interference = nil, nil }), false, "runs no compute guest"},
		{"exam", with(func(s *Snapshot) { s.Config.Exam, s.Config.Interference = true, nil }), false, "runs no compute guest"},
		{"someone logged in", with(func(s *Snapshot) { s.Sessions, s.Config.Interference = 1, nil }), false, "1 user session"},
		{"a job runs", with(func(s *Snapshot) { s.Jobs, s.Config.Interference = 2, nil }), false, "2 Slurm job"},
		{"logged out 9 min ago", with(func(s *Snapshot) { s.LastLogout, s.Config.Interference = now.Add(-9*time.Minute), nil }), false, "nobody logged in for 9m0s only"},
		{"logged out 10 min ago", with(func(s *Snapshot) { s.LastLogout, s.Config.Interference = now.Add(-10*time.Minute), nil }), true, "no calibration yet"},
		{"booted 5 min ago, nobody since", with(func(s *Snapshot) { s.Boot, s.Config.Interference = now.Add(-5*time.Minute), nil }), false, "only"},
		{"no boot time known", with(func(s *Snapshot) { s.Boot, s.Config.Interference = time.Time{}, nil }), true, "no calibration yet"},
		{"failed 59 min ago", with(func(s *Snapshot) { s.LastFailure, s.Config.Interference = now.Add(-59*time.Minute), nil }), false, "failed"},
		{"failed 1 h ago", with(func(s *Snapshot) { s.LastFailure, s.Config.Interference = now.Add(-time.Hour), nil }), true, "no calibration yet"},
		{"new kernel", idle(cluster(other(func(e *Env) { e.Kernel = "6.1.0-18-amd64" }))), true, `kernel "6.1.0-18-amd64" → "6.8.0-45-generic"`},
		{"other CPU", idle(cluster(other(func(e *Env) { e.CPUModel = "AMD Ryzen 5 5600G" }))), true, "CPU model"},
		{"CPU count", idle(cluster(other(func(e *Env) { e.CPUs = 12 }))), true, "CPUs 12 → 6"},
		{"cgroup v1", idle(cluster(other(func(e *Env) { e.Cgroup = "v1" }))), true, "cgroup"},
		{"other backend", idle(cluster(other(func(e *Env) { e.Backend = "qemu" }))), true, "backend"},
		{"30 days old", idle(cluster(profile(now.Add(-MaxAge), here))), false, "is current"},
		{"31 days old", idle(cluster(profile(now.Add(-MaxAge-24*time.Hour), here))), true, "31 days old"},
		{"measured in the future (clock)", idle(cluster(profile(now.Add(48*time.Hour), here))), false, "is current"},
		{"pending, not echoed yet", with(func(s *Snapshot) { s.Config.Interference, s.Pending = nil, profile(now.Add(-time.Minute), here) }), false, "is current"},
		{"pending newer than a stale echo", with(func(s *Snapshot) {
			s.Config.Interference, s.Pending = profile(now.Add(-40*24*time.Hour), here), profile(now.Add(-time.Minute), here)
		}), false, "is current"},
	} {
		due, reason := Due(now, tc.s)
		if due != tc.due || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: Due = %v %q, want %v with %q", tc.name, due, reason, tc.due, tc.reason)
		}
		if strings.ContainsAny(reason, "\n\r") {
			t.Errorf("%s: reason %q is not one line", tc.name, reason)
		}
	}
}

// The Calibrator runs once when due, stamps and delivers the profile, keeps it pending
// until the configuration echoes it (no second run meanwhile), and after a failure waits
// RetryAfter.
func TestCalibrator(t *testing.T) {
	clock := now
	runs := 0
	var targets []float64
	fail := errors.New("guest did not start")
	var runErr error
	var delivered []wire.InterferenceProfile
	c := &Calibrator{
		Now: func() time.Time { return clock },
		Run: func(_ context.Context, target float64) (wire.InterferenceProfile, error) {
			runs++
			targets = append(targets, target)
			return wire.InterferenceProfile{CPUSlowdown: 0.03, MemorySlowdown: 0.1, StartCap: 0.5, Harvest: 0.6, Kernel: "ignored"}, runErr
		},
		Deliver: func(p wire.InterferenceProfile) { delivered = append(delivered, p) },
	}
	ctx := context.Background()
	cfg := cluster(nil)
	cfg.Policy.SlowdownTarget = 2

	// A failure: counted, not delivered, and no retry within the hour.
	runErr = fail
	if ran, _, err := c.Maybe(ctx, idle(cfg)); !ran || !errors.Is(err, fail) || len(delivered) != 0 {
		t.Fatalf("failing run: ran %v err %v delivered %v", ran, err, delivered)
	}
	clock = clock.Add(30 * time.Minute)
	if due, reason := c.Due(idle(cfg)); due || !strings.Contains(reason, "failed") {
		t.Fatalf("Calibrator.Due within the hour after a failure: %v (%s)", due, reason)
	}
	if ran, reason, _ := c.Maybe(ctx, idle(cfg)); ran || !strings.Contains(reason, "failed") {
		t.Fatalf("retry within the hour: ran %v (%s)", ran, reason)
	}
	// An hour after the failure: runs again, succeeds, stamps, delivers.
	runErr = nil
	clock = clock.Add(30 * time.Minute)
	ran, reason, err := c.Maybe(ctx, idle(cfg))
	if !ran || err != nil || reason != "no calibration yet" || len(delivered) != 1 {
		t.Fatalf("second run: ran %v %q err %v delivered %d", ran, reason, err, len(delivered))
	}
	p := delivered[0]
	if !p.Measured.Equal(clock) || Of(&p) != here || p.CPUSlowdown != 0.03 {
		t.Errorf("delivered profile not stamped: %+v", p)
	}
	if runs != 2 || targets[1] != 0.02 {
		t.Errorf("runs %d targets %v, want 2 runs at target 0.02 (slowdownTarget 2%%)", runs, targets)
	}
	if c.LastError() != nil {
		t.Errorf("last error after success: %v", c.LastError())
	}
	// Pending until the configuration carries it; no second run meanwhile.
	if got := c.Pending(cfg); got == nil || !got.Measured.Equal(p.Measured) {
		t.Fatalf("pending: %+v", got)
	}
	clock = clock.Add(2 * time.Hour)
	if due, _ := c.Due(idle(cfg)); due {
		t.Fatal("Calibrator.Due before the configuration echoed the profile")
	}
	if ran, _, _ := c.Maybe(ctx, idle(cfg)); ran {
		t.Fatal("ran again before the configuration echoed the profile")
	}
	echoed := cluster(&p)
	if got := c.Pending(echoed); got != nil {
		t.Fatalf("still pending after the echo: %+v", got)
	}
	if ran, reason, _ := c.Maybe(ctx, idle(echoed)); ran || !strings.Contains(reason, "current") {
		t.Fatalf("echoed profile: ran %v (%s)", ran, reason)
	}
	// A new kernel after a reboot: calibrate again.
	s := idle(echoed)
	s.Env.Kernel = "6.9.0"
	if ran, reason, _ := c.Maybe(ctx, s); !ran || !strings.Contains(reason, "kernel") || delivered[1].Kernel != "6.9.0" {
		t.Fatalf("new kernel: ran %v (%s) %+v", ran, reason, delivered)
	}
	// A run that yields an invalid profile is a failure.
	c2 := &Calibrator{Now: func() time.Time { return clock }, Run: func(context.Context, float64) (wire.InterferenceProfile, error) {
		return wire.InterferenceProfile{CPUSlowdown: -1}, nil
	}}
	if ran, _, err := c2.Maybe(ctx, idle(cluster(nil))); !ran || err == nil || !strings.Contains(err.Error(), "cpuSlowdown") {
		t.Fatalf("invalid profile: ran %v err %v", ran, err)
	}
	if c2.Pending(nil) != nil {
		t.Fatal("an invalid profile is pending")
	}
}

// One run at a time: a Maybe while another runs returns ErrRunning.
func TestCalibratorOneRun(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	c := &Calibrator{Now: func() time.Time { return now }, Run: func(context.Context, float64) (wire.InterferenceProfile, error) {
		close(started)
		<-release
		return wire.InterferenceProfile{}, nil
	}}
	done := make(chan error, 1)
	go func() { _, _, err := c.Maybe(context.Background(), idle(cluster(nil))); done <- err }()
	<-started
	if _, _, err := c.Maybe(context.Background(), idle(cluster(nil))); !errors.Is(err, ErrRunning) {
		t.Errorf("concurrent Maybe: %v, want ErrRunning", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
