// Package policy turns what the node agent observes (the schedule's mode, sessions, input,
// desktop load and pressure) into what happens to the compute guest, under a pool's
// declarative model.Policy. It is pure: no clock, no I/O; the agent feeds it observations
// and calls it again by NextDeadline when nothing happens.
//
// Tightening (run → throttle → freeze → evict) is immediate: it is the owner's input that
// triggers it, and reacting to the event itself is the point. Loosening waits until the
// looser action has been the right one for Policy.Hold without interruption, so that a
// pause in typing does not flap the guest between throttled and full speed.
package policy

import (
	"fmt"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Observation is the agent's view of the desktop at one instant.
type Observation struct {
	Now      time.Time
	Kind     model.ModeKind // kind of the mode the schedule gives now
	HasGuest bool           // the mode defines a guest
	// Sessions logged in: local (graphical or text console) and remote (ssh).
	LocalSessions, RemoteSessions int
	LastInput                     time.Time // last input event (keyboard, mouse, session terminal); zero = never
	Load                          float64   // CPU of processes outside the guest, cores
	Pressure                      float64   // desktop pressure, percent (PSI some avg10)
}

// Decision is what the engine concludes.
type Decision struct {
	State  model.OwnerState
	Action model.GuestAction
	Reason string
	// Changed is true when Action differs from the previous decision.
	Changed bool
}

// Engine holds the hysteresis state between observations. The zero value is not usable;
// use New.
type Engine struct {
	p model.Policy

	action      model.GuestAction
	state       model.OwnerState
	started     bool
	lastAtLeast time.Time // last instant the wanted action was at least as strict as the one in force
	frozenSince time.Time // zero when not frozen
	pressured   bool      // frozen because of pressure (thaw needs pressure below ThawPressure)
	deadline    time.Time
}

// New returns an engine for the effective policy p (every field set: model.Policy.Effective).
func New(p model.Policy) *Engine {
	return &Engine{p: p}
}

// SetPolicy replaces the policy (a new configuration); hysteresis state is kept.
func (e *Engine) SetPolicy(p model.Policy) { e.p = p }

// Policy returns the policy in force.
func (e *Engine) Policy() model.Policy { return e.p }

// Action returns the action in force (run before the first decision).
func (e *Engine) Action() model.GuestAction {
	if !e.started {
		return model.ActionRun
	}
	return e.action
}

// State classifies the owner.
func (e *Engine) State(o Observation) (model.OwnerState, string) {
	switch {
	case !o.HasGuest || o.Kind == model.KindMaintenance || o.Kind == model.KindLocalDisk:
		if !o.HasGuest {
			return model.StateMaintenance, fmt.Sprintf("mode kind %s runs no guest", o.Kind)
		}
		return model.StateMaintenance, "schedule: maintenance"
	case o.Kind == model.KindCluster:
		return model.StateAfterHours, "schedule: cluster mode"
	}
	idle := time.Duration(e.p.IdleAfter)
	sessions := o.LocalSessions
	if e.p.RemoteActive == nil || *e.p.RemoteActive {
		sessions += o.RemoteSessions
	}
	recent := !o.LastInput.IsZero() && o.Now.Sub(o.LastInput) < idle
	switch {
	case recent:
		return model.StateOwnerActive, fmt.Sprintf("input %s ago", roundDur(o.Now.Sub(o.LastInput)))
	case e.p.DesktopLoad > 0 && o.Load >= e.p.DesktopLoad:
		return model.StateOwnerActive, fmt.Sprintf("desktop load %.2f cores >= %.2f", o.Load, e.p.DesktopLoad)
	case sessions == 0:
		return model.StateNoUser, "no sessions"
	default:
		return model.StateOwnerIdle, fmt.Sprintf("%d session(s), no input for %s", sessions, idle)
	}
}

// Decide applies the policy to an observation.
func (e *Engine) Decide(o Observation) Decision {
	state, reason := e.State(o)
	want := e.p.Actions[state]
	if want == "" {
		want = model.ActionRun
	}
	present := state == model.StateOwnerActive || state == model.StateOwnerIdle
	// Pressure: an owner at the desk whose desktop stalls gets the CPU back entirely.
	if present && want.Severity() < model.ActionFreeze.Severity() {
		switch {
		case o.Pressure >= e.p.FreezePressure:
			want, reason = model.ActionFreeze, fmt.Sprintf("desktop pressure %.1f%% >= %.1f%%", o.Pressure, e.p.FreezePressure)
			e.pressured = true
		case e.pressured && o.Pressure >= e.p.ThawPressure:
			want, reason = model.ActionFreeze, fmt.Sprintf("desktop pressure %.1f%% not yet below %.1f%%", o.Pressure, e.p.ThawPressure)
		default:
			e.pressured = false
		}
	} else {
		e.pressured = false
	}
	// A guest frozen for too long is evicted: Slurm requeues the job elsewhere instead of
	// waiting for a node that does not answer.
	if e.started && e.action == model.ActionFreeze && want == model.ActionFreeze && !e.frozenSince.IsZero() &&
		o.Now.Sub(e.frozenSince) >= time.Duration(e.p.EvictAfter) {
		want, reason = model.ActionEvict, fmt.Sprintf("frozen for %s (evictAfter %s)", roundDur(o.Now.Sub(e.frozenSince)), e.p.EvictAfter)
	}
	// Once evicted, stay evicted while the guest would only be frozen again.
	if e.started && e.action == model.ActionEvict && want == model.ActionFreeze {
		want = model.ActionEvict
	}

	prev := e.Action()
	next := prev
	hold := time.Duration(e.p.Hold)
	// Input kept the owner active until LastInput+IdleAfter, even if no observation was
	// made at that instant: the hold runs from there.
	if e.started && e.state == model.StateOwnerActive && !o.LastInput.IsZero() {
		if until := o.LastInput.Add(time.Duration(e.p.IdleAfter)); until.After(e.lastAtLeast) && !until.After(o.Now) {
			e.lastAtLeast = until
		}
	}
	switch {
	case !e.started:
		next = want
		e.lastAtLeast = o.Now
	case want.Severity() >= prev.Severity():
		next = want
		e.lastAtLeast = o.Now
	case o.Now.Sub(e.lastAtLeast) >= hold:
		next = want
		e.lastAtLeast = o.Now
	default:
		reason = fmt.Sprintf("%s; holding %s for %s more", reason, prev, roundDur(hold-o.Now.Sub(e.lastAtLeast)))
	}
	changed := !e.started || next != prev
	if next == model.ActionFreeze && (prev != model.ActionFreeze || e.frozenSince.IsZero()) {
		e.frozenSince = o.Now
	}
	if next != model.ActionFreeze {
		e.frozenSince = time.Time{}
	}
	e.started, e.action, e.state = true, next, state

	// When to look again if nothing happens.
	var dl []time.Time
	if !o.LastInput.IsZero() && state == model.StateOwnerActive {
		dl = append(dl, o.LastInput.Add(time.Duration(e.p.IdleAfter)))
	}
	if next != want {
		dl = append(dl, e.lastAtLeast.Add(hold))
	}
	if next == model.ActionFreeze {
		dl = append(dl, e.frozenSince.Add(time.Duration(e.p.EvictAfter)))
	}
	e.deadline = time.Time{}
	for _, t := range dl {
		if t.After(o.Now) && (e.deadline.IsZero() || t.Before(e.deadline)) {
			e.deadline = t
		}
	}
	return Decision{State: state, Action: next, Reason: reason, Changed: changed}
}

// ExamDecision keeps the compute guest off during an exam whatever the pool's policy
// says: an exam PC runs nothing but the exam. It overrides the engine's decision d
// (exam: the configuration in force says exam) with maintenance and evict.
//
// It is a decision about the guest, so it lives here with the engine that makes the
// others, not with the agent's switching of the PC (node-agent/agent/switch.go, where it
// was): restarting into an exam and keeping the guest off during one are separate rules.
// It is applied after Decide rather than inside it, as before, so that the engine's
// hysteresis keeps following the pool's policy.
func ExamDecision(d Decision, exam bool) Decision {
	if !exam {
		return d
	}
	if d.Action != model.ActionEvict {
		d.Reason = "exam: no compute guest"
	}
	d.State, d.Action = model.StateMaintenance, model.ActionEvict
	return d
}

// NextDeadline is when Decide must run again if no observation changes (an idle timeout,
// a hold or an evict deadline expires); zero when nothing is pending.
func (e *Engine) NextDeadline() time.Time { return e.deadline }

func roundDur(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
