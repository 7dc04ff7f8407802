// Package agent is the node agent's core: it keeps the configuration from the site
// manager (and the last good one in tmpfs), turns sensor events into policy decisions,
// applies them to the compute guest through a backend, restarts a crashed guest with
// backoff, and reports by heartbeat and Prometheus metrics.
//
// One goroutine (Run's loop) owns all decision state; sensors, the configuration fetcher,
// the backend's event watcher and the heartbeat talk to it through channels. A signal is
// acted on as soon as it arrives: the reaction latency is one channel hop plus the
// backend call (a cgroup write or one ~20 ms virsh call).
//
// The Agent is a thin loop over parts that each do one job and own their state, one file
// each: sensing (sensing.go: events into the policy's observation), guestLifecycle
// (guest.go: prepare, start, freeze, thaw, limit, stop, adopt, restart with backoff),
// interferenceControl (control.go: the adaptive controller, a signals tick into the
// guest's CPU limit), calibration (calibrate.go), jobAccounting (jobs.go: counters and
// the SPANK plugin's job calls), switcher (switch.go: restarts, power-offs, notices) and
// heartbeats (heartbeats.go). The decision itself is the policy package's (policy.Engine,
// policy.ExamDecision); config.go fetches, checks and caches the configuration.
//
// A key press reaches the guest's CPU limit in one path: Run → signal (sensing.Observe)
// → decideAndAct (policy.Engine.Decide, interferenceControl.Owner) → act
// (interferenceControl.ThrottleLimit) → guestLifecycle.Act → guestLifecycle.ApplyLimit →
// guest.Backend.SetCPULimit (the container backend writes the cgroup's cpu.max; a guest
// not running yet gets the limit in its start's spec); the controller's later steps take
// controlTick → interferenceControl.Tick → guestLifecycle.ApplyLimit.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/node-agent/examfw"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/hostinfo"
	"github.com/overtime-hpc/overtime/node-agent/interference/calibrate"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/node-agent/policy"
	"github.com/overtime-hpc/overtime/node-agent/powerctl"
	"github.com/overtime-hpc/overtime/node-agent/sensor"
	"github.com/overtime-hpc/overtime/node-agent/switching"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// SiteManager is the part of the site manager's API the agent uses (vocab/client with
// the host's bearer token).
type SiteManager interface {
	AgentConfig(ctx context.Context) (*wire.AgentConfig, error)
	Heartbeat(ctx context.Context, hb wire.Heartbeat) error
	PostJobReport(ctx context.Context, r wire.JobReport) (*wire.JobReport, error)
	// GuestSecrets fetches what the compute guest needs and no image carries (the munge
	// key); an error with HTTPStatus() 404 means the site hands out none.
	GuestSecrets(ctx context.Context) (*wire.GuestSecrets, error)
}

