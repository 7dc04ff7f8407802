// Package agent is the node agent's core: it keeps the configuration from the site
// manager (and the last good one in tmpfs), turns sensor events into policy decisions,
// applies them to the compute guest through a backend, restarts a crashed guest with
// backoff, and reports by heartbeat and Prometheus metrics.
//
// One goroutine (Run's loop) owns all decision state; sensors, the configuration fetcher,
// the backend's event watcher and the heartbeat talk to it through channels. A signal is
// acted on as soon as it arrives: the reaction latency is one channel hop plus the
// backend call (a cgroup write or one ~20 ms virsh call).
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/node-agent/coursevm"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/hostinfo"
	"github.com/overtime-hpc/overtime/node-agent/interference/calibrate"
	"github.com/overtime-hpc/overtime/node-agent/interference/controller"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/node-agent/policy"
	"github.com/overtime-hpc/overtime/node-agent/powerctl"
	"github.com/overtime-hpc/overtime/node-agent/sensor"
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
	// ExamFile exists while the configuration says exam ("": not written; `overtime-agent
	// run` passes paths.ExamMarker). Uptime is /proc/uptime (tests may point elsewhere).
	ExamFile string
	Uptime   string
	// Booted is the mode this PC booted (overtime.mode= on the kernel command line; the
	// site manager's client sends it with every configuration request). Only a PC that
	// Overtime booted follows schedule switches by restarting: a machine it did not boot
	// (a hand-installed desktop, a test host) is never restarted by a schedule.
	Booted string

	HostCPUs  int // default runtime.NumCPU()
	HostMemMB int // default from /proc/meminfo
	Now       func() time.Time
	Log       *slog.Logger
	Version   string
}

// Agent is one node agent.
type Agent struct {
	o   Options
	m   *metrics
	log *slog.Logger

	signals chan sensor.Event
	configs chan configUpdate

	// Loop state (owned by Run's goroutine).
	cfg     *wire.AgentConfig
	cfgFrom string
	engine  *policy.Engine
	obs     policy.Observation
	dec     policy.Decision
	applied applied
	backoff time.Duration
	retryAt time.Time
	// nextCheck is when the periodic status check (tick) is due: an absolute time, so
	// that events more frequent than CheckEvery (the signals' 250 ms ticks) cannot keep
	// postponing it.
	nextCheck   time.Time
	startedAt   time.Time
	restarts    int
	lastStatus  guest.Status
	sawSessions bool
	// secrets are the compute guest's, as last fetched (memory only); noSecretsLogged
	// keeps a site without them from filling the log.
	secrets         *wire.GuestSecrets
	noSecretsLogged bool
	sw              switchState // switch.go

	hbMu sync.Mutex
	hb   wire.Heartbeat
	// instance and hbSeq order this process's heartbeats for the site manager
	// (wire.Heartbeat.Instance, Seq): goroutines post them concurrently, and the clock
	// that stamps them can be stepped by hours.
	instance string
	hbSeq    uint64 // guarded by hbMu

	guestPID atomic.Int64 // main process of the running guest (0: none), for GuestCPU

	// The adaptive controller (control.go), owned by Run's goroutine.
	sig      Signals
	ctl      *controller.Controller
	lastTick signals.Totals
	est      estimate.Estimate // the last tick's

	cal calState // the host's calibration (calibrate.go), owned by Run's goroutine

	cnt      counters            // totals for job reports (jobs.go)
	jobsMu   sync.Mutex          // guards jobStart
	jobStart map[string]Counters // job id -> counters at its start
}

// applied is what the agent last did to the guest (to skip redundant backend calls).
type applied struct {
	running bool
	frozen  bool
	limit   float64
	spec    string // JSON of the spec the guest was started with
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
	if o.Uptime == "" {
		o.Uptime = "/proc/uptime"
	}
	instance, err := newInstanceID()
	if err != nil {
		return nil, err
	}
	a := &Agent{
		o: o, log: o.Log, instance: instance,
		signals: make(chan sensor.Event, 256),
		configs: make(chan configUpdate, 1),
	}
	a.m = newMetrics(func() (throttled, frozen float64) {
		t, f, _ := a.cnt.seconds(o.Now())
		return t, f
	})
	a.m.guestCap.Set(1)
	a.backoff = o.RestartBackoff
	a.sig = o.Signals
	if a.sig == nil {
		a.sig = a.newSignals()
	}
	a.initCalibration()
	return a, nil
}

