package container

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// initEnv marks the hidden re-exec of the agent binary that becomes the container's init.
const initEnv = "_OVERTIME_CONTAINER_INIT"

// initArg0 is argv[0] of that re-exec (what ps shows until the image's init replaces it).
const initArg0 = "overtime-container-init"

// syncFD is the launcher's end of the socket pair in the re-exec (ExtraFiles[0]).
const syncFD = 3

// initConfig is what Start sends the re-exec once it sits in the guest's cgroup and
// network namespace plumbing is done.
type initConfig struct {
	Hostname  string   `json:"hostname"`
	Base      string   `json:"base"`
	Format    string   `json:"format"` // squashfs | dir
	Runtime   string   `json:"runtime"`
	TmpfsSize int64    `json:"tmpfsSize"` // bytes; the overlay's upper layer
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Idle      bool     `json:"idle"`
}

// MaybeInit must be the first thing the agent's main (and a test binary's TestMain) calls.
// In the agent it returns at once. In the hidden re-exec that Start launches inside the
// new namespaces it builds the guest's root, drops privileges and executes the image's
// init, and never returns: like runc's "init", the container's first process is the
// agent binary itself until it execs the guest's init.
func MaybeInit() {
	if os.Getenv(initEnv) != "1" {
		return
	}
	// Credentials, the scheduling class and the cgroup namespace are per thread: do all of
	// it on this thread and exec from it.
	runtime.LockOSThread()
	sync := os.NewFile(syncFD, "sync")
	unix.CloseOnExec(syncFD)
	err := runInit(sync)
	fmt.Fprintf(sync, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	fmt.Fprintf(os.Stderr, "overtime container init: %v\n", err)
	os.Exit(1)
}

func runInit(sync *os.File) error {
	line, err := bufio.NewReader(sync).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the configuration from the launcher: %w", err)
	}
	var c initConfig
	if err := json.Unmarshal(line, &c); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	// The launcher has moved this process into the guest's cgroup by now: a cgroup
	// namespace made here shows the guest its own group as the root.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	freshBootTime()
	// Nothing mounted from here on may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	root, err := buildRoot(c)
	if err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(c.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	if err := pivot(root); err != nil {
		return err
	}
	argv0, err := resolveInit(c.Argv[0], c.Env)
	if err != nil {
		return err
	}
	if c.Idle {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, 19); err != nil {
			return fmt.Errorf("nice 19: %w", err)
		}
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
			return fmt.Errorf("SCHED_IDLE: %w", err)
		}
	}
	if err := dropPrivileges(); err != nil {
		return err
	}
	if _, err := sync.WriteString("exec\n"); err != nil {
		return err
	}
	// The sync socket is close-on-exec: the launcher sees EOF when this succeeds.
	return fmt.Errorf("exec %s: %w", argv0, syscall.Exec(argv0, c.Argv, c.Env))
}

// buildRoot assembles the guest's root under Runtime (a private tmpfs) and returns it:
// lower = the read-only base, upper+work on the tmpfs, root = the overlay with fresh
// /proc, a minimal /dev and a read-only /sys.
func buildRoot(c initConfig) (string, error) {
	rt := c.Runtime
	if err := os.MkdirAll(rt, 0o700); err != nil {
		return "", err
	}
	opts := "mode=0700"
	if c.TmpfsSize > 0 {
		opts += ",size=" + strconv.FormatInt(c.TmpfsSize, 10)
	}
	// Not nodev: the loop device node for a squashfs base is made here. The overlay on
	// top is nodev.
	if err := unix.Mount("tmpfs", rt, "tmpfs", unix.MS_NOSUID, opts); err != nil {
		return "", fmt.Errorf("mount tmpfs on %s: %w", rt, err)
	}
	lower, upper, work, root := filepath.Join(rt, "lower"), filepath.Join(rt, "upper"), filepath.Join(rt, "work"), filepath.Join(rt, "root")
	for _, d := range []string{lower, upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	switch c.Format {
	case "squashfs":
		if err := mountSquashfs(c.Base, lower, rt); err != nil {
			return "", err
		}
	case "dir":
		if err := unix.Mount(c.Base, lower, "", unix.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("bind %s on %s: %w", c.Base, lower, err)
		}
		if err := unix.Mount("", lower, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, ""); err != nil {
			return "", fmt.Errorf("make %s read-only: %w", lower, err)
		}
	default:
		return "", fmt.Errorf("base format %q", c.Format)
	}
	ov := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NODEV, ov); err != nil {
		return "", fmt.Errorf("mount overlay (%s) on %s: %w", ov, root, err)
	}
	return root, populate(root)
}

