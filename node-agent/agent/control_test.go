package agent

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/node-agent/sensor"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// fakeSignals stands in for the signals.Monitor: the test says what each tick measured.
type fakeSignals struct {
	mu     sync.Mutex
	tot    signals.Totals
	active bool
	ticks  chan signals.Totals
}

func newFakeSignals(t0 time.Time) *fakeSignals {
	return &fakeSignals{tot: signals.Totals{Time: t0}, ticks: make(chan signals.Totals, 1)}
}

func (f *fakeSignals) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *fakeSignals) Ticks() <-chan signals.Totals  { return f.ticks }
func (f *fakeSignals) Snapshot() signals.Totals {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tot
}
func (f *fakeSignals) SetOwnerActive(on bool) {
	f.mu.Lock()
	f.active = on
	f.mu.Unlock()
}

// advance adds one interval's measurements and returns the new totals (the tick).
func (f *fakeSignals) advance(d time.Duration, deskCPU, deskWait, guestCPU, guestSteal time.Duration) signals.Totals {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tot.Time = f.tot.Time.Add(d)
	f.tot.Samples++
	f.tot.DesktopCPU += deskCPU
	f.tot.DesktopWait += deskWait
	f.tot.GuestCPU += guestCPU
	f.tot.GuestSteal += guestSteal
	if f.active {
		f.tot.OwnerActive += d
	}
	return f.tot
}

// fakeBackend runs a pretend guest and records the CPU limits set.
type fakeBackend struct {
	mu      sync.Mutex
	running bool
	frozen  bool
	limit   float64
	limits  []float64 // every SetCPULimit, in order (and the start's limit first)
	// statusCalls counts Status calls (read from the test while Run works).
	statusCalls atomic.Int64
}

func (b *fakeBackend) Kind() model.GuestBackend             { return model.BackendContainer }
func (b *fakeBackend) Available(context.Context) error      { return nil }
func (b *fakeBackend) Freeze(context.Context, string) error { b.frozen = true; return nil }
func (b *fakeBackend) Thaw(context.Context, string) error   { b.frozen = false; return nil }
func (b *fakeBackend) Stop(context.Context, string) error   { b.running = false; return nil }
func (b *fakeBackend) Start(_ context.Context, s guest.Spec) error {
	b.running, b.limit = true, s.CPULimit
	b.limits = append(b.limits, s.CPULimit)
	return nil
}
func (b *fakeBackend) Status(context.Context, string) (guest.Status, error) {
	b.statusCalls.Add(1)
	switch {
	case !b.running:
		return guest.Status{State: guest.StateAbsent}, nil
	case b.frozen:
		return guest.Status{State: guest.StatePaused, Reason: "frozen", CPULimit: b.limit}, nil
	}
	return guest.Status{State: guest.StateRunning, CPULimit: b.limit}, nil
}
func (b *fakeBackend) SetCPULimit(_ context.Context, _ string, cpus float64) error {
	b.limit = cpus
	b.limits = append(b.limits, cpus)
	return nil
}

// guestConfig is a desktop mode with a container compute guest under policy p.
func guestConfig(p model.Policy) *wire.AgentConfig {
	c := goodConfig()
	c.Mode, c.Kind, c.Policy = "desktop", model.KindDesktop, p
	c.Guest = &wire.AgentGuest{Name: "overtime-pc1", ImageKind: model.ImageCompute,
		Resolved: model.ImageVersion{Version: "1", Path: "compute/1"}}
	c.Guest.Backend, c.Guest.Image = model.BackendContainer, "compute"
	return c
}

