package guestrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference"
	"github.com/overtime-hpc/overtime/node-agent/kvmprobe"
)

// QEMU runs the guest workload in a QEMU VM: the kernel (Kernel, or FindKernel) boots an
// initramfs the runner writes (WriteInitramfs) whose init is the agent binary, started as
// `/init bench guest-load NAME --threads N` (kernel arguments after "--" are init's
// argv). Progress lines come over the serial console, which is QEMU's stdout. The VM has
// MemoryMB of memory and one vCPU per worker thread, and uses KVM only where a probe guest
// ran under it (kvmprobe), else TCG: then the work is emulated and only ratios (with and
// without a desktop workload, across policies) mean anything.
//
// QEMU is started gated (see startGated) and moved into a fresh group below Parent before
// it runs, so every vCPU and I/O thread it makes is born there.
type QEMU struct {
	// Parent is where the VM's group is made (required; it must exist).
	Parent *cgroup.Group
	// Agent is the static overtime-agent binary (default: the running binary).
	Agent string
	// Kernel is the kernel to boot (default FindKernel()).
	Kernel string
	// Binary is the emulator (default kvmprobe.QEMU).
	Binary string
	// Accel is "kvm" or "tcg" (default kvmprobe.Accel()).
	Accel string
	// MemoryMB is the VM's memory (default 512).
	MemoryMB int
	// WorkDir holds the per-VM initramfs (default os.TempDir()).
	WorkDir string
}

var _ interference.Runner = (*QEMU)(nil)

// Name is "qemu".
func (q *QEMU) Name() string { return "qemu" }

// Start writes the initramfs, boots the VM and returns once guest-load reported progress
// over the serial console (under TCG the boot takes seconds).
func (q *QEMU) Start(ctx context.Context, name string, threads int) (interference.Guest, error) {
	if err := checkWorkload(name, threads); err != nil {
		return nil, err
	}
	if q.Parent == nil {
		return nil, errors.New("guestrun: QEMU without a Parent group")
	}
	agent, err := agentBinary(q.Agent)
	if err != nil {
		return nil, err
	}
	kernel := q.Kernel
	if kernel == "" {
		if kernel, err = FindKernel(); err != nil {
			return nil, err
		}
	}
	bin := q.Binary
	if bin == "" {
		bin = kvmprobe.QEMU
	}
	accel := q.Accel
	if accel == "" {
		accel, _ = kvmprobe.Accel()
	}
	mem := q.MemoryMB
	if mem == 0 {
		mem = 512
	}
	ctx, cancel := withStartTimeout(ctx)
	defer cancel()
	dir, err := os.MkdirTemp(q.WorkDir, "overtime-bench-vm-")
	if err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	g := &qemuGuest{dir: dir, group: q.Parent.Child("bench-vm-" + name + "-" + randSuffix()), prog: newProgress()}
	ok := false
	defer func() {
		if !ok {
			_ = g.Stop(context.Background())
		}
	}()
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := WriteInitramfs(initrd, agent); err != nil {
		return nil, err
	}
	if err := g.group.Create(); err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	// quiet and loglevel keep boot messages off the console (the parser skips them anyway,
	// but under TCG every byte on the emulated UART costs); panic=-1 with -no-reboot makes
	// a guest that dies end QEMU instead of hanging.
	appendArgs := "console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init -- " + strings.Join(guestLoadArgs(name, threads, "/tmp"), " ")
	argv := []string{bin, "-machine", "q35", "-accel", accel, "-m", strconv.Itoa(mem), "-smp", strconv.Itoa(threads),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-chardev", "stdio,id=con0,signal=off", "-serial", "chardev:con0",
		"-kernel", kernel, "-initrd", initrd, "-append", appendArgs}
	pr, pw := io.Pipe()
	go func() {
		g.prog.feed(pr)
		_, _ = io.Copy(io.Discard, pr)
	}()
	if g.proc, err = startGated(argv, pw); err != nil {
		pw.Close()
		return nil, err
	}
	go func() { <-g.proc.done; pw.Close() }()
	if err := g.group.AddProc(g.proc.cmd.Process.Pid); err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	if err := g.proc.release(); err != nil {
		return nil, err
	}
	if err := g.prog.waitFirst(ctx, g.proc.done, "the VM ("+accel+")"); err != nil {
		return nil, err
	}
	ok = true
	return g, nil
}

type qemuGuest struct {
	dir   string
	group *cgroup.Group
	proc  *gated
	prog  *progress
}

func (g *qemuGuest) Progress() (float64, error) { return g.prog.value() }
func (g *qemuGuest) Group() *cgroup.Group       { return g.group }

// PIDs is QEMU's PID (its vCPU and I/O threads are in /proc/PID/task).
func (g *qemuGuest) PIDs() ([]int, error) { return g.group.AllProcs() }

// Stop ends QEMU (SIGTERM: it exits at once, the guest is not asked), removes its group
// and the initramfs.
func (g *qemuGuest) Stop(ctx context.Context) error {
	var errs []error
	if g.proc != nil {
		if frozen, err := g.group.Frozen(); err == nil && frozen {
			_ = g.group.Thaw(ctx)
		}
		g.proc.kill(stopGrace)
	}
	if err := removeGroup(ctx, g.group); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(g.dir); err != nil {
		errs = append(errs, fmt.Errorf("guestrun: %w", err))
	}
	return errors.Join(errs...)
}
