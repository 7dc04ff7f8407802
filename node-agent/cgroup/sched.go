package cgroup

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// IdleProcess puts every thread of process pid at nice 19 with the SCHED_IDLE policy: the
// per-thread half of "idle class" that the cgroup's cpu.idle does for the group (children
// inherit both; threads that exist already need it one by one, as for a QEMU or
// vmware-vmx process adopted after it started). Threads that exit meanwhile are skipped.
func IdleProcess(pid int) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cgroup: threads of %d: %w", pid, err)
	}
	var errs []error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 19); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("nice 19 on thread %d of %d: %w", tid, pid, err))
			continue
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("SCHED_IDLE on thread %d of %d: %w", tid, pid, err))
		}
	}
	return errors.Join(errs...)
}
