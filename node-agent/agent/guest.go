package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/images/manifest"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/slurmcompat"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// guestLifecycle is the compute guest as the agent drives it through its backend:
// prepare (image, the Slurm check, secrets), start (or say why not), freeze, thaw,
// limit, stop, adopt a guest a previous agent left running, notice a guest that stopped
// by itself and start it again with backoff. It does what the decision says; it decides nothing. Owned by Run's goroutine
// (pid and CPU are safe from any goroutine).
type guestLifecycle struct {
	backends  map[model.GuestBackend]guest.Backend
	site      SiteManager // the guest's secrets
	imageRoot string
	stateDir  string
	hostCPUs  int
	hostMemMB int
	agentURL  string // Options.GuestAgentURL
	// firstBackoff and maxBackoff bound the restart delay (Options.RestartBackoff,
	// MaxBackoff).
	firstBackoff, maxBackoff time.Duration
	now                      func() time.Time
	log                      *slog.Logger
	m                        *metrics

	applied    applied
	backoff    time.Duration
	retryAt    time.Time
	startedAt  time.Time
	restarts   int
	lastStatus guest.Status
	// startErr is why there is no guest after the last start ("start failed: …", "not
	// started: …"; "" after a start that worked): the heartbeat's guest reason while
	// there is none, and so Slurm's node reason.
	startErr string
	// slurmRefused is the (controller version, image version) whose slurmd would not
	// join the controller (checkSlurm): no start is tried again until either changes.
	// slurmLogged is the pair an unknown verdict was last logged for (once each).
	slurmRefused, slurmLogged string
	// gaveUp is the spec (specKey) of a guest whose init gave up and said why
	// (guest.LastWords): it is started again at the longest backoff, not sooner, unless
	// the configuration changes (what the init lacked, storage that does not answer, is
	// rarely there seconds later, and each try boots a VM for nothing).
	gaveUp string
	// secrets are the compute guest's, as last fetched (memory only); noSecretsLogged
	// keeps a site without them from filling the log.
	secrets         *wire.GuestSecrets
	noSecretsLogged bool

	pid atomic.Int64 // main process of the running guest (0: none), for CPU
}

// applied is what the agent last did to the guest (to skip redundant backend calls).
type applied struct {
	running bool
	frozen  bool
	limit   float64
	spec    string // JSON of the spec the guest was started with
}

func newGuestLifecycle(o Options, m *metrics) *guestLifecycle {
	return &guestLifecycle{backends: o.Backends, site: o.Site, imageRoot: o.ImageRoot, stateDir: o.StateDir,
		hostCPUs: o.HostCPUs, hostMemMB: o.HostMemMB, agentURL: o.GuestAgentURL,
		firstBackoff: o.RestartBackoff, maxBackoff: o.MaxBackoff, backoff: o.RestartBackoff,
		now: o.Now, log: o.Log, m: m}
}

// Applied is what the agent last did to the guest.
func (g *guestLifecycle) Applied() applied { return g.applied }

// Running reports whether the agent runs the guest (frozen or not).
func (g *guestLifecycle) Running() bool { return g.applied.running }

// Frozen reports whether the agent froze the running guest.
func (g *guestLifecycle) Frozen() bool { return g.applied.frozen }

// RetryAt is when a crashed guest may be started again (zero: no backoff pending).
func (g *guestLifecycle) RetryAt() time.Time { return g.retryAt }

// LastStatus is the guest's status as last read (status check, start, freeze, thaw).
func (g *guestLifecycle) LastStatus() guest.Status {
	st := g.lastStatus
	if st.State == guest.StateAbsent && st.Reason == "" && g.startErr != "" {
		st.Reason = g.startErr
	}
	return st
}

// Restarts counts the guests started again after they stopped by themselves.
func (g *guestLifecycle) Restarts() int { return g.restarts }

// PID is the running guest's main process (0: none). Safe from any goroutine.
func (g *guestLifecycle) PID() int { return int(g.pid.Load()) }

