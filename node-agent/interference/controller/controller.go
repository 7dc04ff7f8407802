// Package controller is the adaptive feedback loop that sets the compute guest's CPU cap
// while someone is at the desk (model.ControllerAdaptive): it keeps the desktop's
// estimated slowdown (node-agent/interference/estimate) under the pool's target and
// harvests as much CPU as that allows.
//
// It is pure — no clock, no I/O — so that recorded traces drive it in tests; the agent
// calls Step once per signals tick with that tick's estimate.
//
// The law (AIMD with a dead band). Per-tick estimates are noisy — ±5–15 percentage
// points at 250–500 ms ticks on the test VM, against a target of 1% — so only a sure
// excess acts on one tick; everything else acts on means, and a mean only counts beyond
// its own noise (its standard error, from the ticks' spread):
//
//   - owner not active for IdleHold: MaxCap (the policy engine decides run/throttle; the
//     controller only stops holding the guest back);
//   - owner becomes active: StartCap (the host's calibrated start, wire.InterferenceProfile;
//     MaxCap when the calibration showed the idle class alone keeps the desktop within
//     target);
//   - a sure excess: multiplicative decrease in the tick that measured it, to where the
//     slowdown would be Target×Aim if it is proportional to the cap, by a factor within
//     [MaxDecrease, MinDecrease]. Sure: the estimate's Low is above Target, or the
//     slowdown is above Target×Burst and its Low above Target/2 (a burst that is not
//     just a wide interval);
//   - a moderate excess: the same decrease, by the mean's lower bound, when a mean of
//     ticks measured under the cap in force — the last ConfirmWindow, the last
//     LongWindows×ConfirmWindow, or the last ticks above Target in a row — exceeds
//     Target by more than Confidence standard errors. The standard error is the ticks'
//     noise (a robust estimate from successive differences, pooled across caps) over
//     √n, with Student's t for few ticks: noise-free ticks confirm in two, noisy ones
//     must agree for longer, pure noise never does;
//   - since the last change (or the last judgement in the dead band), IncreaseHold long,
//     a mean that is not above Target×Margin by more than IncreaseConfidence standard
//     errors: additive increase by Step (when the mean is a measurable slowdown, at most
//     to where it would reach Target×Aim), again after every IncreaseHold. Step 0.1 and
//     IncreaseHold 2 s: a controller driven by noise harvested 10–30% where a fixed 25%
//     cap harvested 42–50%; the ramp from 0.25 to uncapped takes 16 s, still much slower
//     than the back-off;
//   - between: nothing (dead band: a cap that meets the target stays);
//   - never below MinCap: a desktop that suffers even then is the policy engine's to
//     freeze (PSI) or evict.
package controller

import (
	"math"
	"sort"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/vocab/wire"
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
	// even when the estimate's interval reaches below Target, if its Low is above
	// Target/2.
	Burst float64
	// ConfirmWindow: a moderate excess (not sure) is acted on when the mean slowdown of
	// the ticks of the last ConfirmWindow, all under the cap in force, exceeds Target by
	// more than Confidence standard errors.
	ConfirmWindow time.Duration
	// Confidence: how many standard errors of a mean (the ticks' spread / √n) a mean
	// must clear before it counts, for many ticks: above Target for a decrease, above
	// Target×Margin to hold back an increase. Fewer ticks take Student's t quantile
	// scaled alike (tQuantile). 4.26 is the normal's one-sided 1−10⁻⁵ quantile: the test
	// runs at every tick, and pure noise must not cut the cap once an hour. 0 takes the
	// default; a negative value means none (the means alone decide).
	Confidence float64
	// IncreaseConfidence: the same for increases — how many standard errors a mean must
	// clear to count as a measurable slowdown (then it holds back an increase above
	// Target×Margin and limits the step to where it would reach Target×Aim). Lower than
	// Confidence: an increase is judged once per IncreaseHold, and a measured slowdown
	// should limit it.
	IncreaseConfidence float64
	// Step: one additive increase (fraction of the host's CPUs).
	Step float64
	// IncreaseHold: how long the mean slowdown must stay below Target×Margin before an
	// increase, and between increases.
	IncreaseHold time.Duration
	// IdleHold: how long the owner must be inactive before the cap returns to MaxCap.
	IdleHold time.Duration
}

