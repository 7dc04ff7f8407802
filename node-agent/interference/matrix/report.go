package matrix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// Run is one measured phase, raw.
type Run struct {
	Round   int       `json:"round"`
	Seq     int       `json:"seq"` // position in the round's shuffled order
	Phase   string    `json:"phase"`
	Desktop string    `json:"desktop,omitempty"`
	Guest   string    `json:"guest,omitempty"`
	Policy  string    `json:"policy,omitempty"`
	Backend string    `json:"backend,omitempty"`
	Start   time.Time `json:"start"`
	// Load1: the 1-minute load average when the run started (others' work on the host).
	Load1 float64 `json:"load1"`
	// The desktop workload's result; its per-event latencies are summarised in
	// DesktopLatency (and DesktopPct for latency workloads), not kept raw.
	Result         *interference.Result `json:"desktopResult,omitempty"`
	DesktopLatency *Quantiles           `json:"desktopLatency,omitempty"`
	// The wake-up probe next to the desktop workload (µs) and its percentiles 0, 1, ...,
	// 100 (the latency distribution; DesktopPct the same of the wakeup workload's own).
	Probe      *Quantiles `json:"probe,omitempty"`
	ProbePct   []float64  `json:"probePct,omitempty"`
	DesktopPct []float64  `json:"desktopPct,omitempty"`
	// ProbeCPU: the probe thread's CPU time per second of the run (CPUs).
	ProbeCPU float64 `json:"probeCPU,omitempty"`
	// Guest work (its Unit) over the desktop's measured interval (both) or the run (guest
	// alone), and that interval's length.
	GuestWork    float64 `json:"guestWork,omitempty"`
	GuestSeconds float64 `json:"guestSeconds,omitempty"`
	// The signals over the desktop's measured interval and estimate.Desktop of them.
	Window   *interference.Window `json:"window,omitempty"`
	Estimate *Estimate            `json:"estimate,omitempty"`
	CapTrace []CapPoint           `json:"capTrace,omitempty"`
	// Paired: a paired both run's slowdown per pair (rate with the guest frozen / rate
	// with it running − 1; paired.go).
	Paired []float64 `json:"paired,omitempty"`
	Error  string    `json:"error,omitempty"`

	probeLat []float64 // a paired run's probe latencies until the desktop's result is in
}

// Percentiles are xs's percentiles 0, 1, ..., 100 rounded to 0.1 (nil when empty).
func Percentiles(xs []float64) []float64 {
	s := sorted(xs)
	if len(s) == 0 {
		return nil
	}
	out := make([]float64, 101)
	for i := range out {
		out[i] = math.Round(quantileSorted(s, float64(i)/100)*10) / 10
	}
	return out
}

func (r *Run) setDesktop(res interference.Result, probe []float64) {
	r.DesktopLatency = Summarize(res.LatencyUs)
	r.Probe = Summarize(probe)
	r.ProbePct = Percentiles(probe)
	if KindOf(r.Desktop) != Throughput {
		r.DesktopPct = Percentiles(res.LatencyUs)
	}
	res.LatencyUs = nil
	r.Result = &res
}

// CellSummary is a cell over its rounds: medians with 95% intervals.
type CellSummary struct {
	Cell
	Kind   Kind `json:"kind"`
	Rounds int  `json:"rounds"`
	// Slowdown per Kind (fraction), its p99 delta (latency kinds, µs) and missed-frame
	// share delta (frame).
	Slowdown    *CI `json:"slowdown,omitempty"`
	P99DeltaUs  *CI `json:"p99DeltaUs,omitempty"`
	MissedDelta *CI `json:"missedDelta,omitempty"`
	// The wake-up probe's p99 alone and next to the guest (medians over rounds, µs) and
	// their paired difference.
	ProbeP99AloneUs F   `json:"probeP99AloneUs"`
	ProbeP99BothUs  F   `json:"probeP99BothUs"`
	ProbeP99DeltaUs *CI `json:"probeP99DeltaUs,omitempty"`
	IdleShare       F   `json:"idleShare"`
	Harvest         *CI `json:"harvest,omitempty"`
	GuestShare      *CI `json:"guestShare,omitempty"`
	// Estimated: estimate.Desktop's slowdown over the both runs (median).
	Estimated *CI `json:"estimated,omitempty"`
	// Cap: adaptive, the controller's mean cap over each run (fraction of the CPUs).
	Cap *CI `json:"cap,omitempty"`
	// PerRound: the derived numbers of each round (NaN as null).
	PerRound []RoundValue `json:"perRound"`
	Errors   int          `json:"errors,omitempty"`
}

