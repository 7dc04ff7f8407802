package container

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// monitorEnv marks the re-exec of the agent binary that prepares a guest's root file
// system and watches its init (the role conmon plays for Podman).
const monitorEnv = "_OVERTIME_CONTAINER_MONITOR"

// monitorArg0 is argv[0] of the monitor (what ps shows).
const monitorArg0 = "overtime-container-monitor"

// usernsEnv marks a re-exec that only holds a user namespace with the guest's id mapping
// open until its stdin closes: the idmapped mount of the base image is made from it.
const usernsEnv = "_OVERTIME_CONTAINER_USERNS"

// timensEnv marks the re-exec that runs crun in the guest's time namespace: it holds
// the boot clock offset (seconds). See inTimeNamespace.
const timensEnv = "_OVERTIME_CONTAINER_TIMENS"

// syncFD is the agent's end of the socket pair in the monitor (ExtraFiles[0]).
const syncFD = 3

// monitorConfig is what Start sends the monitor.
type monitorConfig struct {
	Name      string   `json:"name"`
	Hostname  string   `json:"hostname"`
	Crun      []string `json:"crun"` // crun and its global options
	Bundle    string   `json:"bundle"`
	Base      string   `json:"base"`
	Format    string   `json:"format"` // squashfs | dir
	Runtime   string   `json:"runtime"`
	TmpfsSize int64    `json:"tmpfsSize"` // bytes; the overlay's upper layer
	UIDBase   uint32   `json:"uidBase"`
	// NoIdmap skips the idmapped mount and shifts ownership in the overlay instead
	// (shiftOwnership), as on kernels that cannot idmap the base's file system. Tests set
	// it to run that path on a kernel that can.
	NoIdmap bool     `json:"noIdmap,omitempty"`
	Argv0   string   `json:"argv0"`
	Path    string   `json:"path"`   // the guest's PATH, to find Argv0
	Cgroup  []string `json:"cgroup"` // cgroup.procs files of the guest's group
	RunDir  string   `json:"runDir"`
	// Secrets is the directory (owned by the guest's root) bound read-only at
	// /run/secrets; empty: none.
	Secrets string `json:"secrets,omitempty"`
	// JobUIDs and JobGIDs are mapped unchanged beside the guest's own block; Storage is
	// mounted by the monitor and bound into the guest (jobs.go).
	JobUIDs []model.IDRange      `json:"jobUIDs,omitempty"`
	JobGIDs []model.IDRange      `json:"jobGIDs,omitempty"`
	Storage []model.GuestStorage `json:"storage,omitempty"`
}

// The monitor's time namespace is made by its main thread: /proc/self/timens_offsets
// belongs to the thread group's leader. Locking in an init function runs main, and so
// MaybeInit, on that thread.
func init() {
	if os.Getenv(monitorEnv) == "1" || os.Getenv(timensEnv) != "" {
		runtime.LockOSThread()
	}
}

// MaybeInit must be the first thing the agent's main (and a test binary's TestMain)
// calls. In the agent it returns at once. In the re-execs the container backend starts
// (the guest's monitor, the holder of a user namespace) it does their work and never
// returns.
func MaybeInit() {
	switch {
	case os.Getenv(usernsEnv) == "1":
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case os.Getenv(timensEnv) != "":
		timensMain()
	case os.Getenv(monitorEnv) == "1":
		monitorMain()
	}
}