// Options configure an Agent.
type Options struct {
	Site     SiteManager
	MAC      string // this PC's MAC; checked against the configuration's
	StateDir string // tmpfs: config cache, guest state directories (default /run/overtime/agent)
	// ImageRoot is where published image versions are visible as ImageRoot/<version path>
	// (the NFS image export, mounted read-only).
	ImageRoot string
	// CourseVMFile is where the agent writes the course VM the desktop session's player
	// shows (coursevm.WriteSpec) while the mode is course-vm, and removes it otherwise
	// ("": never; `overtime-agent run` passes paths.CourseVMSpec).
	CourseVMFile string
	Backends     map[model.GuestBackend]guest.Backend
	Sensors      []sensor.Sensor

	Refresh    time.Duration // re-fetch the configuration at least this often (default 60 s)
	Heartbeat  time.Duration // heartbeat interval (default 30 s)
	CheckEvery time.Duration // guest status check when no event comes (default 30 s)
	// RestartBackoff is the first delay before a crashed guest is started again; it
	// doubles up to MaxBackoff and resets after the guest ran for 10 minutes.
	RestartBackoff, MaxBackoff time.Duration

	// GuestAgentURL is this agent's HTTP address as the guest reaches it (the SPANK
	// plugin's job calls); "" = not told.
	GuestAgentURL string
	// DesktopCPUPressure is the PSI file whose "some" total the job counters keep as
	// desktopStallSeconds (default /proc/pressure/cpu). Job reports' slowdown comes from
	// the interference estimator over Signals, not from it.
	DesktopCPUPressure string
	// Signals measures what the desktop suffers (default: a signals.Monitor of this PC,
	// sampling while a guest runs): the adaptive controller's input and the job reports'
	// slowdown estimate.
	Signals Signals
	// Calibrate runs the host's interference calibration (ProfileRun in production,
	// `overtime-agent run --calibrate=auto`); nil: never calibrate. The agent runs it
	// when calibrate.Due says so, with its compute guest frozen (calibrate.go).
	Calibrate calibrate.RunFunc

	// Machine restarts and switches off the PC (default: systemctl); Notifier tells the
	// people logged in (default: wall and desktop notifications). See switch.go.
	Machine  powerctl.Machine
	Notifier powerctl.Notifier
	// Ender logs out abandoned graphical sessions under the pool's logoutIdle (default:
	// loginctl). See idlelogout.go.
	Ender powerctl.Ender
	// ExamFile exists while the configuration says exam ("": not written; `overtime-agent
	// run` passes paths.ExamMarker). Uptime is /proc/uptime (tests may point elsewhere).
	ExamFile string
	// ExamFirewall limits the network while the configuration says exam (examfw.NFT in
	// production; nil: never limited). ExamLookup resolves the names of its entries
	// (default net.DefaultResolver), ExamResolvConf are the files the PC's own resolvers
	// are read from (default examfw.DefaultResolvConf).
	ExamFirewall   examfw.Firewall
	ExamLookup     examfw.Lookup
	ExamResolvConf []string
	Uptime         string
	// Booted is the mode this PC booted (overtime.mode= on the kernel command line; the
	// site manager's client sends it with every configuration request). Only a PC that
	// Overtime booted follows schedule switches by restarting: a machine it did not boot
	// (a hand-installed desktop, a test host) is never restarted by a schedule.
	Booted string
	// BootedExam: the boot was an exam's (overtime.exam=1). An exam locks the PC down and
	// limits its network only in its own boot: a PC Overtime booted for something else
	// restarts into the exam (after the countdown, with someone logged in), and until then
	// the session must still reach its home to save work. A PC Overtime did not boot
	// (Booted "") never restarts, so it locks at once.
	BootedExam bool

	HostCPUs  int // default runtime.NumCPU()
	HostMemMB int // default from /proc/meminfo
	Now       func() time.Time
	Log       *slog.Logger
	Version   string
}

// Agent is one node agent: the decision loop (Run) over parts that each do one job and
// own their state — sensing (the observation), the guest's lifecycle, the interference
// controller, the calibration, job accounting, switching the PC, heartbeats. The loop
// holds the configuration in force and the decision, and is the only caller of the
// parts' loop-owned operations.
type Agent struct {
	o   Options
	m   *metrics
	log *slog.Logger

	signals chan sensor.Event
	configs chan configUpdate

	// The decision loop's state (owned by Run's goroutine).
	cfg     *wire.AgentConfig
	cfgFrom string
	engine  *policy.Engine
	dec     policy.Decision
	// nextCheck is when the periodic status check (tick) is due: an absolute time, so
	// that events more frequent than CheckEvery (the signals' 250 ms ticks) cannot keep
	// postponing it.
	nextCheck time.Time

	sense   sensing              // sensing.go
	guest   *guestLifecycle      // guest.go
	control *interferenceControl // control.go
	cal     *calibration         // calibrate.go
	jobs    *jobAccounting       // jobs.go
	sw      *switcher            // switch.go
	// abandoned logs out abandoned graphical sessions (idlelogout.go).
	abandoned *abandonedSessions
	hb        *heartbeats  // heartbeats.go
	examNet   *examNetwork // examnet.go
	examWaits bool         // an exam is configured, the PC runs another boot: said once (examInForce)
}

