package workload

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain makes the test binary answer DefaultStartCommand (`bench noop`) the way the
// agent binary does: exit at once, so the startup workload's default runs here too.
func TestMain(m *testing.M) {
	if slices.Equal(os.Args[1:], DefaultStartCommand[1:]) {
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const runFor = 200 * time.Millisecond

func TestDesktopWorkloads(t *testing.T) {
	for _, tc := range []struct {
		name, unit string
		// minWork: the least a 200 ms run does on any machine we run tests on, even with
		// other test binaries competing for its two cores.
		minWork   float64
		latencies bool
		minCPU    float64 // the least CPU time (s) the run's thread must show
	}{
		{"wakeup", "wakeups", 20, true, 0},
		{"frame", "frames", 5, true, 0.01},
		{"cpu", "ops", 10, false, 0.05},
		{"memory", "bytes", 100 << 20, false, 0.05},
		{"fs", "files", 100, false, 0.01},
		// /bin/true: a start of the (default) test binary takes a second under -race;
		// TestStartupDefault runs the default.
		{"startup", "starts", 2, true, 0.001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o DesktopOptions
			if tc.name == "startup" {
				o.StartCommand = []string{"/bin/true"}
			}
			r, err := o.Run(context.Background(), tc.name, runFor)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", summary(r.Workload, r.Work, r.Unit, r.Seconds, r.CPUSeconds, r.LatencyUs))
			if r.Workload != tc.name || r.Unit != tc.unit {
				t.Errorf("workload %q unit %q, want %q %q", r.Workload, r.Unit, tc.name, tc.unit)
			}
			// Seconds covers the run, not set-up; the run stops at its deadline within
			// one step of the workload (a start-up, a 1 MiB triad chunk, a frame).
			if r.Seconds < runFor.Seconds() || r.Seconds > runFor.Seconds()+0.5 {
				t.Errorf("seconds %.3f, want about %.1f", r.Seconds, runFor.Seconds())
			}
			if r.Work < tc.minWork {
				t.Errorf("work %g %s in %v, want at least %g", r.Work, r.Unit, runFor, tc.minWork)
			}
			if r.CPUSeconds < tc.minCPU || r.CPUSeconds > r.Seconds*1.05+0.05 && tc.name != "startup" {
				t.Errorf("cpu seconds %.4f of %.3f s, want at least %g and at most the wall time (one thread)", r.CPUSeconds, r.Seconds, tc.minCPU)
			}
			if tc.latencies != (len(r.LatencyUs) > 0) {
				t.Errorf("%d latencies, want some: %v", len(r.LatencyUs), tc.latencies)
			}
			for _, l := range r.LatencyUs {
				if l < 0 || l > 5e6 {
					t.Fatalf("implausible latency %g µs", l)
				}
			}
		})
	}
}

// TestStartupDefault: the default start command (this binary's `bench noop`, see TestMain)
// runs and is timed.
func TestStartupDefault(t *testing.T) {
	r, err := RunDesktop(context.Background(), "startup", runFor)
	if err != nil {
		t.Fatal(err)
	}
	if r.Work < 1 || len(r.LatencyUs) != int(r.Work) || r.LatencyUs[0] <= 0 {
		t.Errorf("%g starts, latencies %v", r.Work, r.LatencyUs)
	}
}

func summary(name string, work float64, unit string, secs, cpu float64, lat []float64) string {
	return strings.Join([]string{name, time.Duration(secs * 1e9).String(),
		"work", strings.TrimSpace(FormatProgress(work, unit)),
		"cpu", time.Duration(cpu * 1e9).String(),
		"p50", time.Duration(Percentile(lat, 50) * 1e3).String(),
		"p99", time.Duration(Percentile(lat, 99) * 1e3).String()}, " ")
}

func TestUnknownWorkloads(t *testing.T) {
	if _, err := RunDesktop(context.Background(), "nope", time.Millisecond); err == nil {
		t.Error("RunDesktop of an unknown name: no error")
	}
	if err := RunGuest(context.Background(), "nope", 1, &bytes.Buffer{}); err == nil {
		t.Error("RunGuest of an unknown name: no error")
	}
}

// TestFrameMisses: frames whose work (20 ms) is longer than the period (16.7 ms) all miss;
// frames of 1 ms on a machine with a spare CPU mostly do not.
func TestFrameMisses(t *testing.T) {
	long, err := DesktopOptions{FrameWork: 20 * time.Millisecond}.Run(context.Background(), "frame", runFor)
	if err != nil {
		t.Fatal(err)
	}
	// At least 2 frames fit in 200 ms even on a loaded machine (the tests share 2 cores).
	if long.Events < 2 || long.Missed != long.Events {
		t.Errorf("20 ms frames at 60 Hz: %d of %d missed, want all (and at least 2)", long.Missed, long.Events)
	}
	short, err := DesktopOptions{FrameWork: time.Millisecond}.Run(context.Background(), "frame", runFor)
	if err != nil {
		t.Fatal(err)
	}
	if short.Events < 10 || short.Missed > short.Events/2 {
		t.Errorf("1 ms frames at 60 Hz: %d of %d missed, want few (and at least 10 frames)", short.Missed, short.Events)
	}
	if p := Percentile(short.LatencyUs, 50); p < 500 || p > 20000 {
		t.Errorf("1 ms frames: median work time %.0f µs", p)
	}
}

func TestProgressRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		work float64
		unit string
	}{{0, "flop"}, {1.5, "bytes"}, {123456789012345, "flop"}, {3e21, "bytes"}} {
		line := FormatProgress(tc.work, tc.unit)
		if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
			t.Errorf("%q: want one line", line)
		}
		w, u, ok := ParseProgress(line)
		if !ok || w != tc.work || u != tc.unit {
			t.Errorf("ParseProgress(%q) = %g %q %v, want %g %q", line, w, u, ok, tc.work, tc.unit)
		}
	}
	for _, tc := range []struct {
		line string
		ok   bool
		work float64
	}{
		{"[    1.234] random: crng init done\rovertime-work 42 flop\r", true, 42},
		{"overtime-work 42", false, 0},
		{"overtime-work x flop", false, 0},
		{"overtime-work -1 flop", false, 0},
		{"overtime-work 1 flop extra", false, 0},
		{"hello", false, 0},
	} {
		w, _, ok := ParseProgress(tc.line)
		if ok != tc.ok || w != tc.work {
			t.Errorf("ParseProgress(%q) = %g %v, want %g %v", tc.line, w, ok, tc.work, tc.ok)
		}
	}
}

