// Package container is the OS-level container backend of the node agent
// (model.BackendContainer): the compute guest runs on the desktop's own kernel in its own
// namespaces and cgroup, started by crun, a well-kept OCI runtime.
//
// # Why crun
//
// The guest must not read the desktop user's data nor escape to the host, so it needs a
// user namespace, a seccomp filter and dropped capabilities, done the way the maintained
// runtimes do them rather than by a launcher of our own. crun (Debian 12: 1.8.1) rather
// than runc (1.1.5): crun is a small C binary without a Go runtime (fast create, no
// threads in the way of namespace set-up), supports idmapped mounts and time namespaces
// in newer releases, and has --cgroup-manager=disabled, which lets the agent keep placing
// and limiting guests in its own groups on cgroup v1, v2 and under systemd (runc always
// manages the container's cgroup itself). systemd-nspawn needs systemd as PID 1 and
// libvirt-lxc failed on hybrid cgroup layouts.
//
// # What a guest gets
//
//   - The base image read-only: a squashfs file on a loop device (read-only, autoclear)
//     or a directory, mounted idmapped (image uid 0 = host uid Options.UIDBase = the
//     guest's root) as the lower layer of an overlayfs whose upper layer is a tmpfs:
//     everything the guest writes lives in its memory cgroup and disappears with it.
//     Idmapping needs the base's file system to support it: squashfs from Linux 6.2,
//     ext4/xfs/btrfs directories from 5.12–5.15, never NFS. Where the kernel cannot
//     (Debian 12's stock 6.1 and squashfs), the overlay is mounted with metacopy and
//     every file's owner is shifted into the guest's range through it
//     (shiftOwnership): a metadata-only copy-up, an inode per file in the tmpfs, no
//     data copied; set-id bits survive, file capabilities do not.
//   - A user namespace (uids and gids 0..65535 = UIDBase..; DefaultUIDBase is far from
//     any desktop user), new mount, PID, UTS, IPC, network, cgroup and time namespaces
//     (the boot clock starts at zero, as Slurm's power saving needs). crun pivots into
//     the overlay: the desktop's /home, /run/user, /tmp and the agent's credential are
//     not reachable at all. /proc with Docker's masked and read-only paths, /sys
//     read-only, a tmpfs /dev with only null zero full random urandom tty (+ pts, shm,
//     mqueue).
//   - Capabilities cut to keptCaps (Docker's default set without CAP_MKNOD, with
//     CAP_NET_ADMIN for its own DHCP client), all of them only over the guest's own
//     namespaces; no_new_privs; a seccomp deny-list (seccompProfile: namespaces, mounts,
//     kernel keys, modules, bpf, io_uring, perf, userfaultfd, ... fail with EPERM).
//   - Its init is the image's /sbin/init, or Spec.Cmdline split into argv like a shell
//     would ("/bin/sh -c 'echo hi'"), run with nice 19 and SCHED_IDLE (inherited by
//     every process it starts) when Spec.CPUIdle.
//   - Limits in its cgroup, set by the agent: idle class (Spec.CPUIdle), memory.max =
//     Spec.MemoryMB and no swap (the overlay's tmpfs is charged to it too), cpu.max =
//     Spec.CPULimit, a low I/O weight (Options.IOWeight). Spec.VCPUs is not enforced
//     (CPULimit caps its bandwidth); Kernel and Initrd do not apply (the host's kernel).
//   - Networking: NetNone (only lo) or NetBridged (a veth pair, the host end enslaved to
//     Spec.Bridge, the guest end eth0 with Spec.MAC, brought up by the guest's own DHCP
//     client). NetNAT is not supported yet: it needs nftables or iptables on the host.
//
// # Process model and adoption
//
// Start writes the OCI bundle (StateDir/bundle/config.json, runtime-spec types) and
// re-executes the agent binary (/proc/self/exe) as the guest's monitor (MaybeInit, which
// the agent's main calls first, is its entry point), in a session and mount namespace of
// its own, the role conmon plays for Podman. The monitor builds the root file system in
// its mount namespace (nothing is ever mounted in the desktop's), enters a fresh time
// namespace, runs `crun create` from inside the guest's cgroup (so the guest's cgroup
// namespace is rooted there; crun runs with --cgroup-manager=disabled) and reports init's
// PID; the agent sets the scheduling class and the veth while init waits, then the
// monitor runs `crun start`. The monitor is init's subreaper: it records how init ended
// (RunDir/NAME.exit) and exits with it. Neither has a parent-death signal: the guest
// survives the agent. crun's state is in RunDir/crun.
//
// The cgroup is the source of truth: each guest's group has a fixed path (direct
// placement: OPTIONS-PARENT/guest-NAME; on systemd hosts the delegated scope
// overtime.slice/overtime-guest-NAME.scope, group "guest" below it, the monitor in
// "monitor" next to it), and a small record in RunDir (NAME.json: init's PID and start
// time, StateDir, veth) says the rest. A new Backend (a restarted agent) finds the
// running guest through Status, refuses to start a second one, re-asserts limits through
// the agent, and Stop kills the cgroup's processes (the mount namespaces, overlay, tmpfs
// and loop device go with the last of them), deletes crun's state, removes the veth, the
// cgroup, StateDir and the record.
package container

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// SystemdMode says whether guests go into systemd scopes.
type SystemdMode int