type configUpdate struct {
	cfg  *wire.AgentConfig
	from string
}

// New checks options and fills defaults.
func New(o Options) (*Agent, error) {
	if o.Site == nil {
		return nil, errors.New("agent: no site manager client")
	}
	if o.StateDir == "" {
		o.StateDir = paths.AgentState
	}
	if o.Refresh == 0 {
		o.Refresh = 60 * time.Second
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 30 * time.Second
	}
	if o.CheckEvery == 0 {
		o.CheckEvery = 30 * time.Second
	}
	if o.RestartBackoff == 0 {
		o.RestartBackoff = 5 * time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.HostCPUs == 0 {
		o.HostCPUs = runtime.NumCPU()
	}
	if o.HostMemMB == 0 {
		o.HostMemMB = hostinfo.MemTotalMB()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DesktopCPUPressure == "" {
		o.DesktopCPUPressure = "/proc/pressure/cpu"
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Machine == nil {
		o.Machine = powerctl.Systemd{}
	}
	if o.Notifier == nil {
		log := o.Log
		o.Notifier = powerctl.Sessions{Log: log.Debug}
	}
	if o.Ender == nil {
		o.Ender = powerctl.Loginctl{}
	}
	if o.Uptime == "" {
		o.Uptime = "/proc/uptime"
	}
	hb, err := newHeartbeats(o.Site, o.Log, o.StateDir, o.Uptime)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		o: o, log: o.Log, hb: hb,
		signals: make(chan sensor.Event, 256),
		configs: make(chan configUpdate, 1),
	}
	a.jobs = &jobAccounting{site: o.Site, log: o.Log, now: o.Now, psi: o.DesktopCPUPressure}
	a.m = newMetrics(a.jobs.Seconds)
	a.m.guestCap.Set(1)
	a.sense = sensing{m: a.m}
	a.guest = newGuestLifecycle(o, a.m)
	sig := o.Signals
	if sig == nil {
		sig = newSignals(a.guest.PID)
	}
	a.control = newInterferenceControl(sig, o.HostCPUs, a.m)
	a.jobs.snapshot = sig.Snapshot
	a.cal = newCalibration(o.Calibrate, o.Uptime, o.Now, o.Log)
	a.sw = &switcher{machine: o.Machine, notifier: o.Notifier, booted: o.Booted, log: o.Log}
	a.abandoned = &abandonedSessions{notifier: o.Notifier, ender: o.Ender, log: o.Log}
	a.examNet = &examNetwork{fw: o.ExamFirewall, lookup: o.ExamLookup, resolvConf: o.ExamResolvConf, log: o.Log}
	if a.examNet.lookup == nil {
		a.examNet.lookup = net.DefaultResolver
	}
	if a.examNet.resolvConf == nil {
		a.examNet.resolvConf = examfw.DefaultResolvConf
	}
	return a, nil
}

// MetricsHandler serves /metrics.
func (a *Agent) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(a.m.reg, promhttp.HandlerOpts{})
}

// Signals is where sensors deliver (Run starts the configured sensors on it too).
func (a *Agent) Signals() chan<- sensor.Event { return a.signals }

// LastHeartbeat is the most recent heartbeat document (what /status shows).
func (a *Agent) LastHeartbeat() wire.Heartbeat { return a.hb.Last() }

// GuestCPU is the CPU time of the running guest's process and its threads (QEMU; a
// container's init), for the desktop-load sensor, which counts everything else. Safe
// from any goroutine.
func (a *Agent) GuestCPU() time.Duration { return a.guest.CPU() }

// Counters returns the job accounting's totals now (safe from any goroutine).
func (a *Agent) Counters() Counters { return a.jobs.Counters() }

// JobHandler serves the SPANK plugin's calls (mounted next to /metrics): jobs.go.
func (a *Agent) JobHandler(mux *http.ServeMux) { a.jobs.Handler(mux) }

// Run works until ctx is done. The guest is left as it is when Run returns: it keeps its
// limits, and the next agent adopts it.
func (a *Agent) Run(ctx context.Context) error {
	if err := os.MkdirAll(a.o.StateDir, 0o700); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.setConfigSource("none")
	if c, err := loadCache(a.cachePath()); err == nil {
		if err := checkConfig(c, a.o.MAC); err == nil {
			a.log.Info("configuration from cache", "mode", c.Mode, "generated", c.Generated)
			a.apply(ctx, c, "cache")
		} else {
			a.log.Warn("cached configuration refused", "err", err)
		}
	}
	for _, s := range a.o.Sensors {
		go func(s sensor.Sensor) {
			if err := s.Run(ctx, a.signals); err != nil && ctx.Err() == nil {
				a.log.Warn("sensor unavailable", "sensor", fmt.Sprintf("%T", s), "err", err)
			}
		}(s)
	}
	go a.fetchLoop(ctx)
	go a.hb.Loop(ctx, a.o.Heartbeat)
	go func() {
		if err := a.control.Signals().Run(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("desktop signals unavailable: no adaptive control, no slowdown estimates", "err", err)
		}
	}()
	ticks := a.control.Signals().Ticks()
	events := a.guest.Watch(ctx)

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		a.armTimer(timer)
		select {
		case <-ctx.Done():
			return nil
		case ev := <-a.signals:
			a.signal(ev)
			// Drain what else is queued, then decide once.
			for drained := false; !drained; {
				select {
				case ev := <-a.signals:
					a.signal(ev)
				default:
					drained = true
				}
			}
			a.decideAndAct(ctx, ev.Time)
		case u := <-a.configs:
			a.apply(ctx, u.cfg, u.from)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			a.guestEvent(ctx, ev)
		case t := <-ticks:
			a.controlTick(ctx, t)
		case r := <-a.cal.done:
			a.calibrated(ctx, r)
		case <-timer.C:
			a.tick(ctx)
		}
	}
}