// lineRecorder collects what RunGuest writes and calls enough once it has n lines.
type lineRecorder struct {
	mu     sync.Mutex
	b      bytes.Buffer
	n      int
	enough func()
}

func (l *lineRecorder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Count(l.b.Bytes(), []byte("\n")) < l.n && bytes.Count(l.b.Bytes(), []byte("\n"))+bytes.Count(p, []byte("\n")) >= l.n {
		l.enough()
	}
	return l.b.Write(p)
}

func TestGuestWorkloads(t *testing.T) {
	for _, name := range GuestNames() {
		t.Run(name, func(t *testing.T) {
			// Stopped after the first line (after set-up, whose time varies: -race) and
			// three reports, i.e. after about 300 ms of work.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out := lineRecorder{n: 4, enough: cancel}
			o := GuestOptions{Threads: 1, Dir: t.TempDir(), IOBytes: 4 << 20, MemoryBytes: 16 << 20}
			if err := o.Run(ctx, name, &out); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.b.String(), "\n"), "\n")
			// One at the start, one per 100 ms, one at the end.
			if len(lines) < 5 || ctx.Err() != context.Canceled {
				t.Fatalf("%d progress lines (%v), want at least 5: %q", len(lines), ctx.Err(), lines)
			}
			prev := -1.0
			for _, l := range lines {
				w, u, ok := ParseProgress(l)
				if !ok || u != GuestUnit(name) || w < prev {
					t.Fatalf("line %q after work %g: want non-decreasing progress in %s", l, prev, GuestUnit(name))
				}
				prev = w
			}
			if first, _, _ := ParseProgress(lines[0]); first != 0 {
				t.Errorf("first line %q: want work 0", lines[0])
			}
			if name == "idle" && prev != 0 {
				t.Errorf("idle did work %g", prev)
			}
			if name != "idle" && prev < 1e6 {
				t.Errorf("%s: %g %s in 300 ms, want at least 1e6", name, prev, GuestUnit(name))
			}
			t.Logf("%s: %g %s", name, prev, GuestUnit(name))
			if ents, _ := os.ReadDir(o.Dir); len(ents) != 0 {
				t.Errorf("%s left %d files in its directory", name, len(ents))
			}
		})
	}
}

// TestProbeOverhead measures the probe's own cost (reported in the Probe's doc comment)
// and checks that it wakes about every interval.
func TestProbeOverhead(t *testing.T) {
	p := StartProbe(0)
	time.Sleep(time.Second) // the probe runs for this long: the test's subject, not a wait
	r := p.Stop()
	// A late wake-up skips the ticks it missed: on a machine busy with other tests the
	// probe sees fewer than one per interval, but never few.
	wantMin := 0.2 * r.Seconds / DefaultProbeInterval.Seconds()
	if r.Work < wantMin || int(r.Work) != len(r.LatencyUs) {
		t.Errorf("%g wake-ups (%d latencies) in %.3f s, want at least %.0f", r.Work, len(r.LatencyUs), r.Seconds, wantMin)
	}
	overhead := r.CPUSeconds / r.Seconds
	t.Logf("probe: %g wake-ups in %.3f s, p50 %.0f µs p99 %.0f µs, CPU %.2f ms = %.3f %% of a CPU (%.1f µs per wake-up)",
		r.Work, r.Seconds, Percentile(r.LatencyUs, 50), Percentile(r.LatencyUs, 99),
		r.CPUSeconds*1e3, overhead*100, r.CPUSeconds/r.Work*1e6)
	if overhead > 0.05 {
		t.Errorf("probe overhead %.1f %% of a CPU, want < 5 %%", overhead*100)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct{ p, want float64 }{{0, 1}, {50, 3}, {100, 5}, {99, 5}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %g, want %g", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile(nil) != 0")
	}
}
