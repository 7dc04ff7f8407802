// Package estimate turns a measurement Window (node-agent/interference/signals) into the
// desktop's slowdown caused by the guest, with an interval, and the guest's own slowdown.
//
// There are no hardware performance counters on the pool's PCs (nor in this VM), so the
// model uses what the kernel accounts for every task plus the memory canary:
//
//	slowdown = CPU part + memory part
//	CPU part    = desktop run-queue wait attributable to the guest / desktop CPU time
//	memory part = MemoryK × (canary ratio − 1) × desktop busy share
//
// The CPU part is what the desktop's work waited for a CPU the guest had, per unit of
// work done: a desktop task that ran 1 s and waited 10 ms behind the guest took 1% longer.
// Wait is attributed to the guest in proportion to the guest's share of the CPU time the
// desktop competed with (WaitShareWeight), because a waiting task waits behind whatever
// holds the CPU, and a desktop that contends with itself (more runnable threads than
// CPUs) is not slowed by the guest.
//
// The memory part is for interference the run queue does not show: the guest evicting
// the desktop's data from the shared last-level cache and taking memory bandwidth. The
// canary (a pointer chase over twice the L2) is 100% memory-bound, the desktop's work is
// not: MemoryK is the share of its time a typical desktop workload is memory-bound. It
// only slows the desktop while the desktop runs, hence the busy share.
//
// The constants are reasoned starting values; the interference matrix
// (node-agent/interference/matrix) measures real slowdowns next to these estimates and
// replaces them (and the error model) with fitted ones. Method names the estimator so
// that a report says what produced its number.
package estimate

import (
	"math"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// Estimate is a slowdown (fraction: 0.01 = the desktop's work took 1% longer) with its
// interval Low..High and the estimator that produced it.
type Estimate struct {
	Slowdown float64 `json:"slowdown"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	Method   string  `json:"method"`
}

// The model's constants. Variables, not constants, so that the matrix's calibration can
// set fitted values (and tests can vary them); change them only before any Desktop call.
var (
	// MemoryK: desktop slowdown per unit of canary slowdown while the desktop runs. 0.5:
	// interactive and office work spends well under half its cycles stalled on memory,
	// compilers and browsers about a third to a half; the canary spends all of them.
	MemoryK = 0.5
	// WaitShareWeight weighs the guest's CPU time against the desktop's when attributing
	// run-queue wait to the guest. 1 = a waiting desktop task is as likely to wait
	// behind a guest thread as behind a desktop thread per second of CPU each used. In
	// the idle class the guest is preempted at once, so the true weight is likely below
	// 1; the matrix fits it.
	WaitShareWeight = 1.0
	// CanaryNoise: canary ratios within this of 1 are measurement noise (frequency
	// changes, the canary's own cache misses), not interference.
	CanaryNoise = 0.03
	// MinDesktopCPU: below this many CPU seconds per second the desktop is idle: there is
	// no work to slow down, and wait/CPU would divide noise by almost nothing.
	MinDesktopCPU = 0.01
	// RelErr and AbsErr give the interval: Slowdown ± (RelErr×Slowdown + AbsErr).
	// PLACEHOLDERS until the matrix's calibration replaces them with the fitted error
	// of this estimator against measured slowdowns.
	RelErr = 0.5
	AbsErr = 0.005
)

// Method names.
const (
	MethodWait       = "run-queue wait"
	MethodWaitCanary = "run-queue wait + memory canary"
)

// Desktop estimates the desktop's slowdown over w caused by the guest.
func Desktop(w interference.Window) Estimate {
	method := MethodWait
	if w.CanaryRatio > 0 {
		method = MethodWaitCanary
	}
	if !(w.Seconds > 0) {
		return Estimate{Method: method, High: AbsErr}
	}
	dcpu := pos(w.DesktopCPUSeconds)
	busy := math.Min(dcpu/w.Seconds, 1)
	var cpuPart, memPart float64
	if dcpu/w.Seconds >= MinDesktopCPU {
		g := WaitShareWeight * pos(w.GuestCPUSeconds)
		if g+dcpu > 0 {
			cpuPart = pos(w.DesktopWaitSeconds) * g / (g + dcpu) / dcpu
		}
		if w.CanaryRatio > 0 {
			memPart = MemoryK * pos(w.CanaryRatio-1-CanaryNoise) * busy
		}
	}
	s := cpuPart + memPart
	if math.IsNaN(s) || math.IsInf(s, 0) {
		s = 0
	}
	e := RelErr*s + AbsErr
	return Estimate{Slowdown: s, Low: pos(s - e), High: s + e, Method: method}
}

// Guest is the share of its time the guest's threads lost waiting for a CPU (the
// desktop had it): steal / (CPU + steal).
func Guest(w interference.Window) float64 {
	c, s := pos(w.GuestCPUSeconds), pos(w.GuestStealSeconds)
	if c+s <= 0 {
		return 0
	}
	return s / (c + s)
}

func pos(v float64) float64 {
	if v > 0 {
		return v
	}
	return 0
}
