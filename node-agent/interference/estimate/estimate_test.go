package estimate

import (
	"math"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// withModel sets the model's constants for one test and restores them.
func withModel(t *testing.T, memoryK, attribution float64) {
	t.Helper()
	k, a := MemoryK, Attribution
	MemoryK, Attribution = memoryK, attribution
	t.Cleanup(func() { MemoryK, Attribution = k, a })
}

// TestDesktop checks the model's arithmetic at round constants (the reasoned start:
// MemoryK 0.5, the attributions' geometric mean); TestFitted the fitted ones.
func TestDesktop(t *testing.T) {
	withModel(t, 0.5, 0.5)
	for _, tc := range []struct {
		name   string
		w      interference.Window
		want   float64
		method string
		low    float64 // -1: not checked
	}{
		{"nothing measured", interference.Window{}, 0, MethodWait, 0},
		{"idle desktop: no work to slow", interference.Window{Seconds: 1, DesktopCPUSeconds: 0.001, DesktopWaitSeconds: 0.5, GuestCPUSeconds: 1}, 0, MethodWait, 0},
		// 1 s of desktop CPU waited 40 ms while the guest ran 1 s: at most all of it the
		// guest's (4%), by the guest's share of the CPU half (2%): √(2%·4%) = 2.83%; the
		// low end is the share less the error (2% − 1% − 0.5%).
		{"wait behind the guest", interference.Window{Seconds: 1, DesktopCPUSeconds: 1, DesktopWaitSeconds: 0.04, GuestCPUSeconds: 1}, math.Sqrt(0.02 * 0.04), MethodWait, 0.005},
		// The desktop waited 0.5 s, the guest ran only 20 ms: at most that is the guest's
		// (2%), by share 0.98%; the low end is within the error of nothing.
		{"wait mostly the desktop's own", interference.Window{Seconds: 1, DesktopCPUSeconds: 1, DesktopWaitSeconds: 0.5, GuestCPUSeconds: 0.02}, math.Sqrt(0.02 * 0.5 * 0.02 / 1.02), MethodWait, 0},
		// The desktop contends with itself, the guest got nothing: not the guest's wait.
		{"self-contention", interference.Window{Seconds: 1, DesktopCPUSeconds: 2, DesktopWaitSeconds: 0.5}, 0, MethodWait, 0},
		// A 60 Hz frame loop: 0.15 CPU in 600 wake-ups a second, each waiting 40 µs for
		// its idle vCPU to wake: 24 ms of wait, 16% of its CPU time, all of it baseline.
		{"wake-up latency is not interference", interference.Window{Seconds: 1, DesktopCPUSeconds: 0.15, DesktopWaitSeconds: 0.024, DesktopSlices: 600, GuestCPUSeconds: 1.8}, 0, MethodWait, 0},
		// The same loop waiting 40 ms: 10 ms over the baseline of 600 × 50 µs, by the
		// upper bound 10/150, by the share 10/150 × 1.8/1.95.
		{"excess over the baseline", interference.Window{Seconds: 1, DesktopCPUSeconds: 0.15, DesktopWaitSeconds: 0.04, DesktopSlices: 600, GuestCPUSeconds: 1.8},
			math.Sqrt(0.01 / 0.15 * 0.01 / 0.15 * 1.8 / 1.95), MethodWait, -1},
		// Canary 23% slow, desktop busy half the time: 0.5 × (0.23 − 0.03) × 0.5 = 5%.
		{"memory", interference.Window{Seconds: 2, DesktopCPUSeconds: 1, CanaryRatio: 1.23, GuestCPUSeconds: 2}, 0.05, MethodWaitCanary, -1},
		{"canary noise", interference.Window{Seconds: 1, DesktopCPUSeconds: 1, CanaryRatio: 1.02}, 0, MethodWaitCanary, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Desktop(tc.w)
			if math.Abs(e.Slowdown-tc.want) > 1e-9 || e.Method != tc.method {
				t.Fatalf("Desktop = %+v, want slowdown %v by %q", e, tc.want, tc.method)
			}
			if !(e.Low <= e.Slowdown && e.Slowdown < e.High) || e.Low < 0 {
				t.Fatalf("interval %v..%v does not hold %v", e.Low, e.High, e.Slowdown)
			}
			if tc.low >= 0 && math.Abs(e.Low-tc.low) > 1e-9 {
				t.Fatalf("low end %v, want %v", e.Low, tc.low)
			}
		})
	}
}

func TestExcessWait(t *testing.T) {
	for _, tc := range []struct {
		w    interference.Window
		want float64
	}{
		{interference.Window{DesktopWaitSeconds: 0.01}, 0.01}, // no slices: no baseline
		{interference.Window{DesktopWaitSeconds: 0.01, DesktopSlices: 100}, 0.005},
		{interference.Window{DesktopWaitSeconds: 0.001, DesktopSlices: 100}, 0},
	} {
		if got := ExcessWait(tc.w); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ExcessWait(%+v) = %v, want %v", tc.w, got, tc.want)
		}
	}
}

func TestGuest(t *testing.T) {
	if g := Guest(interference.Window{GuestCPUSeconds: 3, GuestStealSeconds: 1}); g != 0.25 {
		t.Fatalf("Guest = %v, want 0.25", g)
	}
	if g := Guest(interference.Window{}); g != 0 {
		t.Fatalf("Guest of nothing = %v", g)
	}
}

// TestReported: a report's interval is the calibrated error around the estimate, never
// below 0.
func TestReported(t *testing.T) {
	r := Reported(Estimate{Slowdown: 0.04, Low: 0.03, High: 0.05, Method: MethodWait})
	if d := ReportRelErr*0.04 + ReportAbsErr; math.Abs(r.Low-math.Max(0, 0.04-d)) > 1e-12 || math.Abs(r.High-(0.04+d)) > 1e-12 || r.Slowdown != 0.04 || r.Method != MethodWait {
		t.Errorf("Reported = %+v", r)
	}
	if r := Reported(Estimate{}); r.Low != 0 || !(r.High > 0) {
		t.Errorf("Reported(no slowdown) = %+v, want 0..ReportAbsErr", r)
	}
}