func (g *guestLifecycle) backend(c *wire.AgentConfig) (guest.Backend, error) {
	if c == nil || c.Guest == nil {
		return nil, errors.New("no guest configured")
	}
	b := g.backends[c.Guest.Backend]
	if b == nil {
		return nil, guest.Unavailable(c.Guest.Backend, "not built into this agent")
	}
	return b, nil
}

func (g *guestLifecycle) fail(op, name string, err error) {
	g.m.actionError.WithLabelValues(op).Inc()
	g.log.Error("guest "+op, "guest", name, "err", err)
}

// Adopt finds a guest left running by a previous agent and takes over its state.
func (g *guestLifecycle) Adopt(ctx context.Context, c *wire.AgentConfig) {
	if c.Guest == nil {
		return
	}
	b, err := g.backend(c)
	if err != nil {
		return
	}
	st, err := b.Status(ctx, c.Guest.Name)
	if err != nil || st.State == guest.StateAbsent {
		return
	}
	g.applied = applied{running: st.State == guest.StateRunning || st.State == guest.StatePaused,
		frozen: st.State == guest.StatePaused, limit: st.CPULimit}
	g.lastStatus = st
	g.pid.Store(int64(st.PID))
	if spec, err := g.Spec(c); err == nil {
		g.applied.spec = specKey(spec)
		// The previous agent may have died between starting the guest and limiting it.
		if r, ok := b.(guest.Reasserter); ok {
			if err := r.Reassert(ctx, spec); err != nil {
				g.log.Warn("re-applying the adopted guest's limits", "guest", c.Guest.Name, "err", err)
			}
		}
	}
	g.startedAt = g.now()
	g.log.Info("adopted running guest", "guest", c.Guest.Name, "state", st.State, "pid", st.PID, "cpuLimit", st.CPULimit)
}

// Act brings the guest of configuration c to action with CPU limit limit (CPUs; 0 =
// none; only for run and throttle); it reports whether it changed anything. keep, when
// not nil, reports whether the applied limit cur may stay although it differs from
// limit: the adaptive controller's small moves wait for its tick (Agent.controlTick).
func (g *guestLifecycle) Act(ctx context.Context, c *wire.AgentConfig, action model.GuestAction, limit float64, keep func(cur float64) bool) bool {
	if c.Guest == nil {
		return false
	}
	b, err := g.backend(c)
	if err != nil {
		g.log.Error("guest backend", "err", err)
		return false
	}
	name := c.Guest.Name
	changed := false
	spec, specErr := g.Spec(c)
	// A new guest definition (image version, size) replaces the running guest.
	if g.applied.running && specErr == nil && g.applied.spec != "" && g.applied.spec != specKey(spec) && action != model.ActionEvict {
		g.log.Info("guest definition changed: replacing the guest", "guest", name)
		g.Stop(ctx, b, name, action)
		changed = true
	}
	switch action {
	case model.ActionEvict:
		if g.applied.running {
			g.Stop(ctx, b, name, action)
			changed = true
		}
	case model.ActionFreeze:
		if g.applied.running && !g.applied.frozen {
			if err := b.Freeze(ctx, name); err != nil {
				g.fail("freeze", name, err)
			} else {
				g.applied.frozen, changed = true, true
				g.refreshStatus(ctx, b, name)
			}
		}
	case model.ActionRun, model.ActionThrottle:
		if !g.applied.running {
			if specErr != nil {
				g.fail("start", name, specErr)
				return changed
			}
			if g.slurmRefused != "" && g.slurmRefused == slurmKey(c) {
				return changed // its slurmd would not join the controller: until either changes
			}
			if now := g.now(); now.Before(g.retryAt) && (g.gaveUp == "" || g.gaveUp == specKey(spec)) {
				return changed // backing off after a crash
			}
			spec.CPULimit = limit
			if err := g.prepare(ctx, c, &spec); err != nil {
				var mismatch *slurmMismatch
				if errors.As(err, &mismatch) {
					// Not a failure to retry: the same image meets the same controller
					// until the configuration changes one of them.
					g.slurmRefused = slurmKey(c)
					g.m.actionError.WithLabelValues("start").Inc()
					g.log.Error("guest not started: its slurmd would not join the Slurm controller", "guest", name,
						"slurmctld", mismatch.slurmctld, "slurmd", mismatch.slurmd, "image", c.Guest.Image,
						"version", c.Guest.Resolved.Version, "why", mismatch.why)
					return g.noGuest(ctx, b, name, notStarted+err.Error()) || changed
				}
				g.fail("start", name, err)
				g.scheduleRetry()
				return g.noGuest(ctx, b, name, "start failed: "+err.Error()) || changed
			}
			if err := b.Start(ctx, spec); err != nil {
				g.fail("start", name, err)
				g.scheduleRetry()
				return g.noGuest(ctx, b, name, "start failed: "+err.Error()) || changed
			}
			g.startErr, g.slurmRefused, g.gaveUp = "", "", ""
			g.applied = applied{running: true, limit: limit, spec: specKey(spec)}
			g.startedAt = g.now()
			if st, err := b.Status(ctx, name); err == nil {
				g.lastStatus = st
				g.pid.Store(int64(st.PID))
			}
			g.log.Info("guest started", "guest", name, "backend", b.Kind(), "cpuLimit", limit)
			return true
		}
		if g.applied.frozen {
			if err := b.Thaw(ctx, name); err != nil {
				g.fail("thaw", name, err)
			} else {
				g.applied.frozen, changed = false, true
				g.refreshStatus(ctx, b, name)
			}
		}
		if g.applied.limit != limit && (keep == nil || !keep(g.applied.limit)) {
			if err := g.ApplyLimit(ctx, c, limit); err == nil {
				changed = true
			}
		}
	}
	return changed
}