// monitorMain runs in a mount namespace of its own (Start clones it so): it builds the
// guest's root there, runs `crun create`, reports init's PID to the agent and then waits
// for init as its subreaper, to record how it ended. The guest's mounts exist only in this
// namespace and the guest's own; they go away with the last of the two processes.
func monitorMain() {
	runtime.LockOSThread()
	sync := os.NewFile(syncFD, "sync")
	unix.CloseOnExec(syncFD)
	c, pid, start, err := monitorCreate(sync)
	if err != nil {
		fmt.Fprintf(sync, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Fprintf(os.Stderr, "overtime container monitor: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(sync, "created %d\n", pid)
	// crun start runs from here, in the time namespace crun create ran in: crun compares
	// init's start time in /proc (which a time namespace shifts) with what it recorded.
	if line, err := bufio.NewReader(sync).ReadString('\n'); err == nil && line == "start\n" {
		if err := crunStart(c); err != nil {
			fmt.Fprintf(sync, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Fprintf(sync, "started\n")
		}
	}
	sync.Close()
	monitorWait(c, pid, start)
	os.Exit(0)
}

func monitorCreate(sync *os.File) (c monitorConfig, pid int, start uint64, err error) {
	line, err := bufio.NewReader(sync).ReadBytes('\n')
	if err != nil {
		return c, 0, 0, fmt.Errorf("reading the configuration from the agent: %w", err)
	}
	if err := json.Unmarshal(line, &c); err != nil {
		return c, 0, 0, fmt.Errorf("configuration: %w", err)
	}
	// crun's init is orphaned when `crun create` exits: as subreaper the monitor gets it
	// and learns its exit status.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return c, 0, 0, fmt.Errorf("subreaper: %w", err)
	}
	// Nothing mounted from here on may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return c, 0, 0, fmt.Errorf("make / private: %w", err)
	}
	root, err := buildRoot(c)
	if err != nil {
		return c, 0, 0, err
	}
	if err := mountStorage(c.Storage); err != nil {
		return c, 0, 0, err
	}
	if err := checkInit(root, c.Argv0, c.Path); err != nil {
		return c, 0, 0, err
	}
	pid, err = crunCreate(c)
	if err != nil {
		return c, 0, 0, err
	}
	start, err = procStart(pid)
	if err != nil {
		return c, 0, 0, fmt.Errorf("container init %d: %w", pid, err)
	}
	return c, pid, start, nil
}

// crunCreate runs `crun create` from inside the guest's cgroup, so that crun's init
// starts there and the guest's cgroup namespace is rooted at its own group (crun runs
// with --cgroup-manager=disabled: the agent owns the cgroups and their limits), then
// moves the monitor back to where it was.
func crunCreate(c monitorConfig) (int, error) {
	h, err := cgroup.Detect()
	if err != nil {
		return 0, err
	}
	self, err := h.FindByPID(os.Getpid())
	if err != nil {
		return 0, err
	}
	var back []string
	for k := range self.Paths() {
		back = append(back, filepath.Join(self.Dir(k), "cgroup.procs"))
	}
	// Opened before hideHybridUnified, which may take some of them out of sight.
	guestProcs, err := openAll(c.Cgroup)
	if err != nil {
		return 0, fmt.Errorf("the guest's cgroup: %w", err)
	}
	defer closeAll(guestProcs)
	backProcs, err := openAll(back)
	if err != nil {
		return 0, fmt.Errorf("the monitor's cgroup: %w", err)
	}
	defer closeAll(backProcs)
	if err := hideHybridUnified(); err != nil {
		return 0, err
	}
	me := []byte(strconv.Itoa(os.Getpid()))
	for _, f := range guestProcs {
		if _, err := f.Write(me); err != nil {
			return 0, fmt.Errorf("entering the guest's cgroup %s: %w", f.Name(), err)
		}
	}
	pidFile := filepath.Join(c.Bundle, "init.pid")
	_ = os.Remove(pidFile)
	args := append(append([]string{}, c.Crun[1:]...), "create", "--bundle", c.Bundle, "--pid-file", pidFile, c.Name)
	cmd := inTimeNamespace(bootOffset(), c.Crun[0], args...)
	// crun's stdio become the guest's: the console log.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.Dir = c.Bundle
	err = cmd.Run()
	for _, f := range backProcs {
		if _, berr := f.Write(me); berr != nil && err == nil {
			err = fmt.Errorf("leaving the guest's cgroup for %s: %w", f.Name(), berr)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("crun create: %w", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("crun create: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("crun create: pid file %s: %q", pidFile, b)
	}
	return pid, nil
}

// monitorWait reaps the guest's init (and any other orphan that comes to the subreaper)
// and records init's end in RunDir, unless the guest was stopped or replaced meanwhile.
func monitorWait(c monitorConfig, pid int, start uint64) {
	var ws unix.WaitStatus
	for {
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // ECHILD: init was never handed to us
		}
		if got == pid {
			break
		}
	}
	ex := exitRecord{PID: pid, PIDStart: start, Code: ws.ExitStatus()}
	if ws.Signaled() {
		ex.Code, ex.Signal = -1, ws.Signal().String()
	}
	b := &Backend{o: Options{RunDir: c.RunDir}}
	unlock, err := b.lock(context.Background(), c.Name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "overtime container monitor: %v\n", err)
		return
	}
	defer unlock()
	rec, err := b.readRecord(c.Name)
	if err != nil || rec == nil || rec.PID != pid || rec.PIDStart != start {
		return
	}
	if err := writeJSON(b.exitPath(c.Name), ex); err != nil {
		fmt.Fprintf(os.Stderr, "overtime container monitor: recording the exit of init: %v\n", err)
	}
}

// buildRoot assembles the guest's root under Runtime (a private tmpfs) and returns it:
// the read-only base mounted as is, an idmapped mount of it (the image's uid 0 is the
// guest's root, host uid UIDBase), and an overlay with the tmpfs as upper layer.
func buildRoot(c monitorConfig) (string, error) {
	rt := c.Runtime
	if err := os.MkdirAll(rt, 0o700); err != nil {
		return "", err
	}
	opts := "mode=0711"
	if c.TmpfsSize > 0 {
		opts += ",size=" + strconv.FormatInt(c.TmpfsSize, 10)
	}
	// Not nodev: the loop device node for a squashfs base is made here. The overlay on
	// top is nodev.
	if err := unix.Mount("tmpfs", rt, "tmpfs", unix.MS_NOSUID, opts); err != nil {
		return "", fmt.Errorf("mount tmpfs on %s: %w", rt, err)
	}
	base, lower, upper, work := filepath.Join(rt, "base"), filepath.Join(rt, "lower"), filepath.Join(rt, "upper"), filepath.Join(rt, "work")
	for _, d := range []string{base, lower, upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	switch c.Format {
	case "squashfs":
		if err := mountSquashfs(c.Base, base, rt); err != nil {
			return "", err
		}
	case "dir":
		if err := unix.Mount(c.Base, base, "", unix.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("bind %s on %s: %w", c.Base, base, err)
		}
	default:
		return "", fmt.Errorf("base format %q", c.Format)
	}
	shift := c.NoIdmap
	if !shift {
		err := idmapMount(base, lower, c.UIDBase)
		switch {
		case errors.Is(err, unix.EINVAL):
			// This kernel cannot idmap the base's file system (Debian 12's 6.1 and
			// squashfs): the overlay shifts ownership instead (shiftOwnership).
			fmt.Fprintf(os.Stderr, "overtime container monitor: %v; shifting ownership in the overlay instead (metadata-only copy-up)\n", err)
			shift = true
		case err != nil:
			return "", fmt.Errorf("idmapped mount of the base image %s (%s): %w", c.Base, c.Format, err)
		}
	}
	if shift {
		if err := unix.Mount(base, lower, "", unix.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("bind %s on %s: %w", base, lower, err)
		}
		if err := unix.Mount("", lower, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return "", fmt.Errorf("read-only %s: %w", lower, err)
		}
	}
	if err := unix.Unmount(base, unix.MNT_DETACH); err != nil {
		return "", fmt.Errorf("unmount %s: %w", base, err)
	}
	// The overlay's root directory is the upper layer's: it must look like the base's
	// root through the mapping (owner, mode), or the guest's root would not own /.
	var st unix.Stat_t
	if err := unix.Stat(lower, &st); err != nil {
		return "", err
	}
	for _, d := range []string{upper, work} {
		if err := os.Chown(d, int(st.Uid), int(st.Gid)); err != nil {
			return "", err
		}
	}
	if err := unix.Chmod(upper, st.Mode&0o7777); err != nil {
		return "", err
	}
	// crun sets the root up from inside the user namespace, as the guest's root, which
	// may not pass through the state directory's parents (0700, root's). In this mount
	// namespace only, a fresh tmpfs on rootParent gives the root a path it can reach.
	// A root without /mnt (a minimal image) gets an empty one: the only trace left
	// outside this mount namespace.
	if err := os.MkdirAll(rootParent, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("tmpfs", rootParent, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return "", fmt.Errorf("mount tmpfs on %s: %w", rootParent, err)
	}
	root := guestRoot
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", err
	}
	ov := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	flags := uintptr(unix.MS_NODEV)
	if shift {
		// metacopy: a chown copies up the inode only, not the file's data.
		ov += ",metacopy=on,redirect_dir=on"
		flags |= unix.MS_NOSUID
	}
	if err := unix.Mount("overlay", root, "overlay", flags, ov); err != nil {
		return "", fmt.Errorf("mount overlay (%s) on %s: %w", ov, root, err)
	}
	if shift {
		if err := shiftOwnership(root, c.UIDBase); err != nil {
			return "", fmt.Errorf("shifting the ownership of the base image %s into the guest's id range: %w", c.Base, err)
		}
	}
	return root, nil
}

// shiftOwnership gives every file of the overlay at root the owner the guest's user
// namespace sees as the image's: ids 0..65535 become uidBase.. on the host. Through an
// overlay mounted with metacopy, each chown copies up only the inode (an entry in the
// tmpfs upper layer, the data stays in the read-only base), so this costs an inode per
// file and a few seconds for a full Debian tree instead of a copy of the image. It is
// the fallback for kernels that cannot idmap the base (squashfs before Linux 6.2): the
// guest still runs in its user namespace and sees its files owned by its own root.
// chown drops set-id bits and file capabilities; set-id bits are put back (the overlay
// is nosuid anyway, as the idmapped base is), capabilities are not.
func shiftOwnership(root string, uidBase uint32) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		if st.Uid >= idRange || st.Gid >= idRange {
			return nil // outside the mapping: stays unmapped (nobody) in the guest
		}
		if err := unix.Lchown(path, int(uidBase+st.Uid), int(uidBase+st.Gid)); err != nil {
			return err
		}
		if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 && st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return unix.Chmod(path, st.Mode&0o7777)
		}
		return nil
	})
}

