package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
)

// The desktop-slowdown model (issue 16): what an owner-active minute costs the person at
// the desk, as a function of the guest's CPU cap and of what the desktop does.
//
// While the owner is active (input in the last ActiveWindow, or a desktop load episode)
// and a guest runs, the desktop is slowed down by Slowdown(kind, cap): kind is
// ActivityLoad while a load episode runs (a compile, a video, a notebook: 1-2 cores in
// this week), ActivityInteractive otherwise (typing, reading, browsing); cap is the
// fraction of the host's cores the guest may use (cgroup cpu.max): 1 at full speed (still
// in the idle class), the policy's ThrottleCPU while a fixed throttle holds, the adaptive
// controller's output while it does. A frozen, evicted or absent guest slows nothing
// (0). Slowdown is a fraction: 0.01 is a desktop 1 % slower than alone.
//
// Coefficients: one curve per kind, points (cap, slowdown) interpolated linearly, 0 at
// cap 0. They are meant to come from the interference matrix (node-agent/interference/
// matrix, `overtime-agent bench interference`, published as
// docs/benchmarks/interference/interference.json): -interference PATH loads its
// "simCoefficients" section (see InterferenceFile). Without it the simulator uses
// DefaultCoefficients, which are NOT measurements: placeholders of a plausible shape, to
// be replaced from the matrix. Their reasoning: an idle-class guest leaves the desktop
// its CPUs but still shares caches, memory bandwidth and the package's turbo budget, so
// the slowdown grows with the guest's CPU use (taken linear in the cap); a CPU-bound
// desktop load suffers most (Xen measurements in the project's sources report ~18 %
// for a CPU-bound domain sharing caches with a busy guest; 10 % is taken here for a
// guest in the idle class), an interactive desktop little (Linger-Longer reports 0.5 %
// foreground slowdown for its lowest-priority guest; 2 % at full speed is taken here,
// which includes the wake-up latency and application start-up of a loaded machine).

// Activity is what an owner-active desktop does.
type Activity int

const (
	ActivityInteractive Activity = iota // input only: no load episode
	ActivityLoad                        // a desktop load episode runs
	nActivities
)

func (a Activity) String() string {
	switch a {
	case ActivityInteractive:
		return "interactive"
	case ActivityLoad:
		return "load"
	}
	return fmt.Sprintf("activity(%d)", int(a))
}

// CapPoint is one measured point of a slowdown curve: the desktop's slowdown (fraction)
// next to a guest capped at Cap (fraction of the host's cores).
type CapPoint struct {
	Cap      float64 `json:"cap"`
	Slowdown float64 `json:"slowdown"`
}

// Coefficients are the slowdown curves, one per Activity, and where they come from.
type Coefficients struct {
	Source      string     `json:"source"` // "default (placeholder)" or the file loaded
	Interactive []CapPoint `json:"interactive"`
	Load        []CapPoint `json:"load"`
}

// DefaultCoefficients are the placeholder curves (see the model comment): linear in the
// cap, 2 % (interactive) and 10 % (load episode) at full speed. TO BE REPLACED by the
// interference matrix's measurements (-interference docs/benchmarks/interference/
// interference.json).
func DefaultCoefficients() Coefficients {
	return Coefficients{
		Source: "default placeholder coefficients (test/bench/harvest/slowdown.go), not measured",
		Interactive: []CapPoint{
			{0.1, 0.002}, {0.25, 0.005}, {0.5, 0.010}, {0.75, 0.015}, {1, 0.020},
		},
		Load: []CapPoint{
			{0.1, 0.010}, {0.25, 0.025}, {0.5, 0.050}, {0.75, 0.075}, {1, 0.100},
		},
	}
}

// InterferenceFile is the part of the matrix's interference.json the simulator reads:
//
//	{ ..., "simCoefficients": {
//	    "interactive": [{"cap": 0.25, "slowdown": 0.004}, ..., {"cap": 1, "slowdown": 0.02}],
//	    "load":        [{"cap": 0.25, "slowdown": 0.03},  ..., {"cap": 1, "slowdown": 0.12}] } }
//
// "interactive": the median slowdown of the matrix's interactive desktop workloads
// (wake-up latency, frame pacing, application start) next to a CPU guest capped at cap;
// "load": of its CPU- and memory-bound desktop workloads at 1-2 threads. Slowdowns are
// fractions, caps fractions of the host's cores; every other field is ignored.
type InterferenceFile struct {
	SimCoefficients *struct {
		Interactive []CapPoint `json:"interactive"`
		Load        []CapPoint `json:"load"`
	} `json:"simCoefficients"`
}