// ApplyLimit puts a CPU limit (CPUs; 0 = none) on the running guest: the one place the
// agent changes a running guest's limit (the container backend writes its cgroup's
// cpu.max; libvirt its vCPU quota). Both a decision (Act) and the adaptive controller's
// tick (Agent.controlTick) come through here. A failure is counted and logged.
func (g *guestLifecycle) ApplyLimit(ctx context.Context, c *wire.AgentConfig, limit float64) error {
	b, err := g.backend(c)
	if err != nil {
		return err
	}
	if err := b.SetCPULimit(ctx, c.Guest.Name, limit); err != nil {
		g.fail("cpu-limit", c.Guest.Name, err)
		return err
	}
	g.applied.limit = limit
	return nil
}

// CapFraction is the applied cap as a fraction of the host's CPUs (1 = uncapped).
func (g *guestLifecycle) CapFraction() float64 {
	if !g.applied.running || g.applied.limit <= 0 {
		return 1
	}
	return g.applied.limit / float64(g.hostCPUs)
}

// noGuest records why there is no guest after a start (the heartbeat's guest reason, so
// Slurm's node reason) and reads the guest's status, so that the reason shows at once;
// it reports whether the reason changed.
func (g *guestLifecycle) noGuest(ctx context.Context, b guest.Backend, name, why string) bool {
	changed := g.startErr != why
	g.startErr = why
	g.refreshStatus(ctx, b, name)
	return changed
}

// refreshStatus reads the guest's status after a freeze or thaw, so that the heartbeat
// sent with the decision says what is in force (Slurm resumes a node on "running", not
// on the next periodic check).
func (g *guestLifecycle) refreshStatus(ctx context.Context, b guest.Backend, name string) {
	if st, err := b.Status(ctx, name); err == nil {
		g.lastStatus = st
	}
}