// rootParent is covered by a tmpfs in the monitor's mount namespace (the desktop's /mnt
// is untouched); guestRoot, the guest's root, is mounted in it.
const (
	rootParent = "/mnt"
	guestRoot  = "/mnt/guest"
)

// idmapMount makes an idmapped, read-only, nodev, nosuid clone of the mount at src at dst:
// ids 0..65535 on the image are uidBase.. on the host, which the guest's user namespace
// maps back to 0..65535. This is how the root-owned image appears root-owned to the
// guest's unprivileged root (Linux 5.12 mount_setattr; the file system must support it:
// ext4, xfs, btrfs from 5.12–5.15, squashfs from 6.2, tmpfs from 6.3; overlayfs itself
// never, hence the idmapped *lower* layer, supported from 5.19).
func idmapMount(src, dst string, uidBase uint32) error {
	holder := exec.Command("/proc/self/exe")
	holder.Args = []string{"overtime-container-userns"}
	holder.Env = []string{usernsEnv + "=1"}
	in, err := holder.StdinPipe()
	if err != nil {
		return err
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uidBase), Size: idRange}}
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Pdeathsig: unix.SIGKILL}
	if err := holder.Start(); err != nil {
		return fmt.Errorf("user namespace for the id mapping: %w", err)
	}
	defer func() { in.Close(); _ = holder.Wait() }()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid))
	if err != nil {
		return err
	}
	defer ns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID,
		Userns_fd: uint64(ns.Fd()),
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("mount_setattr: %w: this kernel cannot idmap that file system (squashfs needs Linux 6.2, tmpfs 6.3; NFS cannot)", err)
		}
		return fmt.Errorf("mount_setattr: %w", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount to %s: %w", dst, err)
	}
	return nil
}

