// Package controller is the adaptive feedback loop that sets the compute guest's CPU cap
// while someone is at the desk (model.ControllerAdaptive): it keeps the desktop's
// estimated slowdown (node-agent/interference/estimate) under the pool's target and
// harvests as much CPU as that allows.
//
// It is pure — no clock, no I/O — so that recorded traces drive it in tests; the agent
// calls Step once per signals tick with that tick's estimate.
//
// The law (AIMD with a dead band):
//
//   - owner not active for IdleHold: MaxCap (the policy engine decides run/throttle; the
//     controller only stops holding the guest back);
//   - owner becomes active: StartCap (the host's calibrated start, wire.InterferenceProfile;
//     MaxCap when the calibration showed the idle class alone keeps the desktop within
//     target);
//   - slowdown above Target: multiplicative decrease, to where the slowdown would be
//     Target×Aim if it is proportional to the cap, by a factor within [MaxDecrease,
//     MinDecrease]. At once — in the tick that measured it — when the excess is sure:
//     the estimate's Low is above Target, or the slowdown is above Target×Burst; a
//     smaller excess must be measured in Confirm consecutive ticks, so that one noisy
//     250 ms window does not cut the cap;
//   - mean slowdown since the last change below Target×Margin for IncreaseHold: additive
//     increase by Step (at most to where the slowdown would reach Target×Aim), again
//     after every IncreaseHold — slow, so that the desktop is not probed often, and on
//     the mean, so that noise does not hold it back;
//   - between: nothing (dead band: a cap that meets the target stays);
//   - never below MinCap: a desktop that suffers even then is the policy engine's to
//     freeze (PSI) or evict.
package controller

