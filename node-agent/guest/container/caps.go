package container

import "golang.org/x/sys/unix"

// keptCaps is the guest's capability bounding set: Docker's default set minus CAP_MKNOD
// plus CAP_NET_ADMIN.
//
//   - No CAP_MKNOD: neither cgroup version restricts device access here (v2 would need a
//     BPF device program), so the guest must not be able to create device nodes; /dev
//     holds only the harmless ones the launcher made.
//   - CAP_NET_ADMIN: the guest configures its own eth0 (DHCP client) in its own network
//     namespace; with no CAP_SYS_ADMIN it cannot enter another one.
//   - No CAP_SYS_ADMIN (mount, namespaces, most of the kernel), CAP_SYS_MODULE,
//     CAP_SYS_PTRACE, CAP_SYS_TIME, CAP_SYS_NICE (it stays at nice 19 / SCHED_IDLE),
//     CAP_SYS_RESOURCE, CAP_SYS_BOOT, CAP_SYS_RAWIO, CAP_DAC_READ_SEARCH (open_by_handle_at
//     escapes), CAP_IPC_LOCK, CAP_AUDIT_CONTROL, CAP_MAC_*, CAP_SYSLOG, CAP_BPF,
//     CAP_PERFMON, CAP_CHECKPOINT_RESTORE, CAP_WAKE_ALARM, CAP_BLOCK_SUSPEND, CAP_LEASE,
//     CAP_LINUX_IMMUTABLE, CAP_NET_BROADCAST.
var keptCaps = []int{
	unix.CAP_CHOWN,
	unix.CAP_DAC_OVERRIDE,
	unix.CAP_FSETID,
	unix.CAP_FOWNER,
	unix.CAP_NET_RAW,
	unix.CAP_SETGID,
	unix.CAP_SETUID,
	unix.CAP_SETFCAP,
	unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT,
	unix.CAP_KILL,
	unix.CAP_AUDIT_WRITE,
	unix.CAP_NET_ADMIN,
}

// capMask is keptCaps as a bit mask (the format of CapBnd in /proc/PID/status).
func capMask() uint64 {
	var m uint64
	for _, c := range keptCaps {
		m |= 1 << uint(c)
	}
	return m
}
