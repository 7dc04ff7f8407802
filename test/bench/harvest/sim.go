package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/policy"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The simulator replays a Trace host by host, event-driven: between two changes of what a
// host's policy could observe (a login, a burst of input starting or ending, a load
// episode, a schedule change) and the policy's own deadlines (idle timeouts, holds,
// polls) nothing changes, so each interval is accounted in one step. A 200-host week is
// a few hundred thousand steps per policy.
//
// Compute model: a host has Params.Cores cores. The guest runs in the idle class (nice
// 19 / SCHED_IDLE or the idle cgroup), so the desktop always comes first: at full speed
// it gets cores minus desktop load, throttled min(ThrottleCPU% of the cores, cores minus
// desktop load), frozen, evicted or absent nothing.
//
// Jobs: each host's guest runs jobs back to back, an endless queue. A job's length is
// lognormal (median JobMedian = 2 h, sigma JobSigma = 1, at most JobMax = 24 h) at full
// speed on all cores, so it needs length × cores core-seconds of work and takes longer
// while the guest is throttled or frozen. Freezing keeps the job; evicting (or stopping
// the guest in any way) requeues it, and the work it had done is wasted. When the guest
// runs again it takes the next job. Each host's job lengths come from their own random
// stream (JobSeed, host), the same sequence under every policy, so that policies are
// compared on the same work.
//
// Owner-active (the same for every policy): a session (local or ssh) with input in the
// last ActiveWindow (5 min, the common screen-saver and idle notion) or a desktop load
// episode running. The report counts owner-active time with the guest running at full
// speed (unthrottled) and throttled, and the modelled desktop slowdown of every
// owner-active second (slowdown.go): a function of the guest's cap and of whether a load
// episode runs.
//
// Adaptive throttle (PolicySpec.Adaptive): while the policy throttles, the guest's cap is
// a CapController's output instead of ThrottleCPU. When the throttle begins (the input
// event) the simulator tells the controller the engine's owner state (Owner: the agent
// does so at the key press, so that the start cap is in force at once), then steps it at
// the end of every ControlTick (250 ms, the agent's signals tick; the event-driven steps
// are split at the ticks) and applies its cap when it moved by capStep or more, as the
// agent does; the owner state it passes is the agent's (the engine sees the owner
// active, or the action is throttle); each step gets an estimate of its tick: the modelled slowdown averaged
// over the tick (the cap is constant within a tick; 0 while nobody is active) plus
// Gaussian estimation noise of σ = EstimateRelSigma × slowdown + EstimateSigma (a
// seeded stream per host; the estimate is clipped at 0), with the estimator's interval.
// When the throttle ends the controller is told the owner state again.

// NoInput is Obs.LastInput when there has been no input yet. Far in the past, but far
// enough from math.MinInt64 that Now-LastInput does not overflow.
const NoInput int64 = math.MinInt64 / 4

// NoDeadline is what NextDeadline returns when nothing is pending.
const NoDeadline int64 = math.MaxInt64

// Obs is what a policy sees of a host at one instant; times are seconds since the trace's
// start.
type Obs struct {
	Now            int64
	Kind           model.ModeKind // the schedule's mode kind: desktop or cluster
	LocalSessions  int
	RemoteSessions int
	LastInput      int64   // the last input event: Now during a burst, NoInput before the first
	Load           float64 // CPU used by the desktop (outside the guest), cores
	Cores          int
}

// Policy decides what happens to one host's compute guest. The simulator calls Decide at
// every change of the host's observation and at NextDeadline; Decide returns the action
// in force from that instant (model.ActionEvict also stands for "no guest": not started,
// waiting for a start condition).
type Policy interface {
	Decide(o Obs) model.GuestAction
	NextDeadline() int64 // NoDeadline when nothing is pending
}

// Env is what a policy is built for.
type Env struct {
	Start time.Time // the trace's start (Obs times are seconds after it)
	Cores int
	// The desktop-slowdown model and target of the run (for an adaptive policy's
	// calibrated start cap and target).
	Model  *SlowdownModel
	Target float64
}

// PolicySpec names a policy and builds one instance per host.
type PolicySpec struct {
	Name        string
	About       string // one sentence for the report
	ThrottleCPU int    // percent of the host's cores a throttled guest may use
	New         func(Env) Policy
	// Adaptive, when set, builds each host's cap controller: while the policy throttles,
	// the guest's cap is the controller's output (ThrottleCPU is then unused).
	Adaptive func(Env) CapController
}

