package matrix

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestQuantiles(t *testing.T) {
	xs := []float64{5, 1, 3, math.NaN(), 2, 4}
	if m := Median(xs); m != 3 {
		t.Errorf("median %v", m)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("even median %v", m)
	}
	if q := Quantile([]float64{0, 10}, 0.9); !near(q, 9) {
		t.Errorf("q90 %v", q)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("median of nothing")
	}
	s := Summarize([]float64{1, 2, 3, 4, 100})
	if s.N != 5 || s.P50 != 3 || s.Max != 100 {
		t.Errorf("summary %+v", s)
	}
}

func TestOrderRank(t *testing.T) {
	// Known ranks of the distribution-free 95% interval of the median.
	for n, k := range map[int]int{5: 0, 6: 1, 8: 1, 9: 2, 10: 2, 12: 3, 20: 6} {
		if got := orderRank(n); got != k {
			t.Errorf("orderRank(%d) = %d, want %d", n, got, k)
		}
	}
}

func TestMedianCI(t *testing.T) {
	if MedianCI(nil) != nil {
		t.Error("CI of nothing")
	}
	c := MedianCI([]float64{7})
	if c.Method != "single" || c.Low != 7 || c.High != 7 {
		t.Errorf("single %+v", c)
	}
	c = MedianCI([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	if c.Method != "order" || c.Low != 2 || c.High != 9 || c.Median != 5.5 {
		t.Errorf("order %+v", c)
	}
	five := []float64{0.01, 0.03, 0.02, 0.05, 0.04}
	c = MedianCI(five)
	if c.Method != "bootstrap" || c.Median != 0.03 || c.Low < 0.01 || c.High > 0.05 || c.Low > c.Median || c.High < c.Median {
		t.Errorf("bootstrap %+v", c)
	}
	if d := MedianCI(five); *d != *c {
		t.Error("bootstrap not deterministic")
	}
	// Coverage of the order interval on normal samples: at least 95% (n = 9: 96.1%).
	r := rand.New(rand.NewPCG(3, 4))
	hit := 0
	const trials = 4000
	for i := 0; i < trials; i++ {
		xs := make([]float64, 9)
		for j := range xs {
			xs[j] = r.NormFloat64()
		}
		if c := MedianCI(xs); c.Low <= 0 && c.High >= 0 {
			hit++
		}
	}
	if cov := float64(hit) / trials; cov < 0.945 {
		t.Errorf("coverage %.3f", cov)
	}
}

func TestRoundPhasesCoverEveryCell(t *testing.T) {
	cells := append(Presets["standard"].Cells, Cell{"cpu", "cpu", "none", "process"}) // duplicate
	phases := RoundPhases(cells, true)
	seen := map[Phase]int{}
	for _, p := range phases {
		seen[p]++
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("phase %+v %d times", p, n)
		}
	}
	for _, c := range cells {
		for _, p := range []Phase{{Kind: PhaseBoth, Desktop: c.Desktop, Guest: c.Guest, Policy: c.Policy, Backend: c.Backend},
			{Kind: PhaseDesktop, Desktop: c.Desktop}, {Kind: PhaseGuest, Guest: c.Guest, Backend: c.Backend, Policy: "none"}} {
			if seen[p] != 1 {
				t.Errorf("cell %s: phase %+v missing", c, p)
			}
		}
	}
	if seen[Phase{Kind: PhaseNoProbe, Desktop: "cpu"}] != 1 {
		t.Error("probe overhead phase missing")
	}
	nboth := 0
	for _, p := range phases {
		if p.Kind == PhaseBoth {
			nboth++
		}
	}
	if nboth != len(cells)-1 {
		t.Errorf("%d both phases for %d distinct cells", nboth, len(cells)-1)
	}
	// Baselines shared: 6 desktops alone, guest alone per (backend, guest).
	nd, ng := 0, 0
	for _, p := range phases {
		switch p.Kind {
		case PhaseDesktop:
			nd++
		case PhaseGuest:
			ng++
		}
	}
	if nd != 6 || ng != 6 {
		t.Errorf("%d desktop-alone, %d guest-alone baselines; want 6, 6", nd, ng)
	}
	// Shuffle: a permutation, different orders for different rounds.
	r := rand.New(rand.NewPCG(1, 1))
	a, b := Shuffle(phases, r), Shuffle(phases, r)
	if len(a) != len(phases) {
		t.Fatal("shuffle lost phases")
	}
	same := true
	cnt := map[Phase]int{}
	for i := range a {
		cnt[a[i]]++
		same = same && a[i] == b[i]
	}
	if same {
		t.Error("two rounds in the same order")
	}
	for p := range seen {
		if cnt[p] != 1 {
			t.Errorf("shuffle: %+v %d times", p, cnt[p])
		}
	}
}

func TestStandardPreset(t *testing.T) {
	cs := Presets["standard"].Cells
	if len(cs) != 58 {
		t.Errorf("%d standard cells", len(cs))
	}
	cfg := Config{Cells: cs, Run: Presets["standard"].Run, Warmup: Presets["standard"].Warmup, ProbeOverhead: true, Keep: map[string]bool{"qemu": true}}
	d, what := EstimateDuration(cfg)
	t.Logf("standard: %v (%s)", d, what)
	if d < 10*time.Minute || d > 30*time.Minute {
		t.Errorf("standard preset estimated at %v", d)
	}
}

func TestDerive(t *testing.T) {
	res := func(work, secs, cpu float64, lat ...float64) *interference.Result {
		return &interference.Result{Work: work, Seconds: secs, CPUSeconds: cpu, LatencyUs: lat, Events: 100}
	}
	alone := &Run{Result: res(1000, 2, 1), Probe: &Quantiles{P99: 100}} // 500/s, half of 2 cores... 1 CPU-s of 4
	both := &Run{Result: res(900, 2, 1), Probe: &Quantiles{P99: 350}, GuestWork: 1200, GuestSeconds: 2}
	galone := &Run{GuestWork: 4000, GuestSeconds: 2} // 2000/s
	d := Derive("cpu", 2, alone, both, galone)
	if !near(d.Slowdown, 1000.0/900-1) {
		t.Errorf("slowdown %v", d.Slowdown)
	}
	if !near(d.IdleShare, 0.75) {
		t.Errorf("idle share %v", d.IdleShare)
	}
	// guest did 1200 in 2 s; alone 4000 in 2 s → share 0.3; idle share 0.75 → harvest 0.4.
	if !near(d.GuestShare, 0.3) || !near(d.Harvest, 0.4) {
		t.Errorf("share %v harvest %v", d.GuestShare, d.Harvest)
	}
	if d.ProbeP99AloneUs != 100 || d.ProbeP99BothUs != 350 {
		t.Errorf("probe %v %v", d.ProbeP99AloneUs, d.ProbeP99BothUs)
	}
	// Latency: ratio of medians and p99 delta.
	la := &Run{Result: res(0, 2, 0.1), DesktopLatency: Summarize([]float64{10, 20, 30})}
	lb := &Run{Result: res(0, 2, 0.1), DesktopLatency: Summarize([]float64{20, 30, 40})}
	d = Derive("wakeup", 2, la, lb, galone)
	if !near(d.Slowdown, 0.5) || !near(d.P99DeltaUs, lb.DesktopLatency.P99-la.DesktopLatency.P99) {
		t.Errorf("latency %+v", d)
	}
	// Frame: work-time ratio and missed share delta.
	fa := &Run{Result: &interference.Result{Seconds: 2, Events: 100, Missed: 2}, DesktopLatency: Summarize([]float64{4000})}
	fb := &Run{Result: &interference.Result{Seconds: 2, Events: 100, Missed: 7}, DesktopLatency: Summarize([]float64{5000})}
	d = Derive("frame", 2, fa, fb, nil)
	if !near(d.Slowdown, 0.25) || !near(d.MissedDelta, 0.05) || !math.IsNaN(d.Harvest) {
		t.Errorf("frame %+v", d)
	}
	// Idle guest (no work alone): no harvest; desktop filling every core: idle share floored.
	if h, _ := Harvest(both, &Run{GuestWork: 0, GuestSeconds: 2}, 0.5); !math.IsNaN(h) {
		t.Errorf("harvest of an idle guest %v", h)
	}
	if s := IdleShare(interference.Result{Seconds: 1, CPUSeconds: 2.5}, 2); s != minIdleShare {
		t.Errorf("idle share %v", s)
	}
	if d := Derive("cpu", 2, nil, both, galone); !math.IsNaN(d.Slowdown) {
		t.Error("slowdown without baseline")
	}
}

func TestPolicyReset(t *testing.T) {
	ctx := context.Background()
	for _, p := range Policies {
		c, th := &fakeControl{}, newFakeThreads()
		if err := applyStatic(ctx, p, c, th, []int{100, 200}, 2); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		switch p {
		case "nice19":
			if th.nice[101] != 19 || th.nice[200] != 19 {
				t.Errorf("nice19: %v", th.nice)
			}
		case "sched-idle":
			if !th.idle[100] || !th.idle[201] {
				t.Errorf("sched-idle: %v", th.idle)
			}
		case "cgroup-idle", "adaptive":
			if !c.idle || c.max != 0 {
				t.Errorf("%s: idle %v max %v", p, c.idle, c.max)
			}
		case "cap":
			if c.max != 0.5 || c.idle {
				t.Errorf("cap: %v", c.max)
			}
		case "suspend":
			if !c.frozen {
				t.Error("suspend: not frozen")
			}
		case "default":
			if !c.idle || c.max != 0.5 || th.nice[100] != 19 {
				t.Errorf("default: idle %v max %v nice %v", c.idle, c.max, th.nice)
			}
		}
		if err := resetPolicy(ctx, c, th, []int{100, 200}); err != nil {
			t.Fatal(err)
		}
		if c.idle || c.max != 0 || c.frozen {
			t.Errorf("%s: after reset idle %v max %v frozen %v", p, c.idle, c.max, c.frozen)
		}
		for _, tid := range []int{100, 101, 200, 201} {
			if th.nice[tid] != 0 || th.idle[tid] {
				t.Errorf("%s: after reset thread %d nice %d idle %v", p, tid, th.nice[tid], th.idle[tid])
			}
		}
	}
	if err := applyStatic(ctx, "bogus", &fakeControl{}, newFakeThreads(), nil, 2); err == nil {
		t.Error("unknown policy accepted")
	}
}

func TestMeasureFake(t *testing.T) {
	w := newWorld()
	cells := []Cell{{"cpu", "cpu", "none", "process"}, {"wakeup", "cpu", "adaptive", "process"},
		{"cpu", "cpu", "suspend", "qemu"}, {"frame", "idle", "default", "process"}}
	cfg := Config{Cells: cells, Run: 60 * time.Millisecond, Warmup: 10 * time.Millisecond, AdaptiveWarmup: 50 * time.Millisecond, Reps: 3, Seed: 7,
		ProbeOverhead: true, Keep: map[string]bool{"qemu": true}, Tick: 15 * time.Millisecond, Cores: 2}
	rep, err := Measure(context.Background(), cfg, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	if w.guests != 0 {
		t.Errorf("%d guests left running", w.guests)
	}
	// qemu kept: started once; process guests once per run (3 rounds × (2 guest-alone + 3 both)).
	if w.started != 1+3*(2+3) {
		t.Errorf("%d guest starts", w.started)
	}
	for _, r := range rep.Runs {
		if r.Error != "" {
			t.Errorf("run %+v: %s", r, r.Error)
		}
	}
	if len(rep.Cells) != len(cells) {
		t.Fatalf("%d summaries", len(rep.Cells))
	}
	for _, s := range rep.Cells {
		if s.Rounds != 3 || s.Slowdown == nil {
			t.Errorf("cell %s: %d rounds, slowdown %v", s.Cell, s.Rounds, s.Slowdown)
		}
		switch s.Cell {
		case cells[0]:
			if !near(s.Slowdown.Median, 1000.0/900-1) || s.Harvest == nil || s.ProbeP99BothUs <= s.ProbeP99AloneUs {
				t.Errorf("cpu×cpu %+v %+v %v %v", s.Slowdown, s.Harvest, s.ProbeP99AloneUs, s.ProbeP99BothUs)
			}
		case cells[2]:
			if s.GuestShare == nil || s.GuestShare.Median > 0.05 {
				t.Errorf("suspend: guest share %+v", s.GuestShare)
			}
		case cells[3]:
			if s.MissedDelta == nil || s.Harvest == nil {
				t.Errorf("frame×idle: %+v", s)
			}
		}
	}
	var adaptive *Run
	for i, r := range rep.Runs {
		if r.Phase == PhaseBoth && r.Policy == "adaptive" {
			adaptive = &rep.Runs[i]
		}
		if r.Phase == PhaseBoth && (r.Window == nil || r.Estimate == nil) {
			t.Errorf("both run without window/estimate: %+v", r)
		}
		if r.Desktop == "wakeup" && r.Phase != PhaseGuest && (len(r.ProbePct) != 101 || len(r.DesktopPct) != 101) {
			t.Errorf("wakeup run without latency percentiles")
		}
	}
	if adaptive == nil || len(adaptive.CapTrace) == 0 {
		t.Fatal("adaptive run without cap trace")
	}
	if rep.ProbeOverhead == nil {
		t.Error("no probe overhead")
	}
	dir := t.TempDir()
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(filepath.Join(dir, "interference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != len(rep.Runs) || len(back.Cells) != len(rep.Cells) {
		t.Error("JSON round trip lost runs")
	}
	// Summarize of the loaded runs gives the same summaries.
	a, _ := json.Marshal(back.Cells)
	back.Summarize()
	b, _ := json.Marshal(back.Cells)
	if string(a) != string(b) {
		t.Error("summaries differ after reloading")
	}
}

func TestMarkdownGolden(t *testing.T) {
	rep := goldenReport()
	got := rep.Markdown()
	path := filepath.Join("testdata", "interference.md")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Markdown differs from %s (go test -run Golden -update):\n%s", path, got)
	}
}

// goldenReport is a fixed report built from synthetic runs through Summarize.
func goldenReport() *Report {
	cells := []Cell{{"cpu", "cpu", "none", "process"}, {"cpu", "cpu", "adaptive", "process"},
		{"memory", "memory", "adaptive", "process"}, {"wakeup", "cpu", "cgroup-idle", "process"},
		{"frame", "cpu", "suspend", "qemu"}}
	rep := &Report{Started: time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC),
		Env: Env{Kernel: "6.1.0-test", CPUModel: "Test CPU", Cores: 2, SMT: "0", Cgroup: "v1 hybrid", CPUIdle: true,
			Backends: []string{"process", "qemu"}, Sched: map[string]string{"sched_autogroup_enabled": "1"}, PSI: true, LoadAvg: "0.1"},
		Config: ConfigRecord{Cells: cells, RunSeconds: 3, WarmupSeconds: 0.5, Reps: 6, Cores: 2, Seed: 42, Policies: PolicyDoc,
			Baseline: "desktop alone: no guest"}}
	for round := 0; round < 6; round++ {
		f := float64(round)
		add := func(r Run) { r.Round = round; rep.Runs = append(rep.Runs, r) }
		res := func(work, cpu float64, lat ...float64) *interference.Result {
			return &interference.Result{Seconds: 3, Work: work, CPUSeconds: cpu, LatencyUs: lat, Events: 180, Missed: round}
		}
		add(Run{Phase: PhaseDesktop, Desktop: "cpu", Result: res(3000, 3), Probe: &Quantiles{P99: 80 + f}})
		add(Run{Phase: PhaseNoProbe, Desktop: "cpu", Result: res(3003+f, 3)})
		add(Run{Phase: PhaseDesktop, Desktop: "memory", Result: res(600, 3), Probe: &Quantiles{P99: 90}})
		add(Run{Phase: PhaseDesktop, Desktop: "wakeup", Result: res(0, 0.3), DesktopLatency: &Quantiles{P50: 60, P99: 120 + f}, Probe: &Quantiles{P99: 70}})
		add(Run{Phase: PhaseDesktop, Desktop: "frame", Result: res(0, 1.5), DesktopLatency: &Quantiles{P50: 4000, P99: 6000}, Probe: &Quantiles{P99: 75}})
		add(Run{Phase: PhaseGuest, Guest: "cpu", Backend: "process", Policy: "none", GuestWork: 6000, GuestSeconds: 3})
		add(Run{Phase: PhaseGuest, Guest: "memory", Backend: "process", Policy: "none", GuestWork: 1200, GuestSeconds: 3})
		add(Run{Phase: PhaseGuest, Guest: "cpu", Backend: "qemu", Policy: "none", GuestWork: 300, GuestSeconds: 3})
		add(Run{Phase: PhaseBoth, Desktop: "cpu", Guest: "cpu", Policy: "none", Backend: "process", Result: res(1500+10*f, 3),
			Probe: &Quantiles{P99: 4000 + 100*f}, GuestWork: 3000, GuestSeconds: 3, Estimate: &Estimate{Slowdown: 0.9}})
		add(Run{Phase: PhaseBoth, Desktop: "cpu", Guest: "cpu", Policy: "adaptive", Backend: "process", Result: res(2990-f, 3),
			Probe: &Quantiles{P99: 200 + f}, GuestWork: 2900 + 10*f, GuestSeconds: 3, Estimate: &Estimate{Slowdown: 0.004}})
		add(Run{Phase: PhaseBoth, Desktop: "memory", Guest: "memory", Policy: "adaptive", Backend: "process", Result: res(580-f, 3),
			Probe: &Quantiles{P99: 150}, GuestWork: 300, GuestSeconds: 3, Estimate: &Estimate{Slowdown: 0.02}})
		add(Run{Phase: PhaseBoth, Desktop: "wakeup", Guest: "cpu", Policy: "cgroup-idle", Backend: "process", Result: res(0, 0.3),
			DesktopLatency: &Quantiles{P50: 66, P99: 400 + 10*f}, Probe: &Quantiles{P99: 300}, GuestWork: 5400, GuestSeconds: 3})
		add(Run{Phase: PhaseBoth, Desktop: "frame", Guest: "cpu", Policy: "suspend", Backend: "qemu", Result: res(0, 1.5),
			DesktopLatency: &Quantiles{P50: 4040, P99: 6000}, Probe: &Quantiles{P99: 90}, GuestWork: 0, GuestSeconds: 3})
	}
	rep.Summarize()
	return rep
}

func TestProfileFake(t *testing.T) {
	w := newWorld()
	d := w.deps()
	p, err := ProfileWith(context.Background(), d, fakeRunner{w, "process"}, 0.01,
		ProfileOptions{Run: 30 * time.Millisecond, Pairs: 2, CapPairs: 1, Caps: []float64{0.5, 0.25}, Cores: 2, CanaryNs: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", p)
	// The fake desktop runs 10% slower next to any running guest: no cap meets 1%.
	if !near(p.CPUSlowdown, 1000.0/900-1) || !near(p.MemorySlowdown, 1000.0/900-1) || p.StartCap != 0.25 || p.Harvest <= 0 {
		t.Errorf("profile %+v", p)
	}
	if p.WakeupP99GuestUs <= p.WakeupP99AloneUs || p.CanaryNs != 1e6 || p.Backend != "process" || p.CPUs == 0 {
		t.Errorf("profile %+v", p)
	}
	if w.guests != 0 {
		t.Errorf("%d guests left", w.guests)
	}
}

func TestMeasureAdapt(t *testing.T) {
	w := newWorld()
	w.jitter = rand.New(rand.NewPCG(5, 6))
	cells := []Cell{{"cpu", "cpu", "none", "process"}, {"wakeup", "cpu", "none", "process"}}
	cfg := Config{Cells: cells, Run: 20 * time.Millisecond, Warmup: -1, AdaptiveWarmup: -1, Reps: 3, MaxReps: 6, Adapt: true, MaxWidth: 0.01, Seed: 3, Cores: 2}
	rep, err := Measure(context.Background(), cfg, w.deps())
	if err != nil {
		t.Fatal(err)
	}
	// cpu×cpu's slowdown is noisy (±5%): it gets every extra round; wakeup's is not.
	for _, s := range rep.Cells {
		want := 3
		if s.Desktop == "cpu" {
			want = 6
		}
		if s.Rounds != want {
			t.Errorf("%s: %d rounds, want %d (CI %+v)", s.Cell, s.Rounds, want, s.Slowdown)
		}
	}
}