// armTimer sets the loop's timer to the earliest of: the policy's deadline, the restart
// backoff, the periodic status check.
func (a *Agent) armTimer(t *time.Timer) {
	now := a.o.Now()
	if a.nextCheck.IsZero() {
		a.nextCheck = now.Add(a.o.CheckEvery)
	}
	next := a.nextCheck
	if a.engine != nil {
		if d := a.engine.NextDeadline(); !d.IsZero() && d.Before(next) {
			next = d
		}
	}
	if r := a.guest.RetryAt(); !r.IsZero() && r.Before(next) {
		next = r
	}
	if a.cfg != nil && !a.cfg.NextChange.IsZero() && a.cfg.NextChange.Before(next) && a.cfg.NextChange.After(now) {
		next = a.cfg.NextChange
	}
	if w := a.sw.Wake(); !w.IsZero() && w.Before(next) {
		next = w
	}
	if w := a.abandoned.Wake(); !w.IsZero() && w.Before(next) {
		next = w
	}
	d := next.Sub(now)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// signal folds a sensor event into the observation (sensing).
func (a *Agent) signal(ev sensor.Event) {
	a.log.Debug("signal", "kind", ev.Kind, "source", ev.Source, "time", ev.Time, "value", ev.Value)
	a.sense.Observe(ev)
}

// apply takes a new configuration (already checked) into force.
func (a *Agent) apply(ctx context.Context, c *wire.AgentConfig, from string) {
	first := a.cfg == nil
	// A configuration without the running guest (a mode without one, an exam, another
	// guest) stops it: act only ever sees the guest of the configuration in force.
	if prev := a.cfg; prev != nil && prev.Guest != nil && a.guest.Running() &&
		(c.Guest == nil || c.Guest.Name != prev.Guest.Name || c.Guest.Backend != prev.Guest.Backend) {
		if b := a.o.Backends[prev.Guest.Backend]; b != nil {
			a.log.Info("the new configuration has no place for the running guest: stopping it", "guest", prev.Guest.Name, "mode", c.Mode)
			a.guest.Stop(ctx, b, prev.Guest.Name, a.dec.Action)
		}
	}
	a.cfg = c
	a.sw.Configured(a.o.Now())
	a.setConfigSource(from)
	exam := a.examInForce(c)
	a.examMarker(exam)
	a.examNet.Configure(ctx, exam)
	if a.engine == nil || !reflect.DeepEqual(a.engine.Policy(), c.Policy) {
		p := c.Policy
		a.log.Info("policy in force", "ownerActive", p.Actions[model.StateOwnerActive], "ownerIdle", p.Actions[model.StateOwnerIdle],
			"idleAfter", time.Duration(p.IdleAfter), "hold", time.Duration(p.Hold), "evictAfter", time.Duration(p.EvictAfter),
			"throttleCPU", p.ThrottleCPU, "controller", p.Controller, "slowdownTarget", p.SlowdownTarget)
	}
	if a.engine == nil {
		a.engine = policy.New(c.Policy)
	} else {
		a.engine.SetPolicy(c.Policy)
	}
	a.control.Configure(c)
	a.sense.SetMode(c.Kind, c.Guest != nil)
	a.publishCourseVM(ctx, c)
	if first {
		a.guest.Adopt(ctx, c)
	}
	a.decideAndAct(ctx, time.Time{})
}

// decideAndAct runs the policy on the current observation and applies the result.
// since is the signal's time (zero for timer and configuration changes): the reaction
// latency is measured from it.
func (a *Agent) decideAndAct(ctx context.Context, since time.Time) {
	if a.cfg == nil {
		return
	}
	obs := a.sense.At(a.o.Now())
	a.foldCounters(false) // the time until now counts under the previous decision
	d := policy.ExamDecision(a.engine.Decide(obs), a.cfg.Exam)
	if act := a.cal.Decision(d.Action); act != d.Action {
		d.Action, d.Reason = act, "calibrating: the guest is frozen for the run"
	}
	if d.Changed || d.State != a.dec.State {
		a.log.Info("decision", "state", d.State, "action", d.Action, "reason", d.Reason)
	}
	prevAction, prevState := a.dec.Action, a.dec.State
	a.dec = d
	setOne(a.m.ownerState, ownerStates, string(d.State))
	setOne(a.m.action, guestActions, string(d.Action))
	// The owner's arrival puts the controller's start cap in force with this very
	// decision, before any measurement.
	a.control.Owner(obs.Now, d.State, d.Action)
	reason := a.guest.LastStatus().Reason
	changed := a.act(ctx)
	a.m.guestCap.Set(a.guest.CapFraction())
	if changed && !since.IsZero() {
		a.m.reaction.WithLabelValues(string(d.Action)).Observe(a.o.Now().Sub(since).Seconds())
	}
	a.foldCounters(d.Action != prevAction)
	// The owner state matters to Slurm too (node features desk-empty / owner-active), and
	// so does why a guest did not start (the node's reason).
	if d.Action != prevAction || d.State != prevState || a.guest.LastStatus().Reason != reason {
		a.announce(ctx)
	}
	a.planAbandoned(ctx)
	a.planSwitch(ctx)
}

// planAbandoned warns and logs out an abandoned graphical session (abandonedSessions).
func (a *Agent) planAbandoned(ctx context.Context) {
	n, last := a.sense.Graphical()
	a.abandoned.Plan(ctx, a.cfg, a.o.Now(), n, last)
}

// act brings the guest to the decided action, with the throttle's CPU limit from the
// interference controller; it reports whether it changed anything.
func (a *Agent) act(ctx context.Context) bool {
	action := a.dec.Action
	limit := 0.0
	if action == model.ActionThrottle {
		limit = a.control.ThrottleLimit() // fixed ThrottleCPU, or the adaptive controller's cap
	}
	return a.guest.Act(ctx, a.cfg, action, limit, a.control.KeepFor(action, limit))
}

// controlTick runs on each signals tick: the controller's step (interferenceControl.Tick)
// and, when its cap moved enough, the guest's new limit (guestLifecycle.ApplyLimit).
func (a *Agent) controlTick(ctx context.Context, t signals.Totals) {
	limit, ok := a.control.Tick(a.o.Now(), t, a.controlInput())
	if !ok || a.cfg == nil {
		return
	}
	if err := a.guest.ApplyLimit(ctx, a.cfg, limit); err != nil {
		return
	}
	est := a.control.Estimate()
	a.log.Debug("adaptive cap", "cap", a.control.Cap(), "cpuLimit", limit, "slowdown", est.Slowdown, "method", est.Method)
	a.foldCounters(false) // the time until now counts under the previous cap
	a.m.guestCap.Set(a.guest.CapFraction())
}

// controlInput is the decision and the guest in force, as the controller needs them.
func (a *Agent) controlInput() controlInput {
	ap := a.guest.Applied()
	return controlInput{state: a.dec.State, action: a.dec.Action, running: ap.running, frozen: ap.frozen, limit: ap.limit}
}

// foldCounters accounts the time since the last fold under what was in force, and takes
// what is in force now (transition: the decision entered a new action).
func (a *Agent) foldCounters(transition bool) {
	ap := a.guest.Applied()
	in := inForce{
		throttled: ap.running && !ap.frozen && ap.limit > 0,
		frozen:    ap.running && ap.frozen,
		active:    a.dec.State == model.StateOwnerActive,
		state:     a.dec.State, action: a.dec.Action,
	}
	if a.cfg != nil {
		in.host, in.mode = a.cfg.Host, a.cfg.Mode
	}
	a.jobs.Fold(in, transition)
}

var (
	ownerStates  = strs(model.OwnerStates)
	guestActions = strs(model.GuestActions)
)

func strs[T ~string](v []T) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = string(x)
	}
	return out
}