// LoadCoefficients reads the slowdown curves from the matrix's interference.json.
func LoadCoefficients(path string) (Coefficients, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Coefficients{}, err
	}
	var f InterferenceFile
	if err := json.Unmarshal(b, &f); err != nil {
		return Coefficients{}, fmt.Errorf("%s: %w", path, err)
	}
	if f.SimCoefficients == nil {
		return Coefficients{}, fmt.Errorf("%s: no simCoefficients section (see test/bench/harvest/slowdown.go)", path)
	}
	c := Coefficients{Source: path, Interactive: f.SimCoefficients.Interactive, Load: f.SimCoefficients.Load}
	if err := c.Validate(); err != nil {
		return Coefficients{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate checks that each curve has points with caps in (0, 1], increasing, and
// slowdowns in [0, 10].
func (c Coefficients) Validate() error {
	for _, k := range []Activity{ActivityInteractive, ActivityLoad} {
		pts := c.curve(k)
		if len(pts) == 0 {
			return fmt.Errorf("slowdown curve %s: no points", k)
		}
		for i, p := range pts {
			if !(p.Cap > 0 && p.Cap <= 1) || !(p.Slowdown >= 0 && p.Slowdown <= 10) {
				return fmt.Errorf("slowdown curve %s: point %+v out of range", k, p)
			}
			if i > 0 && p.Cap <= pts[i-1].Cap {
				return fmt.Errorf("slowdown curve %s: caps not increasing", k)
			}
		}
	}
	return nil
}

func (c Coefficients) curve(k Activity) []CapPoint {
	if k == ActivityLoad {
		return c.Load
	}
	return c.Interactive
}

// SlowdownModel evaluates the curves.
type SlowdownModel struct {
	c Coefficients
}

// NewSlowdownModel checks c and returns its model.
func NewSlowdownModel(c Coefficients) (*SlowdownModel, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.Interactive, c.Load = slices.Clone(c.Interactive), slices.Clone(c.Load)
	return &SlowdownModel{c: c}, nil
}

// DefaultSlowdownModel is the model of DefaultCoefficients.
func DefaultSlowdownModel() *SlowdownModel {
	m, err := NewSlowdownModel(DefaultCoefficients())
	if err != nil {
		panic(err)
	}
	return m
}

// Coefficients returns the model's curves.
func (m *SlowdownModel) Coefficients() Coefficients { return m.c }

// Slowdown is the desktop's slowdown (fraction) doing k next to a guest capped at cap
// (fraction of the cores; 0: no guest): linear between the curve's points and from
// (0, 0) to the first, flat beyond the last.
func (m *SlowdownModel) Slowdown(k Activity, cap float64) float64 {
	if cap <= 0 {
		return 0
	}
	pts := m.c.curve(k)
	prev := CapPoint{}
	for _, p := range pts {
		if cap <= p.Cap {
			return prev.Slowdown + (p.Slowdown-prev.Slowdown)*(cap-prev.Cap)/(p.Cap-prev.Cap)
		}
		prev = p
	}
	return prev.Slowdown
}

// CapFor is the largest cap (to 1e-4) whose slowdown for k stays at or below target; 1
// when even full speed does. It is what a calibration run reports as StartCap
// (wire.InterferenceProfile) when it measures the desktop the curve describes.
func (m *SlowdownModel) CapFor(k Activity, target float64) float64 {
	if m.Slowdown(k, 1) <= target {
		return 1
	}
	lo, hi := 0.0, 1.0
	for hi-lo > 1e-4 {
		mid := (lo + hi) / 2
		if m.Slowdown(k, mid) <= target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Floor(lo*1e4) / 1e4
}

// coefficientsFor loads path, or returns the defaults for an empty path.
func coefficientsFor(path string) (*SlowdownModel, error) {
	c := DefaultCoefficients()
	if path != "" {
		var err error
		if c, err = LoadCoefficients(path); err != nil {
			return nil, err
		}
	}
	return NewSlowdownModel(c)
}