// CapController is an adaptive throttle as the simulator drives it: Step is called every
// ControlTick while the policy throttles the guest, with the estimated desktop slowdown
// over the past tick and whether the policy engine sees the owner active, and returns
// the cap (fraction of the host's cores, 0-1] for the next tick. adaptive.go adapts the
// agent's controller (node-agent/interference/controller) to it.
type CapController interface {
	// Owner applies a change of the owner's activity without a measurement.
	Owner(now time.Time, ownerActive bool) float64
	Step(now time.Time, est SlowdownEstimate, ownerActive bool) float64
}

// SlowdownEstimate is what the agent's estimator would report for one tick: the
// desktop's slowdown and an interval around it (fractions).
type SlowdownEstimate struct {
	Slowdown, Low, High float64
}

// Estimator interval (see estimate.go's RelErr and AbsErr): Low..High is
// Slowdown ± (estRelErr × Slowdown + estAbsErr); adaptive.go sets them from the agent's
// estimator.
var estRelErr, estAbsErr = 0.5, 0.005

// capStep is the agent's smallest applied cap change (node-agent/agent: a smaller one is
// within the estimate's noise and not worth a backend call).
const capStep = 0.02

// ownerStater is a Policy that can say whether it sees the owner active (the engine's
// state), for the cap controller.
type ownerStater interface {
	OwnerActive() bool
}

// Policies are the ones compared in the report: overtime-adaptive (when the agent's
// controller is built in, adaptive.go) next to the fixed 25 % default and the reference
// policies.
func Policies() []PolicySpec {
	var out []PolicySpec
	if a, ok := OvertimeAdaptive(); ok {
		out = append(out, a)
	}
	return append(out, OvertimeDefault(), HTCondorDesktop(), Nice19(), AfterHoursOnly())
}

// --- overtime-default: the production engine -------------------------------------------

// OvertimeDefault is the node agent's real decision engine (node-agent/policy) with the
// default pool policy (model.DefaultPolicy) and the fixed controller (the default before
// issue 16): run while nobody is at the desk or the owner is idle, throttle to
// ThrottleCPU at the first input, freeze on desktop pressure, evict after EvictAfter
// frozen; cluster mode runs the guest regardless. The guest definition is assumed the
// same in the desktop and the cluster mode, so a mode change does not replace the guest
// (the agent replaces it only when its definition changes).
func OvertimeDefault() PolicySpec {
	p := model.DefaultPolicy()
	p.Controller = model.ControllerFixed
	p = p.Effective()
	return PolicySpec{
		Name:        "overtime-default",
		About:       "the node agent's engine (node-agent/policy) with model.DefaultPolicy and the fixed controller (the default before issue 16): throttle to 25 % of the cores at the first input, full speed again 5 min after the last input plus a 30 s hold, freeze on desktop pressure and evict after 10 min frozen; cluster mode runs the guest at full speed",
		ThrottleCPU: p.ThrottleCPU,
		New: func(env Env) Policy {
			return &overtime{e: policy.New(p), start: env.Start}
		},
	}
}

// agentCheckEvery is the node agent's default CheckEvery: its loop decides again at
// least this long after the previous decision, even if no sensor reports anything.
const agentCheckEvery = 30

type overtime struct {
	e     *policy.Engine
	start time.Time
	last  int64             // the previous Decide
	act   model.GuestAction // its action
	state model.OwnerState  // and the engine's owner state
}

// OwnerActive is the engine's owner state at the last decision.
func (o *overtime) OwnerActive() bool { return o.state == model.StateOwnerActive }

func (o *overtime) at(s int64) time.Time { return o.start.Add(time.Duration(s) * time.Second) }

func (o *overtime) Decide(ob Obs) model.GuestAction {
	var last time.Time
	if ob.LastInput != NoInput {
		last = o.at(ob.LastInput)
	}
	d := o.e.Decide(policy.Observation{
		Now: o.at(ob.Now), Kind: ob.Kind, HasGuest: true,
		LocalSessions: ob.LocalSessions, RemoteSessions: ob.RemoteSessions,
		LastInput: last, Load: ob.Load, Pressure: Pressure(ob.Load, ob.Cores),
	})
	o.last, o.act, o.state = ob.Now, d.Action, d.State
	return d.Action
}

