// Package calibrate decides when a host measures its interference profile and keeps
// the bookkeeping around the run (docs/interference.md, docs/agent-api.md).
//
// A calibration is a short run of the interference matrix on this PC (matrix.Profile,
// given here as a RunFunc): how much a compute guest at full speed slows a CPU-bound and
// a memory-bound desktop, the memory canary's baseline, and the guest cap the adaptive
// controller starts from. The site manager keeps the last profile per host, hands it
// back in the host's AgentConfig (a PXE-booted PC forgets everything at reboot) and
// derives the host's Slurm node weight from it.
//
// When (Due): the host is in a cluster mode with a compute guest (the PC is the
// cluster's, nobody is expected at it), nobody has been logged in for IdleFor, no Slurm
// job runs in the guest, and the AgentConfig carries no profile, or one measured in
// another environment (kernel, CPU model, CPU count, cgroup version, guest backend), or
// one older than MaxAge. After a failed run, not again before RetryAfter.
//
// Due is pure: the agent passes what it observed (Snapshot) and the time. Calibrator
// adds the bookkeeping: it runs the RunFunc once when Due, stamps the profile with the
// environment and the time, hands it to Deliver (the agent sends it in its heartbeats
// until its AgentConfig carries it back) and remembers failures and the profile on its
// way, so that neither a failing host nor one whose site manager has not echoed the
// profile yet calibrates again and again.
//
// Stopping the guest's own work during the run (the run starts its own guest workloads
// and measures the desktop side alone as baseline) is the caller's business: the agent
// freezes or stops its compute guest before Calibrator.Maybe runs the RunFunc, and
// drains the Slurm node first, which Due's "no job runs" presupposes.
package calibrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Bounds of the decision.
const (
	// IdleFor: how long nobody may have been logged in before a calibration starts (the
	// run takes the whole machine for a few minutes; someone who just left may come back).
	IdleFor = 10 * time.Minute
	// MaxAge: a profile older than this is measured again (a BIOS update, a changed power
	// profile, thermal paste: what the environment does not name).
	MaxAge = 30 * 24 * time.Hour
	// RetryAfter: after a failed run, the next attempt waits this long.
	RetryAfter = time.Hour
)

// Env is the environment a profile holds for (wire.InterferenceProfile's Kernel,
// CPUModel, CPUs, Cgroup, Backend).
type Env struct {
	Kernel   string
	CPUModel string
	CPUs     int
	Cgroup   string // "v1" or "v2"
	Backend  string // the guest backend (model.GuestBackend)
}

// Of is the environment p was measured in.
func Of(p *wire.InterferenceProfile) Env {
	return Env{Kernel: p.Kernel, CPUModel: p.CPUModel, CPUs: p.CPUs, Cgroup: p.Cgroup, Backend: p.Backend}
}

// Diff names the fields where e and o differ ("" when equal), e.g. "kernel 6.1.0 → 6.8.0".
func (e Env) Diff(o Env) string {
	var d []string
	str := func(name, a, b string) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %q → %q", name, a, b))
		}
	}
	str("kernel", e.Kernel, o.Kernel)
	str("CPU model", e.CPUModel, o.CPUModel)
	if e.CPUs != o.CPUs {
		d = append(d, fmt.Sprintf("CPUs %d → %d", e.CPUs, o.CPUs))
	}
	str("cgroup", e.Cgroup, o.Cgroup)
	str("backend", e.Backend, o.Backend)
	return strings.Join(d, ", ")
}

// Stamp sets p's environment fields to e.
func (e Env) Stamp(p *wire.InterferenceProfile) {
	p.Kernel, p.CPUModel, p.CPUs, p.Cgroup, p.Backend = e.Kernel, e.CPUModel, e.CPUs, e.Cgroup, e.Backend
}

// Snapshot is what the agent observed, for Due.
type Snapshot struct {
	// Config is the agent's configuration in force (nil: none yet).
	Config *wire.AgentConfig
	// Env is this host's environment now (Environment, with the backend the guest runs).
	Env Env
	// Sessions: users logged in now (local and remote); LastLogout: when the last one
	// ended (zero: nobody since boot, then Boot counts).
	Sessions   int
	LastLogout time.Time
	Boot       time.Time
	// Jobs: Slurm jobs running in the guest now (the SPANK plugin's start/end calls).
	Jobs int
	// LastFailure: when the last run on this boot failed (zero: none). Pending: a
	// profile this boot measured and delivered that Config does not carry yet.
	// Calibrator fills both.
	LastFailure time.Time
	Pending     *wire.InterferenceProfile
}

