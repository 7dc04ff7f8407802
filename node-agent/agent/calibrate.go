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
	"log/slog"
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

// calibration is the host's calibration: whether one is due, the run in progress (the
// guest stays frozen for it: Decision), the profile to send until the configuration
// carries it. Owned by Run's goroutine; the loop starts and ends runs
// (Agent.maybeCalibrate, Agent.calibrated).
type calibration struct {
	c       *calibrate.Calibrator // nil: calibration off
	env     calibrate.Env         // this host's, read once at start (Backend from the config)
	uptime  string                // Options.Uptime
	now     func() time.Time
	running bool // a run is in progress: the guest stays frozen
	cancel  context.CancelFunc
	done    chan calResult
	reason  string // the last Due answer, logged when it changes
}

type calResult struct {
	ran    bool
	reason string
	err    error
}

// newCalibration sets the calibrator up (New); run nil: calibration off.
func newCalibration(run calibrate.RunFunc, uptime string, now func() time.Time, log *slog.Logger) *calibration {
	cal := &calibration{done: make(chan calResult, 1), uptime: uptime, now: now}
	if run == nil {
		return cal
	}
	env, err := calibrate.Environment()
	if err != nil {
		log.Warn("host environment for calibration partly unreadable", "err", err)
	}
	cal.env = env
	cal.c = &calibrate.Calibrator{Run: run, Now: now}
	return cal
}

// Snapshot is what the agent observed, for calibrate.Due: the configuration in force,
// the sessions and when the last one ended, the running jobs.
func (cal *calibration) Snapshot(c *wire.AgentConfig, sessions int, lastLogout time.Time, jobs int) calibrate.Snapshot {
	env := cal.env
	if c != nil && c.Guest != nil {
		env.Backend = string(c.Guest.Backend)
	}
	return calibrate.Snapshot{Config: c, Env: env, Sessions: sessions,
		LastLogout: lastLogout, Boot: cal.bootTime(), Jobs: jobs}
}

// bootTime is when this PC booted (Options.Uptime; zero when unreadable).
func (cal *calibration) bootTime() time.Time {
	b, err := os.ReadFile(cal.uptime)
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
	return cal.now().Add(-time.Duration(v * float64(time.Second)))
}

// Due reports whether a calibration is due under s, and why; a changed reason is logged.
func (cal *calibration) Due(s calibrate.Snapshot, log *slog.Logger) (bool, string) {
	due, reason := cal.c.Due(s)
	if reason != cal.reason {
		cal.reason = reason
		log.Debug("calibration", "due", due, "why", reason)
	}
	return due, reason
}

// Begin marks a run as in progress, so that the next decision freezes the guest
// (Decision); Start then runs it, or Abort takes it back.
func (cal *calibration) Begin(ctx context.Context) context.Context {
	cal.running = true
	rctx, cancel := context.WithCancel(ctx)
	cal.cancel = cancel
	return rctx
}

// Enabled reports whether this agent calibrates at all (Options.Calibrate).
func (cal *calibration) Enabled() bool { return cal.c != nil }

// Running reports whether a run is in progress.
func (cal *calibration) Running() bool { return cal.running }

// Cancel asks the run in progress to stop (someone arrived); its result still comes.
func (cal *calibration) Cancel() { cal.cancel() }

// Abort takes back a run that could not start (the guest was not frozen).
func (cal *calibration) Abort() {
	cal.running = false
	cal.cancel()
}

// Start runs the calibration in a goroutine; its result arrives on done.
func (cal *calibration) Start(ctx context.Context, s calibrate.Snapshot) {
	go func() {
		ran, why, err := cal.c.Maybe(ctx, s)
		cal.done <- calResult{ran, why, err}
	}()
}

// End marks the run as over (its result came).
func (cal *calibration) End() {
	cal.running = false
	if cal.cancel != nil {
		cal.cancel()
	}
}

// Decision keeps the guest frozen while a calibration runs (a guest that would run or
// be throttled; evicting, freezing and stopping stand).
func (cal *calibration) Decision(action model.GuestAction) model.GuestAction {
	if cal.running && (action == model.ActionRun || action == model.ActionThrottle) {
		return model.ActionFreeze
	}
	return action
}

// Pending is the calibration to send in the heartbeat under configuration c (nil: none).
func (cal *calibration) Pending(c *wire.AgentConfig) *wire.InterferenceProfile {
	if cal.c == nil {
		return nil
	}
	return cal.c.Pending(c)
}