func (o *overtime) NextDeadline() int64 {
	dl := NoDeadline
	if d := o.e.NextDeadline(); !d.IsZero() {
		// Round up: the simulator's clock is whole seconds, and deciding a fraction of a
		// second late is what a real timer does too.
		dl = int64((d.Sub(o.start) + time.Second - 1) / time.Second)
	}
	// The agent's periodic decision refreshes the engine's hysteresis (a restriction
	// still wanted restarts its hold), which decides when a guest is let loose after the
	// condition ends. While the guest runs at full speed it changes nothing (nothing is
	// looser than run, and a tightening restarts the hold anyway), so the simulator only
	// pays for these wake-ups while the guest is restricted.
	if o.act != model.ActionRun {
		dl = min(dl, o.last+agentCheckEvery)
	}
	return dl
}

// Pressure is the desktop's CPU pressure (PSI "some", percent) the simulator feeds the
// engine. The guest runs in the idle class, so the desktop stalls only when it wants
// more cores than the host has: then the share of its demand that has to wait.
func Pressure(load float64, cores int) float64 {
	if c := float64(cores); load > c {
		return 100 * (load - c) / load
	}
	return 0
}

// --- htcondor-desktop ----------------------------------------------------------------

// HTCondor's desktop policy (the manual's "Desktop/Non-Desktop Policy" with IsDesktop,
// and its default macros):
//
//	StartIdleTime = 15 min, ContinueIdleTime = 5 min, MaxSuspendTime = 10 min
//	BackgroundLoad = 0.3, HighLoad = 0.5 (non-HTCondor load; taken per core here)
//	KeyboardBusy = KeyboardIdle < 60 s
//	START    = CPUIdle && KeyboardIdle > StartIdleTime
//	SUSPEND  = KeyboardBusy || (CpuBusyTime > 2 min && ActivationTimer > 90 s)
//	CONTINUE = CPUIdle && ActivityTimer > 300 s && KeyboardIdle > ContinueIdleTime
//	PREEMPT  = Activity == Suspended && ActivityTimer > MaxSuspendTime
//
// The startd evaluates these every POLLING_INTERVAL (5 s) and condor_kbdd reports input
// on that beat, so the policy reacts at the next multiple of 5 s after an event.
// KeyboardIdle covers every terminal, so ssh input counts like the console's. Preemption
// vacates the job (requeued); the slot then waits for START again. Vanilla jobs run at
// nice 10 (JOB_RENICE_INCREMENT), yielding to the desktop like the other guests.
const (
	condorPoll             = 5
	condorStartIdle        = 15 * minute
	condorContinueIdle     = 5 * minute
	condorMaxSuspend       = 10 * minute
	condorKeyboardBusy     = minute
	condorBackgroundLoad   = 0.3
	condorHighLoad         = 0.5
	condorCPUBusyTime      = 2 * minute
	condorActivationBefore = 90
	condorContinueActivity = 300
)

// HTCondorDesktop is HTCondor's documented desktop policy (see the constants above).
func HTCondorDesktop() PolicySpec {
	return PolicySpec{
		Name:        "htcondor-desktop",
		About:       "HTCondor's documented desktop policy: start after 15 min without keyboard input and with low load (< 0.3 per core), suspend at the next 5 s poll after input, continue after 5 idle minutes, preempt (requeue) after 10 min suspended; no schedule",
		ThrottleCPU: 100,
		New:         func(env Env) Policy { return &htcondor{cores: float64(env.Cores), cpuBusySince: -1} },
	}
}

type condorActivity int

const (
	condorOwner     condorActivity = iota // Owner/Unclaimed: no job
	condorBusy                            // Claimed/Busy: the job runs
	condorSuspended                       // Claimed/Suspended
)

type htcondor struct {
	cores        float64
	activity     condorActivity
	since        int64 // entered the current activity
	jobStart     int64
	cpuBusySince int64 // -1 while the CPU is not busy
	deadline     int64
}

func (c *htcondor) action() model.GuestAction {
	switch c.activity {
	case condorBusy:
		return model.ActionRun
	case condorSuspended:
		return model.ActionFreeze
	}
	return model.ActionEvict
}

func (c *htcondor) NextDeadline() int64 { return c.deadline }