const (
	// SystemdAuto uses a scope when the hierarchy is v2 and PID 1 is systemd.
	SystemdAuto SystemdMode = iota
	// SystemdOff always places the guest's group directly in the cgroup file system.
	SystemdOff
	// SystemdOn always uses a systemd scope.
	SystemdOn
)

// Options configure a Backend. The zero value is the production setting.
type Options struct {
	// Hierarchy is the cgroup layout (nil: cgroup.Detect()).
	Hierarchy *cgroup.Hierarchy
	// Parent is the group below which guests' groups are made with direct placement
	// (nil: /overtime). Not used with systemd scopes.
	Parent *cgroup.Group
	// RunDir keeps the per-guest records and locks (default /run/overtime/container).
	RunDir string
	// Systemd: see SystemdMode.
	Systemd SystemdMode
	// Slice is the systemd slice of the guests' scopes (default overtime.slice).
	Slice string
	// HostNetNS is the named network namespace (ip netns) that holds the bridges: the host
	// end of a bridged guest's veth is made there. "" is the agent's own (production).
	HostNetNS string
	// IOWeight is the guests' I/O weight on the io.weight scale (default 10: low).
	IOWeight int
	// Exe is the binary re-executed as the guest's monitor; it must call MaybeInit first
	// thing (default /proc/self/exe).
	Exe string
	// Crun is the OCI runtime binary (default: crun in PATH).
	Crun string
	// UIDBase is the first host uid and gid of the guest's user namespace (default
	// DefaultUIDBase): the guest's uids 0..65535 are UIDBase..UIDBase+65535 on the host.
	UIDBase uint32
	// NoIdmap takes the path of kernels that cannot idmap the base image (ownership
	// shifted in the overlay, see shiftOwnership) even where the kernel can: for tests.
	NoIdmap bool
	// Logf receives notes (I/O weight not applicable, cleanup details); nil: dropped.
	Logf func(format string, a ...any)
}

// Backend runs containers. It keeps no state in memory that matters: any number of
// Backends (an agent restarted, a test's fresh instance) see the same guests.
type Backend struct {
	o       Options
	h       *cgroup.Hierarchy
	err     error // detection error, reported by Available and Start
	systemd bool

	// scopeRoot is where systemd's tree starts: the root (tests move it below a
	// throwaway group, with a stand-in for busctl).
	scopeRoot *cgroup.Group

	mu       sync.Mutex
	children map[int]*child // inits this Backend started and waits for
}

// child is a guest this Backend started: done closes when its monitor has ended, which
// is after init has ended and its exit has been recorded.
type child struct {
	start uint64
	done  chan struct{}
}

var _ guest.Backend = (*Backend)(nil)

// New returns a backend; problems with the host show up in Available and Start.
func New(o Options) *Backend {
	b := &Backend{o: o, h: o.Hierarchy, children: map[int]*child{}}
	if b.o.RunDir == "" {
		b.o.RunDir = paths.ContainerRun
	}
	if b.o.Slice == "" {
		b.o.Slice = "overtime.slice"
	}
	if b.o.IOWeight == 0 {
		b.o.IOWeight = 10
	}
	if b.o.Exe == "" {
		b.o.Exe = "/proc/self/exe"
	}
	if b.o.Crun == "" {
		b.o.Crun = "crun"
		if p, err := exec.LookPath("crun"); err == nil {
			b.o.Crun = p
		}
	}
	if b.o.UIDBase == 0 {
		b.o.UIDBase = DefaultUIDBase
	}
	if b.h == nil {
		b.h, b.err = cgroup.Detect()
	}
	if b.h != nil {
		if b.o.Parent == nil {
			b.o.Parent = b.h.Group("overtime")
		}
		b.scopeRoot = b.h.Group("/")
		switch b.o.Systemd {
		case SystemdOn:
			b.systemd = true
		case SystemdAuto:
			b.systemd = b.h.Version() == cgroup.V2 && systemdRunning()
		}
	}
	return b
}

func (b *Backend) logf(format string, a ...any) {
	if b.o.Logf != nil {
		b.o.Logf(format, a...)
	}
}

// Kind is model.BackendContainer.
func (b *Backend) Kind() model.GuestBackend { return model.BackendContainer }

// Available checks root, the cgroup controllers, namespaces and overlayfs.
func (b *Backend) Available(ctx context.Context) error {
	un := func(format string, a ...any) error { return guest.Unavailable(model.BackendContainer, format, a...) }
	if b.err != nil {
		return un("cgroups: %v", b.err)
	}
	if os.Geteuid() != 0 {
		return un("needs root (namespaces, mounts, cgroups)")
	}
	ctrls, err := b.h.Controllers()
	if err != nil {
		return un("cgroups: %v", err)
	}
	need := []string{"cpu", "memory"}
	if b.h.Version() == cgroup.V1 {
		need = append(need, "cpuacct", "freezer")
	}
	for _, c := range need {
		if !slices.Contains(ctrls, c) {
			return un("cgroup controller %s not available (%s)", c, b.h)
		}
	}
	for _, ns := range []string{"mnt", "pid", "uts", "ipc", "net", "cgroup", "user", "time"} {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return un("kernel without %s namespaces", ns)
		}
	}
	if !overlayAvailable() {
		return un("overlayfs not available (module overlay)")
	}
	if b.systemd {
		if _, err := exec.LookPath("busctl"); err != nil {
			return un("systemd scopes need busctl: %v", err)
		}
	}
	if _, err := os.Stat(b.o.Exe); err != nil {
		return un("agent binary: %v", err)
	}
	if _, err := exec.LookPath(b.o.Crun); err != nil {
		return un("OCI runtime: %v (Debian package crun)", err)
	}
	return nil
}

