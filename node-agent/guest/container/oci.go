package container

import (
	"fmt"
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// idRange is how many uids and gids the guest's user namespace maps (0..65535 inside).
const idRange = 65536

// DefaultUIDBase is the first host uid (and gid) of the guests' user namespace: the guest's
// root is this uid on the desktop. It is the last 64 Ki block of the range systemd reserves
// for container uids (524288…1879048191, systemd's docs/UIDS-GIDS.md), far from the
// desktop users' uids (LDAP, local) and from systemd-nspawn's usual picks.
const DefaultUIDBase = 0x6FFF0000

// ociSpec is the runtime-spec configuration of a guest: crun runs it from the bundle
// StateDir/bundle with the root file system the monitor prepared at rootPath.
func ociSpec(c monitorConfig, argv, env []string, rootPath string) *specs.Spec {
	caps := capNames()
	s := &specs.Spec{
		Version:  "1.1.0",
		Hostname: c.Hostname,
		Root:     &specs.Root{Path: rootPath},
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: argv,
			Env:  env,
			Cwd:  "/",
			// The same set everywhere but ambient: exec keeps it for root, and nothing a
			// guest runs can get more (no_new_privs, the bounding set).
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps, Inheritable: caps,
			},
			NoNewPrivileges: true,
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{
			UIDMappings: idMappings(c.UIDBase, c.JobUIDs),
			GIDMappings: idMappings(c.UIDBase, c.JobGIDs),
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.UserNamespace}, {Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
				{Type: specs.CgroupNamespace},
			},
			// No time namespace here: crun 1.8 ignores timeOffsets. The monitor runs crun
			// in a time namespace of its own (monitor.go, inTimeNamespace), which the guest
			// inherits.
			// No devices beyond the runtime's defaults: null zero full random urandom tty
			// (and /dev/pts, /dev/ptmx). Nothing of the desktop's disks, input, GPU or KVM.
			Devices:           nil,
			RootfsPropagation: "private",
			// What Docker and Podman hide: kernel memory and key lists, timers, firmware.
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
				"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
				"/proc/timer_stats", "/sys/firmware", "/sys/devices/virtual/powercap",
				"/proc/kallsyms",
			},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			Seccomp:       seccompProfile(),
		},
	}
	s.Mounts = append(s.Mounts, storageMounts(c.Storage)...)
	if c.Secrets != "" {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: secretsDest, Type: "bind", Source: c.Secrets,
			Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}})
	}
	return s
}

// secretsDest is where a guest finds guest.Spec.Secrets.
const secretsDest = "/run/secrets"

// capNames is keptCaps in the runtime-spec's notation (CAP_CHOWN, ...).
func capNames() []string {
	var out []string
	for _, c := range keptCaps {
		n, ok := capName[c]
		if !ok {
			panic(fmt.Sprintf("container: capability %d has no name", c))
		}
		out = append(out, n)
	}
	return out
}

var capName = map[int]string{
	unix.CAP_CHOWN: "CAP_CHOWN", unix.CAP_DAC_OVERRIDE: "CAP_DAC_OVERRIDE", unix.CAP_FSETID: "CAP_FSETID",
	unix.CAP_FOWNER: "CAP_FOWNER", unix.CAP_NET_RAW: "CAP_NET_RAW", unix.CAP_SETGID: "CAP_SETGID",
	unix.CAP_SETUID: "CAP_SETUID", unix.CAP_SETFCAP: "CAP_SETFCAP", unix.CAP_SETPCAP: "CAP_SETPCAP",
	unix.CAP_NET_BIND_SERVICE: "CAP_NET_BIND_SERVICE", unix.CAP_SYS_CHROOT: "CAP_SYS_CHROOT",
	unix.CAP_KILL: "CAP_KILL", unix.CAP_AUDIT_WRITE: "CAP_AUDIT_WRITE", unix.CAP_NET_ADMIN: "CAP_NET_ADMIN",
}

// seccompArchs are the system call ABIs the filter covers on this build's architecture:
// every ABI the CPU can enter (x86's 32-bit and x32 calls on amd64), or a denied call
// would be reachable under another number.
func seccompArchs() []specs.Arch {
	switch runtime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	}
	return nil
}

// deniedSyscalls fail with EPERM in the guest. This is a deny-list, not Docker's
// allow-list, on purpose: the guest runs whatever HPC software a site's users bring
// (MPI, NUMA placement with mbind/set_mempolicy, debuggers with ptrace, io via
// splice/tee...), an allow-list lags behind new kernels and libcs (a call libseccomp does
// not know is silently dropped from it, and programs fail in odd ways), and the kernel
// already refuses most privileged calls to the guest's user-namespaced root without
// capabilities. What is denied here is what a user namespace's root may still do or
// what widens the kernel's attack surface with no use for a compute node — the calls
// Docker's default profile refuses to containers without CAP_SYS_ADMIN and friends:
//
//   - namespaces and mounts: unshare, setns, mount, umount(2), pivot_root, the new mount
//     API (fsopen ... mount_setattr, open_tree, move_mount); clone with namespace flags
//     (below) — a user-namespaced root could otherwise build new namespaces and mount
//     file systems of its own (the base of many container escapes);
//   - kernel keys (add_key, keyctl, request_key): the keyring is not namespaced;
//   - modules, kexec, reboot, swap, quotas, accounting, clock setting;
//   - bpf, perf_event_open, userfaultfd, io_uring_*: large kernel attack surface with a
//     record of privilege escalations; io_uring also bypasses this very filter's checks of
//     the calls it performs;
//   - open_by_handle_at/name_to_handle_at (the "shocker" escape), kcmp, lookup_dcookie,
//     ioperm/iopl, vm86, syslog, obsolete calls.
//
// process_vm_readv/writev are allowed, as in Docker's default profile since Linux 4.8: the
// kernel checks them like ptrace's attach (PTRACE_MODE_ATTACH_REALCREDS: same uids and
// gids, no capability the caller lacks, a dumpable target), which the guest already
// allows, so they reach no memory ptrace could not. MPI needs them: Open MPI's vader/sm
// BTL copies messages between the ranks of one node with them (CMA, cross-memory attach;
// test/slurm_mpi_test.go runs a job on that path).
var deniedSyscalls = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "clock_settime64", "create_module",
	"delete_module", "fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
	"get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register", "io_uring_setup",
	"ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie",
	"mount", "mount_setattr", "move_mount", "name_to_handle_at", "nfsservctl",
	"open_by_handle_at", "open_tree", "perf_event_open", "pivot_root", "query_module",
	"quotactl", "quotactl_fd", "reboot", "request_key", "setns", "settimeofday", "stime",
	"swapoff", "swapon", "syslog", "sysfs", "_sysctl", "umount", "umount2", "unshare",
	"uselib", "userfaultfd", "ustat", "vm86", "vm86old",
}

// nsCloneFlags are clone's namespace flags: clone with any of them is refused.
var nsCloneFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
}

// seccompProfile allows everything but deniedSyscalls and namespace-creating clones.
// clone3 passes its flags in memory, which seccomp cannot read: it fails with ENOSYS,
// which makes glibc and musl fall back to clone, whose flags are checked (Docker and
// Podman do the same).
func seccompProfile() *specs.LinuxSeccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	p := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArchs(),
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	// clone's flags are its first argument on x86 and arm64 (s390 swaps the first two).
	for _, f := range nsCloneFlags {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: f, ValueTwo: f, Op: specs.OpMaskedEqual}},
		})
	}
	return p
}