// guestEvent handles a state change the backend reported.
func (a *Agent) guestEvent(ctx context.Context, ev guest.Event) {
	if gone, why := a.guest.Event(ctx, a.cfg, ev); gone {
		a.guestGone(ctx, why)
	}
}

// guestGone: the guest stopped without the agent asking (crash, power-off inside); the
// site manager learns it at once.
func (a *Agent) guestGone(ctx context.Context, why string) {
	a.guest.Gone(ctx, a.cfg, why)
	a.announce(ctx)
}

// tick runs on the timer: policy deadlines, restart after backoff, a status check
// (crashes a backend without events reports late), accounting.
func (a *Agent) tick(ctx context.Context) {
	a.nextCheck = a.o.Now().Add(a.o.CheckEvery)
	if a.cfg == nil {
		return
	}
	if gone, why := a.guest.Check(ctx, a.cfg); gone {
		a.guestGone(ctx, why)
	}
	a.decideAndAct(ctx, time.Time{})
	a.maybeCalibrate(ctx)
	a.guest.Account()
	a.updateHeartbeat()
}

// maybeCalibrate starts a calibration when one is due (tick), and cancels a running one
// when someone arrives.
func (a *Agent) maybeCalibrate(ctx context.Context) {
	if !a.cal.Enabled() || a.cfg == nil {
		return
	}
	if a.cal.Running() {
		if a.sense.Sessions() > 0 || a.dec.State == model.StateOwnerActive {
			a.log.Info("someone arrived: calibration cancelled")
			a.cal.Cancel()
		}
		return
	}
	s := a.cal.Snapshot(a.cfg, a.sense.Sessions(), a.sense.LastLogout(), a.jobs.Running())
	due, reason := a.cal.Due(s, a.log)
	if !due || !a.guest.Running() {
		// Without a running guest there is nothing to freeze, and the guest's backend
		// is in doubt: wait for it.
		return
	}
	rctx := a.cal.Begin(ctx)
	// The decision freezes the guest while the run is in progress (calibration.Decision).
	a.decideAndAct(ctx, time.Time{})
	if !a.guest.Frozen() {
		a.log.Warn("calibration due but the guest could not be frozen; not calibrating", "why", reason)
		a.cal.Abort()
		return
	}
	a.log.Info("calibrating: guest frozen for the run", "why", reason)
	a.cal.Start(rctx, s)
}