// The adaptive path: the key press puts the start cap in force at once; a desktop that
// waits behind the guest makes the cap fall within the tick; a desktop that no longer
// suffers lets it climb back, slowly; the job report carries the estimate.
func TestAdaptiveCapFollowsSlowdown(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	now := t0
	sig := newFakeSignals(t0)
	be := &fakeBackend{}
	a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), ImageRoot: t.TempDir(),
		HostCPUs: 4, HostMemMB: 8192, Signals: sig,
		Backends: map[model.GuestBackend]guest.Backend{model.BackendContainer: be},
		Now:      func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := model.DefaultPolicy() // adaptive, target 1%, ThrottleCPU 25 (the start without a profile)
	a.apply(ctx, guestConfig(p), "api")
	if !be.running || be.limit != 0 {
		t.Fatalf("nobody at the desk: guest running %v, limit %v; want running uncapped", be.running, be.limit)
	}
	tick := func(deskCPU, deskWait, guestCPU time.Duration) {
		now = now.Add(250 * time.Millisecond)
		a.controlTick(ctx, sig.advance(250*time.Millisecond, deskCPU, deskWait, guestCPU, 0))
	}
	tick(0, 0, time.Second) // the first tick only starts the window
	tick(0, 0, time.Second)

	// A key: throttle, at the start cap (25% of 4 CPUs).
	now = now.Add(10 * time.Millisecond)
	a.signal(sensor.Event{Kind: sensor.KindInput, Time: now})
	a.decideAndAct(ctx, now)
	if a.dec.Action != model.ActionThrottle || be.limit != 1 {
		t.Fatalf("after a key: action %s, limit %v CPUs; want throttle at 1 CPU (StartCap 0.25 × 4)", a.dec.Action, be.limit)
	}
	if hb := a.LastHeartbeat(); hb.Cap != 0.25 {
		t.Errorf("heartbeat cap %v, want 0.25", hb.Cap)
	}
	// The desktop works 0.2 s of each 0.25 s tick and waits 20 ms while the guest ran
	// 0.2 s: a slowdown of 5 to 10% (by the two attributions), far above the target.
	before := sig.Snapshot()
	tick(200*time.Millisecond, 20*time.Millisecond, 200*time.Millisecond)
	want := estimate.Desktop(signals.WindowOf(before, sig.Snapshot())).Slowdown
	if !(be.limit < 1*0.5) {
		t.Fatalf("desktop at %.1f%% slowdown: limit %v CPUs, want cut to at most half of 1 within the tick", 100*a.control.est.Slowdown, be.limit)
	}
	if a.control.est.Slowdown != want || !(want > 0.05 && want < 0.1) {
		t.Errorf("estimate %v, want the estimator's %v (between 5 and 10%%)", a.control.est.Slowdown, want)
	}
	cut := be.limit
	if got, _ := strconv.ParseFloat(metricValue(t, a, "overtime_agent_guest_cpu_cap"), 64); math.Abs(got-cut/4) > 1e-9 {
		t.Errorf("cap gauge %v, want %v", got, cut/4)
	}
	if got, _ := strconv.ParseFloat(metricValue(t, a, "overtime_agent_desktop_slowdown"), 64); math.Abs(got-want) > 1e-9 {
		t.Errorf("slowdown gauge %v, want %v", got, want)
	}

	// The desktop keeps working but no longer waits: after the increase hold the cap
	// climbs, one step at a time.
	calls := len(be.limits)
	for i := 0; i < 40; i++ { // 10 s
		a.signal(sensor.Event{Kind: sensor.KindInput, Time: now})
		a.decideAndAct(ctx, now)
		tick(200*time.Millisecond, 0, 100*time.Millisecond)
	}
	if !(be.limit > cut) {
		t.Fatalf("a desktop without wait for 10 s: limit %v, want above the cut %v", be.limit, cut)
	}
	if be.limit > cut+5*0.1*4*1.0001 {
		t.Errorf("limit %v after 10 s: more than 5 steps of 10%% above %v (one per 2 s increase hold)", be.limit, cut)
	}
	if n := len(be.limits) - calls; n > 5 {
		t.Errorf("%d backend calls in 10 s of slow ramp: want one per step", n)
	}

	// A job over a window with waits: the report carries the estimate and its method.
	start := a.Counters()
	for i := 0; i < 4; i++ {
		tick(200*time.Millisecond, 2*time.Millisecond, 200*time.Millisecond)
	}
	end := a.Counters()
	r := Report("7", start, end)
	jw := signals.WindowOf(start.Signals, end.Signals)
	if jw.Seconds != 1 || jw.DesktopWaitSeconds < 0.0079 || jw.DesktopWaitSeconds > 0.0081 {
		t.Errorf("the job's window %+v, want the four ticks' 1 s and 8 ms of wait", jw)
	}
	if e := estimate.Reported(estimate.Desktop(jw)); r.DesktopSlowdown != e.Slowdown || r.SlowdownLow != e.Low || r.SlowdownHigh != e.High ||
		r.SlowdownMethod != e.Method || !(r.SlowdownLow < r.DesktopSlowdown && r.DesktopSlowdown < r.SlowdownHigh) {
		t.Errorf("job report slowdown %v [%v, %v] by %q; want the estimate over the job's window %+v",
			r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh, r.SlowdownMethod, e)
	}
	if err := r.Validate(); err != nil {
		t.Errorf("report does not validate: %v", err)
	}

	// The fixed controller ignores the measurements: ThrottleCPU it is.
	p.Controller = model.ControllerFixed
	a.apply(ctx, guestConfig(p), "api")
	tick(200*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond)
	if be.limit != 1 {
		t.Errorf("fixed controller: limit %v, want ThrottleCPU 25%% of 4 = 1", be.limit)
	}
}