func overlayAvailable() bool {
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(b), "\toverlay\n") {
		return true
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	rel := unix.ByteSliceToString(u.Release[:])
	_, err := os.Stat(filepath.Join("/lib/modules", rel, "kernel/fs/overlayfs"))
	return err == nil
}

// group is the guest's cgroup: a fixed path, so that it is found without any record.
func (b *Backend) group(name string) *cgroup.Group {
	if b.systemd {
		return b.scopeRoot.Child(scopeCgroup(b.o.Slice, scopeUnit(name)))
	}
	return b.o.Parent.Child("guest-" + name)
}

// record is what RunDir/NAME.json keeps about a started guest.
type record struct {
	Name      string             `json:"name"`
	PID       int                `json:"pid"`
	PIDStart  uint64             `json:"pidStart"` // /proc/PID/stat starttime: a reused PID does not match
	StateDir  string             `json:"stateDir"`
	Cgroup    string             `json:"cgroup"`
	Network   model.GuestNetwork `json:"network"`
	HostVeth  string             `json:"hostVeth,omitempty"`
	HostNetNS string             `json:"hostNetNS,omitempty"`
	Unit      string             `json:"unit,omitempty"`
	Monitor   int                `json:"monitor,omitempty"` // the monitor's PID (informational)
	Started   time.Time          `json:"started"`
}

// exitRecord is RunDir/NAME.exit: how init ended, written by the agent that started it.
type exitRecord struct {
	PID      int    `json:"pid"`
	PIDStart uint64 `json:"pidStart"`
	Code     int    `json:"code"`   // -1 when killed by a signal
	Signal   string `json:"signal"` // "" unless killed
}

func (b *Backend) recordPath(name string) string { return filepath.Join(b.o.RunDir, name+".json") }
func (b *Backend) exitPath(name string) string   { return filepath.Join(b.o.RunDir, name+".exit") }