func (c *htcondor) Decide(o Obs) model.GuestAction {
	if o.Now%condorPoll != 0 {
		// Seen at the next poll, not now.
		c.deadline = (o.Now/condorPoll + 1) * condorPoll
		return c.action()
	}
	p := o.Now
	kbdIdle := p - o.LastInput
	perCore := o.Load / c.cores
	cpuIdle := perCore <= condorBackgroundLoad
	cpuBusy := perCore >= condorHighLoad
	if !cpuBusy {
		c.cpuBusySince = -1
	} else if c.cpuBusySince < 0 {
		c.cpuBusySince = p
	}
	cpuBusyTime := int64(0)
	if c.cpuBusySince >= 0 {
		cpuBusyTime = p - c.cpuBusySince
	}
	switch c.activity {
	case condorOwner:
		if cpuIdle && kbdIdle > condorStartIdle {
			c.activity, c.since, c.jobStart = condorBusy, p, p
		}
	case condorBusy:
		if kbdIdle < condorKeyboardBusy || (cpuBusyTime > condorCPUBusyTime && p-c.jobStart > condorActivationBefore) {
			c.activity, c.since = condorSuspended, p
		}
	case condorSuspended:
		// PREEMPT is evaluated before CONTINUE.
		if p-c.since > condorMaxSuspend {
			c.activity, c.since = condorOwner, p
		} else if cpuIdle && p-c.since > condorContinueActivity && kbdIdle > condorContinueIdle {
			c.activity, c.since = condorBusy, p
		}
	}
	// The next poll at which a timer alone can make an expression true ("> x" first holds
	// at the first poll after x); changes of the observation call Decide anyway.
	c.deadline = NoDeadline
	after := func(x int64) {
		if g := (x/condorPoll + 1) * condorPoll; g > p && g < c.deadline {
			c.deadline = g
		}
	}
	switch c.activity {
	case condorOwner:
		if cpuIdle {
			after(o.LastInput + condorStartIdle)
		}
	case condorBusy:
		if cpuBusy {
			after(max(c.cpuBusySince+condorCPUBusyTime, c.jobStart+condorActivationBefore))
		}
	case condorSuspended:
		after(c.since + condorMaxSuspend)
		if cpuIdle {
			after(max(c.since+condorContinueActivity, o.LastInput+condorContinueIdle))
		}
	}
	return c.action()
}

// --- nice19 --------------------------------------------------------------------------

// Nice19 is the BOINC-style guest: always running at the lowest priority, never stopped.
func Nice19() PolicySpec {
	return PolicySpec{
		Name:        "nice19",
		About:       "BOINC-style: the guest always runs at nice 19 / SCHED_IDLE and is never stopped; it gets whatever the desktop does not use",
		ThrottleCPU: 100,
		New:         func(Env) Policy { return always{} },
	}
}

type always struct{}

func (always) Decide(Obs) model.GuestAction { return model.ActionRun }
func (always) NextDeadline() int64          { return NoDeadline }

// --- after-hours-only ----------------------------------------------------------------

// AfterHoursOnly boots the hosts into a cluster mode only in the schedule's cluster
// windows: the guest runs at full speed there and is stopped (its job requeued) when the
// window ends.
func AfterHoursOnly() PolicySpec {
	return PolicySpec{
		Name:        "after-hours-only",
		About:       "the PCs reboot into a cluster mode in the schedule's windows only (22:00-07:00 on weekdays, weekends); the guest runs at full speed there and its job is requeued when the window ends",
		ThrottleCPU: 100,
		New:         func(Env) Policy { return afterHours{} },
	}
}

type afterHours struct{}

func (afterHours) Decide(o Obs) model.GuestAction {
	if o.Kind == model.KindCluster {
		return model.ActionRun
	}
	return model.ActionEvict
}
func (afterHours) NextDeadline() int64 { return NoDeadline }

// --- the simulator -------------------------------------------------------------------

// SimOptions are the simulator's parameters (see the comment block at the top).
type SimOptions struct {
	JobMedian    time.Duration `json:"jobMedian"`
	JobSigma     float64       `json:"jobSigma"`
	JobMax       time.Duration `json:"jobMax"`
	JobSeed      uint64        `json:"jobSeed"` // 0: the trace's seed
	ActiveWindow time.Duration `json:"activeWindow"`
	// SlowdownTarget: the desktop slowdown (fraction) the report counts minutes above, and
	// the adaptive controller's target (model.DefaultPolicy's SlowdownTarget, 1 %).
	SlowdownTarget float64 `json:"slowdownTarget"`
	// ControlTick: how often the adaptive controller is stepped while throttling (whole
	// milliseconds).
	ControlTick time.Duration `json:"controlTick"`
	// The Gaussian noise added to the modelled slowdown before the controller sees it:
	// σ = EstimateRelSigma × slowdown + EstimateSigma (fractions).
	EstimateSigma    float64 `json:"estimateSigma"`
	EstimateRelSigma float64 `json:"estimateRelSigma"`
	// Model: the desktop-slowdown model (nil: DefaultSlowdownModel).
	Model *SlowdownModel `json:"-"`
	// Record keeps every action change in Result.Changes (for tests on small traces).
	Record bool `json:"-"`
}

