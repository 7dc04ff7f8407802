package matrix

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/node-agent/interference/workload"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// ProfileOptions tune the calibration (zero: about 2 minutes on 2 cores).
type ProfileOptions struct {
	// Run is each desktop run (default 3 s); Pairs the alone/with-guest pairs per
	// measurement (default 3) and CapPairs per cap tried (default 2).
	Run             time.Duration
	Pairs, CapPairs int
	// Caps tried, highest first, until memory×memory stays within the target (default
	// 0.75, 0.5, 0.35, 0.25, 0.15, 0.1, 0.05 of the host's CPUs).
	Caps []float64
	// Cores of the host (default runtime.NumCPU).
	Cores int
	// CanaryNs: a measured canary baseline (0: measure it here, guest stopped).
	CanaryNs float64
	Log      func(format string, a ...any)
}

// Profile is the host's short interference calibration with runner's guests and the
// desktop workloads in this process: the memory canary's baseline, the slowdown of a
// CPU-bound and a memory-bound desktop next to a guest of the same kind at full speed in
// the idle class (cgroup idle class + SCHED_IDLE and nice 19 on its threads), the
// desktop's wake-up p99 alone and next to the CPU guest, and the highest CPU cap under
// which memory×memory stays within target (StartCap) with the harvest there. "Alone"
// runs freeze the guest (it holds its memory, not the CPU); alone and with-guest runs
// alternate in a random order. About 2 minutes.
func Profile(ctx context.Context, runner interference.Runner, target float64) (wire.InterferenceProfile, error) {
	return ProfileWith(ctx, Deps{RunDesktop: workload.RunDesktop}, runner, target, ProfileOptions{})
}