func populate(root string) error {
	in := func(p string) string { return filepath.Join(root, p) }
	type m struct {
		src, dst, fstype string
		flags            uintptr
		data             string
	}
	const nsn = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	for _, x := range []m{
		{"proc", "proc", "proc", nsn, ""},
		{"sysfs", "sys", "sysfs", nsn | unix.MS_RDONLY, ""},
		{"tmpfs", "dev", "tmpfs", unix.MS_NOSUID | unix.MS_STRICTATIME, "mode=755,size=65536k"},
	} {
		if err := os.MkdirAll(in(x.dst), 0o755); err != nil {
			return err
		}
		if err := unix.Mount(x.src, in(x.dst), x.fstype, x.flags, x.data); err != nil {
			return fmt.Errorf("mount %s on /%s: %w", x.fstype, x.dst, err)
		}
	}
	old := unix.Umask(0)
	defer unix.Umask(old)
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		if err := unix.Mknod(in("dev/"+d.name), unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod /dev/%s: %w", d.name, err)
		}
	}
	for _, x := range []m{
		{"devpts", "dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"},
		{"tmpfs", "dev/shm", "tmpfs", nsn, "mode=1777"},
		{"mqueue", "dev/mqueue", "mqueue", nsn, ""},
	} {
		if err := os.Mkdir(in(x.dst), 0o755); err != nil {
			return err
		}
		if err := unix.Mount(x.src, in(x.dst), x.fstype, x.flags, x.data); err != nil {
			return fmt.Errorf("mount %s on /%s: %w", x.fstype, x.dst, err)
		}
	}
	for link, target := range map[string]string{
		"dev/ptmx": "pts/ptmx", "dev/fd": "/proc/self/fd", "dev/stdin": "/proc/self/fd/0",
		"dev/stdout": "/proc/self/fd/1", "dev/stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, in(link)); err != nil {
			return err
		}
	}
	// What Docker hides in /proc: read-only kernel tunables, masked kernel memory and key
	// lists (the guest has no CAP_SYS_ADMIN to undo any of it).
	for _, p := range []string{"proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus", "proc/fs"} {
		if _, err := os.Lstat(in(p)); err != nil {
			continue
		}
		if err := unix.Mount(in(p), in(p), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /%s: %w", p, err)
		}
		if err := unix.Mount("", in(p), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|nsn, ""); err != nil {
			return fmt.Errorf("read-only /%s: %w", p, err)
		}
	}
	for _, p := range []string{"proc/kcore", "proc/keys", "proc/timer_list", "proc/sched_debug", "proc/kallsyms"} {
		if st, err := os.Lstat(in(p)); err != nil || st.IsDir() {
			continue
		}
		if err := unix.Mount(in("dev/null"), in(p), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask /%s: %w", p, err)
		}
	}
	for _, p := range []string{"proc/acpi", "proc/scsi", "sys/firmware"} {
		if st, err := os.Lstat(in(p)); err != nil || !st.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", in(p), "tmpfs", nsn|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("mask /%s: %w", p, err)
		}
	}
	return nil
}

// pivot makes root the root and detaches everything else: the host's file systems
// (/home, /run/user, /tmp, the agent's state) are no longer reachable at all.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; unmounting "."
	// then removes it (runc's trick: no directory for the old root needed).
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root to %s: %w", root, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return unix.Chdir("/")
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

func resolveInit(argv0 string, env []string) (string, error) {
	if !strings.Contains(argv0, "/") {
		path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "PATH="); ok {
				path = v
			}
		}
		for _, d := range filepath.SplitList(path) {
			if p := filepath.Join(d, argv0); isExec(p) {
				return p, nil
			}
		}
		return "", fmt.Errorf("init %q not found in the image's PATH %s", argv0, path)
	}
	if !isExec(argv0) {
		if _, err := os.Stat(argv0); err != nil {
			return "", fmt.Errorf("init %s not in the image: %w", argv0, err)
		}
		return "", fmt.Errorf("init %s is not executable", argv0)
	}
	return argv0, nil
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// dropPrivileges limits the capability bounding set to keptCaps, clears ambient
// capabilities, sets this thread's capabilities to the same set and sets no_new_privs:
// after exec the guest's root holds at most keptCaps and nothing (setuid, file
// capabilities) can ever add to them.
func dropPrivileges() error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	keep := capMask()
	for c := 0; c <= last; c++ {
		if keep&(1<<uint(c)) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for i := range data {
		v := uint32(keep >> (32 * uint(i)))
		data[i] = unix.CapUserData{Effective: v, Permitted: v, Inheritable: v}
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// freshBootTime puts the guest's init in a new time namespace whose boot clock starts
// at (about) zero, so that the guest, like a VM, reports having booted when it started.
// Slurm relies on it: a node woken by power saving counts as resumed only when its
// slurmd reports a boot after the resume request, and a container sharing the desktop's
// boot time would never be. The namespace takes effect at exec (kernel 5.11+). Without
// time namespaces the guest keeps the desktop's uptime, which is said on its console.
func freshBootTime() {
	var ts unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	if err == nil {
		err = unix.Unshare(unix.CLONE_NEWTIME)
	}
	if err == nil {
		// Keep one second of uptime: the kernel refuses an offset that makes the clock
		// negative, and the clock moves on while this runs.
		err = os.WriteFile("/proc/self/timens_offsets", []byte(fmt.Sprintf("boottime %d 0\n", -(ts.Sec-1))), 0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "overtime container init: warning: guest shares the desktop's boot time (no time namespace: %v)\n", err)
	}
}