// RoundValue is a cell's derived numbers in one round.
type RoundValue struct {
	Round int `json:"round"`
	Derived
}

// MarshalJSON writes the round next to the derived numbers (Derived's own MarshalJSON
// would otherwise be promoted and drop it).
func (r RoundValue) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.Derived)
	if err != nil {
		return nil, err
	}
	return append([]byte(fmt.Sprintf(`{"round":%d,`, r.Round)), b[1:]...), nil
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *RoundValue) UnmarshalJSON(b []byte) error {
	var round struct {
		Round int `json:"round"`
	}
	if err := json.Unmarshal(b, &round); err != nil {
		return err
	}
	r.Round = round.Round
	return json.Unmarshal(b, &r.Derived)
}

// MarshalJSON writes NaN as null.
func (d Derived) MarshalJSON() ([]byte, error) {
	m := map[string]*float64{}
	for k, v := range map[string]float64{"slowdown": d.Slowdown, "p99DeltaUs": d.P99DeltaUs, "missedDelta": d.MissedDelta,
		"probeP99AloneUs": d.ProbeP99AloneUs, "probeP99BothUs": d.ProbeP99BothUs, "idleShare": d.IdleShare,
		"harvest": d.Harvest, "guestShare": d.GuestShare} {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			v := v
			m[k] = &v
		} else {
			m[k] = nil
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads null as NaN.
func (d *Derived) UnmarshalJSON(b []byte) error {
	var m map[string]*float64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	get := func(k string) float64 {
		if v := m[k]; v != nil {
			return *v
		}
		return math.NaN()
	}
	*d = Derived{Slowdown: get("slowdown"), P99DeltaUs: get("p99DeltaUs"), MissedDelta: get("missedDelta"),
		ProbeP99AloneUs: get("probeP99AloneUs"), ProbeP99BothUs: get("probeP99BothUs"), IdleShare: get("idleShare"),
		Harvest: get("harvest"), GuestShare: get("guestShare")}
	return nil
}

// Report is the whole matrix: interference.json.
type Report struct {
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Env      Env          `json:"environment"`
	Config   ConfigRecord `json:"config"`
	// Definitions says how each number is computed (also in the Markdown).
	Definitions map[string]string `json:"definitions"`
	Cells       []CellSummary     `json:"cells"`
	// ProbeOverhead: the CPU desktop workload's slowdown with the probe running vs
	// without (paired per round).
	ProbeOverhead *CI `json:"probeOverhead,omitempty"`
	// ProbeCPU: the probe thread's own CPU use (CPUs, median over runs); SignalsCost:
	// the signal sampler's and memory canary's CPU (CPUs, over the whole matrix).
	ProbeCPU    F        `json:"probeCPU"`
	SignalsCost F        `json:"signalsCost,omitempty"`
	Targets     []Target `json:"targets"`
	// SimCoefficients: the measured slowdown curves the harvest simulation
	// (test/bench/harvest -interference) replays, when the cells they come from ran.
	SimCoefficients *SimCoefficients `json:"simCoefficients,omitempty"`
	Runs            []Run            `json:"runs"`
}

// ConfigRecord is the run's configuration as recorded.
type ConfigRecord struct {
	Cells         []Cell            `json:"cells"`
	RunSeconds    float64           `json:"runSeconds"`
	WarmupSeconds float64           `json:"warmupSeconds"`
	Reps          int               `json:"reps"`
	Adapt         bool              `json:"adapt"`
	MaxReps       int               `json:"maxReps"`
	MaxWidth      float64           `json:"maxWidth"`
	Threads       int               `json:"threads"`
	Cores         int               `json:"cores"`
	Seed          uint64            `json:"seed"`
	TickSeconds   float64           `json:"tickSeconds"`
	Keep          map[string]bool   `json:"keepGuests,omitempty"`
	Baseline      string            `json:"baseline"`
	Policies      map[string]string `json:"policies"`
}

func recordConfig(c Config) ConfigRecord {
	base := "desktop alone: no guest of the cell runs (guests are stopped after each run)"
	if len(c.Keep) > 0 {
		var ks []string
		used := backendsOf(c.Cells)
		for k, on := range c.Keep {
			if on && slices.Contains(used, k) {
				ks = append(ks, k)
			}
		}
		sort.Strings(ks)
		if len(ks) > 0 {
			base += fmt.Sprintf("; %v guests stay up between runs and are frozen while not measured (they hold memory, no CPU)", ks)
		}
	}
	return ConfigRecord{Cells: c.Cells, RunSeconds: c.Run.Seconds(), WarmupSeconds: c.Warmup.Seconds(), Reps: c.Reps,
		Adapt: c.Adapt, MaxReps: c.MaxReps, MaxWidth: c.MaxWidth, Threads: c.Threads, Cores: c.Cores, Seed: c.Seed,
		TickSeconds: c.Tick.Seconds(), Keep: c.Keep, Baseline: base, Policies: PolicyDoc}
}

// Definitions of the reported numbers.
var Definitions = map[string]string{
	"slowdown.throughput": "cpu, memory, fs: alone rate / both rate - 1 (rate = work / seconds of the measured run)",
	"slowdown.latency":    "wakeup, startup: median latency both / alone - 1; p99Delta = p99 both - p99 alone (µs)",
	"slowdown.frame":      "frame: median frame work time both / alone - 1; missedDelta = missed-frame share both - alone",
	"harvest":             "guest work over the desktop's measured interval / (guest-alone rate × interval × idle share); idle share = 1 - desktop CPU / (cores × seconds) in desktop alone",
	"guestShare":          "guest work over the interval / (guest-alone rate × interval)",
	"ci":                  "median over rounds (each round pairs a cell's both run with that round's baselines); 95% interval: order statistics of the median (n >= 6), else percentile bootstrap",
	"probe":               "wake-up latency probe (own locked thread, 2 ms interval) alongside every desktop run; p99 over the run",
	"probeOverhead":       "CPU desktop rate without the probe / with it - 1, paired per round",
}

// Summarize computes per-cell summaries, the probe overhead and the targets from Runs.
func (rep *Report) Summarize() {
	rep.Definitions = Definitions
	type rk struct {
		round int
		p     Phase
	}
	idx := map[rk]*Run{}
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Error != "" {
			continue
		}
		p := Phase{Kind: r.Phase, Desktop: r.Desktop, Guest: r.Guest, Policy: r.Policy, Backend: r.Backend}
		idx[rk{r.Round, p}] = r
	}
	cores := rep.Config.Cores
	rep.Cells = nil
	for _, c := range rep.Config.Cells {
		s := CellSummary{Cell: c, Kind: KindOf(c.Desktop)}
		var sl, p99, md, pa, pb, pd, idle, hv, gs, est, caps []float64
		for i := range rep.Runs {
			r := &rep.Runs[i]
			if r.Phase != PhaseBoth || r.Cell() != c {
				continue
			}
			if r.Error != "" {
				s.Errors++
				continue
			}
			alone := idx[rk{r.Round, Phase{Kind: PhaseDesktop, Desktop: c.Desktop}}]
			galone := idx[rk{r.Round, Phase{Kind: PhaseGuest, Guest: c.Guest, Backend: c.Backend, Policy: "none"}}]
			d := Derive(c.Desktop, cores, alone, r, galone)
			s.PerRound = append(s.PerRound, RoundValue{Round: r.Round, Derived: d})
			sl, p99, md = append(sl, d.Slowdown), append(p99, d.P99DeltaUs), append(md, d.MissedDelta)
			pa, pb, pd = append(pa, d.ProbeP99AloneUs), append(pb, d.ProbeP99BothUs), append(pd, d.ProbeP99BothUs-d.ProbeP99AloneUs)
			idle, hv, gs = append(idle, d.IdleShare), append(hv, d.Harvest), append(gs, d.GuestShare)
			if r.Estimate != nil {
				est = append(est, r.Estimate.Slowdown)
			}
			if len(r.CapTrace) > 0 {
				sum := 0.0
				for _, c := range r.CapTrace {
					sum += c.Cap
				}
				caps = append(caps, sum/float64(len(r.CapTrace)))
			}
		}
		s.Rounds = len(s.PerRound)
		s.Slowdown, s.Harvest, s.GuestShare, s.Estimated = MedianCI(sl), MedianCI(hv), MedianCI(gs), MedianCI(est)
		s.Cap = MedianCI(caps)
		if s.Kind == Latency {
			s.P99DeltaUs = MedianCI(p99)
		}
		if s.Kind == Frame {
			s.MissedDelta = MedianCI(md)
		}
		s.ProbeP99AloneUs, s.ProbeP99BothUs, s.ProbeP99DeltaUs = F(Median(pa)), F(Median(pb)), MedianCI(pd)
		s.IdleShare = F(Median(idle))
		rep.Cells = append(rep.Cells, s)
	}
	// Probe overhead, paired per round.
	var ov []float64
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Phase != PhaseNoProbe || r.Error != "" || r.Result == nil {
			continue
		}
		with := idx[rk{r.Round, Phase{Kind: PhaseDesktop, Desktop: r.Desktop}}]
		if with == nil || with.Result == nil {
			continue
		}
		ov = append(ov, rate(*r.Result)/rate(*with.Result)-1)
	}
	rep.ProbeOverhead = MedianCI(ov)
	var pc []float64
	for _, r := range rep.Runs {
		if r.ProbeCPU > 0 {
			pc = append(pc, r.ProbeCPU)
		}
	}
	if len(pc) > 0 {
		rep.ProbeCPU = F(Median(pc))
	}
	rep.Targets = EvalTargets(rep.Cells)
	rep.SimCoefficients = simCoefficients(rep.Cells)
}