// tickingSignals delivers a tick every few milliseconds, as the Monitor does every 250 ms.
type tickingSignals struct {
	*fakeSignals
	every time.Duration
}

func (f tickingSignals) Run(ctx context.Context) error {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			tot := f.advance(f.every, 0, 0, 0, 0)
			select {
			case f.ticks <- tot:
			default:
			}
		}
	}
}

// Ticks more frequent than the status check must not postpone it: the check is what
// notices a guest that crashed, and what refreshes the state heartbeats report. (The
// loop's timer was re-armed to now+CheckEvery at every event, so the signals' 250 ms
// ticks kept it from ever firing.)
func TestStatusCheckNotStarvedByTicks(t *testing.T) {
	be := &fakeBackend{}
	site := &fakeSite{cfg: guestConfig(model.DefaultPolicy())}
	a, err := New(Options{Site: site, MAC: testMAC, StateDir: t.TempDir(), ImageRoot: t.TempDir(),
		HostCPUs: 4, HostMemMB: 8192, Signals: tickingSignals{newFakeSignals(time.Now()), 2 * time.Millisecond},
		Backends:   map[model.GuestBackend]guest.Backend{model.BackendContainer: be},
		CheckEvery: 30 * time.Millisecond, Refresh: time.Hour, Heartbeat: time.Hour,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	waitFor(t, "the guest started", func() bool { return be.statusCalls.Load() >= 1 })
	from := be.statusCalls.Load()
	waitFor(t, "five periodic status checks (one per 30 ms) between ticks every 2 ms", func() bool {
		return be.statusCalls.Load() >= from+5
	})
}

// A thaw's heartbeat says the guest runs: Slurm resumes the node on it, and must not
// wait for the next periodic check (30 s by default) to learn it.
func TestThawHeartbeatSaysRunning(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	now := t0
	be := &fakeBackend{}
	a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), ImageRoot: t.TempDir(),
		HostCPUs: 4, HostMemMB: 8192, Signals: newFakeSignals(t0),
		Backends: map[model.GuestBackend]guest.Backend{model.BackendContainer: be},
		Now:      func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := model.DefaultPolicy()
	p.Actions = map[model.OwnerState]model.GuestAction{model.StateOwnerActive: model.ActionFreeze, model.StateOwnerIdle: model.ActionRun}
	p.IdleAfter, p.Hold = model.Duration(4*time.Second), model.Duration(time.Second)
	a.apply(ctx, guestConfig(p), "api")
	a.tick(ctx)
	if hb := a.LastHeartbeat(); hb.GuestState != string(guest.StateRunning) {
		t.Fatalf("guest started: heartbeat guest state %q, want running", hb.GuestState)
	}
	now = now.Add(time.Second)
	a.signal(sensor.Event{Kind: sensor.KindInput, Time: now})
	a.decideAndAct(ctx, now)
	if hb := a.LastHeartbeat(); !be.frozen || hb.Action != model.ActionFreeze || hb.GuestState != string(guest.StatePaused) {
		t.Fatalf("after a key: frozen %v, heartbeat action %s guest %q; want frozen, freeze, paused", be.frozen, hb.Action, hb.GuestState)
	}
	now = now.Add(10 * time.Second)
	a.decideAndAct(ctx, time.Time{})
	if hb := a.LastHeartbeat(); be.frozen || hb.Action != model.ActionRun || hb.GuestState != string(guest.StateRunning) {
		t.Fatalf("owner gone: frozen %v, heartbeat action %s guest %q; want thawed, run, running", be.frozen, hb.Action, hb.GuestState)
	}
}

// Tick returns a limit only when the controller sets the guest's limit now (adaptive,
// throttle, the guest running and not frozen) and its cap moved a step from the applied
// one; KeepFor lets the decision leave a small move to it.
func TestControlTick(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	sig := newFakeSignals(t0)
	c := newInterferenceControl(sig, 4, newMetrics(func() (float64, float64) { return 0, 0 }))
	now := t0
	tick := func(in controlInput) (float64, bool) {
		now = now.Add(250 * time.Millisecond)
		return c.Tick(now, sig.advance(250*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond, 200*time.Millisecond, 0), in)
	}
	throttled := controlInput{state: model.StateOwnerActive, action: model.ActionThrottle, running: true, limit: 1}
	if _, ok := tick(throttled); ok {
		t.Fatal("a limit before any configuration")
	}
	c.Configure(guestConfig(model.DefaultPolicy())) // adaptive, start cap 25%
	c.Owner(now, model.StateOwnerActive, model.ActionThrottle)
	if got := c.ThrottleLimit(); got != 1 {
		t.Fatalf("throttle limit %v, want the start cap's 1 CPU of 4", got)
	}
	tick(throttled) // the first tick after the configuration starts the window
	for _, tc := range []struct {
		name string
		in   controlInput
		ok   bool
	}{
		{"frozen", controlInput{state: model.StateOwnerActive, action: model.ActionFreeze, running: true, frozen: true, limit: 1}, false},
		{"running free", controlInput{state: model.StateNoUser, action: model.ActionRun, running: true}, false},
		{"no guest", controlInput{state: model.StateOwnerActive, action: model.ActionThrottle}, false},
		{"throttled, desktop waiting", throttled, true},
	} {
		limit, ok := tick(tc.in)
		if ok != tc.ok || (ok && !(limit > 0 && limit < 1)) {
			t.Errorf("%s: limit %v ok %v, want ok %v (and a cut below 1 CPU)", tc.name, limit, ok, tc.ok)
		}
	}
	if keep := c.KeepFor(model.ActionThrottle, 1); keep == nil || !keep(1.05) || keep(1.2) || keep(0) {
		t.Error("adaptive KeepFor: want to keep a limit within a step, not one further or uncapped")
	}
	if c.KeepFor(model.ActionRun, 0) != nil {
		t.Error("KeepFor run: want nil (any change applied)")
	}
	p := model.DefaultPolicy()
	p.Controller = model.ControllerFixed
	c.Configure(guestConfig(p))
	if _, ok := tick(throttled); ok || c.KeepFor(model.ActionThrottle, 1) != nil || c.ThrottleLimit() != 1 {
		t.Error("fixed controller: want no tick limit, no keep, ThrottleCPU's 1 CPU")
	}
}