// checkInit checks that argv0 names an executable in the guest's root (searching path
// when it has no slash), resolving symbolic links inside the root (RESOLVE_IN_ROOT), so
// that a missing init fails Start with a clear message.
func checkInit(root, argv0, path string) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	try := func(p string) (bool, error) {
		fd, err := unix.Openat2(rfd, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
		if err != nil {
			return false, err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return false, err
		}
		return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0, nil
	}
	if !strings.Contains(argv0, "/") {
		for _, d := range filepath.SplitList(path) {
			if ok, _ := try(filepath.Join(d, argv0)); ok {
				return nil
			}
		}
		return fmt.Errorf("init %q not found in the image's PATH %s", argv0, path)
	}
	ok, err := try(argv0)
	if err != nil {
		return fmt.Errorf("init %s not in the image: %w", argv0, err)
	}
	if !ok {
		return fmt.Errorf("init %s is not executable", argv0)
	}
	return nil
}

// hideHybridUnified detaches the cgroup2 hierarchy of a hybrid layout
// (/sys/fs/cgroup/unified) from this mount namespace when controllers are attached to it
// (crun 1.8 refuses such a layout outright, even with its cgroup manager disabled). The
// agent, not crun, handles cgroups, so crun loses nothing; the guest never sees the host's
// cgroup mounts anyway. On pure v1, pure v2 and systemd's hybrid layout (no controllers
// in unified) this does nothing.
func hideHybridUnified() error {
	const unified = "/sys/fs/cgroup/unified"
	b, err := os.ReadFile(unified + "/cgroup.controllers")
	if err != nil || strings.TrimSpace(string(b)) == "" {
		return nil
	}
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) != nil || st.Type == unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	if err := unix.Unmount(unified, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("hiding the hybrid cgroup2 hierarchy from crun: %w", err)
	}
	return nil
}

