// Package matrix is `overtime-agent bench interference`: desktop workloads × guest
// workloads × isolation policies × guest backends. Every cell is measured as the desktop
// alone, the guest alone and both together; the phases of a round (one per cell plus the
// shared baselines) run in a shuffled order, rounds repeat, and each cell is reported as
// the median and 95% interval over rounds of the desktop's slowdown and of the harvest
// (guest work next to the desktop / guest-alone work scaled to the desktop's idle share).
// Profile is the short per-host calibration built from the same measurements.
package matrix

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// Estimate is estimate.Desktop's output (node-agent/interference/estimate), as recorded
// next to each measured slowdown.
type Estimate struct {
	Slowdown float64 `json:"slowdown"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	Method   string  `json:"method"`
}

// Probe is a running wake-up latency probe (*workload.Probe); Stop ends it and returns its
// latencies (LatencyUs, µs) and its own thread's CPU time (CPUSeconds).
type Probe interface {
	Stop() interference.Result
}

// Signals is the agent's signal sampler (signals.Monitor) watching one guest; Begin
// snapshots its totals and returns what measures the Window from there to now.
type Signals interface {
	Begin() func() interference.Window
	Close()
}

// Controller is the adaptive controller ((*controller.Controller).Step): the guest's cap
// as a fraction of the host's CPUs (1 = uncapped).
type Controller interface {
	Step(now time.Time, est Estimate, ownerActive bool) float64
}

// Deps are the parts the matrix drives, from node-agent/interference/{workload,guestrun,
// signals,estimate,controller}; the command wires the real ones, tests fakes.
type Deps struct {
	// Runners by backend name (process, container, qemu).
	Runners map[string]interference.Runner
	// RunDesktop runs desktop workload name for d (workload.RunDesktop).
	RunDesktop func(ctx context.Context, name string, d time.Duration) (interference.Result, error)
	// StartProbe starts the wake-up probe (workload.Probe) on its own locked thread.
	StartProbe func(ctx context.Context) (Probe, error)
	// Signals starts a sampler that counts everything outside guest g (nil: no guest) as
	// the desktop; nil Signals: no windows recorded (and no adaptive policy).
	Signals func(g interference.Guest) (Signals, error)
	// Estimate is estimate.Desktop.
	Estimate func(interference.Window) Estimate
	// NewController makes a fresh adaptive controller for one run.
	NewController func() Controller
	// StartDesktop starts a throughput desktop workload as a process reporting its
	// progress, for the paired both runs (paired.go); nil: both runs are unpaired.
	StartDesktop func(ctx context.Context, name string, d time.Duration) (DesktopStream, error)

	// for tests: the guest's cgroup controls and the per-thread scheduling calls.
	control func(interference.Guest) control
	threads threadOps
}

// Config is one matrix run.
type Config struct {
	Cells []Cell
	// Run is each measured run's length (default 3 s), Warmup the desktop's warm-up run
	// before it (the guest, under its policy, runs through it; default 0.5 s).
	Run, Warmup time.Duration
	// Reps rounds (default 5); with Adapt, more rounds of the cells whose slowdown
	// interval is wider than MaxWidth (default 0.02) up to MaxReps (default 3 × Reps).
	Reps, MaxReps int
	Adapt         bool
	MaxWidth      float64
	// Threads of each guest workload (default: cores).
	Threads int
	// Cores of the host (default runtime.NumCPU).
	Cores int
	// Seed of the phase order (default: time).
	Seed uint64
	// ProbeOverhead adds the CPU desktop alone without the probe to every round.
	ProbeOverhead bool
	// Keep: backends whose guests stay up between runs, frozen when not measured (QEMU's
	// boot is too slow to repeat per run). Other guests are stopped after each run.
	Keep map[string]bool
	// Tick is the adaptive controller's period (default 500 ms).
	Tick time.Duration
	// Pairs and Segment: a throughput desktop's both run is Pairs pairs of Segment-long
	// segments with the guest frozen and running (paired.go; default 6 × 400 ms; Pairs
	// < 0: unpaired runs).
	Pairs   int
	Segment time.Duration
	// AdaptiveWarmup: the adaptive policy's paired runs start measuring this much later
	// (default 8 s), so that they show the controller near its steady state rather than
	// its start from the start cap; the cap trace keeps the transient.
	AdaptiveWarmup time.Duration
	// Notes go into the report's environment (what the caller left out and why).
	Notes []string
	// Log reports progress (nil: quiet).
	Log func(format string, a ...any)
}

func (c *Config) defaults() {
	if c.Run <= 0 {
		c.Run = 3 * time.Second
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = 500 * time.Millisecond
	}
	if c.Reps <= 0 {
		c.Reps = 5
	}
	if c.MaxReps < c.Reps {
		c.MaxReps = 3 * c.Reps
	}
	if c.MaxWidth <= 0 {
		c.MaxWidth = 0.02
	}
	if c.Cores <= 0 {
		c.Cores = runtime.NumCPU()
	}
	if c.Threads <= 0 {
		c.Threads = c.Cores
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Tick <= 0 {
		c.Tick = 500 * time.Millisecond
	}
	if c.Pairs == 0 {
		c.Pairs = DefaultPairs
	}
	if c.Segment <= 0 {
		c.Segment = DefaultSegment
	}
	if c.AdaptiveWarmup == 0 {
		c.AdaptiveWarmup = 8 * time.Second
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// Validate checks cells against deps.
func (c *Config) Validate(d *Deps) error {
	if len(c.Cells) == 0 {
		return errors.New("matrix: no cells")
	}
	if d.RunDesktop == nil {
		return errors.New("matrix: no desktop workloads wired")
	}
	for _, cell := range c.Cells {
		if !validPolicy(cell.Policy) {
			return fmt.Errorf("matrix: cell %s: unknown policy %q (known: %v)", cell, cell.Policy, Policies)
		}
		if d.Runners[cell.Backend] == nil {
			return fmt.Errorf("matrix: cell %s: no runner for backend %q", cell, cell.Backend)
		}
		if cell.Policy == "adaptive" && (d.Signals == nil || d.Estimate == nil || d.NewController == nil) {
			return fmt.Errorf("matrix: cell %s: adaptive needs signals, estimate and controller", cell)
		}
	}
	return nil
}

// Measure measures the matrix and returns its report (Summarize'd). A phase that fails is
// recorded with its error and the matrix goes on; a cancelled ctx ends it early with
// what was measured so far.
func Measure(ctx context.Context, cfg Config, deps Deps) (*Report, error) {
	cfg.defaults()
	if err := cfg.Validate(&deps); err != nil {
		return nil, err
	}
	if deps.control == nil {
		deps.control = groupControl
	}
	if deps.threads == nil {
		deps.threads = osThreads{}
	}
	b := &bench{cfg: cfg, deps: deps, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6d78)), live: map[gkey]interference.Guest{}}
	rep := &Report{Started: time.Now().UTC(), Config: recordConfig(cfg)}
	rep.Env = CaptureEnv(backendsOf(cfg.Cells))
	rep.Env.Notes = append(rep.Env.Notes, cfg.Notes...)
	defer b.stopAll()
	cells := cfg.Cells
	for round := 0; ; round++ {
		if round >= cfg.Reps {
			if !cfg.Adapt || round >= cfg.MaxReps {
				break
			}
			rep.Summarize()
			cells = rep.Wide(cfg.MaxWidth)
			if len(cells) == 0 {
				break
			}
			cfg.Log("round %d: %d cells with a slowdown interval wider than %.3g", round+1, len(cells), cfg.MaxWidth)
		}
		phases := Shuffle(RoundPhases(cells, cfg.ProbeOverhead), b.rng)
		for i, p := range phases {
			if ctx.Err() != nil {
				break
			}
			cfg.Log("round %d phase %d/%d: %s %s %s %s %s", round+1, i+1, len(phases), p.Kind, p.Backend, p.Desktop, p.Guest, p.Policy)
			r := b.run(ctx, p)
			r.Round, r.Seq = round, i
			if r.Error != "" {
				cfg.Log("  error: %s", r.Error)
			}
			rep.Runs = append(rep.Runs, r)
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.Finished = time.Now().UTC()
	rep.Summarize()
	return rep, ctx.Err()
}

type gkey struct{ backend, workload string }

type bench struct {
	cfg  Config
	deps Deps
	rng  *rand.Rand
	live map[gkey]interference.Guest // kept guests (frozen when not measured)
}

func backendsOf(cells []Cell) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cells {
		if !seen[c.Backend] {
			seen[c.Backend] = true
			out = append(out, c.Backend)
		}
	}
	return out
}

func (b *bench) run(ctx context.Context, p Phase) Run {
	r := Run{Phase: p.Kind, Desktop: p.Desktop, Guest: p.Guest, Policy: p.Policy, Backend: p.Backend, Start: time.Now().UTC(), Load1: load1()}
	var err error
	switch p.Kind {
	case PhaseDesktop, PhaseNoProbe:
		err = b.desktopAlone(ctx, p, &r)
	case PhaseGuest:
		err = b.guestAlone(ctx, p, &r)
	case PhaseBoth:
		if b.paired(p) {
			err = b.pairedBoth(ctx, p, &r)
		} else {
			err = b.both(ctx, p, &r)
		}
	default:
		err = fmt.Errorf("unknown phase %q", p.Kind)
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// acquire starts the guest (or thaws a kept one) and resets every policy on it.
func (b *bench) acquire(ctx context.Context, backend, workload string) (interference.Guest, error) {
	k := gkey{backend, workload}
	g := b.live[k]
	if g == nil {
		var err error
		if g, err = b.deps.Runners[backend].Start(ctx, workload, b.cfg.Threads); err != nil {
			return nil, fmt.Errorf("start %s guest %s: %w", backend, workload, err)
		}
		if b.cfg.Keep[backend] {
			b.live[k] = g
		}
	}
	if err := b.reset(ctx, g); err != nil {
		b.release(ctx, backend, workload, g)
		return nil, fmt.Errorf("reset policy: %w", err)
	}
	return g, nil
}

// release resets the guest's policy and stops it, or freezes a kept one.
func (b *bench) release(ctx context.Context, backend, workload string, g interference.Guest) error {
	ctx = context.WithoutCancel(ctx)
	err := b.reset(ctx, g)
	if b.cfg.Keep[backend] && b.live[gkey{backend, workload}] == g {
		if c := b.deps.control(g); c != nil {
			return errors.Join(err, c.Freeze(ctx))
		}
		return err
	}
	return errors.Join(err, g.Stop(ctx))
}

func (b *bench) stopAll() {
	for k, g := range b.live {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if c := b.deps.control(g); c != nil {
			_ = c.Thaw(ctx)
		}
		if err := g.Stop(ctx); err != nil {
			b.cfg.Log("stop %s guest %s: %v", k.backend, k.workload, err)
		}
		cancel()
		delete(b.live, k)
	}
}

func (b *bench) reset(ctx context.Context, g interference.Guest) error {
	pids, err := g.PIDs()
	if err != nil {
		return err
	}
	return resetPolicy(ctx, b.deps.control(g), b.deps.threads, pids)
}

func groupControl(g interference.Guest) control {
	if grp := g.Group(); grp != nil {
		return grp
	}
	return nil
}

// desktopRun runs the desktop workload for the measured interval with the probe (if
// probe) alongside, calling around() just inside the interval's ends.
func (b *bench) desktopRun(ctx context.Context, name string, probe bool, r *Run, before, after func()) error {
	if b.cfg.Warmup > 0 {
		if _, err := b.deps.RunDesktop(ctx, name, b.cfg.Warmup); err != nil {
			return fmt.Errorf("desktop %s warm-up: %w", name, err)
		}
	}
	var pr Probe
	if probe && b.deps.StartProbe != nil {
		var err error
		if pr, err = b.deps.StartProbe(ctx); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
	}
	before()
	res, err := b.deps.RunDesktop(ctx, name, b.cfg.Run)
	after()
	var lat []float64
	if pr != nil {
		pres := pr.Stop()
		lat = pres.LatencyUs
		if pres.Seconds > 0 {
			r.ProbeCPU = pres.CPUSeconds / pres.Seconds
		}
	}
	if err != nil {
		return fmt.Errorf("desktop %s: %w", name, err)
	}
	r.setDesktop(res, lat)
	return nil
}

func (b *bench) desktopAlone(ctx context.Context, p Phase, r *Run) error {
	var sig Signals
	if b.deps.Signals != nil {
		var err error
		if sig, err = b.deps.Signals(nil); err != nil {
			return fmt.Errorf("signals: %w", err)
		}
		defer sig.Close()
	}
	var end func() interference.Window
	return b.desktopRun(ctx, p.Desktop, p.Kind == PhaseDesktop, r, func() {
		if sig != nil {
			end = sig.Begin()
		}
	}, func() {
		if end != nil {
			w := end()
			r.Window = ptr(cleanWindow(w))
			if b.deps.Estimate != nil {
				e := b.deps.Estimate(w)
				r.Estimate = &e
			}
		}
	})
}

func (b *bench) guestAlone(ctx context.Context, p Phase, r *Run) (err error) {
	g, err := b.acquire(ctx, p.Backend, p.Guest)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.release(ctx, p.Backend, p.Guest, g)) }()
	if err := sleep(ctx, b.cfg.Warmup); err != nil {
		return err
	}
	p0, t0, err := progress(g)
	if err != nil {
		return err
	}
	if err := sleep(ctx, b.cfg.Run); err != nil {
		return err
	}
	p1, t1, err := progress(g)
	if err != nil {
		return err
	}
	r.GuestWork, r.GuestSeconds = p1-p0, t1.Sub(t0).Seconds()
	return nil
}

func progress(g interference.Guest) (float64, time.Time, error) {
	p, err := g.Progress()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("guest progress: %w", err)
	}
	return p, time.Now(), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *bench) both(ctx context.Context, p Phase, r *Run) (err error) {
	g, err := b.acquire(ctx, p.Backend, p.Guest)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.release(ctx, p.Backend, p.Guest, g)) }()
	c, err := b.applyPolicy(ctx, p.Policy, g, "")
	if err != nil {
		return err
	}
	var sig Signals
	if b.deps.Signals != nil {
		if sig, err = b.deps.Signals(g); err != nil {
			return fmt.Errorf("signals: %w", err)
		}
		defer sig.Close()
	}
	var stopCtl func() []CapPoint
	if p.Policy == "adaptive" {
		stopCtl = b.adaptive(ctx, c, sig)
		// As in paired runs: the desktop works next to the controller for AdaptiveWarmup
		// before the measured run, so that the run shows the controller near its steady
		// state, not its first ticks from the start cap.
		if b.cfg.AdaptiveWarmup > 0 {
			if _, err := b.deps.RunDesktop(ctx, p.Desktop, b.cfg.AdaptiveWarmup); err != nil {
				r.CapTrace = stopCtl()
				return fmt.Errorf("desktop %s adaptive warm-up: %w", p.Desktop, err)
			}
		}
	}
	var (
		p0, p1 float64
		t0, t1 time.Time
		end    func() interference.Window
		perr   error
	)
	err = b.desktopRun(ctx, p.Desktop, true, r, func() {
		if sig != nil {
			end = sig.Begin()
		}
		p0, t0, perr = progress(g)
	}, func() {
		var e error
		p1, t1, e = progress(g)
		perr = errors.Join(perr, e)
		if end != nil {
			w := end()
			r.Window = ptr(cleanWindow(w))
			if b.deps.Estimate != nil {
				est := b.deps.Estimate(w)
				r.Estimate = &est
			}
		}
	})
	if stopCtl != nil {
		r.CapTrace = stopCtl()
	}
	if err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	r.GuestWork, r.GuestSeconds = p1-p0, t1.Sub(t0).Seconds()
	return nil
}

// applyPolicy puts policy's static part on guest g and returns its cgroup controls.
// needGroup, when set, says why the run needs a cgroup whatever the policy (paired runs
// freeze the guest); otherwise only the policies that use one do.
func (b *bench) applyPolicy(ctx context.Context, policy string, g interference.Guest, needGroup string) (control, error) {
	pids, err := g.PIDs()
	if err != nil {
		return nil, err
	}
	c := b.deps.control(g)
	switch {
	case c == nil && needGroup != "":
		return nil, fmt.Errorf("policy %s: %s, and the guest has no cgroup", policy, needGroup)
	case c == nil && policy != "none" && policy != "nice19" && policy != "sched-idle":
		return nil, fmt.Errorf("policy %s: the guest has no cgroup", policy)
	}
	if err := applyStatic(ctx, policy, c, b.deps.threads, pids, b.cfg.Cores); err != nil {
		return nil, fmt.Errorf("policy %s: %w", policy, err)
	}
	return c, nil
}

// CapPoint is one adaptive controller tick.
type CapPoint struct {
	T        float64 `json:"t"` // seconds since the policy was applied
	Cap      float64 `json:"cap"`
	Slowdown float64 `json:"slowdown"` // the estimate the step saw
}

// adaptive runs the controller every Tick until the returned stop is called: the window
// since the last tick → Estimate → Step (owner active) → cpu.max = cap × cores.
func (b *bench) adaptive(ctx context.Context, c control, sig Signals) (stop func() []CapPoint) {
	return b.adaptiveWith(ctx, c, sig, nil)
}

// adaptiveWith is adaptive with a pause: while *paused (the guest frozen in a paired
// run) the controller is not stepped and the window restarts.
func (b *bench) adaptiveWith(ctx context.Context, c control, sig Signals, paused *atomic.Bool) (stop func() []CapPoint) {
	ctl := b.deps.NewController()
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		trace []CapPoint
		wg    sync.WaitGroup
	)
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(b.cfg.Tick)
		defer t.Stop()
		end := sig.Begin()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				w := end()
				end = sig.Begin()
				if paused != nil && paused.Load() {
					continue
				}
				est := b.deps.Estimate(w)
				capf := ctl.Step(now, est, true)
				cpus := capf * float64(b.cfg.Cores)
				if capf >= 1 || math.IsNaN(capf) {
					cpus = 0
				}
				if err := c.SetCPUMax(cpus); err != nil {
					b.cfg.Log("adaptive: cpu.max: %v", err)
				}
				mu.Lock()
				trace = append(trace, CapPoint{T: now.Sub(start).Seconds(), Cap: capf, Slowdown: est.Slowdown})
				mu.Unlock()
			}
		}
	}()
	return func() []CapPoint {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return trace
	}
}

func ptr[T any](v T) *T { return &v }

// load1 is the 1-minute load average (0 when unreadable).
func load1() float64 {
	var v float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &v)
	}
	return v
}