// ProfileWith is Profile with the parts and options given (tests, the matrix command).
func ProfileWith(ctx context.Context, deps Deps, runner interference.Runner, target float64, o ProfileOptions) (wire.InterferenceProfile, error) {
	if o.Run <= 0 {
		o.Run = 3 * time.Second
	}
	if o.Pairs <= 0 {
		o.Pairs = 3
	}
	if o.CapPairs <= 0 {
		o.CapPairs = 2
	}
	if len(o.Caps) == 0 {
		o.Caps = []float64{0.75, 0.5, 0.35, 0.25, 0.15, 0.1, 0.05}
	}
	if o.Cores <= 0 {
		o.Cores = runtime.NumCPU()
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if deps.control == nil {
		deps.control = groupControl
	}
	if deps.threads == nil {
		deps.threads = osThreads{}
	}
	env := CaptureEnv([]string{runner.Name()})
	p := wire.InterferenceProfile{Measured: time.Now().UTC(), Kernel: env.Kernel, CPUModel: env.CPUModel, CPUs: env.Cores,
		Backend: runner.Name(), CanaryNs: o.CanaryNs}
	if h, err := cgroup.Detect(); err == nil {
		p.Cgroup = h.Version().String()
	}
	if len(p.Kernel) > 200 {
		p.Kernel = p.Kernel[:200]
	}
	if p.CanaryNs <= 0 {
		p.CanaryNs = canaryBaseline()
	}
	pr := &profiler{deps: deps, o: o, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}

	// CPU guest: cpu×cpu and wakeup×cpu at full idle-class speed.
	err := pr.withGuest(ctx, runner, "cpu", func(g interference.Guest, c control) error {
		cpu, err := pr.pairs(ctx, g, c, "cpu", o.Pairs)
		if err != nil {
			return err
		}
		p.CPUSlowdown = clampProfile(Median(cpu.slowdowns))
		wk, err := pr.pairs(ctx, g, c, "wakeup", o.Pairs)
		if err != nil {
			return err
		}
		p.WakeupP99AloneUs, p.WakeupP99GuestUs = Median(wk.p99Alone), Median(wk.p99Both)
		o.Log("profile: cpu×cpu slowdown %.3f, wake-up p99 %.0f → %.0f µs", p.CPUSlowdown, p.WakeupP99AloneUs, p.WakeupP99GuestUs)
		return nil
	})
	if err != nil {
		return p, err
	}
	// Memory guest: memory×memory uncapped, then caps from the highest down.
	err = pr.withGuest(ctx, runner, "memory", func(g interference.Guest, c control) error {
		m, err := pr.pairs(ctx, g, c, "memory", o.Pairs)
		if err != nil {
			return err
		}
		p.MemorySlowdown = clampProfile(Median(m.slowdowns))
		p.StartCap, p.Harvest = 1, clampProfile(Median(m.harvest))
		o.Log("profile: memory×memory slowdown %.3f uncapped, harvest %.2f", p.MemorySlowdown, p.Harvest)
		if p.MemorySlowdown <= target {
			return nil
		}
		p.StartCap, p.Harvest = o.Caps[len(o.Caps)-1], 0
		for _, capf := range o.Caps {
			pr.capCPUs = capf * float64(o.Cores)
			if err := c.SetCPUMax(pr.capCPUs); err != nil {
				return err
			}
			m, err := pr.pairs(ctx, g, c, "memory", o.CapPairs)
			if err != nil {
				return err
			}
			s := Median(m.slowdowns)
			o.Log("profile: memory×memory at cap %.2f: slowdown %.3f, harvest %.2f", capf, s, Median(m.harvest))
			p.Harvest = clampProfile(Median(m.harvest)) // at the lowest cap when none met the target
			if s <= target {
				p.StartCap = capf
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return p, err
	}
	return p, p.Validate()
}

func clampProfile(v float64) float64 {
	if v != v || v < 0 {
		return 0
	}
	if v > 10 {
		return 10
	}
	return v
}

// canaryBaseline is the memory canary's median time on a locked thread (ns).
func canaryBaseline() float64 {
	ch := make(chan time.Duration, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ch <- signals.NewCanary(0).Calibrate(15)
	}()
	return float64((<-ch).Nanoseconds())
}

type profiler struct {
	deps Deps
	o    ProfileOptions
	rng  *rand.Rand
	// capCPUs is the guest's cap while the desktop runs (0: none); the guest-alone
	// measurement lifts it (harvest is against the uncapped guest).
	capCPUs float64
}

// withGuest starts workload on runner in the idle class (cgroup idle, nice 19 and
// SCHED_IDLE on its threads), measures its rate alone and runs f; then stops it.
func (pr *profiler) withGuest(ctx context.Context, runner interference.Runner, wl string, f func(interference.Guest, control) error) error {
	g, err := runner.Start(ctx, wl, pr.o.Cores)
	if err != nil {
		return fmt.Errorf("profile: start %s guest: %w", wl, err)
	}
	defer g.Stop(context.WithoutCancel(ctx))
	c := pr.deps.control(g)
	if c == nil {
		return errors.New("profile: the guest has no cgroup")
	}
	pids, err := g.PIDs()
	if err != nil {
		return err
	}
	if err := c.SetIdle(true); err != nil {
		return err
	}
	err = eachThread(pr.deps.threads, pids, func(tid int) error {
		return errors.Join(pr.deps.threads.SetNice(tid, 19), pr.deps.threads.SetIdleSched(tid, true))
	})
	if err != nil {
		return err
	}
	return f(g, c)
}

type pairResult struct {
	slowdowns, p99Alone, p99Both, harvest []float64
}

// pairs runs n pairs of desktop alone (guest frozen) / desktop with the guest in a random
// order within each pair, plus the guest alone once per pair (its rate for the harvest,
// over a third of a run).
func (pr *profiler) pairs(ctx context.Context, g interference.Guest, c control, desktop string, n int) (pairResult, error) {
	var out pairResult
	for i := 0; i < n; i++ {
		var alone, both, galone Run
		steps := []func() error{
			func() error { // desktop alone: guest frozen
				if err := c.Freeze(ctx); err != nil {
					return err
				}
				defer c.Thaw(context.WithoutCancel(ctx))
				res, err := pr.deps.RunDesktop(ctx, desktop, pr.o.Run)
				alone.Desktop = desktop
				alone.setDesktop(res, nil)
				return err
			},
			func() error {
				p0, t0, err := progress(g)
				if err != nil {
					return err
				}
				res, err := pr.deps.RunDesktop(ctx, desktop, pr.o.Run)
				if err != nil {
					return err
				}
				p1, t1, err := progress(g)
				both.Desktop = desktop
				both.setDesktop(res, nil)
				both.GuestWork, both.GuestSeconds = p1-p0, t1.Sub(t0).Seconds()
				return err
			},
			func() error { // guest alone, a third of a run, uncapped
				if pr.capCPUs > 0 {
					if err := c.SetCPUMax(0); err != nil {
						return err
					}
					defer c.SetCPUMax(pr.capCPUs)
				}
				p0, t0, err := progress(g)
				if err != nil {
					return err
				}
				if err := sleep(ctx, max(pr.o.Run/3, 10*time.Millisecond)); err != nil {
					return err
				}
				p1, t1, err := progress(g)
				galone.GuestWork, galone.GuestSeconds = p1-p0, t1.Sub(t0).Seconds()
				return err
			},
		}
		pr.rng.Shuffle(len(steps), func(a, b int) { steps[a], steps[b] = steps[b], steps[a] })
		for _, s := range steps {
			if err := s(); err != nil {
				return out, fmt.Errorf("profile %s: %w", desktop, err)
			}
		}
		d := Derive(desktop, pr.o.Cores, &alone, &both, &galone)
		out.slowdowns = append(out.slowdowns, d.Slowdown)
		out.harvest = append(out.harvest, d.Harvest)
		if alone.DesktopLatency != nil && both.DesktopLatency != nil {
			out.p99Alone = append(out.p99Alone, alone.DesktopLatency.P99)
			out.p99Both = append(out.p99Both, both.DesktopLatency.P99)
		}
	}
	return out, nil
}