// prepare makes what the spec names available before a start: the guest's image
// version (mounted read-only from the boot server's export when the image root does not
// already show it), the check that a compute guest's slurmd joins the site's Slurm
// controller (checkSlurm: a *slurmMismatch), and, for a compute guest, its secrets.
func (g *guestLifecycle) prepare(ctx context.Context, c *wire.AgentConfig, spec *guest.Spec) error {
	cg := c.Guest
	dir := filepath.Join(g.imageRoot, filepath.FromSlash(cg.Resolved.Path))
	if err := ensureImage(ctx, g.log, dir, cg.NFS, model.ImageRoot); err != nil {
		return fmt.Errorf("image %s %s: %w", cg.Image, cg.Resolved.Version, err)
	}
	if cg.ImageKind != model.ImageCompute {
		return nil
	}
	if err := g.checkSlurm(c, dir); err != nil {
		return err
	}
	// Containers see the secrets in /run/secrets, VM guests on their configuration disk
	// (node-agent/guest/libvirt/guestconfig.go); VMware's backend takes none.
	if cg.Backend == model.BackendVMware {
		return nil
	}
	sec, err := g.site.GuestSecrets(ctx)
	var status interface{ HTTPStatus() int }
	switch {
	case err == nil:
		g.secrets = sec
	case errors.As(err, &status) && status.HTTPStatus() == http.StatusNotFound:
		// The site hands out none (overtime serve without --munge-key): the image
		// must bring its own, or its init says what is missing.
		if !g.noSecretsLogged {
			g.log.Warn("the site manager hands out no guest secrets; starting the guest without", "err", err)
			g.noSecretsLogged = true
		}
		g.secrets = nil
	case errors.As(err, &status) && status.HTTPStatus() >= 400 && status.HTTPStatus() < 500:
		// The site manager answered and refused (over plain HTTP, or no compute guest
		// for this host now): that is the reason, not a guest started without its key.
		// (A 5xx is a server or proxy that is down: as unreachable, below.)
		return fmt.Errorf("guest secrets: %w", err)
	case g.secrets != nil:
		// Unreachable now: the secrets of this boot's earlier start (memory only).
		g.log.Warn("guest secrets: site manager unreachable; using the ones fetched earlier", "err", err)
	default:
		// Unreachable, and nothing fetched in this agent's life (secrets are never kept
		// on disk): the guest starts without, as with a site that hands out none. One
		// that needs a key says so on its console and stops; the agent's next start
		// (with backoff) asks again. Refusing to start would also stop guests that need
		// none whenever the site manager is down (an agent restarted then: TestAgentQEMU).
		g.log.Warn("guest secrets: site manager unreachable and none fetched before; starting the guest without", "err", err)
		g.secrets = nil
	}
	if g.secrets != nil && len(g.secrets.MungeKey) > 0 {
		spec.Secrets = map[string][]byte{"munge.key": g.secrets.MungeKey}
	}
	return nil
}

// slurmMismatch: the compute guest's slurmd would not join the site's Slurm controller.
// Its text is the guest's reason: both versions and what to do.
type slurmMismatch struct {
	slurmctld, slurmd string
	verdict           slurmcompat.Verdict
	image, version    string
	why               string // slurmcompat.Check's explanation (for the log)
}

func (e *slurmMismatch) Error() string {
	rel := "too old for"
	if e.verdict == slurmcompat.TooNew {
		rel = "newer than"
	}
	const todo = "build the compute image with the controller's Slurm: images/recipes/compute-guest, SLURM_DEBS=DIR"
	s := fmt.Sprintf("slurmd %s (image %s %s) %s slurmctld %s; %s", e.slurmd, e.image, e.version, rel, e.slurmctld, todo)
	if len(notStarted)+len(s) > wire.MaxGuestReason {
		// Long image names: what to do must not be cut off the heartbeat's reason.
		s = fmt.Sprintf("slurmd %s %s slurmctld %s; %s", e.slurmd, rel, e.slurmctld, todo)
	}
	return s
}

// notStarted begins the reason of a guest the agent refused to start.
const notStarted = "not started: "

// slurmKey is what a refusal of checkSlurm holds for: the controller's version and the
// guest's image version.
func slurmKey(c *wire.AgentConfig) string {
	if c.Guest == nil {
		return ""
	}
	return c.SlurmctldVersion + "\x00" + c.Guest.Resolved.Path
}