func openAll(paths []string) ([]*os.File, error) {
	var out []*os.File
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// The guest's boot clock starts at (about) zero, so that the guest, like a VM, reports
// having booted when it started. Slurm relies on it: a node woken by power saving counts
// as resumed only when its slurmd reports a boot after the resume request, and a
// container sharing the desktop's boot time would never be.
//
// crun 1.8 ignores the runtime spec's timeOffsets, so crun itself is run in a time
// namespace made for it (inTimeNamespace): a re-exec of this binary unshares one, sets
// the offset and execs crun, which enters it at exec (Linux 5.11+). Not the monitor
// itself: after unshare(CLONE_NEWTIME) a process may not fork with CLONE_VM, which Go's
// exec does (Linux before 6.x refuses it with EINVAL, as Debian 12's 6.1 does). crun
// start must see init's start time in /proc as crun create did, so both run in time
// namespaces with the same offset, computed once per monitor (bootOffset).

var (
	bootOffsetOnce sync.Once
	bootOffsetSec  int64
)

// bootOffset is the boot clock offset of the guest's time namespace: minus the uptime
// now, keeping one second (the kernel refuses an offset that makes the clock negative,
// and the clock moves on while this runs).
func bootOffset() int64 {
	bootOffsetOnce.Do(func() {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) == nil {
			bootOffsetSec = -(ts.Sec - 1)
		}
	})
	return bootOffsetSec
}

// inTimeNamespace is a command running name with args in a new time namespace whose boot
// clock is offset by offset seconds (through this binary: timensMain).
func inTimeNamespace(offset int64, name string, args ...string) *exec.Cmd {
	cmd := exec.Command("/proc/self/exe", append([]string{name}, args...)...)
	cmd.Args[0] = "overtime-container-timens"
	// The monitor's own marker must not make the launcher another monitor.
	env := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, monitorEnv+"=") })
	cmd.Env = append(env, timensEnv+"="+strconv.FormatInt(offset, 10))
	return cmd
}

// timensMain is the re-exec of inTimeNamespace: unshare the time namespace, set the
// offset, exec the command (which enters the namespace). Without time namespaces the
// command runs anyway and the guest keeps the desktop's uptime, which it is told.
func timensMain() {
	offset := os.Getenv(timensEnv)
	env := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, timensEnv+"=") })
	err := unix.Unshare(unix.CLONE_NEWTIME)
	if err == nil {
		err = os.WriteFile("/proc/self/timens_offsets", []byte("boottime "+offset+" 0\n"), 0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "overtime container monitor: warning: guest shares the desktop's boot time (no time namespace: %v)\n", err)
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "overtime container monitor: time namespace launcher without a command")
		os.Exit(2)
	}
	path, err := exec.LookPath(os.Args[1])
	if err == nil {
		err = syscall.Exec(path, os.Args[1:], env)
	}
	fmt.Fprintf(os.Stderr, "overtime container monitor: exec %s: %v\n", os.Args[1], err)
	os.Exit(127)
}

func crunStart(c monitorConfig) error {
	args := append(append([]string{}, c.Crun[1:]...), "start", c.Name)
	out, err := inTimeNamespace(bootOffset(), c.Crun[0], args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("crun start: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
