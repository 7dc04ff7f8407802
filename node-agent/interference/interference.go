// Package interference holds what the parts of Overtime's interference measurement and
// control share (docs/interference.md): a workload run's Result, a guest under test
// (Guest, Runner), and a measurement Window that the estimator turns into a desktop
// slowdown.
//
// The subpackages, one question each:
//   - workload: the desktop workloads and probes (wake-up latency, frame pacing, CPU,
//     memory bandwidth, file system, application start) and the guest workloads (CPU,
//     memory, I/O, idle) that `overtime-agent bench guest-load` runs inside a guest;
//   - guestrun: starting a guest workload in a real guest (a process in its own cgroup,
//     the container backend, QEMU) and reading its progress;
//   - signals: what the agent can observe of the desktop's suffering on a running PC
//     (desktop run-queue wait, the memory canary);
//   - estimate: a Window of signals → the desktop's slowdown with its interval;
//   - controller: the adaptive feedback loop that sets the guest's CPU cap;
//   - matrix: `overtime-agent bench interference`, desktop × guest × isolation policy;
//   - calibrate: the short per-host run whose wire.InterferenceProfile the site manager
//     keeps.
package interference

import (
	"context"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
)

// Result is one run of a workload.
type Result struct {
	Workload string  `json:"workload"`
	Seconds  float64 `json:"seconds"` // wall time of the run
	// Work done, in Unit (ops, bytes, files, starts, frames, flop): throughput = Work/Seconds.
	Work float64 `json:"work"`
	Unit string  `json:"unit"`
	// CPUSeconds: CPU time the workload's threads used (getrusage of its threads).
	CPUSeconds float64 `json:"cpuSeconds"`
	// LatencyUs: per-event latencies in microseconds for latency workloads (wake-up
	// overshoot, frame work time, start-up time); nil for throughput workloads.
	LatencyUs []float64 `json:"latencyUs,omitempty"`
	// Missed: deadlines missed (frame pacing), of Events.
	Missed int `json:"missed,omitempty"`
	Events int `json:"events,omitempty"`
}

// Guest is a guest workload running in a real guest on this machine.
type Guest interface {
	// Progress is the guest workload's cumulative work so far (in its Unit), as it last
	// reported it; the matrix takes differences over a measurement phase.
	Progress() (float64, error)
	// Group is the cgroup all of the guest's host processes are in: policies set cpu.idle,
	// cpu.max and the freezer there.
	Group() *cgroup.Group
	// PIDs are the host PIDs of the guest's processes (policies set nice and SCHED_IDLE
	// on every thread of them).
	PIDs() ([]int, error)
	// Stop ends the guest and removes what Start made.
	Stop(ctx context.Context) error
}

// Runner starts guest workloads in one kind of guest (process, container, qemu).
type Runner interface {
	Name() string
	// Start starts workload (a workload.GuestNames name) with threads worker threads and
	// returns once the workload reports progress (it is warm).
	Start(ctx context.Context, workload string, threads int) (Guest, error)
}

// Window is what the agent's signals measured over an interval (a controller tick, a
// job, one matrix run): the estimator's input.
type Window struct {
	Seconds float64 `json:"seconds"`
	// DesktopCPUSeconds and DesktopWaitSeconds: CPU time of the desktop's tasks (every
	// task outside the guest) and the time they were runnable but waited for a CPU.
	DesktopCPUSeconds  float64 `json:"desktopCPUSeconds"`
	DesktopWaitSeconds float64 `json:"desktopWaitSeconds"`
	// DesktopSlices: how many timeslices the desktop's tasks ran (schedstat's pcount,
	// about one per wake-up; 0 = not measured, as in the cgroup v2 group mode). The
	// estimator subtracts a per-slice baseline wait (the wake-up latency of an idle CPU,
	// which exists without any guest) from DesktopWaitSeconds.
	DesktopSlices float64 `json:"desktopSlices,omitempty"`
	// CanaryRatio: the memory canary's median time over the interval divided by its
	// calibrated baseline (1 = no memory interference; 0 = not measured).
	CanaryRatio float64 `json:"canaryRatio"`
	// The guest's CPU time and steal (run-queue wait of its threads).
	GuestCPUSeconds   float64 `json:"guestCPUSeconds"`
	GuestStealSeconds float64 `json:"guestStealSeconds"`
	// OwnerActiveSeconds: how much of the interval someone was at the desk.
	OwnerActiveSeconds float64 `json:"ownerActiveSeconds"`
}

// Clock lets pure parts (controller) be driven by recorded traces.
type Clock func() time.Time