// checkSlurm refuses (*slurmMismatch) a compute guest whose slurmd would not join the
// site's Slurm controller (vocab/slurmcompat): the controller's version is the
// configuration's (the sync daemon's report), the slurmd's is in the manifest.json of the
// image version directory dir (images/manifest). When either is not known, or the rule
// cannot tell, the guest starts as before, logged once for each controller and image
// version.
func (g *guestLifecycle) checkSlurm(c *wire.AgentConfig, dir string) error {
	cg := c.Guest
	ctld, slurmd, why := c.SlurmctldVersion, "", ""
	verdict := slurmcompat.Unknown
	if ctld == "" {
		why = "the site manager does not know the controller's Slurm version (no report from overtime-slurm-sync yet)"
	} else if v, err := imageSlurmd(dir); err != nil {
		why = err.Error()
	} else {
		slurmd = v
		verdict, why = slurmcompat.Check(ctld, slurmd)
	}
	switch verdict {
	case slurmcompat.TooOld, slurmcompat.TooNew:
		return &slurmMismatch{slurmctld: ctld, slurmd: slurmd, verdict: verdict, image: cg.Image, version: cg.Resolved.Version, why: why}
	case slurmcompat.Unknown:
		if key := slurmKey(c); g.slurmLogged != key {
			g.slurmLogged = key
			g.log.Info("starting the guest without checking its Slurm against the controller's", "guest", cg.Name,
				"image", cg.Image, "version", cg.Resolved.Version, "slurmctld", ctld, "slurmd", slurmd, "why", why)
		}
	default:
		g.log.Debug("the guest's Slurm fits the controller's", "slurmctld", ctld, "slurmd", slurmd, "why", why)
	}
	return nil
}

// imageSlurmd is the Slurm version of the slurmd an image version directory's manifest
// lists (Debian's package or SchedMD's).
func imageSlurmd(dir string) (string, error) {
	m, err := manifest.Read(dir)
	if err != nil {
		return "", fmt.Errorf("the image's slurmd version is not known: %w", err)
	}
	for _, p := range slurmcompat.SlurmdPackages {
		if v := m.Package(p); v != "" {
			return slurmcompat.FromDebian(v)
		}
	}
	return "", fmt.Errorf("the image's %s lists no slurmd package (%s)", manifest.File, strings.Join(slurmcompat.SlurmdPackages, ", "))
}

// ensureImage mounts an image version directory (a guest's, a course VM's) read-only
// from its boot server (nfs: "server:/export/path") at dir, below ImageRoot, when dir does
// not show probe yet: a desktop mounts only the versions it runs, not the whole export.
func ensureImage(ctx context.Context, log *slog.Logger, dir, nfs, probe string) error {
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
		// The unit's sandboxing (PrivateTmp, InaccessiblePaths) gives the agent a mount
		// namespace of its own; a mount made in it would be invisible to the session's
		// course-VM player. Mounted in the system's namespace, it propagates here too.
		argv = append([]string{"nsenter", "--mount=/proc/1/ns/mnt", "--"}, argv...)
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mounting %s at %s: %v: %s", nfs, dir, err, strings.TrimSpace(string(out)))
	}
	log.Info("image mounted", "nfs", nfs, "at", dir)
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

// Stop stops the guest (the decision's action, for the log).
func (g *guestLifecycle) Stop(ctx context.Context, b guest.Backend, name string, action model.GuestAction) {
	if err := b.Stop(ctx, name); err != nil {
		g.m.actionError.WithLabelValues("stop").Inc()
		g.log.Error("guest stop", "guest", name, "err", err)
		return
	}
	g.log.Info("guest stopped", "guest", name, "action", action)
	g.applied = applied{}
	g.pid.Store(0)
}

func (g *guestLifecycle) scheduleRetry() {
	g.retryAt = g.now().Add(g.backoff)
	g.log.Info("guest restart backing off", "delay", g.backoff)
	g.backoff *= 2
	if g.backoff > g.maxBackoff {
		g.backoff = g.maxBackoff
	}
}