// DefaultSimOptions: jobs of median 2 h (sigma 1, at most 24 h); owner-active means
// input in the last 5 min or a load episode; slowdown target 1 %, controller tick 250 ms
// (the agent's signals tick), estimation noise σ = 0.25 × slowdown + 0.25 percentage
// points (the estimator's placeholder interval, ±(0.5 × slowdown + 0.5 pp), read as a 95 %
// interval); the default (placeholder) slowdown model.
func DefaultSimOptions() SimOptions {
	return SimOptions{JobMedian: 2 * time.Hour, JobSigma: 1, JobMax: 24 * time.Hour, ActiveWindow: 5 * time.Minute,
		SlowdownTarget: model.DefaultPolicy().SlowdownTarget / 100, ControlTick: 250 * time.Millisecond,
		EstimateSigma: 0.0025, EstimateRelSigma: 0.25,
		Model: DefaultSlowdownModel()}
}

// Change is one action change of a host's guest.
type Change struct {
	Host   int               `json:"host"`
	At     int64             `json:"at"`
	Action model.GuestAction `json:"action"`
}

// Result is one policy over a whole trace.
type Result struct {
	Policy         string  `json:"policy"`
	CPUHours       float64 `json:"cpuHours"`       // core-hours the guests got
	MaxCPUHours    float64 `json:"maxCpuHours"`    // every core of every host all the time
	Share          float64 `json:"share"`          // CPUHours / MaxCPUHours
	UsefulCPUHours float64 `json:"usefulCpuHours"` // CPUHours minus WastedCPUHours
	JobsCompleted  int     `json:"jobsCompleted"`
	JobsRequeued   int     `json:"jobsRequeued"`
	JobsAtEnd      int     `json:"jobsRunningAtEnd"` // in progress (or frozen) when the trace ends
	WastedCPUHours float64 `json:"wastedCpuHours"`   // work of requeued jobs
	// Owner-active time with the guest at full speed, and throttled (hours, all hosts).
	ActiveUnthrottledHours float64 `json:"ownerActiveUnthrottledHours"`
	ActiveThrottledHours   float64 `json:"ownerActiveThrottledHours"`
	// The modelled desktop slowdown (slowdown.go): owner-active minutes (all hosts) with a
	// slowdown above SlowdownTarget, and the mean slowdown (fraction) over all owner-active
	// time (0 while the guest is frozen or absent).
	SlowdownMinutesAbove float64 `json:"slowdownMinutesAboveTarget"`
	// SlowdownMinutesAboveThrottled: those of them with the guest throttled (the
	// controller's share; the rest is the guest at full speed, e.g. in cluster mode).
	SlowdownMinutesAboveThrottled float64 `json:"slowdownMinutesAboveTargetThrottled"`
	MeanSlowdownActive            float64 `json:"meanSlowdownOwnerActive"`
	// MeanThrottleCap: the guest's mean cap (fraction of the cores) over throttled time.
	MeanThrottleCap float64 `json:"meanThrottleCap"`
	ThrottledHours  float64 `json:"throttledHours"` // guest alive and throttled, all hosts
	// ControllerSteps: how often the adaptive controller was stepped (0: fixed cap).
	ControllerSteps int64 `json:"controllerSteps,omitempty"`
	Throttles       int   `json:"throttles"` // changes into throttle
	Freezes         int   `json:"freezes"`   // changes into freeze (suspend)
	// HourlyCores is the pool's mean delivered cores in each hour of the trace.
	HourlyCores []float64 `json:"hourlyCores,omitempty"`
	Changes     []Change  `json:"-"`

	slowdownSum float64 // slowdown × owner-active seconds
	capSum      float64 // cap × throttled seconds
}

// TraceStats are the policy-independent figures of a trace.
type TraceStats struct {
	Hosts            int            `json:"hosts"`
	Cores            int            `json:"cores"`
	Hours            float64        `json:"hours"`
	Sessions         map[string]int `json:"sessions"` // by kind
	Lectures         int            `json:"lectures"` // booked slots, all rooms
	OwnerActiveHours float64        `json:"ownerActiveHours"`
	DesktopCPUHours  float64        `json:"desktopCpuHours"` // core-hours of desktop load episodes
	// HourlyOwnerActive is the mean number of hosts with an active owner in each hour.
	HourlyOwnerActive []float64 `json:"hourlyOwnerActive,omitempty"`
}

