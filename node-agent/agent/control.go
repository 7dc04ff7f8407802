package agent

// The adaptive controller (model.ControllerAdaptive, docs/node-agent.md "Adaptive
// throttling"): while the policy's action is throttle, the guest's CPU cap is not the
// pool's fixed ThrottleCPU but what node-agent/interference/controller sets, tick by
// tick, from the desktop's slowdown that node-agent/interference/estimate makes of the
// signals' window. The policy engine keeps deciding run / throttle / freeze / evict:
// freezing on pressure and evicting stay the backstop when even the lowest cap is too
// much for the desktop.

import (
	"context"
	"math"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference/controller"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Signals is what the agent measures the desktop with: a signals.Monitor in production,
// a fake in tests.
type Signals interface {
	// Run samples until ctx is done.
	Run(ctx context.Context) error
	// Ticks delivers the totals after each sample: the controller's clock.
	Ticks() <-chan signals.Totals
	// Snapshot is the totals now (job counters).
	Snapshot() signals.Totals
	// SetOwnerActive says whether someone is at the desk.
	SetOwnerActive(on bool)
}

// capStep is the smallest cap change (fraction of the host's CPUs) worth a backend call:
// on libvirt each is a ~20 ms virsh call, and a change this small is within the
// estimate's noise.
const capStep = 0.02

// newSignals is the production Monitor: the desktop from the v2 desktop group when there
// is one (else a /proc scan), the guest's cgroup from its main process, the memory
// canary. It samples only while a guest runs.
func (a *Agent) newSignals() Signals {
	var h *cgroup.Hierarchy
	guest := func() *cgroup.Group {
		pid := int(a.guestPID.Load())
		if pid <= 0 {
			return nil
		}
		if h == nil {
			var err error
			if h, err = cgroup.Detect(); err != nil {
				return nil
			}
		}
		g, err := h.FindByPID(pid)
		if err != nil {
			return nil
		}
		return g
	}
	return signals.NewMonitor(signals.MonitorConfig{Guest: guest, DesktopGroup: signals.DesktopGroupV2(),
		Canary: signals.NewCanary(0), OnlyWithGuest: true})
}

// adaptive reports whether the adaptive controller sets the cap under the policy in force.
func (a *Agent) adaptive() bool {
	return a.cfg != nil && a.cfg.Policy.Controller != model.ControllerFixed
}

// controllerConfig is the controller's configuration for the configuration in force:
// the pool's target, and the start from the host's calibration (the fixed ThrottleCPU
// without one: what the pool chose before it had a measurement).
func (a *Agent) controllerConfig() controller.Config {
	p := a.cfg.Policy
	target := p.SlowdownTarget / 100
	if target <= 0 {
		target = model.DefaultPolicy().SlowdownTarget / 100
	}
	fallback := float64(p.ThrottleCPU) / 100
	if fallback <= 0 {
		fallback = controller.Defaults.StartCap
	}
	return controller.Config{Target: target, StartCap: controller.StartCapFor(a.cfg.Interference, target, fallback)}
}

// configureController follows a new configuration: controller parameters, the canary's
// baseline from the host's profile.
func (a *Agent) configureController() {
	cfg := a.controllerConfig()
	if a.ctl == nil {
		a.ctl = controller.New(cfg)
	} else {
		a.ctl.SetConfig(cfg)
	}
	if p := a.cfg.Interference; p != nil && p.CanaryNs > 0 {
		if m, ok := a.sig.(interface{ SetCanaryBaseline(time.Duration) }); ok {
			m.SetCanaryBaseline(time.Duration(p.CanaryNs))
		}
	}
}

// controlled is true when the controller's cap is the guest's limit now: adaptive,
// throttle decided, the guest running and not frozen.
func (a *Agent) controlled() bool {
	return a.adaptive() && a.dec.Action == model.ActionThrottle && a.applied.running && !a.applied.frozen
}

// ownerActive is whom the controller protects: someone at the desk, or a policy that
// throttles in the state in force (throttle means "as the desktop allows").
func (a *Agent) ownerActive() bool {
	return a.dec.State == model.StateOwnerActive || a.dec.Action == model.ActionThrottle
}

// throttleLimit is the CPU limit (CPUs; 0 = none) of the throttle action.
func (a *Agent) throttleLimit() float64 {
	if !a.adaptive() {
		return float64(a.o.HostCPUs) * float64(a.cfg.Policy.ThrottleCPU) / 100
	}
	return a.capLimit(a.ctl.Cap())
}

// capLimit turns a cap (fraction; 1 = uncapped) into a CPU limit (0 = none).
func (a *Agent) capLimit(c float64) float64 {
	if c >= 1 {
		return 0
	}
	return float64(a.o.HostCPUs) * c
}

// controlTick runs on each signals tick: estimate the desktop's slowdown over the tick,
// step the controller, and apply its cap when it moved enough.
func (a *Agent) controlTick(ctx context.Context, t signals.Totals) {
	prev := a.lastTick
	a.lastTick = t
	if prev.Time.IsZero() || a.cfg == nil {
		return
	}
	w := signals.WindowOf(prev, t)
	if w.Seconds <= 0 {
		return
	}
	est := estimate.Desktop(w)
	a.est = est
	a.m.slowdown.Set(est.Slowdown)
	if a.ctl == nil {
		return
	}
	now := a.o.Now()
	if !a.controlled() {
		// Frozen, running free or no guest: what the desktop shows now says nothing
		// about a cap; only the owner's comings and goings count.
		a.ctl.Owner(now, a.ownerActive())
		return
	}
	a.ctl.Step(now, est, a.ownerActive())
	a.applyCap(ctx)
}

// applyCap sets the controller's cap on the running guest when it differs enough from
// the applied one.
func (a *Agent) applyCap(ctx context.Context) {
	if !a.controlled() || a.ctl == nil {
		return
	}
	limit := a.capLimit(a.ctl.Cap())
	if a.capClose(limit, a.applied.limit) {
		return
	}
	b, err := a.backend()
	if err != nil {
		return
	}
	if err := b.SetCPULimit(ctx, a.cfg.Guest.Name, limit); err != nil {
		a.m.actionError.WithLabelValues("cpu-limit").Inc()
		a.log.Error("guest cpu-limit", "guest", a.cfg.Guest.Name, "err", err)
		return
	}
	a.log.Debug("adaptive cap", "cap", a.ctl.Cap(), "cpuLimit", limit, "slowdown", a.est.Slowdown, "method", a.est.Method)
	a.applied.limit = limit
	a.foldCounters(false) // the time until now counts under the previous cap
	a.m.guestCap.Set(a.capFraction())
}

// capClose reports whether two CPU limits differ by less than capStep (both capped, or
// both uncapped): not worth a backend call.
func (a *Agent) capClose(limit, cur float64) bool {
	return (limit == 0) == (cur == 0) && math.Abs(limit-cur) < capStep*float64(a.o.HostCPUs)
}

// capFraction is the applied cap as a fraction of the host's CPUs (1 = uncapped).
func (a *Agent) capFraction() float64 {
	if !a.applied.running || a.applied.limit <= 0 {
		return 1
	}
	return a.applied.limit / float64(a.o.HostCPUs)
}
