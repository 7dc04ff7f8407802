package matrix

import (
	"fmt"
	"time"
)

// Preset is a named cell list, with the run length it was sized for.
type Preset struct {
	Cells  []Cell
	Run    time.Duration
	Warmup time.Duration
	Doc    string
}

// Presets by name (--cells).
var Presets = map[string]Preset{
	"standard": {Cells: standardCells(), Run: 2 * time.Second, Warmup: 300 * time.Millisecond,
		Doc: "every policy for cpu×cpu, memory×memory, wakeup×cpu, frame×cpu; fs and startup × cpu and io guests × none, cgroup-idle, default, adaptive; the idle guest next to cpu and wakeup; cpu×cpu and wakeup×cpu in a container and in QEMU × none, cgroup-idle, adaptive (process backend unless said); 2 s runs after 0.3 s warm-up"},
}

func standardCells() []Cell {
	var cs []Cell
	add := func(backend string, desktops, guests, policies []string) {
		for _, d := range desktops {
			for _, g := range guests {
				for _, p := range policies {
					cs = append(cs, Cell{Desktop: d, Guest: g, Policy: p, Backend: backend})
				}
			}
		}
	}
	for _, dg := range [][2]string{{"cpu", "cpu"}, {"memory", "memory"}, {"wakeup", "cpu"}, {"frame", "cpu"}} {
		add("process", []string{dg[0]}, []string{dg[1]}, Policies)
	}
	add("process", []string{"fs", "startup"}, []string{"cpu", "io"}, []string{"none", "cgroup-idle", "adaptive"})
	add("process", []string{"cpu", "wakeup"}, []string{"idle"}, []string{"none"})
	for _, be := range []string{"container", "qemu"} {
		add(be, []string{"cpu", "wakeup"}, []string{"cpu"}, []string{"none", "cgroup-idle", "adaptive"})
	}
	return cs
}

// Cross is every combination of the lists (one backend each).
func Cross(desktops, guests, policies, backends []string) []Cell {
	var cs []Cell
	for _, be := range backends {
		for _, d := range desktops {
			for _, g := range guests {
				for _, p := range policies {
					cs = append(cs, Cell{Desktop: d, Guest: g, Policy: p, Backend: be})
				}
			}
		}
	}
	return cs
}

// StartCost is the assumed cost of starting a guest per backend for EstimateDuration
// (kept backends pay it once).
var StartCost = map[string]time.Duration{"process": 200 * time.Millisecond, "container": 1500 * time.Millisecond, "qemu": 40 * time.Second}

// EstimateDuration is how long Measure will take with cfg's settings (Reps rounds, no
// adaptive extra rounds) and what a round consists of.
func EstimateDuration(cfg Config) (time.Duration, string) {
	cfg.defaults()
	phases := RoundPhases(cfg.Cells, cfg.ProbeOverhead)
	var round time.Duration
	var nb, nd, ng int
	starts := map[string]bool{}
	var once time.Duration
	for _, p := range phases {
		if p.Kind == PhaseBoth && KindOf(p.Desktop) == Throughput && cfg.Pairs > 0 {
			round += pairedLength(cfg) - time.Second
			if p.Policy != "adaptive" {
				round -= cfg.AdaptiveWarmup
			}
		} else {
			round += cfg.Run + cfg.Warmup + 100*time.Millisecond
			if p.Kind == PhaseBoth && p.Policy == "adaptive" {
				round += cfg.AdaptiveWarmup
			}
		}
		switch p.Kind {
		case PhaseBoth, PhaseGuest:
			if p.Kind == PhaseBoth {
				nb++
			} else {
				ng++
			}
			if cfg.Keep[p.Backend] {
				if !starts[p.Backend+"/"+p.Guest] {
					starts[p.Backend+"/"+p.Guest] = true
					once += StartCost[p.Backend]
				}
			} else {
				round += StartCost[p.Backend]
			}
		default:
			nd++
		}
	}
	total := time.Duration(cfg.Reps)*round + once
	return total, fmt.Sprintf("%d cells; per round %d both + %d desktop-alone + %d guest-alone runs of %v (+%v warm-up) ≈ %v; %d rounds",
		len(cfg.Cells), nb, nd, ng, cfg.Run, cfg.Warmup, round.Round(time.Second), cfg.Reps)
}