// Defaults are the values zero Config fields take.
var Defaults = Config{
	Target: 0.01, MinCap: 0.05, MaxCap: 1, StartCap: 0.25,
	Margin: 0.5, Aim: 0.7, MaxDecrease: 0.25, MinDecrease: 0.8,
	Burst: 3, ConfirmWindow: 2 * time.Second, Confidence: 4.26, IncreaseConfidence: 2,
	Step: 0.1, IncreaseHold: 2 * time.Second, IdleHold: 5 * time.Second,
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
	if c.ConfirmWindow <= 0 {
		c.ConfirmWindow = d.ConfirmWindow
	}
	switch {
	case c.Confidence == 0 || math.IsNaN(c.Confidence):
		c.Confidence = d.Confidence
	case c.Confidence < 0:
		c.Confidence = 0
	}
	switch {
	case c.IncreaseConfidence == 0 || math.IsNaN(c.IncreaseConfidence):
		c.IncreaseConfidence = d.IncreaseConfidence
	case c.IncreaseConfidence < 0:
		c.IncreaseConfidence = 0
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
	// Since the last change or dead-band judgement: when, and the slowdowns' moments
	// (their mean decides increases).
	quietSince time.Time
	quiet      moments
	// changed: when the cap last changed (or the owner arrived); recent: the ticks since
	// then, at most ConfirmWindow old (their mean confirms a moderate excess).
	changed time.Time
	recent  []sample
	// The ticks' noise as measured before the last change: variance and degrees of
	// freedom (noise).
	noiseVar, noiseDF float64
}

type sample struct {
	at time.Time
	s  float64
}

// moments sums a sample's values and squares.
type moments struct {
	n       int
	sum, sq float64
}

func (m *moments) add(v float64) { m.n++; m.sum += v; m.sq += v * v }

// mean and its standard error (0 with fewer than two values).
func (m moments) mean() (mean, se float64) {
	if m.n == 0 {
		return 0, 0
	}
	mean = m.sum / float64(m.n)
	if m.n > 1 {
		v := (m.sq - float64(m.n)*mean*mean) / float64(m.n-1)
		se = math.Sqrt(math.Max(v, 0) / float64(m.n))
	}
	return mean, se
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
		c.changedAt(now)
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
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return c.cap
	}
	// A sure excess: act in this tick.
	if est.Low > cfg.Target || (s > cfg.Target*cfg.Burst && est.Low > cfg.Target/2) {
		return c.decrease(now, s)
	}

	// A moderate excess: the mean of the last ConfirmWindow, all under this cap.
	c.recent = append(c.recent, sample{now, s})
	i := 0
	for i < len(c.recent) && now.Sub(c.recent[i].at) >= LongWindows*cfg.ConfirmWindow {
		i++
	}
	c.recent = c.recent[i:]
	// Means over the last ConfirmWindow and the last LongWindows of them (a small excess
	// under much noise shows only in a longer mean); all since the last change. The ticks'
	// noise is measured by their successive differences, which a change of the
	// desktop's load barely inflates (a spread around the mean would), pooled with what
	// was measured under the previous caps (noise is the desktop's and the estimator's,
	// not the cap's): a few ticks that agree by chance are no evidence, and noise-free
	// ticks confirm before the window is full.
	if n := len(c.recent); n >= 2 {
		v, df := c.noise()
		// The median is a less efficient estimate than the mean square: its degrees of
		// freedom count at medianEfficiency.
		sigma, q := math.Sqrt(v), c.tq(int(medianEfficiency*df)+1)
		// The third mean is of the last ticks above Target in a row (a load that just
		// began is not diluted by the quiet ticks before it).
		for _, span := range []time.Duration{0, cfg.ConfirmWindow, LongWindows * cfg.ConfirmWindow} {
			var sum float64
			k := 0
			for j := n - 1; j >= 0; j-- {
				r := c.recent[j]
				if (span == 0 && !(r.s > cfg.Target)) || (span > 0 && now.Sub(r.at) >= span) {
					break
				}
				sum += r.s
				k++
			}
			if k < 2 {
				continue
			}
			low := sum / float64(k)
			if sigma > 0 {
				low -= q * sigma / math.Sqrt(float64(k))
			}
			if low > cfg.Target {
				// Cut by the least mean the noise allows.
				return c.decrease(now, low)
			}
		}
	}

	// Increase on a mean that is not (beyond its noise) above Target×Margin.
	if c.quietSince.IsZero() {
		c.resetQuiet(now)
	}
	c.quiet.add(s)
	if now.Sub(c.quietSince) < cfg.IncreaseHold {
		return c.cap
	}
	mean, se := c.quiet.mean()
	low := mean
	if se > 0 {
		low -= tQuantile(c.quiet.n, cfg.IncreaseConfidence) * se
	}
	step := cfg.Step
	if low > 0 {
		// A slowdown is measurable beyond the noise: do not step past where it would
		// reach Target×Aim if it is proportional to the cap.
		step = math.Min(step, c.cap*(cfg.Target*cfg.Aim/mean-1))
	}
	if low < cfg.Target*cfg.Margin && step > 0 && c.cap < cfg.MaxCap {
		c.cap = math.Min(c.cap+step, cfg.MaxCap)
		c.changedAt(now)
		return c.cap
	}
	// In the dead band: judge the next IncreaseHold afresh.
	c.resetQuiet(now)
	return c.cap
}