// calibrated ends a run (the loop, on a.cal.done): thaw the guest, send the profile.
func (a *Agent) calibrated(ctx context.Context, r calResult) {
	a.cal.End()
	switch {
	case r.err != nil:
		a.log.Error("calibration failed", "why", r.reason, "err", r.err)
	case !r.ran:
		a.log.Info("calibration not run", "why", r.reason)
	default:
		p := a.cal.Pending(a.cfg)
		if p != nil {
			a.log.Info("calibrated", "cpuSlowdown", p.CPUSlowdown, "memorySlowdown", p.MemorySlowdown, "startCap", p.StartCap, "harvest", p.Harvest)
		}
	}
	a.decideAndAct(ctx, time.Time{}) // thaws the guest
	a.announce(ctx)
}

// planSwitch decides and carries out restarts, power-offs and notices (switcher).
func (a *Agent) planSwitch(ctx context.Context) {
	if a.cfg == nil {
		return
	}
	act, changed := a.sw.Plan(ctx, a.cfg, a.o.Now(), a.sense.Sessions(), a.jobs.Running())
	switch {
	case act != switching.None:
		// The site manager learns first: once the PC is down nobody can tell it.
		a.updateHeartbeat()
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		a.hb.Send(hctx)
		cancel()
		a.sw.Switch(ctx, act)
	case changed:
		a.announce(ctx)
	}
}