// Event handles a state change the backend reported; gone says the guest stopped
// without the agent asking (then Gone is due, with why).
func (g *guestLifecycle) Event(ctx context.Context, c *wire.AgentConfig, ev guest.Event) (gone bool, why string) {
	if c == nil || c.Guest == nil || ev.Name != c.Guest.Name {
		return false, ""
	}
	switch ev.State {
	case guest.StateCrashed, guest.StateShutoff:
		if !g.applied.running {
			return false, "" // we stopped it
		}
		// The event may be about the previous guest of the same name (replaced after a
		// definition change): believe the backend's current status.
		if b, err := g.backend(c); err == nil {
			if st, err := b.Status(ctx, ev.Name); err == nil && (st.State == guest.StateRunning || st.State == guest.StatePaused) {
				return false, ""
			}
		}
		return true, string(ev.State) + ": " + ev.Reason
	}
	return false, ""
}

// Gone: the guest stopped without the agent asking (crash, power-off inside). What is
// left of it is discarded and a restart is scheduled with backoff.
func (g *guestLifecycle) Gone(ctx context.Context, c *wire.AgentConfig, why string) {
	g.restarts++
	g.m.restarts.Inc()
	if g.now().Sub(g.startedAt) > 10*time.Minute {
		g.backoff = g.firstBackoff
	}
	b, err := g.backend(c)
	if err == nil {
		// A guest whose init gave up says why on its console (a VM compute guest whose
		// cluster storage does not mount, say): that is the reason the heartbeat, and so
		// Slurm's node, shows until a start works, not a bare "shutoff".
		if lw, ok := b.(guest.LastWords); ok {
			if words := lw.LastWords(c.Guest.Name); words != "" {
				g.startErr = "guest stopped: " + words
				why += " (" + words + ")"
				g.gaveUp, g.backoff = g.applied.spec, g.maxBackoff
			}
		}
	}
	g.log.Warn("guest stopped by itself; restarting with backoff", "guest", c.Guest.Name, "why", why, "restarts", g.restarts)
	if err == nil {
		// Discard what is left (state directory, a crashed domain record).
		_ = b.Stop(ctx, c.Guest.Name)
	}
	g.applied = applied{}
	g.scheduleRetry()
}

// Check is the periodic status check (crashes a backend without events reports late):
// it refreshes the status the heartbeat and the gauges report; gone says the guest the
// agent runs is no longer there (then Gone is due, with why).
func (g *guestLifecycle) Check(ctx context.Context, c *wire.AgentConfig) (gone bool, why string) {
	g.lastStatus = guest.Status{}
	if c.Guest == nil {
		return false, ""
	}
	b, err := g.backend(c)
	if err != nil {
		g.lastStatus.Reason = err.Error()
		return false, ""
	}
	st, err := b.Status(ctx, c.Guest.Name)
	if err != nil {
		g.lastStatus.Reason = err.Error()
		return false, ""
	}
	g.lastStatus = st
	g.pid.Store(int64(st.PID))
	switch st.State {
	case guest.StateAbsent, guest.StateCrashed, guest.StateShutoff:
		if g.applied.running {
			return true, "status " + string(st.State) + ": " + st.Reason
		}
	}
	return false, ""
}