// Report is Simulate's answer.
type Report struct {
	Seed         uint64       `json:"seed"`
	Options      SimOptions   `json:"options"`
	Coefficients Coefficients `json:"slowdownCoefficients"`
	Trace        TraceStats   `json:"trace"`
	Results      []Result     `json:"results"`
}

// Simulate replays the trace through each policy.
func Simulate(tr *Trace, specs []PolicySpec, opt SimOptions) *Report {
	if opt.JobSeed == 0 {
		opt.JobSeed = tr.Seed
	}
	if opt.Model == nil {
		opt.Model = DefaultSlowdownModel()
	}
	if opt.ControlTick < time.Millisecond {
		opt.ControlTick = time.Millisecond
	}
	hours := int((tr.Length + hour - 1) / hour)
	cores := tr.Params.Cores
	rep := &Report{Seed: tr.Seed, Options: opt, Coefficients: opt.Model.Coefficients(), Trace: TraceStats{
		Hosts: len(tr.Hosts), Cores: cores, Hours: float64(tr.Length) / hour,
		Sessions: map[string]int{}, HourlyOwnerActive: make([]float64, hours),
	}}
	for _, r := range tr.Rooms {
		rep.Trace.Lectures += len(r.Lectures)
	}
	res := make([]Result, len(specs))
	maxCPU := float64(len(tr.Hosts)*cores) * float64(tr.Length) / hour
	for i, s := range specs {
		res[i] = Result{Policy: s.Name, MaxCPUHours: maxCPU, HourlyCores: make([]float64, hours)}
	}
	env := Env{Start: tr.Params.Start, Cores: cores, Model: opt.Model, Target: opt.SlowdownTarget}
	window := int64(opt.ActiveWindow / time.Second)
	for h := range tr.Hosts {
		for _, s := range tr.Hosts[h].Sessions {
			rep.Trace.Sessions[string(s.Kind)]++
		}
		segs := timeline(tr, h, window)
		st := &rep.Trace
		for i, s := range segs {
			end := tr.Length
			if i+1 < len(segs) {
				end = segs[i+1].t
			}
			if s.ownerActive {
				st.OwnerActiveHours += float64(end-s.t) / hour
				addHourly(st.HourlyOwnerActive, s.t, end, 1)
			}
			st.DesktopCPUHours += s.load * float64(end-s.t) / hour
		}
		for i, spec := range specs {
			runHost(tr, h, segs, spec, env, opt, &res[i])
		}
	}
	for i := range res {
		r := &res[i]
		r.Share = r.CPUHours / r.MaxCPUHours
		r.UsefulCPUHours = r.CPUHours - r.WastedCPUHours
		if a := rep.Trace.OwnerActiveHours * hour; a > 0 {
			r.MeanSlowdownActive = r.slowdownSum / a
		}
		if th := r.ThrottledHours * hour; th > 0 {
			r.MeanThrottleCap = r.capSum / th
		}
		for j := range r.HourlyCores {
			r.HourlyCores[j] /= hour
		}
	}
	for j := range rep.Trace.HourlyOwnerActive {
		rep.Trace.HourlyOwnerActive[j] /= hour
	}
	rep.Results = res
	return rep
}

// addHourlyF is addHourly for fractional seconds.
func addHourlyF(bins []float64, a, b float64, rate float64) {
	for a < b {
		h := math.Floor(a / hour)
		e := min(b, (h+1)*hour)
		if int(h) < len(bins) {
			bins[int(h)] += rate * (e - a)
		}
		a = e
	}
}

// addHourly adds rate×seconds of [a, b) to the hour bins it covers.
func addHourly(bins []float64, a, b int64, rate float64) {
	for a < b {
		h := a / hour
		e := min(b, (h+1)*hour)
		if int(h) < len(bins) {
			bins[h] += rate * float64(e-a)
		}
		a = e
	}
}

// seg is a host's observable state from t until the next seg.
type seg struct {
	t             int64
	local, remote int
	input         bool  // inside a burst of input
	lastInput     int64 // end of the latest burst before t (NoInput: none)
	load          float64
	kind          model.ModeKind
	ownerActive   bool
}

func (s *seg) obs(now int64, cores int) Obs {
	li := s.lastInput
	if s.input {
		li = now
	}
	return Obs{Now: now, Kind: s.kind, LocalSessions: s.local, RemoteSessions: s.remote, LastInput: li, Load: s.load, Cores: cores}
}