// noise is the variance of one tick's slowdown and its degrees of freedom: from the
// successive differences of the ticks since the last change — robustly, by their median
// (σ ≈ 1.4826 × median|d| / √2), so that a change of the desktop's load between two
// ticks does not count as noise — pooled with the estimate carried from before.
func (c *Controller) noise() (v, df float64) {
	m := len(c.recent) - 1
	var vr float64
	if m > 0 {
		d := make([]float64, m)
		for j := range d {
			d[j] = math.Abs(c.recent[j+1].s - c.recent[j].s)
		}
		sort.Float64s(d)
		med := d[m/2]
		if m%2 == 0 {
			med = (d[m/2-1] + d[m/2]) / 2
		}
		sd := 1.4826 * med / math.Sqrt2
		vr = sd * sd
	}
	mf := float64(max(m, 0))
	if mf+c.noiseDF == 0 {
		return 0, 0
	}
	return (mf*vr + c.noiseDF*c.noiseVar) / (mf + c.noiseDF), mf + c.noiseDF
}

// medianEfficiency: the variance of a median-based scale estimate is about that of the
// mean-square one from 0.37 times as many values (Gaussian noise).
const medianEfficiency = 0.37

// maxNoiseDF bounds the weight (in tick pairs) of the noise carried across a change, so
// that the estimate follows a desktop whose noise changes.
const maxNoiseDF = 64

// LongWindows: the longer mean that confirms a moderate excess spans this many
// ConfirmWindows.
const LongWindows = 4

// t999 are Student's t one-sided 99.9% quantiles by degrees of freedom (index; 0 unused),
// the normal's 3.09 beyond.
var t999 = [...]float64{0, 318.3, 22.33, 10.21, 7.173, 5.893, 5.208, 4.785, 4.501, 4.297, 4.144,
	4.025, 3.930, 3.852, 3.787, 3.733, 3.686, 3.646, 3.610, 3.579, 3.552,
	3.527, 3.505, 3.485, 3.467, 3.450, 3.435, 3.421, 3.408, 3.396, 3.385}

// tQuantile is how many standard errors a mean of n values must clear: Student's t
// for n−1 degrees of freedom at 99.9%, scaled by confidence/3.09 (confidence standard
// errors for many values).
func tQuantile(n int, confidence float64) float64 {
	q := 3.09
	switch df := n - 1; {
	case df < 1:
		return math.Inf(1) // no estimate of the spread: no evidence but a spread of nil
	case df < len(t999):
		q = t999[df]
	}
	return q * confidence / 3.09
}

func (c *Controller) tq(n int) float64 { return tQuantile(n, c.cfg.Confidence) }

// decrease cuts the cap for a slowdown s above Target (multiplicative decrease): if the
// slowdown is proportional to the cap (a cache-thrashing guest), cap×Target×Aim/s
// brings it to Target×Aim.
func (c *Controller) decrease(now time.Time, s float64) float64 {
	cfg := c.cfg
	f := clamp(cfg.Target*cfg.Aim/s, cfg.MaxDecrease, cfg.MinDecrease)
	c.cap = math.Max(c.cap*f, cfg.MinCap)
	c.changedAt(now)
	return c.cap
}

// changedAt starts afresh after a change of the cap at now: what was measured before
// was measured under another cap.
func (c *Controller) changedAt(now time.Time) {
	v, df := c.noise()
	c.noiseVar, c.noiseDF = v, math.Min(df, maxNoiseDF)
	c.changed = now
	c.recent = c.recent[:0]
	c.resetQuiet(now)
}

// resetQuiet starts a new averaging period for increases at now.
func (c *Controller) resetQuiet(now time.Time) {
	c.quietSince, c.quiet = now, moments{}
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