// Wide is the cells whose slowdown interval is wider than w (or not measured yet).
func (rep *Report) Wide(w float64) []Cell {
	var out []Cell
	for _, s := range rep.Cells {
		if s.Slowdown == nil || s.Slowdown.Width() > w || math.IsNaN(s.Slowdown.Width()) {
			out = append(out, s.Cell)
		}
	}
	return out
}

// Cell is a both run's cell.
func (r *Run) Cell() Cell { return Cell{r.Desktop, r.Guest, r.Policy, r.Backend} }

// Target is one of the goals judged from the data.
type Target struct {
	Name string `json:"name"`
	Cell Cell   `json:"cell"`
	// Met on the medians; MetCI also with the intervals' unfavourable ends.
	Met    bool   `json:"met"`
	MetCI  bool   `json:"metCI"`
	Detail string `json:"detail"`
}

// EvalTargets judges the targets: CPU×CPU slowdown <= 1% with the probe's p99 up by
// at most 0.5 ms while the harvest is >= 95% of the idle CPU (every policy, every backend),
// and memory×memory <= 3% under adaptive.
func EvalTargets(cells []CellSummary) []Target {
	var out []Target
	for _, s := range cells {
		switch {
		case s.Desktop == "cpu" && s.Guest == "cpu" && s.Slowdown != nil && s.Harvest != nil && s.ProbeP99DeltaUs != nil:
			t := Target{Name: "cpu×cpu: slowdown ≤ 1%, p99 wake-up +≤ 0.5 ms, harvest ≥ 95%", Cell: s.Cell}
			t.Met = s.Slowdown.Median <= 0.01 && s.ProbeP99DeltaUs.Median <= 500 && s.Harvest.Median >= 0.95
			t.MetCI = s.Slowdown.High <= 0.01 && s.ProbeP99DeltaUs.High <= 500 && s.Harvest.Low >= 0.95
			t.Detail = fmt.Sprintf("slowdown %s, p99 %s µs, harvest %s", pct(s.Slowdown), snum(s.ProbeP99DeltaUs), pctPlain(s.Harvest))
			out = append(out, t)
		case s.Desktop == "memory" && s.Guest == "memory" && s.Policy == "adaptive" && s.Slowdown != nil:
			t := Target{Name: "memory×memory: slowdown ≤ 3% under adaptive", Cell: s.Cell}
			t.Met, t.MetCI = s.Slowdown.Median <= 0.03, s.Slowdown.High <= 0.03
			t.Detail = fmt.Sprintf("slowdown %s, harvest %s", pct(s.Slowdown), pctPlain(s.Harvest))
			out = append(out, t)
		}
	}
	return out
}