// timeline turns host h's sessions and its room's schedule into segments of constant
// observation, by a sweep over +1/-1 deltas (intervals may overlap: an ssh login during
// a local session, an owner-active tail into the next burst).
func timeline(tr *Trace, h int, window int64) []seg {
	const (
		dLocal = iota
		dRemote
		dInput
		dLoad
		dOwner
		dCluster
		dLecture
		nd
	)
	type delta struct {
		t    int64
		what int
		v    float64
	}
	host := tr.Hosts[h]
	var ds []delta
	add := func(a, b int64, what int, v float64) {
		if b > a {
			ds = append(ds, delta{a, what, v}, delta{b, what, -v})
		}
	}
	for _, c := range tr.Cluster {
		add(c.Start, c.End, dCluster, 1)
	}
	for _, l := range tr.Rooms[host.Room].Lectures {
		add(l.Start, l.End, dLecture, 1)
	}
	for _, s := range host.Sessions {
		if s.Remote() {
			add(s.Start, s.End, dRemote, 1)
		} else {
			add(s.Start, s.End, dLocal, 1)
		}
		for _, in := range s.Input {
			add(in.Start, in.End, dInput, 1)
			add(in.Start, min(in.End+window, s.End), dOwner, 1)
		}
		for _, l := range s.Load {
			add(l.Start, l.End, dLoad, l.Cores)
			add(l.Start, l.End, dOwner, 1)
		}
	}
	slices.SortFunc(ds, func(a, b delta) int { return cmpInt(a.t, b.t) })
	var cnt [nd]float64
	lastInput := NoInput
	segs := make([]seg, 0, len(ds)/2+1)
	emit := func(t int64) {
		load := cnt[dLoad]
		if load < 1e-9 {
			load = 0 // float residue of +x-x
		}
		kind := model.KindDesktop
		if cnt[dCluster] > 0 && cnt[dLecture] == 0 {
			kind = model.KindCluster
		}
		s := seg{t: t, local: int(cnt[dLocal]), remote: int(cnt[dRemote]), input: cnt[dInput] > 0,
			lastInput: lastInput, load: load, kind: kind, ownerActive: cnt[dOwner] > 0}
		if n := len(segs); n > 0 {
			prev := segs[n-1]
			prev.t = t
			if prev == s {
				return
			}
		}
		segs = append(segs, s)
	}
	i := 0
	for t := int64(0); t < tr.Length; {
		for ; i < len(ds) && ds[i].t == t; i++ {
			cnt[ds[i].what] += ds[i].v
			if ds[i].what == dInput && ds[i].v < 0 {
				lastInput = max(lastInput, t)
			}
		}
		emit(t)
		if i == len(ds) {
			break
		}
		t = ds[i].t
	}
	return segs
}