// Due says whether the host should calibrate now, and why (or why not), one line.
func Due(now time.Time, s Snapshot) (bool, string) {
	cfg := s.Config
	switch {
	case cfg == nil:
		return false, "no configuration yet"
	case cfg.Kind != model.KindCluster:
		return false, fmt.Sprintf("mode %s is not a cluster mode", cfg.Mode)
	case cfg.Exam || cfg.Guest == nil:
		return false, fmt.Sprintf("mode %s runs no compute guest here", cfg.Mode)
	case s.Sessions > 0:
		return false, fmt.Sprintf("%d user session(s) open", s.Sessions)
	case s.Jobs > 0:
		return false, fmt.Sprintf("%d Slurm job(s) running in the guest", s.Jobs)
	}
	idleSince := s.LastLogout
	if idleSince.IsZero() {
		idleSince = s.Boot
	}
	if idle := now.Sub(idleSince); !idleSince.IsZero() && idle < IdleFor {
		return false, fmt.Sprintf("nobody logged in for %s only (waits %s)", idle.Round(time.Second), IdleFor)
	}
	if !s.LastFailure.IsZero() && now.Sub(s.LastFailure) < RetryAfter {
		return false, fmt.Sprintf("last calibration failed %s ago (retries after %s)", now.Sub(s.LastFailure).Round(time.Second), RetryAfter)
	}
	// A profile measured on this boot but not echoed yet counts as the config's.
	p := cfg.Interference
	if s.Pending != nil && (p == nil || s.Pending.Measured.After(p.Measured)) {
		p = s.Pending
	}
	if p == nil {
		return true, "no calibration yet"
	}
	if d := Of(p).Diff(s.Env); d != "" {
		return true, "environment changed: " + d
	}
	if age := now.Sub(p.Measured); age > MaxAge {
		return true, fmt.Sprintf("calibration is %d days old (at most %d)", int(age.Hours()/24), int(MaxAge.Hours()/24))
	}
	return false, "calibration of " + p.Measured.UTC().Format(time.RFC3339) + " is current"
}

// RunFunc runs the calibration (matrix.Profile with its runner): the guest-side runs
// and the desktop probes, target being the pool's slowdown target as a fraction
// (model.Policy.SlowdownTarget / 100), which StartCap is chosen for. It need not fill
// Measured nor the environment: the Calibrator stamps them.
type RunFunc func(ctx context.Context, target float64) (wire.InterferenceProfile, error)

// Calibrator runs calibrations when they are Due and keeps their bookkeeping for one
// boot (an agent process; a PXE-booted PC starts from nothing, the site manager's
// AgentConfig remembers). Safe for concurrent use; at most one run at a time.
type Calibrator struct {
	Run RunFunc
	// Deliver receives each new profile (stamped, validated): the agent puts it in its
	// heartbeats until its AgentConfig carries it back.
	Deliver func(wire.InterferenceProfile)
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu          sync.Mutex
	running     bool
	lastFailure time.Time
	lastErr     error
	pending     *wire.InterferenceProfile
}

// ErrRunning is returned by Maybe while another run is in progress.
var ErrRunning = errors.New("calibrate: a calibration is already running")

func (c *Calibrator) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Pending is the profile delivered and not yet carried back by cfg (nil: none): the
// agent sends it in each heartbeat while it is not nil. A cfg that carries it (or a
// later one) ends it.
func (c *Calibrator) Pending(cfg *wire.AgentConfig) *wire.InterferenceProfile {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settleLocked(cfg)
	if c.pending == nil {
		return nil
	}
	p := *c.pending
	return &p
}

func (c *Calibrator) settleLocked(cfg *wire.AgentConfig) {
	if c.pending != nil && cfg != nil && cfg.Interference != nil && !cfg.Interference.Measured.Before(c.pending.Measured) {
		c.pending = nil
	}
}

// LastError is the last run's error (nil: none, or the last run succeeded).
func (c *Calibrator) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Due is Due for s with the Calibrator's own bookkeeping (LastFailure, Pending) and
// clock, and false while a run is in progress: the cheap check the agent makes at every
// tick before it stops the guest for Maybe.
func (c *Calibrator) Due(s Snapshot) (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return false, "a calibration is running"
	}
	c.settleLocked(s.Config)
	s.LastFailure, s.Pending = c.lastFailure, c.pending
	return Due(c.now(), s)
}

// Maybe runs one calibration if Due says so for s (its LastFailure and Pending are
// the Calibrator's own), and reports whether it ran, why (or why not), and the run's
// error. It blocks for the run's duration; the caller stops the guest's work first and
// resumes it after (see the package comment).
func (c *Calibrator) Maybe(ctx context.Context, s Snapshot) (ran bool, reason string, err error) {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return false, "a calibration is running", ErrRunning
	}
	c.settleLocked(s.Config)
	s.LastFailure, s.Pending = c.lastFailure, c.pending
	due, reason := Due(c.now(), s)
	if !due {
		c.mu.Unlock()
		return false, reason, nil
	}
	c.running = true
	c.mu.Unlock()

	target := model.DefaultPolicy().SlowdownTarget / 100
	if t := s.Config.Policy.SlowdownTarget; t > 0 {
		target = t / 100
	}
	p, err := c.Run(ctx, target)
	if err == nil {
		p.Measured = c.now().UTC()
		s.Env.Stamp(&p)
		if verr := p.Validate(); verr != nil {
			err = fmt.Errorf("calibrate: the run's profile is invalid: %w", verr)
		}
	}

	c.mu.Lock()
	c.running = false
	c.lastErr = err
	if err != nil {
		c.lastFailure = c.now()
		c.mu.Unlock()
		return true, reason, err
	}
	c.lastFailure = time.Time{}
	cp := p
	c.pending = &cp
	c.mu.Unlock()
	if c.Deliver != nil {
		c.Deliver(p)
	}
	return true, reason, nil
}
