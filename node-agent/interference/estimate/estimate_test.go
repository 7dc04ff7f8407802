package estimate

import (
	"math"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

func TestDesktop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		w      interference.Window
		want   float64
		method string
	}{
		{"nothing measured", interference.Window{}, 0, MethodWait},
		{"idle desktop: no work to slow", interference.Window{Seconds: 1, DesktopCPUSeconds: 0.001, DesktopWaitSeconds: 0.5, GuestCPUSeconds: 1}, 0, MethodWait},
		// 1 s of desktop CPU waited 20 ms; the guest had as much CPU as the desktop: half
		// the wait is the guest's → 1%.
		{"wait shared with the guest", interference.Window{Seconds: 1, DesktopCPUSeconds: 1, DesktopWaitSeconds: 0.02, GuestCPUSeconds: 1}, 0.01, MethodWait},
		// The desktop contends with itself, the guest got nothing: not the guest's wait.
		{"self-contention", interference.Window{Seconds: 1, DesktopCPUSeconds: 2, DesktopWaitSeconds: 0.5}, 0, MethodWait},
		// Canary 23% slow, desktop busy half the time: 0.5 × (0.23 − 0.03) × 0.5 = 5%.
		{"memory", interference.Window{Seconds: 2, DesktopCPUSeconds: 1, CanaryRatio: 1.23, GuestCPUSeconds: 2}, 0.05, MethodWaitCanary},
		{"canary noise", interference.Window{Seconds: 1, DesktopCPUSeconds: 1, CanaryRatio: 1.02}, 0, MethodWaitCanary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Desktop(tc.w)
			if math.Abs(e.Slowdown-tc.want) > 1e-9 || e.Method != tc.method {
				t.Fatalf("Desktop = %+v, want slowdown %v by %q", e, tc.want, tc.method)
			}
			if !(e.Low <= e.Slowdown && e.Slowdown < e.High) || e.Low < 0 {
				t.Fatalf("interval %v..%v does not hold %v", e.Low, e.High, e.Slowdown)
			}
		})
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