// MetricsHandler serves /metrics.
func (a *Agent) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(a.m.reg, promhttp.HandlerOpts{})
}

// Signals is where sensors deliver (Run starts the configured sensors on it too).
func (a *Agent) Signals() chan<- sensor.Event { return a.signals }

// LastHeartbeat is the most recent heartbeat document (what /status shows).
func (a *Agent) LastHeartbeat() wire.Heartbeat {
	a.hbMu.Lock()
	defer a.hbMu.Unlock()
	return a.hb
}

func (a *Agent) cachePath() string { return filepath.Join(a.o.StateDir, "config.json") }

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
	go a.heartbeatLoop(ctx)
	go func() {
		if err := a.sig.Run(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("desktop signals unavailable: no adaptive control, no slowdown estimates", "err", err)
		}
	}()
	ticks := a.sig.Ticks()
	events := a.watch(ctx)

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
	if !a.retryAt.IsZero() && a.retryAt.Before(next) {
		next = a.retryAt
	}
	if a.cfg != nil && !a.cfg.NextChange.IsZero() && a.cfg.NextChange.Before(next) && a.cfg.NextChange.After(now) {
		next = a.cfg.NextChange
	}
	if w := a.sw.wake; !w.IsZero() && w.Before(next) {
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

// signal folds a sensor event into the observation.
func (a *Agent) signal(ev sensor.Event) {
	a.m.signals.WithLabelValues(string(ev.Kind)).Inc()
	a.log.Debug("signal", "kind", ev.Kind, "source", ev.Source, "time", ev.Time, "value", ev.Value)
	switch ev.Kind {
	case sensor.KindInput:
		if ev.Time.After(a.obs.LastInput) {
			a.obs.LastInput = ev.Time
		}
	case sensor.KindSessions:
		// Logging in is activity; sessions that exist when the agent starts are not news.
		if a.sawSessions && ev.Sessions.Total() > a.obs.LocalSessions+a.obs.RemoteSessions && ev.Time.After(a.obs.LastInput) {
			a.obs.LastInput = ev.Time
		}
		a.sawSessions = true
		a.calSessions(a.obs.LocalSessions+a.obs.RemoteSessions, ev.Sessions.Total(), ev.Time)
		a.obs.LocalSessions, a.obs.RemoteSessions = ev.Sessions.Local, ev.Sessions.Remote
	case sensor.KindPressure:
		a.obs.Pressure = ev.Value
		a.m.pressure.Set(ev.Value)
	case sensor.KindLoad:
		a.obs.Load = ev.Value
		a.m.load.Set(ev.Value)
	}
}

// apply takes a new configuration (already checked) into force.
func (a *Agent) apply(ctx context.Context, c *wire.AgentConfig, from string) {
	first := a.cfg == nil
	// A configuration without the running guest (a mode without one, an exam, another
	// guest) stops it: act only ever sees the guest of the configuration in force.
	if prev := a.cfg; prev != nil && prev.Guest != nil && a.applied.running &&
		(c.Guest == nil || c.Guest.Name != prev.Guest.Name || c.Guest.Backend != prev.Guest.Backend) {
		if b := a.o.Backends[prev.Guest.Backend]; b != nil {
			a.log.Info("the new configuration has no place for the running guest: stopping it", "guest", prev.Guest.Name, "mode", c.Mode)
			a.stopGuest(ctx, b, prev.Guest.Name)
		}
	}
	a.cfg = c
	a.sw.cfgAt = a.o.Now()
	a.setConfigSource(from)
	a.examMarker(c)
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
	a.configureController()
	a.obs.Kind, a.obs.HasGuest = c.Kind, c.Guest != nil
	a.publishCourseVM(ctx, c)
	if first {
		a.adopt(ctx)
	}
	a.decideAndAct(ctx, time.Time{})
}

// publishCourseVM tells the session's course-VM player what to show: the course VM of a
// course-vm mode in the read-only image export, or nothing (the file removed). A failure
// is logged; the player keeps what it showed.
func (a *Agent) publishCourseVM(ctx context.Context, c *wire.AgentConfig) {
	if a.o.CourseVMFile == "" {
		return
	}
	spec := CourseVMSpec(c, a.o.ImageRoot)
	if spec != nil && spec.Dir != "" && c.CourseVM.NFS != "" {
		// The player reads the version directory: mount it from the boot server first.
		if err := a.ensureImage(ctx, spec.Dir, c.CourseVM.NFS, artefact.SumsFile); err != nil {
			a.log.Error("course VM image", "err", err)
			spec = &coursevm.Spec{Mode: c.Mode, Image: c.CourseVM.Image, Unavailable: err.Error()}
		}
	}
	if err := coursevm.WriteSpec(a.o.CourseVMFile, spec); err != nil {
		a.log.Error("course VM spec not written", "file", a.o.CourseVMFile, "err", err)
	}
}

// CourseVMSpec is what the course-VM player shows under configuration c (nil: nothing).
func CourseVMSpec(c *wire.AgentConfig, imageRoot string) *coursevm.Spec {
	if c.Kind != model.KindCourseVM {
		return nil
	}
	if c.CourseVM == nil {
		why := c.CourseVMUnavailable
		if why == "" {
			why = "the site manager named no course VM"
		}
		return &coursevm.Spec{Mode: c.Mode, Unavailable: why}
	}
	if imageRoot == "" {
		return &coursevm.Spec{Mode: c.Mode, Image: c.CourseVM.Image, Unavailable: "no image root (mount the image export and pass --image-root)"}
	}
	v := c.CourseVM.Resolved
	return &coursevm.Spec{Mode: c.Mode, Image: c.CourseVM.Image, Version: v.Version,
		Dir: filepath.Join(imageRoot, filepath.FromSlash(v.Path)), URL: c.CourseVM.ImageURL}
}

func (a *Agent) setConfigSource(from string) {
	a.cfgFrom = from
	setOne(a.m.configFrom, []string{"api", "cache", "none"}, from)
}

// adopt finds a guest left running by a previous agent and takes over its state.
func (a *Agent) adopt(ctx context.Context) {
	if a.cfg.Guest == nil {
		return
	}
	b, err := a.backend()
	if err != nil {
		return
	}
	st, err := b.Status(ctx, a.cfg.Guest.Name)
	if err != nil || st.State == guest.StateAbsent {
		return
	}
	a.applied = applied{running: st.State == guest.StateRunning || st.State == guest.StatePaused,
		frozen: st.State == guest.StatePaused, limit: st.CPULimit}
	a.lastStatus = st
	a.guestPID.Store(int64(st.PID))
	if spec, err := a.spec(a.cfg); err == nil {
		a.applied.spec = specKey(spec)
		// The previous agent may have died between starting the guest and limiting it.
		if r, ok := b.(guest.Reasserter); ok {
			if err := r.Reassert(ctx, spec); err != nil {
				a.log.Warn("re-applying the adopted guest's limits", "guest", a.cfg.Guest.Name, "err", err)
			}
		}
	}
	a.startedAt = a.o.Now()
	a.log.Info("adopted running guest", "guest", a.cfg.Guest.Name, "state", st.State, "pid", st.PID, "cpuLimit", st.CPULimit)
}

func (a *Agent) backend() (guest.Backend, error) {
	if a.cfg == nil || a.cfg.Guest == nil {
		return nil, errors.New("no guest configured")
	}
	b := a.o.Backends[a.cfg.Guest.Backend]
	if b == nil {
		return nil, guest.Unavailable(a.cfg.Guest.Backend, "not built into this agent")
	}
	return b, nil
}

// decideAndAct runs the policy on the current observation and applies the result.
// since is the signal's time (zero for timer and configuration changes): the reaction
// latency is measured from it.
func (a *Agent) decideAndAct(ctx context.Context, since time.Time) {
	if a.cfg == nil {
		return
	}
	a.obs.Now = a.o.Now()
	a.foldCounters(false) // the time until now counts under the previous decision
	d := a.engine.Decide(a.obs)
	if a.cfg.Exam && d.Action != model.ActionEvict {
		d.Reason = "exam: no compute guest"
	}
	d.State, d.Action = examDecision(a.cfg, d.State, d.Action)
	if act := a.calibrationDecision(d.Action); act != d.Action {
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
	a.sig.SetOwnerActive(d.State == model.StateOwnerActive)
	a.ctl.Owner(a.obs.Now, a.ownerActive())
	changed := a.act(ctx)
	a.m.guestCap.Set(a.capFraction())
	if changed && !since.IsZero() {
		a.m.reaction.WithLabelValues(string(d.Action)).Observe(a.o.Now().Sub(since).Seconds())
	}
	a.foldCounters(d.Action != prevAction)
	// The owner state matters to Slurm too (node features desk-empty / owner-active).
	if d.Action != prevAction || d.State != prevState {
		a.updateHeartbeat()
		go a.sendHeartbeat(context.WithoutCancel(ctx))
	}
	a.planSwitch(ctx)
}

// foldCounters accounts the time since the last fold under what was in force, and takes
// what is in force now (transition: the decision entered a new action).
func (a *Agent) foldCounters(transition bool) {
	running := a.applied.running
	in := inForce{
		throttled: running && !a.applied.frozen && a.applied.limit > 0,
		frozen:    running && a.applied.frozen,
		active:    a.dec.State == model.StateOwnerActive,
		state:     a.dec.State, action: a.dec.Action,
	}
	if a.cfg != nil {
		in.host, in.mode = a.cfg.Host, a.cfg.Mode
	}
	a.cnt.fold(a.o.Now(), in, transition)
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

// act brings the guest to the decided action; it reports whether it changed anything.
func (a *Agent) act(ctx context.Context) bool {
	if a.cfg.Guest == nil {
		return false
	}
	b, err := a.backend()
	if err != nil {
		a.log.Error("guest backend", "err", err)
		return false
	}
	name := a.cfg.Guest.Name
	action := a.dec.Action
	changed := false
	fail := func(op string, err error) {
		a.m.actionError.WithLabelValues(op).Inc()
		a.log.Error("guest "+op, "guest", name, "err", err)
	}
	spec, specErr := a.spec(a.cfg)
	// A new guest definition (image version, size) replaces the running guest.
	if a.applied.running && specErr == nil && a.applied.spec != "" && a.applied.spec != specKey(spec) && action != model.ActionEvict {
		a.log.Info("guest definition changed: replacing the guest", "guest", name)
		a.stopGuest(ctx, b, name)
		changed = true
	}
	switch action {
	case model.ActionEvict:
		if a.applied.running {
			a.stopGuest(ctx, b, name)
			changed = true
		}
	case model.ActionFreeze:
		if a.applied.running && !a.applied.frozen {
			if err := b.Freeze(ctx, name); err != nil {
				fail("freeze", err)
			} else {
				a.applied.frozen, changed = true, true
				a.refreshStatus(ctx, b, name)
			}
		}
	case model.ActionRun, model.ActionThrottle:
		limit := 0.0
		if action == model.ActionThrottle {
			limit = a.throttleLimit() // fixed ThrottleCPU, or the adaptive controller's cap
		}
		if !a.applied.running {
			if specErr != nil {
				fail("start", specErr)
				return changed
			}
			if now := a.o.Now(); now.Before(a.retryAt) {
				return changed // backing off after a crash
			}
			spec.CPULimit = limit
			if err := a.prepareGuest(ctx, &spec); err != nil {
				fail("start", err)
				a.scheduleRetry()
				return changed
			}
			if err := b.Start(ctx, spec); err != nil {
				fail("start", err)
				a.scheduleRetry()
				return changed
			}
			a.applied = applied{running: true, limit: limit, spec: specKey(spec)}
			a.startedAt = a.o.Now()
			if st, err := b.Status(ctx, name); err == nil {
				a.lastStatus = st
				a.guestPID.Store(int64(st.PID))
			}
			a.log.Info("guest started", "guest", name, "backend", b.Kind(), "cpuLimit", limit)
			return true
		}
		if a.applied.frozen {
			if err := b.Thaw(ctx, name); err != nil {
				fail("thaw", err)
			} else {
				a.applied.frozen, changed = false, true
				a.refreshStatus(ctx, b, name)
			}
		}
		// Under the adaptive controller a small move of its cap waits for its tick
		// (applyCap), which calls the backend only for a change worth it.
		if a.applied.limit != limit && !(action == model.ActionThrottle && a.adaptive() && a.capClose(limit, a.applied.limit)) {
			if err := b.SetCPULimit(ctx, name, limit); err != nil {
				fail("cpu-limit", err)
			} else {
				a.applied.limit, changed = limit, true
			}
		}
	}
	return changed
}

// refreshStatus reads the guest's status after a freeze or thaw, so that the heartbeat
// sent with the decision says what is in force (Slurm resumes a node on "running", not
// on the next periodic check).
func (a *Agent) refreshStatus(ctx context.Context, b guest.Backend, name string) {
	if st, err := b.Status(ctx, name); err == nil {
		a.lastStatus = st
	}
}

// prepareGuest makes what the spec names available before a start: the guest's image
// version (mounted read-only from the boot server's export when the image root does not
// already show it) and, for a compute guest in a container, its secrets.
func (a *Agent) prepareGuest(ctx context.Context, spec *guest.Spec) error {
	g := a.cfg.Guest
	dir := filepath.Join(a.o.ImageRoot, filepath.FromSlash(g.Resolved.Path))
	if err := a.ensureImage(ctx, dir, g.NFS, model.ImageRoot); err != nil {
		return fmt.Errorf("image %s %s: %w", g.Image, g.Resolved.Version, err)
	}
	if g.ImageKind != model.ImageCompute || g.Backend != model.BackendContainer {
		return nil
	}
	sec, err := a.o.Site.GuestSecrets(ctx)
	var status interface{ HTTPStatus() int }
	switch {
	case err == nil:
		a.secrets = sec
	case errors.As(err, &status) && status.HTTPStatus() == http.StatusNotFound:
		// The site hands out none (overtime serve without --munge-key): the image
		// must bring its own, or its init says what is missing.
		if !a.noSecretsLogged {
			a.log.Warn("the site manager hands out no guest secrets; starting the guest without", "err", err)
			a.noSecretsLogged = true
		}
		a.secrets = nil
	case a.secrets != nil:
		// Unreachable now: the secrets of this boot's earlier start (memory only).
		a.log.Warn("guest secrets: site manager unreachable; using the ones fetched earlier", "err", err)
	default:
		return fmt.Errorf("guest secrets: %w", err)
	}
	if a.secrets != nil && len(a.secrets.MungeKey) > 0 {
		spec.Secrets = map[string][]byte{"munge.key": a.secrets.MungeKey}
	}
	return nil
}

// ensureImage mounts an image version directory (a guest's, a course VM's) read-only
// from its boot server (nfs: "server:/export/path") at dir, below ImageRoot, when dir does
// not show probe yet: a desktop mounts only the versions it runs, not the whole export.
func (a *Agent) ensureImage(ctx context.Context, dir, nfs, probe string) error {
	if _, err := os.Stat(filepath.Join(dir, probe)); err == nil || nfs == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// NFSv3 like the root (stateless: a boot server restart is invisible), no locks.
	argv := []string{"mount", "-t", "nfs", "-o", "ro,nosuid,nodev,vers=3,proto=tcp,nolock", nfs, dir}
	if inPrivateMountNS() {
		// The unit's sandboxing (PrivateTmp, ProtectHome) gives the agent a mount
		// namespace of its own; a mount made in it would be invisible to the session's
		// course-VM player. Mounted in the system's namespace, it propagates here too.
		argv = append([]string{"nsenter", "--mount=/proc/1/ns/mnt", "--"}, argv...)
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mounting %s at %s: %v: %s", nfs, dir, err, strings.TrimSpace(string(out)))
	}
	a.log.Info("image mounted", "nfs", nfs, "at", dir)
	return nil
}

// inPrivateMountNS reports whether systemd started this agent in a mount namespace other
// than the system's (PID 1's). Only under systemd (INVOCATION_ID): elsewhere (tests, a
// shell) a private namespace is the caller's choice and mounts stay in it.
func inPrivateMountNS() bool {
	if os.Getenv("INVOCATION_ID") == "" {
		return false
	}
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	init, err2 := os.Readlink("/proc/1/ns/mnt")
	return err1 == nil && err2 == nil && self != init
}

func (a *Agent) stopGuest(ctx context.Context, b guest.Backend, name string) {
	if err := b.Stop(ctx, name); err != nil {
		a.m.actionError.WithLabelValues("stop").Inc()
		a.log.Error("guest stop", "guest", name, "err", err)
		return
	}
	a.log.Info("guest stopped", "guest", name, "action", a.dec.Action)
	a.applied = applied{}
	a.guestPID.Store(0)
}

func (a *Agent) scheduleRetry() {
	a.retryAt = a.o.Now().Add(a.backoff)
	a.log.Info("guest restart backing off", "delay", a.backoff)
	a.backoff *= 2
	if a.backoff > a.o.MaxBackoff {
		a.backoff = a.o.MaxBackoff
	}
}

// guestEvent handles a state change the backend reported.
func (a *Agent) guestEvent(ctx context.Context, ev guest.Event) {
	if a.cfg == nil || a.cfg.Guest == nil || ev.Name != a.cfg.Guest.Name {
		return
	}
	switch ev.State {
	case guest.StateCrashed, guest.StateShutoff:
		if !a.applied.running {
			return // we stopped it
		}
		// The event may be about the previous guest of the same name (replaced after a
		// definition change): believe the backend's current status.
		if b, err := a.backend(); err == nil {
			if st, err := b.Status(ctx, ev.Name); err == nil && (st.State == guest.StateRunning || st.State == guest.StatePaused) {
				return
			}
		}
		a.guestGone(ctx, string(ev.State)+": "+ev.Reason)
	}
}

// guestGone: the guest stopped without the agent asking (crash, power-off inside).
func (a *Agent) guestGone(ctx context.Context, why string) {
	a.restarts++
	a.m.restarts.Inc()
	if a.o.Now().Sub(a.startedAt) > 10*time.Minute {
		a.backoff = a.o.RestartBackoff
	}
	a.log.Warn("guest stopped by itself; restarting with backoff", "guest", a.cfg.Guest.Name, "why", why, "restarts", a.restarts)
	if b, err := a.backend(); err == nil {
		// Discard what is left (state directory, a crashed domain record).
		_ = b.Stop(ctx, a.cfg.Guest.Name)
	}
	a.applied = applied{}
	a.scheduleRetry()
	a.updateHeartbeat()
	go a.sendHeartbeat(context.WithoutCancel(ctx))
}

// tick runs on the timer: policy deadlines, restart after backoff, a status check
// (crashes a backend without events reports late), accounting.
func (a *Agent) tick(ctx context.Context) {
	a.nextCheck = a.o.Now().Add(a.o.CheckEvery)
	if a.cfg == nil {
		return
	}
	a.lastStatus = guest.Status{}
	if a.cfg.Guest != nil {
		if b, err := a.backend(); err == nil {
			st, err := b.Status(ctx, a.cfg.Guest.Name)
			if err == nil {
				a.lastStatus = st
				a.guestPID.Store(int64(st.PID))
				switch st.State {
				case guest.StateAbsent, guest.StateCrashed, guest.StateShutoff:
					if a.applied.running {
						a.guestGone(ctx, "status "+string(st.State)+": "+st.Reason)
					}
				}
			} else {
				a.lastStatus.Reason = err.Error()
			}
		} else {
			a.lastStatus.Reason = err.Error()
		}
	}
	a.decideAndAct(ctx, time.Time{})
	a.maybeCalibrate(ctx)
	a.account()
	a.updateHeartbeat()
}

// GuestCPU is the CPU time of the running guest's process and its threads (QEMU; a
// container's init), for the desktop-load sensor, which counts everything else. Safe
// from any goroutine.
func (a *Agent) GuestCPU() time.Duration {
	pid := a.guestPID.Load()
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatInt(pid, 10) + "/stat")
	if err != nil {
		return 0
	}
	st := string(b)
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+2:])
	if len(f) < 15 {
		return 0
	}
	// utime, stime, cutime, cstime (fields 14-17) in clock ticks (USER_HZ 100 on Linux).
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// account refreshes the guest gauges from the last status check. (Throttled and frozen
// seconds come from the job counters, folded at every decision: metrics.go.)
func (a *Agent) account() {
	a.m.guestCPU.Set(a.lastStatus.CPUTime.Seconds())
	setOne(a.m.guestState, []string{"running", "paused", "absent", "shutoff", "crashed"}, string(a.lastStatus.State))
}

// spec builds the backend's guest spec from the configuration.
func (a *Agent) spec(c *wire.AgentConfig) (guest.Spec, error) {
	g := c.Guest
	if g == nil {
		return guest.Spec{}, errors.New("no guest")
	}
	if a.o.ImageRoot == "" {
		return guest.Spec{}, errors.New("no image root (mount the image export and pass --image-root)")
	}
	dir := filepath.Join(a.o.ImageRoot, filepath.FromSlash(g.Resolved.Path))
	vcpus := g.VCPUs
	if vcpus <= 0 || vcpus > a.o.HostCPUs {
		vcpus = a.o.HostCPUs
	}
	mem := g.MemoryMB
	capMB := a.o.HostMemMB * c.Policy.GuestMemory / 100
	if mem <= 0 || (capMB > 0 && mem > capMB) {
		mem = capMB
	}
	if mem < 64 {
		mem = 64
	}
	mac, err := GuestMAC(c.MAC)
	if err != nil {
		return guest.Spec{}, err
	}
	s := guest.Spec{
		Name: g.Name, VCPUs: vcpus, MemoryMB: mem,
		BaseImage: filepath.Join(dir, model.ImageRoot), BaseFormat: "squashfs",
		StateDir: filepath.Join(a.o.StateDir, "guest", g.Name),
		Network:  g.Network, Bridge: g.Bridge, MAC: mac,
		CPUIdle: true, Host: c.Host, AgentURL: a.o.GuestAgentURL,
	}
	for _, p := range g.Ports {
		h, gp, _ := strings.Cut(p, ":")
		hp, _ := strconv.Atoi(h)
		gpp, _ := strconv.Atoi(gp)
		s.Ports = append(s.Ports, guest.PortForward{HostPort: hp, GuestPort: gpp})
	}
	switch g.Backend {
	case model.BackendQEMU, model.BackendXen:
		// The image's own kernel and initrd, booted directly; the root is the read-only
		// squashfs through the transient overlay.
		s.Kernel = filepath.Join(dir, model.ImageKernel)
		s.Initrd = filepath.Join(dir, model.ImageInitrd)
		s.Cmdline = strings.TrimSpace("root=/dev/vda rootfstype=squashfs ro console=ttyS0 panic=30 overtime.guest=" +
			c.Host + " " + g.KernelArgs)
		if g.Backend == model.BackendXen {
			s.Cmdline = strings.Replace(s.Cmdline, "/dev/vda", "/dev/xvda", 1)
			s.Cmdline = strings.Replace(s.Cmdline, "console=ttyS0", "console=hvc0", 1)
		}
	case model.BackendContainer:
		s.Cmdline = g.KernelArgs // empty: the image's /sbin/init
	}
	return s, nil
}

func specKey(s guest.Spec) string {
	s.CPULimit = 0
	b, _ := json.Marshal(s)
	return string(b)
}

// watch starts the backend's event stream when it has one (nil channel otherwise).
func (a *Agent) watch(ctx context.Context) <-chan guest.Event {
	out := make(chan guest.Event, 16)
	n := 0
	for _, b := range a.o.Backends {
		w, ok := b.(guest.Watcher)
		if !ok {
			continue
		}
		ch, err := w.Watch(ctx)
		if guest.IsUnavailable(err) {
			// Normal on a desktop that only has some backends installed; a guest of this
			// kind would fail at start with the same reason.
			a.log.Info("backend unavailable on this desktop", "backend", b.Kind(), "err", err)
			continue
		}
		if err != nil {
			a.log.Warn("guest events unavailable; status checks only", "backend", b.Kind(), "err", err)
			continue
		}
		n++
		go func() {
			for ev := range ch {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	if n == 0 {
		return nil
	}
	return out
}

// fetchLoop gets the configuration now, at the schedule's next change and every Refresh.
func (a *Agent) fetchLoop(ctx context.Context) {
	failing := false
	for {
		wait := a.o.Refresh
		c, err := a.o.Site.AgentConfig(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				a.log.Warn("site manager unreachable; keeping the last good configuration", "err", err)
			}
			failing = true
			wait = min(wait, 15*time.Second)
		default:
			if failing {
				a.log.Info("site manager reachable again")
			}
			failing = false
			if err := checkConfig(c, a.o.MAC); err != nil {
				a.m.rejected.Inc()
				a.log.Error("configuration from the site manager refused; keeping the previous one", "err", err)
				break
			}
			if b, err := json.Marshal(c); err == nil {
				if err := writeAtomic(a.cachePath(), b); err != nil {
					a.log.Warn("caching the configuration", "err", err)
				}
			}
			select {
			case a.configs <- configUpdate{c, "api"}:
			case <-ctx.Done():
				return
			}
			if !c.NextChange.IsZero() {
				if d := c.NextChange.Sub(c.Generated) + time.Second; d > 0 && d < wait {
					wait = d
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// updateHeartbeat refreshes the heartbeat document from the loop's state (the last
// status check's view of the guest).
func (a *Agent) updateHeartbeat() {
	hb := wire.Heartbeat{
		Time: a.o.Now(), ConfigFrom: a.cfgFrom, OwnerState: a.dec.State, Action: a.dec.Action,
		Pressure: a.obs.Pressure, Restarts: a.restarts, Version: a.o.Version,
		GuestState: string(a.lastStatus.State), GuestCPUSeconds: a.lastStatus.CPUTime.Seconds(),
		GuestReason: wire.OneLine(a.lastStatus.Reason, wire.MaxGuestReason),
	}
	hb.Sessions = a.obs.LocalSessions + a.obs.RemoteSessions
	hb.Jobs = a.runningJobs()
	hb.Switch = wire.OneLine(a.sw.status, wire.MaxGuestReason)
	if ans := a.sw.answer; ans != nil {
		c := *ans
		c.Reason = wire.OneLine(c.Reason, wire.MaxGuestReason)
		hb.Power = &c
	}
	hb.BootSeconds = a.bootSeconds()
	hb.Interference = a.pendingProfile()
	if a.applied.running {
		hb.Slowdown = min(max(a.est.Slowdown, 0), 10) // the heartbeat's range; NaN-free (estimate.Desktop)
		if a.applied.limit > 0 {
			hb.Cap = a.applied.limit / float64(a.o.HostCPUs)
		}
	}
	if a.cfg != nil {
		hb.Host, hb.Mode = a.cfg.Host, a.cfg.Mode
		if spec, err := a.spec(a.cfg); err == nil && !a.cfg.Exam {
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
	a.hbMu.Lock()
	a.hbSeq++
	hb.Instance, hb.Seq = a.instance, a.hbSeq
	a.hb = hb
	a.hbMu.Unlock()
}

// newInstanceID is a random id for this agent process's heartbeats: unique across
// restarts without any state, which a stateless PC does not keep.
func newInstanceID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("agent: instance id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func (a *Agent) sendHeartbeat(ctx context.Context) {
	hb := a.LastHeartbeat()
	if hb.Host == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.o.Site.Heartbeat(ctx, hb); err != nil {
		a.log.Debug("heartbeat", "err", err)
	}
}

// heartbeatLoop posts the state every Heartbeat interval. The document is refreshed by
// the loop's goroutine through a request, so that it reads consistent state.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(a.o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.sendHeartbeat(ctx)
		}
	}
}