import (
	"math"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// Config parameterises a Controller. Zero fields take the Defaults.
type Config struct {
	// Target: the desktop slowdown to stay under (fraction: model.Policy.SlowdownTarget/100).
	Target float64
	// Caps are fractions of the host's CPUs; 1 = uncapped.
	MinCap, MaxCap, StartCap float64
	// Margin: the slowdown must be below Target×Margin before the cap increases; between
	// Target×Margin and Target is the dead band.
	Margin float64
	// Aim: a decrease (or the last increase) aims at Target×Aim, inside the dead band.
	Aim float64
	// MaxDecrease and MinDecrease bound the factor of one decrease: at most a cut to
	// MaxDecrease×cap (a large burst), at least to MinDecrease×cap (a slight excess
	// still backs off noticeably).
	MaxDecrease, MinDecrease float64
	// Burst: a slowdown above Target×Burst is acted on in the tick that measured it
	// even when the estimate's interval reaches below Target.
	Burst float64
	// Confirm: consecutive ticks above Target (not sure, not a burst) before a decrease.
	Confirm int
	// Step: one additive increase (fraction of the host's CPUs).
	Step float64
	// IncreaseHold: how long the slowdown must stay below Target×Margin before an
	// increase, and between increases.
	IncreaseHold time.Duration
	// IdleHold: how long the owner must be inactive before the cap returns to MaxCap.
	IdleHold time.Duration
}

// Defaults are the values zero Config fields take.
var Defaults = Config{
	Target: 0.01, MinCap: 0.05, MaxCap: 1, StartCap: 0.25,
	Margin: 0.5, Aim: 0.7, MaxDecrease: 0.25, MinDecrease: 0.8,
	Burst: 3, Confirm: 2, Step: 0.05, IncreaseHold: 3 * time.Second, IdleHold: 5 * time.Second,
}

func (c Config) withDefaults() Config {
	d := Defaults
	set := func(v *float64, def float64) {
		if *v <= 0 || math.IsNaN(*v) {
			*v = def
		}
	}
	set(&c.Target, d.Target)
	set(&c.MaxCap, d.MaxCap)
	set(&c.MinCap, d.MinCap)
	set(&c.StartCap, d.StartCap)
	set(&c.Margin, d.Margin)
	set(&c.Aim, d.Aim)
	set(&c.MaxDecrease, d.MaxDecrease)
	set(&c.MinDecrease, d.MinDecrease)
	set(&c.Step, d.Step)
	set(&c.Burst, d.Burst)
	if c.Confirm <= 0 {
		c.Confirm = d.Confirm
	}
	if c.IncreaseHold <= 0 {
		c.IncreaseHold = d.IncreaseHold
	}
	if c.IdleHold <= 0 {
		c.IdleHold = d.IdleHold
	}
	c.MaxCap = math.Min(c.MaxCap, 1)
	c.MinCap = math.Min(c.MinCap, c.MaxCap)
	c.StartCap = clamp(c.StartCap, c.MinCap, c.MaxCap)
	c.Margin = math.Min(c.Margin, 1)
	c.Aim = clamp(c.Aim, c.Margin, 1)
	return c
}

// StartCapFor is where the controller should start when the owner becomes active, from
// the host's calibration profile (nil: not calibrated → fallback): MaxCap (1) when the
// guest at full speed in the idle class kept both the CPU-bound and the memory-bound
// desktop within target, else the profile's StartCap.
func StartCapFor(p *wire.InterferenceProfile, target, fallback float64) float64 {
	if p == nil {
		return fallback
	}
	if p.CPUSlowdown <= target && p.MemorySlowdown <= target && !p.Measured.IsZero() {
		return 1
	}
	if p.StartCap > 0 {
		return p.StartCap
	}
	return fallback
}

// Controller is the loop's state. Not safe for concurrent use (the agent's loop owns it).
type Controller struct {
	cfg Config
	cap float64

	started   bool
	active    bool      // owner active as last told
	idleSince time.Time // owner inactive since (zero while active)
	// Since the last change, excess or dead-band tick: when, and the slowdowns' sum and
	// count (the mean decides increases).
	quietSince time.Time
	sum        float64
	n          int
	over       int     // consecutive ticks above Target
	overMin    float64 // the smallest slowdown of those ticks
}

// New returns a controller at MaxCap (nobody at the desk yet).
func New(cfg Config) *Controller {
	cfg = cfg.withDefaults()
	return &Controller{cfg: cfg, cap: cfg.MaxCap}
}

// Config is the configuration in force, defaults filled in.
func (c *Controller) Config() Config { return c.cfg }

// SetConfig replaces the configuration (a new policy or calibration); the cap is kept
// within the new bounds.
func (c *Controller) SetConfig(cfg Config) {
	c.cfg = cfg.withDefaults()
	c.cap = clamp(c.cap, c.cfg.MinCap, c.cfg.MaxCap)
}

// Cap is the cap in force (fraction of the host's CPUs; 1 = uncapped).
func (c *Controller) Cap() float64 { return c.cap }

// Owner applies a change of the owner's activity without a measurement (the agent calls
// it at the key press that makes the owner active, so that StartCap is in force before
// the next tick) and returns the cap.
func (c *Controller) Owner(now time.Time, active bool) float64 {
	switch {
	case active && (!c.active || !c.started):
		if !c.idleSince.IsZero() && now.Sub(c.idleSince) < c.cfg.IdleHold {
			// Back within the idle hold: the cap it had still applies.
		} else {
			c.cap = c.cfg.StartCap
		}
		c.idleSince = time.Time{}
		c.quiet(now)
	case !active && c.active:
		c.idleSince = now // the owner left: the learned cap holds for IdleHold
	case !active && !c.started:
		c.idleSince = time.Time{} // nobody yet: the first arrival starts at StartCap
	case !active && !c.idleSince.IsZero() && now.Sub(c.idleSince) >= c.cfg.IdleHold:
		c.cap = c.cfg.MaxCap
	}
	c.active, c.started = active, true
	return c.cap
}

// Step takes one tick's estimate (over the interval that ends at now) and returns the
// cap to apply.
func (c *Controller) Step(now time.Time, est estimate.Estimate, ownerActive bool) float64 {
	wasActive, wasStarted := c.active, c.started
	c.Owner(now, ownerActive)
	if !ownerActive || !wasStarted || !wasActive {
		// Inactive: nobody to protect. Just became active: est measured the interval
		// before StartCap was in force.
		return c.cap
	}
	cfg := c.cfg
	s := est.Slowdown
	if math.IsNaN(s) || s < 0 {
		return c.cap
	}
	if s <= cfg.Target {
		c.over = 0
	}
	switch {
	case s > cfg.Target:
		c.over++
		if c.over == 1 || !(c.overMin <= s) {
			c.overMin = s
		}
		sure := est.Low > cfg.Target || s > cfg.Target*cfg.Burst
		if !sure {
			if c.over < cfg.Confirm {
				return c.cap // not sure yet: one more tick
			}
			// Confirmed by several noisy ticks: cut by the least of them, not by the
			// noise's peak.
			s = c.overMin
		}
		// Multiplicative decrease. If the slowdown is proportional to the cap (a
		// cache-thrashing guest), cap×Target×Aim/s brings it to Target×Aim.
		f := clamp(cfg.Target*cfg.Aim/s, cfg.MaxDecrease, cfg.MinDecrease)
		c.cap = math.Max(c.cap*f, cfg.MinCap)
		// c.over stays: an excess that outlasts the cut is confirmed already, and the
		// next tick cuts again.
		c.overMin = math.Inf(1)
		c.quiet(now)
		return c.cap
	}
	if c.quietSince.IsZero() {
		c.quiet(now)
	}
	c.sum += s
	c.n++
	mean := c.sum / float64(c.n)
	if now.Sub(c.quietSince) < cfg.IncreaseHold {
		return c.cap
	}
	if mean < cfg.Target*cfg.Margin {
		step := cfg.Step
		if mean > 0 {
			// Do not step past where a proportional slowdown would reach Target×Aim.
			step = math.Min(step, c.cap*(cfg.Target*cfg.Aim/mean-1))
		}
		c.cap = math.Min(c.cap+step, cfg.MaxCap)
	}
	// Increased, or in the dead band: judge the next IncreaseHold afresh.
	c.quiet(now)
	return c.cap
}

// quiet starts a new averaging period at now.
func (c *Controller) quiet(now time.Time) {
	c.quietSince, c.sum, c.n = now, 0, 0
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
