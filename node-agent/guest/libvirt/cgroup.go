package libvirt

import (
	"path"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
)

// IdleDomainCgroup returns the Options.SetIdle of QEMU domains on the hierarchy h: it puts
// the cgroup of the domain whose QEMU process is pid into the idle class (cpu.idle, where
// libvirt sets no such thing itself). Nil when h is nil: without usable cgroups the
// backend skips it.
func IdleDomainCgroup(h *cgroup.Hierarchy) func(pid int) error {
	if h == nil {
		return nil
	}
	return func(pid int) error {
		g, err := h.FindByPID(pid)
		if err != nil {
			return err
		}
		return DomainGroup(g).SetIdle(true)
	}
}

// DomainGroup is the cgroup of the domain whose QEMU process is in g. libvirt puts QEMU's
// main thread into <domain>/emulator (and vCPU threads into <domain>/vcpuN); the domain's
// limits, and the idle class covering all of its threads, belong on <domain>. A QEMU not
// in an emulator group (libvirt without per-thread groups) is in the domain's group itself.
func DomainGroup(g *cgroup.Group) *cgroup.Group {
	if path.Base(g.Path()) == "emulator" {
		return g.Parent()
	}
	return g
}
