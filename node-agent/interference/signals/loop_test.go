package signals

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference/controller"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
)

// The whole loop on real processes, as the agent runs it: a desktop task and a guest CPU
// hog share CPU 0; the signals measure, the estimator estimates, the controller caps the
// guest's cgroup (cpu.max). A guest at normal weight hurts the desktop, and the cap falls
// to the minimum within a few ticks; the same guest in the idle class (cpu.idle, as the
// agent runs guests) does not, and the cap climbs.
func TestClosedLoop(t *testing.T) {
	needs.Servers(t, "root (cgroups)", "seconds of CPU-bound processes")
	for _, idle := range []bool{false, true} {
		name := map[bool]string{false: "normal weight", true: "idle class"}[idle]
		t.Run(name, func(t *testing.T) {
			// A hog that did not run cannot hurt the desktop, and the controller rightly
			// leaves it uncapped: the machine's other work (a parallel package's QEMU)
			// starved it (CI: 4 ms of CPU in its last second, uncapped). Such a round
			// proves nothing either way and is run again, twice at most; a hog that ran
			// and was not capped fails at once.
			for round := 1; ; round++ {
				starved := closedLoopRound(t, name, idle)
				if !starved || round == 3 {
					if starved {
						t.Errorf("%s: the guest's hog hardly ran in %d rounds: the machine was too busy to test the loop", name, round)
					}
					return
				}
				t.Logf("%s: round %d: the guest's hog hardly ran (the machine's other work): again", name, round)
			}
		})
	}
}

// closedLoopRound is one round of TestClosedLoop; starved reports a normal-weight round
// whose hog hardly ran (then nothing was checked).
func closedLoopRound(t *testing.T, name string, idle bool) (starved bool) {
	g := guestGroup(t)
	// Gone at the round's end, with its hog: a next round starts on a quiet CPU 0 (the
	// test's cleanups run again at its end, harmlessly).
	defer func() { g.Kill(context.Background()); g.Remove() }()
	if err := g.SetIdle(idle); err != nil {
		t.Fatalf("cpu.idle (the agent runs guests in the idle class; the kernel must have it): %v", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var desk []int
	m := NewMonitor(MonitorConfig{Guest: func() *cgroup.Group { return g }, DesktopPIDs: func() []int { return desk }})
	defer m.scan.close()
	spin := helper(t, "spin")
	defer func() { spin.Process.Kill(); spin.Wait() }()
	desk = []int{spin.Process.Pid}
	hog := helper(t, "spin")
	defer func() { hog.Process.Kill(); hog.Wait() }()
	if err := g.AddProc(hog.Process.Pid); err != nil {
		t.Fatal(err)
	}
	c := controller.New(controller.Config{Target: 0.01, StartCap: 0.25, IncreaseHold: 500 * time.Millisecond})
	host := float64(runtime.NumCPU())
	apply := func(cp float64) {
		var err error
		if cp >= 1 {
			err = g.ClearCPUMax()
		} else {
			err = g.SetCPUMax(cp * host)
		}
		if err != nil {
			t.Fatalf("cap %.3f: %v", cp, err)
		}
	}
	apply(c.Owner(time.Now(), true))
	m.Sample(time.Now())
	prev := m.Snapshot()
	// The verdict comes after 3 s at the earliest, and the loop goes on to 10 s
	// while it does not hold: the test machine's other work (parallel test
	// packages) also delays the desktop task, and the controller rightly backs
	// off for that too; what must hold is where the loop settles.
	settled := func(guestCPU time.Duration) bool {
		if idle {
			return c.Cap() > 0.25
		}
		return c.Cap() <= 0.1 && guestCPU <= 300*time.Millisecond
	}
	var last []estimate.Estimate // the last second's
	var cpu []time.Duration      // the guest's CPU per tick, the last second's
	var guestCPU time.Duration
	for i := 0; i < 100; i++ { // 100 ms ticks
		time.Sleep(100 * time.Millisecond) // the tick, not synchronisation
		now := time.Now()
		m.Sample(now)
		cur := m.Snapshot()
		e := estimate.Desktop(WindowOf(prev, cur))
		last = append(last, e)
		cpu = append(cpu, cur.GuestCPU-prev.GuestCPU)
		if len(last) > 10 {
			last, cpu = last[1:], cpu[1:]
		}
		guestCPU = 0
		for _, d := range cpu {
			guestCPU += d
		}
		if testing.Verbose() {
			w := WindowOf(prev, cur)
			t.Logf("tick %2d: desktop cpu %.3f wait %.3f, guest cpu %.4f steal %.3f → slowdown %.4f, cap %.3f",
				i, w.DesktopCPUSeconds, w.DesktopWaitSeconds, w.GuestCPUSeconds, w.GuestStealSeconds, e.Slowdown, c.Cap())
		}
		prev = cur
		apply(c.Step(now, e, true))
		if i >= 29 && settled(guestCPU) {
			break
		}
	}
	q, _ := g.CPUMax()
	t.Logf("%s: final cap %.3f (cpu.max %v CPUs), guest CPU over the last second %v, last estimates %.4f…%.4f",
		name, c.Cap(), q, guestCPU, last[0].Slowdown, last[len(last)-1].Slowdown)
	if !idle && c.Cap() > 0.1 && guestCPU < 50*time.Millisecond {
		return true
	}
	if !idle {
		if c.Cap() > 0.1 {
			t.Errorf("a normal-weight hog next to the desktop: cap %.3f after up to 10 s, want ≤ 0.1", c.Cap())
		}
		// Uncapped, the hog takes half of CPU 0 (500 ms a second). Capped at 0.1
		// CPU it was measured at ~210 ms here: CFS hands out quota in per-CPU
		// slices, which overshoot a 10 ms quota.
		if guestCPU > 300*time.Millisecond {
			t.Errorf("the capped guest still used %v of the last second", guestCPU)
		}
	} else if c.Cap() <= 0.25 {
		t.Errorf("an idle-class hog: cap %.3f after up to 10 s, want it above the start (0.25): the desktop does not suffer", c.Cap())
	}
	return false
}