// Write writes interference.json and interference.md into dir.
func (rep *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	b = compactNumberArrays(b)
	if err := os.WriteFile(filepath.Join(dir, "interference.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "interference.md"), []byte(rep.Markdown()), 0o644)
}

var numberArray = regexp.MustCompile(`\[\s*-?[0-9][0-9.eE+-]*(?:,\s*-?[0-9][0-9.eE+-]*)*\s*\]`)

// compactNumberArrays puts arrays of numbers (the latency percentiles) on one line.
func compactNumberArrays(b []byte) []byte {
	return numberArray.ReplaceAllFunc(b, func(m []byte) []byte {
		return bytes.Join(bytes.Fields(m), nil)
	})
}

// Load reads an interference.json.
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// SimCoefficients are slowdown-against-cap curves for the harvest simulation: the
// desktop's median slowdown next to a CPU-bound guest in the idle class capped at each
// point's share of the host's CPUs (process backend). Interactive is the frame workload
// (a 60 Hz loop: typing, scrolling, video), Load the CPU-bound desktop (a compile).
type SimCoefficients struct {
	Interactive []SimPoint `json:"interactive"`
	Load        []SimPoint `json:"load"`
}

// SimPoint is one point of a curve (fractions).
type SimPoint struct {
	Cap      float64 `json:"cap"`
	Slowdown float64 `json:"slowdown"`
}

// simCoefficients takes the curves from the default policy's cells (idle class, cap 25%)
// and the cgroup-idle cells (idle class, uncapped), made non-decreasing in the cap; nil
// unless all four ran.
func simCoefficients(cells []CellSummary) *SimCoefficients {
	// A slowdown whose interval reaches 0 is not distinguishable from none: it counts as
	// 0, so that noise does not become a cost in the simulation.
	at := func(desktop, policy string) (float64, bool) {
		for _, c := range cells {
			if c.Backend == "process" && c.Desktop == desktop && c.Guest == "cpu" && c.Policy == policy && c.Slowdown != nil {
				if !(c.Slowdown.Low > 0) {
					return 0, true
				}
				return c.Slowdown.Median, true
			}
		}
		return 0, false
	}
	curve := func(desktop string) []SimPoint {
		capped, ok1 := at(desktop, "default")
		full, ok2 := at(desktop, "cgroup-idle")
		if !ok1 || !ok2 {
			return nil
		}
		return []SimPoint{{0.25, capped}, {1, math.Max(full, capped)}}
	}
	sc := &SimCoefficients{Interactive: curve("frame"), Load: curve("cpu")}
	if sc.Interactive == nil || sc.Load == nil {
		return nil
	}
	return sc
}