// CPU is the CPU time of the running guest's process and its threads (QEMU; a
// container's init), for the desktop-load sensor, which counts everything else. Safe
// from any goroutine.
func (g *guestLifecycle) CPU() time.Duration {
	pid := g.pid.Load()
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

// Account refreshes the guest gauges from the last status check. (Throttled and frozen
// seconds come from the job counters, folded at every decision: metrics.go.)
func (g *guestLifecycle) Account() {
	g.m.guestCPU.Set(g.lastStatus.CPUTime.Seconds())
	setOne(g.m.guestState, []string{"running", "paused", "absent", "shutoff", "crashed"}, string(g.lastStatus.State))
}

// Spec builds the backend's guest spec from the configuration.
func (g *guestLifecycle) Spec(c *wire.AgentConfig) (guest.Spec, error) {
	cg := c.Guest
	if cg == nil {
		return guest.Spec{}, errors.New("no guest")
	}
	if g.imageRoot == "" {
		return guest.Spec{}, errors.New("no image root (mount the image export and pass --image-root)")
	}
	dir := filepath.Join(g.imageRoot, filepath.FromSlash(cg.Resolved.Path))
	vcpus := cg.VCPUs
	if vcpus <= 0 || vcpus > g.hostCPUs {
		vcpus = g.hostCPUs
	}
	mem := cg.MemoryMB
	capMB := g.hostMemMB * c.Policy.GuestMemory / 100
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
		Name: cg.Name, VCPUs: vcpus, MemoryMB: mem,
		BaseImage: filepath.Join(dir, model.ImageRoot), BaseFormat: "squashfs",
		StateDir: filepath.Join(g.stateDir, "guest", cg.Name),
		Network:  cg.Network, Bridge: cg.Bridge, MAC: mac,
		CPUIdle: true, Host: c.Host, AgentURL: g.agentURL,
	}
	if u := cg.JobUsers; u != nil {
		// Validated by the site manager; checked again, as everything the agent is sent.
		if s.JobUIDs, err = model.JobIDRanges("uids", u.UIDs); err != nil {
			return guest.Spec{}, fmt.Errorf("guest jobUsers: %w", err)
		}
		if s.JobGIDs, err = model.JobIDRanges("gids", u.GIDs); err != nil {
			return guest.Spec{}, fmt.Errorf("guest jobUsers: %w", err)
		}
	}
	s.Storage = cg.Storage
	for _, p := range cg.Ports {
		h, gp, _ := strings.Cut(p, ":")
		hp, _ := strconv.Atoi(h)
		gpp, _ := strconv.Atoi(gp)
		s.Ports = append(s.Ports, guest.PortForward{HostPort: hp, GuestPort: gpp})
	}
	switch cg.Backend {
	case model.BackendQEMU, model.BackendXen:
		// The image's own kernel and initrd, booted directly. The initrd is Overtime's
		// (boot/initramfs, in every image images/build.sh makes): overtime.root=disk: has it
		// mount the read-only squashfs disk under a tmpfs overlay, as a PC's root over NFS,
		// so the guest's root is writable and pristine at every start (a bare squashfs
		// root is read-only: systemd and guest-init cannot run on it). The disk is the base
		// behind libvirt's transient overlay.
		disk, console := "/dev/vda", "ttyS0"
		if cg.Backend == model.BackendXen {
			disk, console = "/dev/xvda", "hvc0"
		}
		s.Kernel = filepath.Join(dir, model.ImageKernel)
		s.Initrd = filepath.Join(dir, model.ImageInitrd)
		s.Cmdline = strings.TrimSpace("boot=overtime overtime.root=disk:" + disk + " overtime.kind=" + string(cg.ImageKind) +
			" overtime.host=" + c.Host + " console=" + console + " panic=30 overtime.guest=" + c.Host + " " + cg.KernelArgs)
	case model.BackendContainer:
		s.Cmdline = cg.KernelArgs // empty: the image's /sbin/init
	}
	return s, nil
}

func specKey(s guest.Spec) string {
	s.CPULimit = 0
	b, _ := json.Marshal(s)
	return string(b)
}

// Watch starts the backends' event streams where they have one (nil channel otherwise).
func (g *guestLifecycle) Watch(ctx context.Context) <-chan guest.Event {
	out := make(chan guest.Event, 16)
	n := 0
	for _, b := range g.backends {
		w, ok := b.(guest.Watcher)
		if !ok {
			continue
		}
		ch, err := w.Watch(ctx)
		if guest.IsUnavailable(err) {
			// Normal on a desktop that only has some backends installed; a guest of this
			// kind would fail at start with the same reason.
			g.log.Info("backend unavailable on this desktop", "backend", b.Kind(), "err", err)
			continue
		}
		if err != nil {
			g.log.Warn("guest events unavailable; status checks only", "backend", b.Kind(), "err", err)
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