// runHost replays host h through one policy and adds to r.
func runHost(tr *Trace, h int, segs []seg, spec PolicySpec, env Env, opt SimOptions, r *Result) {
	cores := float64(env.Cores)
	share := float64(spec.ThrottleCPU) / 100
	jobs := rand.New(rand.NewPCG(opt.JobSeed, streamJobs+uint64(h)))
	median, maxLen := opt.JobMedian.Seconds(), opt.JobMax.Seconds()
	nextJob := func() float64 { // core-seconds of work
		return min(maxLen, median*math.Exp(opt.JobSigma*jobs.NormFloat64())) * cores
	}
	pol := spec.New(env)
	var (
		ctl      CapController
		noise    *rand.Rand
		owner, _ = pol.(ownerStater)
		tick     = int64(opt.ControlTick / time.Millisecond)
	)
	if spec.Adaptive != nil {
		ctl = spec.Adaptive(env)
		noise = rand.New(rand.NewPCG(opt.JobSeed, streamNoise+uint64(h)))
	}
	var (
		act        model.GuestAction
		alive      bool    // the guest exists and holds a job
		need, done float64 // the job's work and the work done, core-seconds
		ctlCap     float64 // the controller's cap applied to the guest
		nextTick   int64   // when the controller is stepped next (ms)
		tickSD     float64 // the tick's slowdown × seconds so far
	)
	// ownerActive is whom the controller protects, as the agent tells it
	// (node-agent/agent, Agent.ownerActive): the engine sees the owner active, or the
	// action is throttle ("as the desktop allows").
	ownerActive := func(a model.GuestAction) bool {
		return (owner != nil && owner.OwnerActive()) || a == model.ActionThrottle
	}
	at := func(ms int64) time.Time { return env.Start.Add(time.Duration(ms) * time.Millisecond) }
	// capOf is the cap in force under action a (0: the guest gets nothing).
	capOf := func(a model.GuestAction) float64 {
		switch {
		case !alive:
			return 0
		case a == model.ActionRun:
			return 1
		case a == model.ActionThrottle && ctl != nil:
			return ctlCap
		case a == model.ActionThrottle:
			return share
		}
		return 0
	}
	set := func(t int64, a model.GuestAction, first bool) {
		if a == act && !first {
			return
		}
		if ctl != nil && (a == model.ActionThrottle) != (act == model.ActionThrottle) && !first {
			ctlCap = ctl.Owner(at(t*1000), ownerActive(a))
		}
		switch a {
		case model.ActionEvict:
			if alive {
				r.JobsRequeued++
				r.WastedCPUHours += done / hour
				alive = false
			}
		case model.ActionRun, model.ActionThrottle:
			if !alive {
				alive, need, done = true, nextJob(), 0
			}
		case model.ActionFreeze:
			r.Freezes++
		}
		if a == model.ActionThrottle {
			r.Throttles++
			if ctl != nil {
				if first {
					ctlCap = ctl.Owner(at(t*1000), ownerActive(a))
				}
				nextTick, tickSD = t*1000+tick, 0
			}
		}
		act = a
		if opt.Record {
			r.Changes = append(r.Changes, Change{Host: h, At: t, Action: a})
		}
	}
	// account adds [a, b) (seconds) with the guest at cap c in segment s and returns the
	// desktop's slowdown (0 when nobody is active).
	account := func(a, b float64, s *seg, c float64) (sd float64) {
		dt := b - a
		rate := 0.0
		if alive && c > 0 {
			rate = min(c*cores, max(0, cores-s.load))
		}
		if rate > 0 {
			r.CPUHours += rate * dt / hour
			addHourlyF(r.HourlyCores, a, b, rate)
			work := rate * dt
			for done+work >= need { // jobs end inside the step; the next starts at once
				work -= need - done
				r.JobsCompleted++
				need, done = nextJob(), 0
			}
			done += work
		}
		if alive && act == model.ActionThrottle {
			r.ThrottledHours += dt / hour
			r.capSum += c * dt
		}
		if s.ownerActive {
			if alive {
				switch act {
				case model.ActionRun:
					r.ActiveUnthrottledHours += dt / hour
				case model.ActionThrottle:
					r.ActiveThrottledHours += dt / hour
				}
			}
			sd = opt.Model.Slowdown(s.activity(), c)
			r.slowdownSum += sd * dt
			if sd > opt.SlowdownTarget {
				r.SlowdownMinutesAbove += dt / minute
				if act == model.ActionThrottle {
					r.SlowdownMinutesAboveThrottled += dt / minute
				}
			}
		}
		return sd
	}
	i := 0
	set(0, pol.Decide(segs[0].obs(0, env.Cores)), true)
	for t := int64(0); t < tr.Length; {
		next := tr.Length
		if i+1 < len(segs) {
			next = segs[i+1].t
		}
		if dl := pol.NextDeadline(); dl > t && dl < next {
			next = dl
		}
		s := &segs[i]
		if ctl != nil && alive && act == model.ActionThrottle {
			// The controller's ticks inside [t, next), in milliseconds.
			for a, end := t*1000, next*1000; a < end; {
				if a >= nextTick {
					sd := tickSD / (float64(tick) / 1000) // the tick's mean slowdown
					est := max(0, sd+(opt.EstimateRelSigma*sd+opt.EstimateSigma)*noise.NormFloat64())
					w := estRelErr*est + estAbsErr
					e := SlowdownEstimate{Slowdown: est, Low: max(0, est-w), High: est + w}
					// The agent applies a new cap only when it moved by capStep or more.
					if c := min(1, max(0, ctl.Step(at(a), e, ownerActive(act)))); (c >= 1) != (ctlCap >= 1) || math.Abs(c-ctlCap) >= capStep {
						ctlCap = c
					}
					r.ControllerSteps++
					nextTick, tickSD = a+tick, 0
				}
				b := min(end, nextTick)
				tickSD += account(float64(a)/1000, float64(b)/1000, s, ctlCap) * float64(b-a) / 1000
				a = b
			}
		} else {
			account(float64(t), float64(next), s, capOf(act))
		}
		t = next
		if t >= tr.Length {
			break
		}
		if i+1 < len(segs) && segs[i+1].t == t {
			i++
		}
		set(t, pol.Decide(segs[i].obs(t, env.Cores)), false)
	}
	if alive {
		r.JobsAtEnd++
	}
}

// activity is what the owner does in the segment, for the slowdown model.
func (s *seg) activity() Activity {
	if s.load > 0 {
		return ActivityLoad
	}
	return ActivityInteractive
}
