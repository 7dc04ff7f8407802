package matrix

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/cgroup/cgrouptest"
	"github.com/overtime-hpc/overtime/node-agent/interference/guestrun"
	"github.com/overtime-hpc/overtime/node-agent/interference/workload"
)

// TestMatrixProcessRoot runs a 2-cell matrix for real: guests as processes in cgroups,
// desktop workloads as `overtime-agent bench desktop-load` processes, the probe, the
// signal sampler and the adaptive controller; 1 s runs, 2 rounds. Needs root.
func TestMatrixProcessRoot(t *testing.T) {
	needs.Servers(t, "root (cgroups, SCHED_IDLE)")
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	parent := cgrouptest.TestParent(t, h)
	agent := buildAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	real, err := NewReal(ctx, RealOptions{Agent: agent, Parent: parent, WorkDir: t.TempDir(), Backends: []string{"process"}})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	cells := []Cell{{"cpu", "cpu", "none", "process"}, {"wakeup", "cpu", "adaptive", "process"}}
	cfg := Config{Cells: cells, Run: time.Second, Warmup: 200 * time.Millisecond, Reps: 2, Seed: 1, ProbeOverhead: true,
		Tick: 250 * time.Millisecond, Pairs: 3, Segment: 200 * time.Millisecond, AdaptiveWarmup: time.Second, Log: t.Logf}
	rep, err := Measure(ctx, cfg, real.Deps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if r.Error != "" {
			t.Errorf("%s %s: %s", r.Phase, r.Cell(), r.Error)
		}
	}
	for _, s := range rep.Cells {
		t.Logf("%s: slowdown %+v harvest %+v probe p99 %.0f → %.0f µs", s.Cell, s.Slowdown, s.Harvest, s.ProbeP99AloneUs, s.ProbeP99BothUs)
		if s.Rounds != 2 || s.Slowdown == nil || s.Harvest == nil || s.Estimated == nil {
			t.Errorf("%s: incomplete summary %+v", s.Cell, s)
		}
	}
	// The guest runs in the idle class: while other test packages keep both cores busy
	// it may get no CPU at all for a 0.6 s run, and that is the idle class working. A
	// cell whose guest made no progress in any round would be the machinery broken.
	worked := map[Cell]bool{}
	for _, r := range rep.Runs {
		if r.Phase == PhaseBoth && r.GuestWork > 0 {
			worked[r.Cell()] = true
		}
	}
	for _, c := range cells {
		if !worked[c] {
			t.Errorf("cell %s: the guest made no progress in any both run", c)
		}
	}
	for _, r := range rep.Runs {
		if r.Phase == PhaseBoth && (r.Window == nil || r.Window.Seconds <= 0 || r.Probe == nil) {
			t.Errorf("both run %s without window or probe: %+v", r.Cell(), r)
		}
		// cpu is a throughput desktop: its both runs are paired (frozen/running segments of
		// one desktop process), wakeup's are not.
		if r.Phase == PhaseBoth && (len(r.Paired) == 3) != (r.Desktop == "cpu") {
			t.Errorf("both run %s: %d pairs", r.Cell(), len(r.Paired))
		}
		if r.Policy == "adaptive" && r.Phase == PhaseBoth && len(r.CapTrace) == 0 {
			t.Errorf("adaptive run without a cap trace")
		}
	}
	// Nothing left below the parent: every guest stopped, its group removed.
	kids, _ := os.ReadDir(parent.Dir("cpu"))
	for _, k := range kids {
		if k.IsDir() {
			t.Errorf("left behind: %s", k.Name())
		}
	}
	if err := rep.Write(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestProfileProcessRoot runs a shortened calibration with the Process runner.
func TestProfileProcessRoot(t *testing.T) {
	needs.Servers(t, "root (cgroups, SCHED_IDLE)")
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	parent := cgrouptest.TestParent(t, h)
	agent := buildAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runner := &guestrun.Process{Parent: parent, Agent: agent, Dir: t.TempDir()}
	p, err := ProfileWith(ctx, Deps{RunDesktop: workload.RunDesktop}, runner, 0.01,
		ProfileOptions{Run: 500 * time.Millisecond, Pairs: 1, CapPairs: 1, Caps: []float64{0.5, 0.25}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", p)
	if p.CanaryNs <= 0 || p.WakeupP99AloneUs <= 0 || p.StartCap <= 0 || p.Cgroup == "" {
		t.Errorf("incomplete profile %+v", p)
	}
}

// buildAgent builds the static overtime-agent binary: desktop workloads and guests run
// as its `bench` subcommands (a test binary has none).
func buildAgent(t *testing.T) string {
	t.Helper()
	agent := filepath.Join(t.TempDir(), "overtime-agent")
	cmd := exec.Command("go", "build", "-o", agent, "github.com/overtime-hpc/overtime/cmd/overtime-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return agent
}
