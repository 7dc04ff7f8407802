package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Policies are the isolation policies, in report order.
var Policies = []string{"none", "nice19", "sched-idle", "cgroup-idle", "cap", "suspend", "default", "adaptive"}

// PolicyDoc says what each policy does to a running guest.
var PolicyDoc = map[string]string{
	"none":        "nice 0, SCHED_OTHER, no cgroup limits",
	"nice19":      "setpriority(19) on every thread of the guest's processes",
	"sched-idle":  "SCHED_IDLE on every thread of the guest's processes",
	"cgroup-idle": "the guest's cgroup in the idle class (cpu.idle 1; CPUWeight=idle)",
	"cap":         "hard cap: cpu.max = 0.25 × cores",
	"suspend":     "HTCondor-style: guest frozen while the desktop runs (the best case of its keyboard poll: frozen before the desktop starts)",
	"default":     "today's agent default: idle class (cpu.idle) + nice 19 as the agent starts guests, then cpu.max = 25% of the cores while the owner is active (the whole desktop run)",
	"adaptive":    "idle class + the adaptive controller: signals → estimate → controller.Step each tick, owner active, cpu.max = cap × cores",
}

// control is what a policy sets on the guest's cgroup (*cgroup.Group).
type control interface {
	SetIdle(on bool) error
	SetCPUMax(cpus float64) error
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
}

// threadOps sets per-thread scheduling (the real one: /proc and syscalls).
type threadOps interface {
	Threads(pid int) ([]int, error)
	SetNice(tid, nice int) error
	SetIdleSched(tid int, idle bool) error
}

type osThreads struct{}

func (osThreads) Threads(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

func (osThreads) SetNice(tid, nice int) error {
	return unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
}

func (osThreads) SetIdleSched(tid int, idle bool) error {
	pol := uint32(0) // SCHED_OTHER (SCHED_NORMAL)
	if idle {
		pol = unix.SCHED_IDLE
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: pol}
	return unix.SchedSetAttr(tid, &attr, 0)
}

// eachThread runs f on every thread of pids; threads that exit meanwhile are skipped.
func eachThread(ops threadOps, pids []int, f func(tid int) error) error {
	var errs []error
	for _, pid := range pids {
		tids, err := ops.Threads(pid)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		for _, tid := range tids {
			if err := f(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("thread %d of %d: %w", tid, pid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// applyStatic applies a policy's fixed settings, everything but the adaptive controller's
// ticks; suspend freezes the guest here, before the desktop's warm-up starts.
func applyStatic(ctx context.Context, policy string, c control, ops threadOps, pids []int, cores int) error {
	switch policy {
	case "none":
		return nil
	case "nice19":
		return eachThread(ops, pids, func(tid int) error { return ops.SetNice(tid, 19) })
	case "sched-idle":
		return eachThread(ops, pids, func(tid int) error { return ops.SetIdleSched(tid, true) })
	case "cgroup-idle":
		return c.SetIdle(true)
	case "cap":
		return c.SetCPUMax(0.25 * float64(cores))
	case "suspend":
		return c.Freeze(ctx)
	case "default":
		if err := c.SetIdle(true); err != nil {
			return err
		}
		if err := eachThread(ops, pids, func(tid int) error { return ops.SetNice(tid, 19) }); err != nil {
			return err
		}
		return c.SetCPUMax(0.25 * float64(cores))
	case "adaptive":
		return c.SetIdle(true)
	}
	return fmt.Errorf("matrix: unknown policy %q", policy)
}

// resetPolicy undoes every policy: thawed, idle class off, cpu.max cleared, nice 0 and
// SCHED_OTHER on every thread.
func resetPolicy(ctx context.Context, c control, ops threadOps, pids []int) error {
	var errs []error
	if c != nil {
		errs = append(errs, c.Thaw(ctx), c.SetIdle(false), c.SetCPUMax(0))
	}
	errs = append(errs, eachThread(ops, pids, func(tid int) error {
		return errors.Join(ops.SetIdleSched(tid, false), ops.SetNice(tid, 0))
	}))
	return errors.Join(errs...)
}

func validPolicy(p string) bool {
	for _, q := range Policies {
		if p == q {
			return true
		}
	}
	return false
}
