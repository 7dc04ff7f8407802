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
	"github.com/overtime-hpc/overtime/vocab/wire"
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

// interferenceControl is the adaptive controller with its input: the desktop signals,
// the estimate of the last tick, the controller's cap. It turns a signals tick into the
// CPU limit the guest should have (Tick) and the throttle action into one (ThrottleLimit);
// the guest's lifecycle applies it (guestLifecycle.ApplyLimit). Owned by Run's goroutine.
type interferenceControl struct {
	sig      Signals
	hostCPUs int
	m        *metrics

	adaptive bool // the configuration in force lets the controller set the cap
	// fixedCPU is the fixed controller's throttle (the policy's ThrottleCPU, percent).
	fixedCPU int
	ctl      *controller.Controller // nil until the first configuration
	lastTick signals.Totals
	est      estimate.Estimate // the last tick's
}

// controlInput is what the controller needs of the decision and of the guest in force.
type controlInput struct {
	state   model.OwnerState
	action  model.GuestAction
	running bool    // the guest runs
	frozen  bool    // and is frozen
	limit   float64 // its applied CPU limit (CPUs; 0 = none)
}

func newInterferenceControl(sig Signals, hostCPUs int, m *metrics) *interferenceControl {
	return &interferenceControl{sig: sig, hostCPUs: hostCPUs, m: m}
}

// newSignals is the production Monitor: the desktop from the v2 desktop group when there
// is one (else a /proc scan), the guest's cgroup from its main process (guestPID), the
// memory canary. It samples only while a guest runs.
func newSignals(guestPID func() int) Signals {
	var h *cgroup.Hierarchy
	guest := func() *cgroup.Group {
		pid := guestPID()
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

// controllerConfig is the controller's configuration for configuration c: the pool's
// target, and the start from the host's calibration (the fixed ThrottleCPU without one:
// what the pool chose before it had a measurement).
func controllerConfig(c *wire.AgentConfig) controller.Config {
	p := c.Policy
	target := p.SlowdownTarget / 100
	if target <= 0 {
		target = model.DefaultPolicy().SlowdownTarget / 100
	}
	fallback := float64(p.ThrottleCPU) / 100
	if fallback <= 0 {
		fallback = controller.Defaults.StartCap
	}
	return controller.Config{Target: target, StartCap: controller.StartCapFor(c.Interference, target, fallback)}
}

// Configure follows a new configuration: fixed or adaptive, controller parameters, the
// canary's baseline from the host's profile.
func (c *interferenceControl) Configure(cfg *wire.AgentConfig) {
	c.adaptive = cfg.Policy.Controller != model.ControllerFixed
	c.fixedCPU = cfg.Policy.ThrottleCPU
	cc := controllerConfig(cfg)
	if c.ctl == nil {
		c.ctl = controller.New(cc)
	} else {
		c.ctl.SetConfig(cc)
	}
	if p := cfg.Interference; p != nil && p.CanaryNs > 0 {
		if m, ok := c.sig.(interface{ SetCanaryBaseline(time.Duration) }); ok {
			m.SetCanaryBaseline(time.Duration(p.CanaryNs))
		}
	}
}

// controlled is true when the controller's cap is the guest's limit now: adaptive,
// throttle decided, the guest running and not frozen.
func (c *interferenceControl) controlled(in controlInput) bool {
	return c.adaptive && in.action == model.ActionThrottle && in.running && !in.frozen
}

// ownerActive is whom the controller protects: someone at the desk, or a policy that
// throttles in the state in force (throttle means "as the desktop allows").
func ownerActive(state model.OwnerState, action model.GuestAction) bool {
	return state == model.StateOwnerActive || action == model.ActionThrottle
}

// Owner follows a decision: the signals learn whether someone is at the desk, and the
// owner's arrival puts the controller's start cap in force with this very decision,
// before any measurement.
func (c *interferenceControl) Owner(now time.Time, state model.OwnerState, action model.GuestAction) {
	c.sig.SetOwnerActive(state == model.StateOwnerActive)
	c.ctl.Owner(now, ownerActive(state, action))
}

// ThrottleLimit is the CPU limit (CPUs; 0 = none) of the throttle action: the fixed
// ThrottleCPU, or the adaptive controller's cap.
func (c *interferenceControl) ThrottleLimit() float64 {
	if !c.adaptive {
		return float64(c.hostCPUs) * float64(c.fixedCPU) / 100
	}
	return c.capLimit(c.ctl.Cap())
}

// Signals is the desktop signals the controller measures with (Run samples them; the
// job counters read their totals).
func (c *interferenceControl) Signals() Signals { return c.sig }

// Estimate is the last tick's estimate of the desktop's slowdown.
func (c *interferenceControl) Estimate() estimate.Estimate { return c.est }

// Cap is the controller's cap now (fraction of the host's CPUs; 1 = uncapped).
func (c *interferenceControl) Cap() float64 { return c.ctl.Cap() }

// capLimit turns a cap (fraction; 1 = uncapped) into a CPU limit (0 = none).
func (c *interferenceControl) capLimit(f float64) float64 {
	if f >= 1 {
		return 0
	}
	return float64(c.hostCPUs) * f
}

// Tick runs on each signals tick: estimate the desktop's slowdown over the tick and step
// the controller. It returns the CPU limit to put on the guest when the controller sets
// it now and its cap moved enough from the applied one to be worth a backend call (ok
// false: leave the guest's limit as it is).
func (c *interferenceControl) Tick(now time.Time, t signals.Totals, in controlInput) (limit float64, ok bool) {
	prev := c.lastTick
	c.lastTick = t
	if prev.Time.IsZero() || c.ctl == nil {
		return 0, false
	}
	w := signals.WindowOf(prev, t)
	if w.Seconds <= 0 {
		return 0, false
	}
	est := estimate.Desktop(w)
	c.est = est
	c.m.slowdown.Set(est.Slowdown)
	if !c.controlled(in) {
		// Frozen, running free or no guest: what the desktop shows now says nothing
		// about a cap; only the owner's comings and goings count.
		c.ctl.Owner(now, ownerActive(in.state, in.action))
		return 0, false
	}
	c.ctl.Step(now, est, ownerActive(in.state, in.action))
	limit = c.capLimit(c.ctl.Cap())
	if c.capClose(limit, in.limit) {
		return 0, false
	}
	return limit, true
}

// KeepFor is Act's keep for the throttle limit limit: under the adaptive controller a
// small move of its cap waits for its tick (Tick), which calls the backend only for a
// change worth it. nil: any change is applied.
func (c *interferenceControl) KeepFor(action model.GuestAction, limit float64) func(cur float64) bool {
	if action != model.ActionThrottle || !c.adaptive {
		return nil
	}
	return func(cur float64) bool { return c.capClose(limit, cur) }
}

// capClose reports whether two CPU limits differ by less than capStep (both capped, or
// both uncapped): not worth a backend call.
func (c *interferenceControl) capClose(limit, cur float64) bool {
	return (limit == 0) == (cur == 0) && math.Abs(limit-cur) < capStep*float64(c.hostCPUs)
}
