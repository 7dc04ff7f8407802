package agent

// The per-host interference calibration (node-agent/interference/calibrate,
// docs/node-agent.md "Calibration"): when calibrate.Due says so — a cluster mode with a
// compute guest, nobody logged in for a while, no Slurm job, no current profile — the
// agent freezes its compute guest, runs the short interference matrix on this PC in a
// goroutine (Options.Calibrate) and thaws the guest after. The profile goes to the site
// manager in every heartbeat until the AgentConfig carries it back.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference/calibrate"
	"github.com/overtime-hpc/overtime/node-agent/interference/guestrun"
	"github.com/overtime-hpc/overtime/node-agent/interference/matrix"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// ProfileRun is the production calibration: matrix.Profile with its guest workloads run
// as plain processes of this binary in cgroups below parent (the group the compute
// guests' groups live in: the container backend's "overtime"), made when missing.
func ProfileRun(parent *cgroup.Group) calibrate.RunFunc {
	return func(ctx context.Context, target float64) (wire.InterferenceProfile, error) {
		if parent == nil {
			return wire.InterferenceProfile{}, fmt.Errorf("calibration: no cgroup for the guest workloads")
		}
		if err := parent.Create(); err != nil {
			return wire.InterferenceProfile{}, fmt.Errorf("calibration: %w", err)
		}
		return matrix.Profile(ctx, &guestrun.Process{Parent: parent}, target)
	}
}

// calState is the calibration's part of the loop's state.
type calState struct {
	c       *calibrate.Calibrator // nil: calibration off
	env     calibrate.Env         // this host's, read once at start (Backend from the config)
	running bool                  // a run is in progress: the guest stays frozen
	cancel  context.CancelFunc
	done    chan calResult
	// lastLogout: when the last user session ended (zero: none since the agent started).
	lastLogout time.Time
	reason     string // the last Due answer, logged when it changes
}

type calResult struct {
	ran    bool
	reason string
	err    error
}

// initCalibration sets the calibrator up (New).
func (a *Agent) initCalibration() {
	a.cal.done = make(chan calResult, 1)
	if a.o.Calibrate == nil {
		return
	}
	env, err := calibrate.Environment()
	if err != nil {
		a.log.Warn("host environment for calibration partly unreadable", "err", err)
	}
	a.cal.env = env
	a.cal.c = &calibrate.Calibrator{Run: a.o.Calibrate, Now: a.o.Now}
}

// calSnapshot is what the agent observed, for calibrate.Due.
func (a *Agent) calSnapshot() calibrate.Snapshot {
	env := a.cal.env
	if a.cfg != nil && a.cfg.Guest != nil {
		env.Backend = string(a.cfg.Guest.Backend)
	}
	return calibrate.Snapshot{Config: a.cfg, Env: env, Sessions: a.obs.LocalSessions + a.obs.RemoteSessions,
		LastLogout: a.cal.lastLogout, Boot: a.bootTime(), Jobs: a.runningJobs()}
}

// bootTime is when this PC booted (Options.Uptime; zero when unreadable).
func (a *Agent) bootTime() time.Time {
	b, err := os.ReadFile(a.o.Uptime)
	if err != nil {
		return time.Time{}
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return time.Time{}
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v <= 0 {
		return time.Time{}
	}
	return a.o.Now().Add(-time.Duration(v * float64(time.Second)))
}

// maybeCalibrate starts a calibration when one is due (tick), and cancels a running one
// when someone arrives.
func (a *Agent) maybeCalibrate(ctx context.Context) {
	c := a.cal.c
	if c == nil || a.cfg == nil {
		return
	}
	if a.cal.running {
		if a.obs.LocalSessions+a.obs.RemoteSessions > 0 || a.dec.State == model.StateOwnerActive {
			a.log.Info("someone arrived: calibration cancelled")
			a.cal.cancel()
		}
		return
	}
	s := a.calSnapshot()
	due, reason := c.Due(s)
	if reason != a.cal.reason {
		a.cal.reason = reason
		a.log.Debug("calibration", "due", due, "why", reason)
	}
	if !due || !a.applied.running {
		// Without a running guest there is nothing to freeze, and the guest's backend
		// is in doubt: wait for it.
		return
	}
	a.cal.running = true
	rctx, cancel := context.WithCancel(ctx)
	a.cal.cancel = cancel
	// The decision freezes the guest while a.cal.running (calibrationDecision).
	a.decideAndAct(ctx, time.Time{})
	if !a.applied.frozen {
		a.log.Warn("calibration due but the guest could not be frozen; not calibrating", "why", reason)
		a.cal.running = false
		cancel()
		return
	}
	a.log.Info("calibrating: guest frozen for the run", "why", reason)
	go func() {
		ran, why, err := c.Maybe(rctx, s)
		a.cal.done <- calResult{ran, why, err}
	}()
}

// calibrated ends a run (the loop, on a.cal.done): thaw the guest, send the profile.
func (a *Agent) calibrated(ctx context.Context, r calResult) {
	a.cal.running = false
	if a.cal.cancel != nil {
		a.cal.cancel()
	}
	switch {
	case r.err != nil:
		a.log.Error("calibration failed", "why", r.reason, "err", r.err)
	case !r.ran:
		a.log.Info("calibration not run", "why", r.reason)
	default:
		p := a.cal.c.Pending(a.cfg)
		if p != nil {
			a.log.Info("calibrated", "cpuSlowdown", p.CPUSlowdown, "memorySlowdown", p.MemorySlowdown, "startCap", p.StartCap, "harvest", p.Harvest)
		}
	}
	a.decideAndAct(ctx, time.Time{}) // thaws the guest
	a.updateHeartbeat()
	go a.sendHeartbeat(context.WithoutCancel(ctx))
}

// calibrationDecision keeps the guest frozen while a calibration runs (a guest that
// would run or be throttled; evicting, freezing and stopping stand).
func (a *Agent) calibrationDecision(action model.GuestAction) model.GuestAction {
	if a.cal.running && (action == model.ActionRun || action == model.ActionThrottle) {
		return model.ActionFreeze
	}
	return action
}

// calSessions follows the sessions for the calibration's "nobody logged in since".
func (a *Agent) calSessions(before, after int, at time.Time) {
	if before > 0 && after == 0 {
		a.cal.lastLogout = at
	}
}

// pendingProfile is the calibration to send in the heartbeat (nil: none).
func (a *Agent) pendingProfile() *wire.InterferenceProfile {
	if a.cal.c == nil {
		return nil
	}
	return a.cal.c.Pending(a.cfg)
}
