package main

import (
	"github.com/overtime-hpc/overtime/node-agent/policy"
	"github.com/overtime-hpc/overtime/sitemgmt/model"
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
// (node-agent/interference/controller) behind CapController; nil while the package is
// not in this tree, and then the report has no overtime-adaptive row (the simulator never
// publishes a stand-in).
var agentController func(ControllerParams) CapController

// OvertimeAdaptive is the node agent's engine with model.DefaultPolicy as it is after
// issue 16 (Controller "adaptive", SlowdownTarget 1 %): the engine decides run, throttle,
// freeze and evict exactly as for overtime-default, and while it throttles the guest's
// cap is the agent's controller output, stepped every ControlTick on the modelled
// slowdown plus estimation noise. ok is false when the controller is not built in.
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
			"(node-agent/interference/controller) output, stepped every second on the modelled desktop slowdown plus estimation noise, " +
			"starting at the cap the host's calibration would report",
		ThrottleCPU: p.ThrottleCPU,
		New: func(env Env) Policy {
			return &overtime{e: policy.New(p), start: env.Start}
		},
		Adaptive: func(env Env) CapController { return newCtl(adaptiveParams(env, p)) },
	}
}

// adaptiveParams are a host's controller parameters: the pool's target (the run's, which
// is the policy's SlowdownTarget by default) and as start cap what a calibration run
// reports as wire.InterferenceProfile.StartCap: the cap under which the harder desktop
// (a load episode) stays within the target, here read off the slowdown model.
func adaptiveParams(env Env, p model.Policy) ControllerParams {
	target := env.Target
	if target <= 0 {
		target = p.SlowdownTarget / 100
	}
	m := env.Model
	if m == nil {
		m = DefaultSlowdownModel()
	}
	start := max(adaptiveMinCap, m.CapFor(ActivityLoad, target))
	return ControllerParams{Target: target, MinCap: adaptiveMinCap, MaxCap: adaptiveMaxCap, StartCap: start}
}