func (b *Backend) readRecord(name string) (*record, error) {
	data, err := os.ReadFile(b.recordPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("container: record %s: %w", b.recordPath(name), err)
	}
	return &r, nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// lock takes the guest's lock file (flock, so that two agents or Backends serialise
// Start and Stop) and returns its release.
func (b *Backend) lock(ctx context.Context, name string) (func(), error) {
	if err := os.MkdirAll(b.o.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("container: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(b.o.RunDir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("container: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, fmt.Errorf("container: lock %s: %w", f.Name(), err)
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("container: waiting for the lock of %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

// launch is a validated Spec.
type launch struct {
	spec guest.Spec
	cfg  monitorConfig
	argv []string
	env  []string
}

func (b *Backend) validate(s guest.Spec) (*launch, error) {
	if names.Hostname(s.Name) != nil {
		return nil, fmt.Errorf("container: invalid name %q: [a-z0-9-], at most 63", s.Name)
	}
	if s.MemoryMB < 16 {
		return nil, fmt.Errorf("container %s: memoryMB %d: at least 16", s.Name, s.MemoryMB)
	}
	if s.BaseImage == "" {
		return nil, fmt.Errorf("container %s: no base image", s.Name)
	}
	st, err := os.Stat(s.BaseImage)
	if err != nil {
		return nil, fmt.Errorf("container %s: base image: %w", s.Name, err)
	}
	format := s.BaseFormat
	if format == "" {
		format = "squashfs"
		if st.IsDir() {
			format = "dir"
		}
	}
	switch format {
	case "dir":
		if !st.IsDir() {
			return nil, fmt.Errorf("container %s: base image %s is not a directory", s.Name, s.BaseImage)
		}
	case "squashfs":
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("container %s: base image %s is not a file", s.Name, s.BaseImage)
		}
	default:
		return nil, fmt.Errorf("container %s: base format %q: the container backend takes squashfs or dir", s.Name, format)
	}
	for _, p := range []struct{ what, path string }{{"state directory", s.StateDir}, {"base image", s.BaseImage}} {
		if !filepath.IsAbs(p.path) || strings.ContainsAny(p.path, ",:\\\n") {
			return nil, fmt.Errorf("container %s: %s %q: want an absolute path without , : or \\ (overlayfs options)", s.Name, p.what, p.path)
		}
	}
	switch s.Network {
	case "", model.NetNone:
		s.Network = model.NetNone
	case model.NetBridged:
		if s.Bridge == "" {
			return nil, fmt.Errorf("container %s: bridged network without a bridge", s.Name)
		}
	case model.NetNAT:
		return nil, fmt.Errorf("container %s: network nat is not supported by the container backend yet (use bridged or none)", s.Name)
	default:
		return nil, fmt.Errorf("container %s: unknown network %q", s.Name, s.Network)
	}
	if err := checkJobs(s, b.o.UIDBase); err != nil {
		return nil, fmt.Errorf("container %s: %w", s.Name, err)
	}
	argv := []string{"/sbin/init"}
	if strings.TrimSpace(s.Cmdline) != "" {
		if argv, err = splitArgs(s.Cmdline); err != nil {
			return nil, fmt.Errorf("container %s: %w", s.Name, err)
		}
	}
	const path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	return &launch{spec: s, argv: argv, env: []string{
		"PATH=" + path,
		"HOME=/root",
		"TERM=linux",
		"container=overtime",
		"OVERTIME_HOST=" + s.Host,
		"OVERTIME_AGENT_URL=" + s.AgentURL,
		// What the guest was given, which is what a dynamic Slurm node should announce
		// (the guest sees the desktop's CPUs and memory in /proc).
		"OVERTIME_GUEST_CPUS=" + strconv.Itoa(s.VCPUs),
		"OVERTIME_GUEST_MEMORY_MB=" + strconv.Itoa(s.MemoryMB),
	}, cfg: monitorConfig{
		Name:      s.Name,
		Hostname:  s.Name,
		Crun:      b.crunArgs(),
		Bundle:    filepath.Join(s.StateDir, "bundle"),
		Base:      filepath.Clean(s.BaseImage),
		Format:    format,
		Runtime:   filepath.Join(s.StateDir, "rt"),
		TmpfsSize: int64(s.MemoryMB) << 20,
		UIDBase:   b.o.UIDBase,
		NoIdmap:   b.o.NoIdmap,
		Argv0:     argv[0],
		Path:      path,
		RunDir:    b.o.RunDir,
		JobUIDs:   s.JobUIDs,
		JobGIDs:   s.JobGIDs,
		Storage:   s.Storage,
	}}, nil
}

// Start creates and starts the guest. It fails if the guest is running (or frozen); the
// remains of one that ended (record, cgroup, state directory) are cleaned up first.
func (b *Backend) Start(ctx context.Context, s guest.Spec) (err error) {
	if b.err != nil {
		return fmt.Errorf("container: cgroups: %w", b.err)
	}
	l, err := b.validate(s)
	if err != nil {
		return err
	}
	unlock, err := b.lock(ctx, s.Name)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := b.status(s.Name)
	if err != nil {
		return err
	}
	switch st.State {
	case guest.StateRunning, guest.StatePaused:
		return fmt.Errorf("container %s is already running (pid %d, cgroup %s)", s.Name, st.PID, st.Cgroup)
	case guest.StateAbsent:
	default:
		if err := b.stop(ctx, s.Name); err != nil {
			return fmt.Errorf("container %s: cleaning up the previous run: %w", s.Name, err)
		}
	}
	defer func() {
		if err != nil {
			if serr := b.stop(context.Background(), s.Name); serr != nil {
				err = fmt.Errorf("%w (cleanup: %v)", err, serr)
			}
		}
	}()
	return b.start(ctx, l)
}

func (b *Backend) start(ctx context.Context, l *launch) error {
	s := l.spec
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
	}
	// Stop removes the state directory: it must be ours (new, or what a run left).
	if ents, err := os.ReadDir(s.StateDir); err == nil {
		for _, e := range ents {
			if n := e.Name(); n != "console.log" && n != "rt" && n != "bundle" && n != "secrets" {
				return fmt.Errorf("container %s: state directory %s holds %s, which is not the guest's: refusing to use (and later remove) it", s.Name, s.StateDir, n)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("container %s: state directory: %w", s.Name, err)
	}
	rec := &record{Name: s.Name, StateDir: s.StateDir, Network: s.Network, Started: time.Now().UTC()}
	if s.Network == model.NetBridged {
		rec.HostVeth, rec.HostNetNS = hostVeth(s.Name), b.o.HostNetNS
	}
	if b.systemd {
		rec.Unit = scopeUnit(s.Name)
	}
	g := b.group(s.Name)
	rec.Cgroup = g.Path()
	// The record comes first: whatever fails below, Stop finds what to clean up.
	_ = os.Remove(b.exitPath(s.Name))
	if err := writeJSON(b.recordPath(s.Name), rec); err != nil {
		return fmt.Errorf("container %s: %w", s.Name, err)
	}
	if err := os.MkdirAll(l.cfg.Bundle, 0o700); err != nil {
		return fmt.Errorf("container %s: %w", s.Name, err)
	}
	console, err := os.OpenFile(filepath.Join(s.StateDir, "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("container %s: %w", s.Name, err)
	}
	defer console.Close()
	if len(s.Secrets) > 0 {
		if l.cfg.Secrets, err = b.writeSecrets(s); err != nil {
			return fmt.Errorf("container %s: secrets: %w", s.Name, err)
		}
	}
	if !b.systemd {
		if err := g.Create(); err != nil {
			return fmt.Errorf("container %s: %w", s.Name, err)
		}
		if err := b.applyLimits(g, s); err != nil {
			return fmt.Errorf("container %s: %w", s.Name, err)
		}
	}
	for k := range g.Paths() {
		l.cfg.Cgroup = append(l.cfg.Cgroup, filepath.Join(g.Dir(k), "cgroup.procs"))
	}
	slices.Sort(l.cfg.Cgroup)
	spec := ociSpec(l.cfg, l.argv, l.env, guestRoot)
	if err := writeJSON(filepath.Join(l.cfg.Bundle, "config.json"), spec); err != nil {
		return fmt.Errorf("container %s: bundle: %w", s.Name, err)
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("container %s: socketpair: %w", s.Name, err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return err
	}
	parentEnd := os.NewFile(uintptr(fds[0]), "container-sync")
	childEnd := os.NewFile(uintptr(fds[1]), "container-sync-child")
	defer parentEnd.Close()
	cmd := &exec.Cmd{
		Path:       b.o.Exe,
		Args:       []string{monitorArg0, s.Name},
		Env:        []string{monitorEnv + "=1", "PATH=" + os.Getenv("PATH")},
		Stdout:     console,
		Stderr:     console,
		ExtraFiles: []*os.File{childEnd},
		SysProcAttr: &syscall.SysProcAttr{
			// No Pdeathsig: the guest and its monitor outlive the agent. Its own session:
			// no signal for the agent's process group or terminal reaches it. Its own
			// mount namespace: the guest's mounts never appear in the desktop's.
			Setsid:     true,
			Cloneflags: unix.CLONE_NEWNS,
		},
	}
	err = cmd.Start()
	childEnd.Close()
	if err != nil {
		return fmt.Errorf("container %s: starting the monitor %s: %w", s.Name, b.o.Exe, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	rec.Monitor = cmd.Process.Pid
	if b.systemd {
		if err := b.place(ctx, g, s, cmd.Process.Pid); err != nil {
			return fmt.Errorf("container %s: %w", s.Name, err)
		}
	}
	pid, err := monitorHandshake(ctx, parentEnd, l.cfg)
	if err != nil {
		return fmt.Errorf("container %s: %w%s", s.Name, err, consoleTail(s.StateDir))
	}
	rec.PID = pid
	rec.PIDStart, err = procStart(pid)
	if err != nil {
		return fmt.Errorf("container %s: %w", s.Name, err)
	}
	if err := writeJSON(b.recordPath(s.Name), rec); err != nil {
		return fmt.Errorf("container %s: %w", s.Name, err)
	}
	c := &child{start: rec.PIDStart, done: make(chan struct{})}
	b.mu.Lock()
	b.children[pid] = c
	b.mu.Unlock()
	go b.reap(cmd, pid, c)
	ok = true
	// crun's init waits for `crun start` before it execs the guest's init: the class,
	// the network and the start happen while nothing of the guest runs yet. The class is
	// inherited by everything the guest starts; without CAP_SYS_NICE it cannot leave it.
	if s.CPUIdle {
		if err := unix.Setpriority(unix.PRIO_PROCESS, pid, 19); err != nil {
			return fmt.Errorf("container %s: nice 19: %w", s.Name, err)
		}
		if err := unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
			return fmt.Errorf("container %s: SCHED_IDLE: %w", s.Name, err)
		}
	}
	if s.Network == model.NetBridged {
		if err := setupBridged(ctx, b.o.HostNetNS, rec.HostVeth, s.Bridge, s.MAC, pid); err != nil {
			return fmt.Errorf("container %s: network: %w", s.Name, err)
		}
	}
	crunExe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)) // init waits in crun until started
	if err := monitorStart(parentEnd); err != nil {
		return fmt.Errorf("container %s: %w%s", s.Name, err, consoleTail(s.StateDir))
	}
	// crun start returns once it has released init, which then execs the guest's init:
	// Start returns when that has happened (or init is gone), as callers expect.
	for {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || exe != crunExe {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s: init did not exec the guest's init: %w", s.Name, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// monitorStart has the monitor run crun start and reads its answer.
func monitorStart(conn *os.File) error {
	if _, err := conn.Write([]byte("start\n")); err != nil {
		return fmt.Errorf("telling the guest's monitor to start: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	switch line = strings.TrimSpace(line); {
	case line == "started":
		return nil
	case strings.HasPrefix(line, "error "):
		return errors.New(strings.TrimPrefix(line, "error "))
	case line != "":
		return fmt.Errorf("the guest's monitor said %q", line)
	}
	return fmt.Errorf("waiting for the guest's monitor to start it: %v", err)
}

// crunArgs is crun with its global options: the state below RunDir (a restarted agent
// finds it), and no cgroup handling of its own (the agent's groups and limits are the
// truth on cgroup v1, v2, with or without systemd; crun would place the guest by its own
// idea of the layout).
func (b *Backend) crunArgs() []string {
	return []string{b.o.Crun, "--root", filepath.Join(b.o.RunDir, "crun"), "--cgroup-manager", "disabled"}
}

// crunDelete removes crun's state of the guest, killing its init if it still runs.
// processesGone says the guest's cgroups are gone with every process in them (stop
// killed them): then crun's state describes nothing that runs.
func (b *Backend) crunDelete(ctx context.Context, name string, processesGone bool) error {
	dir := filepath.Join(b.o.RunDir, "crun", name)
	if gone(dir) {
		return nil
	}
	err := run(ctx, append(b.crunArgs(), "delete", "--force", name))
	if err == nil || gone(dir) || !processesGone {
		return err
	}
	// crun's --force first signals the init it recorded and fails when it cannot ("open
	// pidfd: No such file or directory": the process ended between stop's kill and this
	// call, or its pid is another process's now), leaving its state behind: every later
	// start would fail on it, and the guest could never run again (CI saw this). Nothing
	// of the guest runs, so the state is only files under our RunDir.
	if rerr := os.RemoveAll(dir); rerr != nil {
		return errors.Join(err, rerr)
	}
	b.logf("container %s: crun could not delete the stopped guest's state (%v); removed it", name, err)
	return nil
}

func gone(p string) bool {
	_, err := os.Lstat(p)
	return errors.Is(err, os.ErrNotExist)
}

// monitorGroup is the systemd scope's group for the guest's monitor (next to "guest": a
// v2 group with processes cannot pass controllers to its children).
func monitorGroup(g *cgroup.Group) *cgroup.Group { return g.Parent().Child("monitor") }

// place puts the monitor (pid) into a new delegated systemd scope's "monitor" sub-group,
// and makes the guest's group "guest" next to it with its limits.
func (b *Backend) place(ctx context.Context, g *cgroup.Group, s guest.Spec, pid int) error {
	unit := scopeUnit(s.Name)
	if err := run(ctx, startScopeCommand(unit, b.o.Slice, s.Name, pid)); err != nil {
		return fmt.Errorf("systemd scope: %w", err)
	}
	scope := g.Parent().Path()
	for {
		if cur, err := b.h.FindByPID(pid); err == nil && cur.Path() == scope {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("systemd scope %s: process %d not moved into %s: %w", unit, pid, scope, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The scope holds the process: move it down, then let the scope pass its controllers
	// on (v2 allows that only in a group without processes).
	m := monitorGroup(g)
	if err := m.Mkdir(); err != nil {
		return err
	}
	if err := m.AddProc(pid); err != nil {
		return err
	}
	if err := g.Create(); err != nil {
		return err
	}
	return b.applyLimits(g, s)
}

func (b *Backend) applyLimits(g *cgroup.Group, s guest.Spec) error {
	if s.CPUIdle {
		if err := g.SetIdle(true); err != nil {
			return err
		}
	}
	if err := g.SetMemoryMax(int64(s.MemoryMB) << 20); err != nil {
		return err
	}
	// The memory limit is the guest's: it must not spill into the desktop's swap.
	if err := g.SetSwapMax(0); err != nil && !errors.Is(err, cgroup.ErrNotSupported) {
		return err
	}
	if err := g.SetCPUMax(s.CPULimit); err != nil {
		return err
	}
	note, err := g.SetIOWeight(b.o.IOWeight)
	if err != nil {
		return err
	}
	if note != "" {
		b.logf("container %s: %s", s.Name, note)
	}
	return nil
}

// monitorHandshake sends the configuration to the waiting monitor and reads its report:
// "created PID" (crun's init waits for crun start) or "error MSG".
func monitorHandshake(ctx context.Context, conn *os.File, cfg monitorConfig) (int, error) {
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	data, err := json.Marshal(cfg)
	if err != nil {
		return 0, err
	}
	if _, err := conn.Write(append(data, '\n')); err != nil {
		return 0, fmt.Errorf("sending the configuration to the guest's monitor: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "created "):
		pid, perr := strconv.Atoi(strings.TrimPrefix(line, "created "))
		if perr != nil || pid <= 0 {
			return 0, fmt.Errorf("the guest's monitor said %q", line)
		}
		return pid, nil
	case strings.HasPrefix(line, "error "):
		return 0, errors.New(strings.TrimPrefix(line, "error "))
	case line != "":
		return 0, fmt.Errorf("the guest's monitor said %q", line)
	case err == io.EOF:
		return 0, errors.New("the guest's monitor ended without a report")
	}
	return 0, fmt.Errorf("waiting for the guest's monitor: %w", err)
}

func consoleTail(stateDir string) string {
	b, err := os.ReadFile(filepath.Join(stateDir, "console.log"))
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 1000 {
		b = b[len(b)-1000:]
	}
	return "; console: " + strings.TrimSpace(string(b))
}

// lastConsoleLine is the last non-empty line of the guest's console log ("" if none).
func lastConsoleLine(stateDir string) string {
	if stateDir == "" {
		return ""
	}
	f, err := os.Open(filepath.Join(stateDir, "console.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(len(buf)) {
		_, _ = f.Seek(fi.Size()-int64(len(buf)), io.SeekStart)
	}
	n, _ := io.ReadFull(f, buf)
	lines := strings.Split(strings.TrimRight(string(buf[:n]), "\r\n \t"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// reap waits for the monitor of a guest this agent started; the monitor has recorded
// init's end (RunDir/NAME.exit) before it exits.
func (b *Backend) reap(cmd *exec.Cmd, pid int, c *child) {
	_ = cmd.Wait()
	close(c.done)
	b.mu.Lock()
	if b.children[pid] == c {
		delete(b.children, pid)
	}
	b.mu.Unlock()
}

// procStart is field 22 of /proc/PID/stat (start time in clock ticks since boot).
func procStart(pid int) (uint64, error) {
	st, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return st.start, nil
}

type pstat struct {
	state byte
	start uint64
}

func procStat(pid int) (pstat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pstat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return pstat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return pstat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return pstat{}, fmt.Errorf("/proc/%d/stat: %v", pid, err)
	}
	return pstat{state: f[0][0], start: start}, nil
}

// nsInit reports whether pid is the init of a PID namespace one level below ours.
func nsInit(pid int) bool {
	own, err := nsPids(os.Getpid())
	if err != nil {
		return false
	}
	p, err := nsPids(pid)
	return err == nil && len(p) == len(own)+1 && p[len(p)-1] == "1"
}

func nsPids(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return strings.Fields(v), nil
		}
	}
	return nil, fmt.Errorf("/proc/%d/status: no NSpid", pid)
}

// Status reports the guest from its cgroup: running or paused (frozen) while the group
// has processes, with init's PID (from the record, checked against the process's start
// time, or found as the PID-namespace init among the group's processes), CPU time and
// cap; shutoff or crashed when the group is empty but a record is left; absent otherwise.
func (b *Backend) Status(ctx context.Context, name string) (guest.Status, error) {
	if b.err != nil {
		return guest.Status{}, fmt.Errorf("container: cgroups: %w", b.err)
	}
	if names.Hostname(name) != nil {
		return guest.Status{}, fmt.Errorf("container: invalid name %q", name)
	}
	return b.status(name)
}

func (b *Backend) status(name string) (guest.Status, error) {
	rec, rerr := b.readRecord(name)
	g := b.group(name)
	exists := g.Exists()
	var procs []int
	if exists {
		var err error
		if procs, err = g.AllProcs(); err != nil {
			return guest.Status{}, err
		}
		procs = alive(procs)
	}
	st := guest.Status{State: guest.StateAbsent}
	if exists {
		st.Cgroup = g.Path()
	}
	if len(procs) == 0 {
		switch {
		case rerr != nil:
			st.State, st.Reason = guest.StateCrashed, rerr.Error()
		case rec == nil && !exists:
		case rec == nil:
			st.State, st.Reason = guest.StateShutoff, "empty cgroup left behind"
		default:
			st.State, st.Reason = b.ended(name, rec)
			// What the guest said last is usually why it ended (its init's error).
			if last := lastConsoleLine(rec.StateDir); last != "" {
				st.Reason += "; console: " + last
			}
		}
		return st, nil
	}
	st.State = guest.StateRunning
	st.PID = findInit(rec, procs)
	if st.PID == 0 {
		// Init is gone and the kernel is killing the rest of its PID namespace: why init
		// ended (its monitor's record) is the guest's reason, not the leftovers.
		why := "container init gone"
		if rec != nil {
			_, why = b.ended(name, rec)
		}
		st.State, st.Reason = guest.StateCrashed, fmt.Sprintf("%s (%d processes left in the cgroup)", why, len(procs))
	}
	var err error
	if st.CPUTime, err = g.CPUUsage(); err != nil {
		return st, err
	}
	if st.CPULimit, err = g.CPUMax(); err != nil {
		return st, err
	}
	frozen, err := g.Frozen()
	if err != nil {
		return st, err
	}
	if frozen && st.State == guest.StateRunning {
		st.State, st.Reason = guest.StatePaused, "frozen (cgroup freezer)"
	}
	return st, nil
}

func (b *Backend) ended(name string, rec *record) (guest.State, string) {
	if rec.PID == 0 {
		return guest.StateCrashed, "start did not complete"
	}
	b.mu.Lock()
	c := b.children[rec.PID]
	b.mu.Unlock()
	if c != nil && c.start == rec.PIDStart {
		// Ours: init has exited (its group is empty), and its monitor is recording that
		// and ending.
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
		}
	}
	var ex exitRecord
	data, err := os.ReadFile(b.exitPath(name))
	if err != nil || json.Unmarshal(data, &ex) != nil || ex.PID != rec.PID || ex.PIDStart != rec.PIDStart {
		return guest.StateCrashed, "container init ended (exit status unknown: its monitor did not record it)"
	}
	switch {
	case ex.Signal != "":
		return guest.StateCrashed, "container init killed by signal " + ex.Signal
	case ex.Code != 0:
		return guest.StateCrashed, fmt.Sprintf("container init exited with status %d", ex.Code)
	}
	return guest.StateShutoff, "container init exited"
}

// alive leaves out the zombies of procs, and those gone meanwhile: a guest's init that
// exited stays in its cgroup's process list until its parent reaps it, and is gone all
// the same (a status read in that moment said "container init gone (1 processes left)"
// where the guest had ended, killed by a signal).
func alive(procs []int) []int {
	out := procs[:0:0]
	for _, p := range procs {
		if st, err := procStat(p); err != nil || st.state == 'Z' {
			continue
		}
		out = append(out, p)
	}
	return out
}

func findInit(rec *record, procs []int) int {
	if rec != nil && rec.PID != 0 && slices.Contains(procs, rec.PID) {
		if st, err := procStat(rec.PID); err == nil && st.start == rec.PIDStart && st.state != 'Z' {
			return rec.PID
		}
	}
	for _, p := range procs {
		if nsInit(p) {
			return p
		}
	}
	return 0
}

// running returns the guest's group, or guest.ErrNotFound when it has no processes.
func (b *Backend) running(name string) (*cgroup.Group, error) {
	if b.err != nil {
		return nil, fmt.Errorf("container: cgroups: %w", b.err)
	}
	if names.Hostname(name) != nil {
		return nil, fmt.Errorf("container %q: %w", name, guest.ErrNotFound)
	}
	g := b.group(name)
	if !g.Exists() {
		return nil, fmt.Errorf("container %s: %w", name, guest.ErrNotFound)
	}
	procs, err := g.AllProcs()
	if err != nil {
		return nil, err
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("container %s: %w", name, guest.ErrNotFound)
	}
	return g, nil
}

// Freeze freezes the guest's cgroup and waits until it is frozen.
func (b *Backend) Freeze(ctx context.Context, name string) error {
	g, err := b.running(name)
	if err != nil {
		return err
	}
	return g.Freeze(ctx)
}

// Thaw thaws the guest's cgroup.
func (b *Backend) Thaw(ctx context.Context, name string) error {
	g, err := b.running(name)
	if err != nil {
		return err
	}
	return g.Thaw(ctx)
}

// SetCPULimit sets the cgroup's CPU cap (cpus <= 0: none).
func (b *Backend) SetCPULimit(ctx context.Context, name string, cpus float64) error {
	g, err := b.running(name)
	if err != nil {
		return err
	}
	return g.SetCPUMax(cpus)
}

// Stop kills the guest, whoever started it, and removes everything it had: the
// processes (and with them its mounts and loop device), the veth, the cgroup (and the
// systemd scope), the state directory and the record. Stop of an absent guest is nil.
func (b *Backend) Stop(ctx context.Context, name string) error {
	if b.err != nil {
		return fmt.Errorf("container: cgroups: %w", b.err)
	}
	if names.Hostname(name) != nil {
		return fmt.Errorf("container: invalid name %q", name)
	}
	unlock, err := b.lock(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	return b.stop(ctx, name)
}

func (b *Backend) stop(ctx context.Context, name string) error {
	rec, rerr := b.readRecord(name)
	g := b.group(name)
	var errs []error
	if rerr != nil {
		errs = append(errs, rerr)
	}
	groups := []*cgroup.Group{g}
	if b.systemd {
		groups = append(groups, monitorGroup(g))
	}
	processesGone := true
	for _, g := range groups {
		if g.Exists() {
			if err := g.Kill(ctx); err != nil {
				errs = append(errs, err)
			} else if err := g.Remove(); err != nil {
				errs = append(errs, err)
			}
		}
		processesGone = processesGone && !g.Exists()
	}
	// With its processes gone, crun's state is all that is left of the container.
	if err := b.crunDelete(ctx, name, processesGone); err != nil {
		errs = append(errs, err)
	}
	if rec != nil && rec.HostVeth != "" {
		if err := removeVeth(ctx, rec.HostNetNS, rec.HostVeth); err != nil {
			errs = append(errs, err)
		}
	}
	if b.systemd {
		// The scope is empty now and systemd collects it; stopping it says so at once.
		_ = run(ctx, stopScopeCommand(scopeUnit(name)))
	}
	if rec != nil && rec.StateDir != "" {
		// The console of the guest that just ended is kept next to the state directory
		// (NAME.console.prev): after a crash it is the only record of why.
		_ = os.Rename(filepath.Join(rec.StateDir, "console.log"), filepath.Clean(rec.StateDir)+".console.prev")
		if err := removeStateDir(rec.StateDir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("container %s: stop: %w", name, errors.Join(errs...))
	}
	for _, p := range []string{b.recordPath(name), b.exitPath(name)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeStateDir deletes the guest's state directory, unless something is mounted in it
// in our mount namespace (never by this package: then RemoveAll could reach through a
// mount into data that is not ours).
func removeStateDir(dir string) error {
	dir = filepath.Clean(dir)
	mounts, err := mountPointsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("not removing %s: mounted in it: %s", dir, strings.Join(mounts, ", "))
	}
	return os.RemoveAll(dir)
}

// mountPointsUnder lists the mount points at or below dir in this process's mount
// namespace.
func mountPointsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := cgroup.UnescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// writeSecrets puts s.Secrets into StateDir/secrets (tmpfs), owned by the guest's root
// (mode 0400, the directory 0500), so that the guest reads them and nobody else on the
// desktop but root does. Stop removes them with the state directory.
func (b *Backend) writeSecrets(s guest.Spec) (string, error) {
	dir := filepath.Join(s.StateDir, "secrets")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o500); err != nil {
		return "", err
	}
	id := int(b.o.UIDBase)
	for name, data := range s.Secrets {
		if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return "", fmt.Errorf("invalid secret name %q", name)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o400); err != nil {
			return "", err
		}
		if err := os.Chown(p, id, id); err != nil {
			return "", err
		}
	}
	return dir, os.Chown(dir, id, id)
}