// announce refreshes the heartbeat document and posts it in the background: the site
// manager learns a change of the loop's state without waiting for the next interval.
func (a *Agent) announce(ctx context.Context) {
	a.updateHeartbeat()
	go a.hb.Send(context.WithoutCancel(ctx))
}

// updateHeartbeat refreshes the heartbeat document from the loop's state (the last
// status check's view of the guest).
func (a *Agent) updateHeartbeat() {
	g := a.guest
	st, ap := g.LastStatus(), g.Applied()
	hb := wire.Heartbeat{
		Time: a.o.Now(), ConfigFrom: a.cfgFrom, OwnerState: a.dec.State, Action: a.dec.Action,
		Pressure: a.sense.Pressure(), Restarts: g.Restarts(), Version: a.o.Version,
		GuestState: string(st.State), GuestCPUSeconds: st.CPUTime.Seconds(),
		GuestReason: wire.OneLine(st.Reason, wire.MaxGuestReason),
	}
	hb.Sessions = a.sense.Sessions()
	hb.Jobs = a.jobs.Running()
	a.sw.Report(&hb)
	hb.BootSeconds = a.hb.BootSeconds()
	hb.Interference = a.cal.Pending(a.cfg)
	if ap.running {
		hb.Slowdown = min(max(a.control.Estimate().Slowdown, 0), 10) // the heartbeat's range; NaN-free (estimate.Desktop)
		if ap.limit > 0 {
			hb.Cap = ap.limit / float64(a.o.HostCPUs)
		}
	}
	if a.cfg != nil {
		hb.Host, hb.Mode = a.cfg.Host, a.cfg.Mode
		if spec, err := g.Spec(a.cfg); err == nil && !a.cfg.Exam {
			// What the guest may use, as Slurm should record it (no GPUs are passed
			// through yet).
			hb.CPUs, hb.MemoryMB = spec.VCPUs, spec.MemoryMB
		}
		if a.cfg.Guest != nil {
			hb.Backend = string(a.cfg.Guest.Backend)
			if hb.GuestState == "" {
				hb.GuestState = "unavailable"
			}
		} else {
			hb.GuestState = "none"
		}
	}
	a.hb.Record(hb)
}
