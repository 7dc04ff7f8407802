package main

import (
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference/controller"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/node-agent/policy"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// ControllerParams configure one host's adaptive controller in the simulation.
type ControllerParams struct {
	Target   float64 // desktop slowdown to stay under (fraction)
	MinCap   float64 // the controller's bounds on the cap (fractions of the cores)
	MaxCap   float64
	StartCap float64 // where it starts when the owner becomes active
}

// Bounds of the simulated controller's cap: it may go down to 5 % of the cores and up to
// full speed; the start cap is what the host's calibration would report (see
// adaptiveParams).
const (
	adaptiveMinCap = 0.05
	adaptiveMaxCap = 1
)

// agentController builds the node agent's real controller
// (node-agent/interference/controller) behind CapController, with its defaults for
// everything but the target, the bounds and the start cap. (Without that package the
// report would have no overtime-adaptive row: the simulator publishes no stand-in.)
var agentController = func(p ControllerParams) CapController {
	return agentCtl{controller.New(controller.Config{Target: p.Target, MinCap: p.MinCap, MaxCap: p.MaxCap, StartCap: p.StartCap})}
}

// agentCtl adapts *controller.Controller to CapController.
type agentCtl struct{ c *controller.Controller }

func (a agentCtl) Owner(now time.Time, active bool) float64 { return a.c.Owner(now, active) }

func (a agentCtl) Step(now time.Time, e SlowdownEstimate, active bool) float64 {
	return a.c.Step(now, estimate.Estimate{Slowdown: e.Slowdown, Low: e.Low, High: e.High, Method: estimateMethod}, active)
}

// estimateMethod names where the controller's estimates come from in the simulation.
const estimateMethod = "harvest simulation: modelled slowdown + noise"

func init() {
	// The simulated estimate's interval is the agent's estimator's.
	estRelErr, estAbsErr = estimate.RelErr, estimate.AbsErr
}

// OvertimeAdaptive is the node agent's engine with model.DefaultPolicy as it is after
// issue 16 (Controller "adaptive", SlowdownTarget 1 %): the engine decides run, throttle,
// freeze and evict exactly as for overtime-default, and while it throttles the guest's
// cap is the agent's controller output, stepped every ControlTick on the modelled
// slowdown plus estimation noise. ok is false when no controller is built in.
func OvertimeAdaptive() (spec PolicySpec, ok bool) {
	if agentController == nil {
		return PolicySpec{}, false
	}
	return overtimeAdaptive(agentController), true
}

// overtimeAdaptive is the adaptive policy with the controller newCtl builds.
func overtimeAdaptive(newCtl func(ControllerParams) CapController) PolicySpec {
	p := model.DefaultPolicy()
	p.Controller = model.ControllerAdaptive
	p = p.Effective()
	return PolicySpec{
		Name: "overtime-adaptive",
		About: "the node agent's engine (node-agent/policy) with model.DefaultPolicy after issue 16 (controller adaptive, slowdown target 1 %): " +
			"run, throttle, freeze and evict as overtime-default, but while throttled the guest's cap is the agent's controller " +
			"(node-agent/interference/controller, its defaults) output, stepped every 250 ms on the modelled desktop slowdown plus estimation noise, " +
			"starting at the cap the host's calibration would report",
		ThrottleCPU: p.ThrottleCPU,
		New: func(env Env) Policy {
			return &overtime{e: policy.New(p), start: env.Start}
		},
		Adaptive: func(env Env) CapController { return newCtl(adaptiveParams(env, p)) },
	}
}

// adaptiveParams are a host's controller parameters: the pool's target (the run's, which
// is the policy's SlowdownTarget by default) and the start cap the agent derives from the
// host's calibration (controller.StartCapFor): the profile here is the one a calibration
// would measure on the modelled desktop, the load curve's slowdown at full speed and the
// cap under which a load episode stays within the target.
func adaptiveParams(env Env, p model.Policy) ControllerParams {
	target := env.Target
	if target <= 0 {
		target = p.SlowdownTarget / 100
	}
	m := env.Model
	if m == nil {
		m = DefaultSlowdownModel()
	}
	full := m.Slowdown(ActivityLoad, 1)
	prof := &wire.InterferenceProfile{Measured: env.Start, CPUSlowdown: full, MemorySlowdown: full, StartCap: m.CapFor(ActivityLoad, target)}
	start := max(adaptiveMinCap, controller.StartCapFor(prof, target, controller.Defaults.StartCap))
	return ControllerParams{Target: target, MinCap: adaptiveMinCap, MaxCap: adaptiveMaxCap, StartCap: start}
}
