// Package coursevm is the course-VM player of a pool PC: while the schedule gives a
// course-vm mode, it runs the lecturer's VM full screen from the read-only image export,
// with a throwaway overlay, and keeps nothing afterwards (docs/course-vms.md).
//
// Who runs it: the graphical session, as the student's user, not the root agent. In a
// course slot the greeter offers the course VM as a session of its own (the site
// manager's seat configuration), whose program is the player (`overtime-agent course-vm
// --session`, Options.Session): the VM full screen with no desktop around it, and the
// session ends when the VM does. The agent decides and the session shows: the
// agent, which holds the host credential, writes what to run to a world-readable spec
// file (WriteSpec, /run/overtime/course-vm.json) when its configuration says course-vm,
// and removes it otherwise; the player in the session, which owns the display (X11 or
// Wayland, as the student's user), follows that file (WatchSpec). A root daemon could
// reach a Wayland session's display only through hacks, and QEMU needs no privilege.
//
// A start: vm.json is checked against SHA256SUMS (images/vmspec.Read), the disk by its
// size (by sha256 too with Options.VerifyDisk), the disk is checked again to be one
// self-contained disk of vm.json's format (images/diskcheck, as the site manager did
// before publishing it: defence in depth), an overlay is made in a fresh directory below
// Options.StateDir (tmpfs: $XDG_RUNTIME_DIR) with `qemu-img create -u -b DISK -F FORMAT`,
// and QEMU runs the overlay on that base and nothing else (-blockdev, no backing below
// the base): KVM when node-agent/kvmprobe says KVM really runs guests, else TCG;
// memory and CPUs from vm.json, capped by the PC; QEMU's seccomp sandbox on. When QEMU
// exits (the window closed, the guest powered off, QEMU killed), its overlay is deleted
// and, outside a session, a fresh one is started after a backoff. A new spec (the mode
// changed) or the end of Run stops QEMU and deletes the overlay. VMware Player runs a VM whose vm.json asks for
// it when vmplayer is installed, with an independent-nonpersistent disk; otherwise the
// start fails with "backend unavailable: vmware: …", never silently.
package coursevm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/images/diskcheck"
	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/node-agent/hostinfo"
	"github.com/overtime-hpc/overtime/node-agent/kvmprobe"
)

// Spec is what the agent asks the player to show: the course VM version of the mode in
// force. Dir is the version directory in the read-only image export.
type Spec struct {
	Mode    string `json:"mode"`
	Image   string `json:"image"`
	Version string `json:"version"`
	Dir     string `json:"dir"`
	URL     string `json:"url,omitempty"`
	// Unavailable: the mode is course-vm but its VM cannot run (no published version);
	// the player shows nothing and logs why.
	Unavailable string `json:"unavailable,omitempty"`
}

func (s *Spec) key() string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// WriteSpec replaces the spec file atomically (world-readable: it names a course VM,
// which every PC of the pool shows anyway); nil removes it.
func WriteSpec(path string, s *Spec) error {
	if s == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadSpec reads the spec file; a missing file is nil (no course VM now).
func ReadSpec(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Unavailable == "" && !filepath.IsAbs(s.Dir) {
		return nil, fmt.Errorf("%s: dir %q is not an absolute path", path, s.Dir)
	}
	return &s, nil
}

// WatchSpec sends the spec file's content on the channel now and whenever it changes
// (checked every interval: the file is replaced by rename, a few times a day). A file
// that cannot be read is logged and counts as no spec.
func WatchSpec(ctx context.Context, path string, interval time.Duration, log *slog.Logger) <-chan *Spec {
	out := make(chan *Spec, 1)
	go func() {
		defer close(out)
		last := "unset"
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s, err := ReadSpec(path)
			if err != nil {
				log.Warn("course VM spec unreadable", "file", path, "err", err)
				s = nil
			}
			if k := s.key(); k != last {
				last = k
				select {
				case out <- s:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// Options configure a Player.
type Options struct {
	QEMU    string // default kvmprobe.QEMU
	QemuImg string // default qemu-img
	// StateDir holds the overlays (one fresh directory per start); tmpfs.
	StateDir string
	// Display is how QEMU shows the VM: "gtk" (default: full screen), "sdl" (full
	// screen), or "none" (headless: tests, or a display given in ExtraArgs).
	Display string
	// SerialLog, when set, receives the VM's first serial port (appended, across restarts);
	// "-" is the player's standard output.
	SerialLog string
	// Accel chooses KVM or TCG (default kvmprobe.Accel: KVM only if a probe guest ran).
	Accel func() (name, reason string)
	// HostCPUs and HostMemMB are the PC's; the VM gets at most HostCPUs and MemoryPercent
	// (default 75) of HostMemMB.
	HostCPUs, HostMemMB, MemoryPercent int
	// RestartBackoff is the first delay before a VM that exited is started again
	// (default 1 s); it doubles up to MaxBackoff (30 s) while the VM keeps exiting within
	// ResetAfter (60 s) of its start.
	RestartBackoff, MaxBackoff, ResetAfter time.Duration
	// VerifyDisk checks the disk's sha256 against SHA256SUMS before each start (reads
	// the whole disk over NFS: off by default, the size is checked always).
	VerifyDisk bool
	VMPlayer   string // VMware Player's command (default: vmplayer from PATH)
	OVMFCode   string // EFI firmware (default /usr/share/OVMF/OVMF_CODE_4M.fd, else OVMF_CODE.fd)
	OVMFVars   string // its variable store template
	ExtraArgs  []string
	Log        *slog.Logger

	// Share is the desktop directory the VM sees, read-write, as the student who runs
	// the player (created 0700 when missing; empty: the VM sees nothing of the desktop).
	// QEMU exports it over virtio-9p with the mount tag ShareTag (a Linux guest:
	// mount -t 9p -o trans=virtio,version=9p2000.L home /mnt); VMware Player as the
	// shared folder ShareTag (VMware Tools). A guest without the driver ignores it.
	// The session shares one folder of the student's home, not the home itself: the
	// lecturer's VM is the lecturer's software, with a network, and sees only what the
	// student puts there for it (docs/desktop.md "Sessions").
	Share string

	// Session: the player is the X session the student chose in the greeter (`--session`),
	// not a program inside a desktop. The VM is not started again when it exits: Run
	// returns, and the session (with the overlay) ends with the VM. A spec that goes away
	// after a VM ran (the course-vm mode ended) ends it too.
	Session bool
	// SessionWait: in a session, how long Run waits for a VM to run (no spec yet, the VM
	// unavailable, its starts failing) before it returns ErrNoCourseVM rather than
	// leaving the student a black screen (default 60 s).
	SessionWait time.Duration
}

// ShareTag names Options.Share inside the VM (the 9p mount tag, the VMware shared
// folder).
const ShareTag = "home"

// ErrNoCourseVM is Run's answer in a session when no VM ran within Options.SessionWait;
// the error says why (no spec, the VM unavailable, the last start's failure).
var ErrNoCourseVM = errors.New("no course VM to show")

// Player runs the course VM of the spec in force.
type Player struct {
	o        Options
	reg      *prometheus.Registry
	starts   prometheus.Counter
	restarts prometheus.Counter
	failures prometheus.Counter
	running  prometheus.Gauge

	nRestarts atomic.Int64
	pid       atomic.Int64
	mu        sync.Mutex
	lastErr   string
}

// New fills defaults.
func New(o Options) *Player {
	if o.QEMU == "" {
		o.QEMU = kvmprobe.QEMU
	}
	if o.QemuImg == "" {
		o.QemuImg = "qemu-img"
	}
	if o.Display == "" {
		o.Display = "gtk"
	}
	if o.Accel == nil {
		o.Accel = kvmprobe.Accel
	}
	if o.HostCPUs == 0 {
		o.HostCPUs = runtime.NumCPU()
	}
	if o.HostMemMB == 0 {
		o.HostMemMB = hostinfo.MemTotalMB()
	}
	if o.MemoryPercent == 0 {
		o.MemoryPercent = 75
	}
	if o.RestartBackoff == 0 {
		o.RestartBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.ResetAfter == 0 {
		o.ResetAfter = time.Minute
	}
	if o.SessionWait == 0 {
		o.SessionWait = time.Minute
	}
	if o.VMPlayer == "" {
		o.VMPlayer = "vmplayer"
	}
	if o.OVMFCode == "" {
		o.OVMFCode, o.OVMFVars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
		if _, err := os.Stat(o.OVMFCode); err != nil {
			o.OVMFCode, o.OVMFVars = "/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"
		}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	p := &Player{o: o, reg: prometheus.NewRegistry()}
	ns := "overtime_coursevm"
	p.starts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "starts_total", Help: "Course VM starts (first starts and restarts)."})
	p.restarts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "restarts_total", Help: "Course VMs started again after they exited (window closed, guest powered off, QEMU died)."})
	p.failures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "start_failures_total", Help: "Starts that failed (unavailable backend, damaged image, QEMU refused)."})
	p.running = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "running", Help: "1 while a course VM runs."})
	p.reg.MustRegister(p.starts, p.restarts, p.failures, p.running)
	return p
}

// MetricsHandler serves the player's /metrics.
func (p *Player) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{})
}

// Restarts counts the starts after an exit since New.
func (p *Player) Restarts() int64 { return p.nRestarts.Load() }

// PID is the running VM's process (0: none).
func (p *Player) PID() int { return int(p.pid.Load()) }

// LastError is why the last start failed ("" after a successful one).
func (p *Player) LastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

func (p *Player) setErr(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = s
}

// vm is one running VM process.
type vm struct {
	cmd     *exec.Cmd
	dir     string // its overlay directory
	started time.Time
	done    chan struct{}
	err     error
	stderr  *tailBuffer
}

// Run shows the VM of the latest spec from specs until ctx ends; then the VM is stopped
// and its overlay deleted. Overlay directories left by a player that died are deleted
// first. In a session (Options.Session) it also returns when the VM exits (nil when QEMU
// exited cleanly: the guest powered off or its window was closed), when the spec goes
// away after a VM ran, and with ErrNoCourseVM when no VM ran for Options.SessionWait.
func (p *Player) Run(ctx context.Context, specs <-chan *Spec) error {
	if err := os.MkdirAll(p.o.StateDir, 0o700); err != nil {
		return err
	}
	p.cleanStale()
	var (
		cur     *Spec
		run     *vm
		retry   *time.Timer
		retryC  <-chan time.Time
		backoff = p.o.RestartBackoff
		exited  bool // the VM of cur ran and exited: the next start is a restart
		ran     bool // a VM ran in this Run (a session then ends with the mode)
		// In a session: fires when no VM has run for SessionWait.
		giveUp  *time.Timer
		giveUpC <-chan time.Time
	)
	defer func() {
		if giveUp != nil {
			giveUp.Stop()
		}
	}()
	stopRetry := func() {
		if retry != nil {
			retry.Stop()
		}
		retry, retryC = nil, nil
	}
	later := func(d time.Duration) {
		stopRetry()
		retry = time.NewTimer(d)
		retryC = retry.C
	}
	start := func(restart bool) {
		if cur == nil {
			return
		}
		if cur.Unavailable != "" {
			p.setErr("course VM unavailable: " + cur.Unavailable)
			p.o.Log.Warn("course VM unavailable", "mode", cur.Mode, "reason", cur.Unavailable)
			return
		}
		v, err := p.start(ctx, cur)
		if err != nil {
			p.failures.Inc()
			p.setErr(err.Error())
			p.o.Log.Error("course VM did not start", "image", cur.Image, "version", cur.Version, "err", err, "retry", backoff)
			later(backoff)
			backoff = min(2*backoff, p.o.MaxBackoff)
			return
		}
		p.setErr("")
		p.starts.Inc()
		if restart {
			p.restarts.Inc()
			p.nRestarts.Add(1)
		}
		run, exited, ran = v, false, true
	}
	defer func() {
		stopRetry()
		p.stop(run)
	}()
	for {
		var done chan struct{}
		if run != nil {
			done = run.done
		}
		if p.o.Session {
			// The wait runs while nothing is shown, and starts again after a VM was.
			switch {
			case run != nil && giveUp != nil:
				giveUp.Stop()
				giveUp, giveUpC = nil, nil
			case run == nil && giveUp == nil:
				giveUp = time.NewTimer(p.o.SessionWait)
				giveUpC = giveUp.C
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case s, ok := <-specs:
			if !ok {
				specs = nil
				continue
			}
			if s.key() == cur.key() {
				continue
			}
			stopRetry()
			p.stop(run)
			run, cur, backoff, exited = nil, s, p.o.RestartBackoff, false
			if p.o.Session && s == nil && ran {
				p.o.Log.Info("the course-vm mode ended; the session ends")
				return nil
			}
			if s == nil {
				p.o.Log.Info("no course VM in this mode")
			} else {
				p.o.Log.Info("course VM", "mode", s.Mode, "image", s.Image, "version", s.Version, "dir", s.Dir)
			}
			start(false)
		case <-done:
			lasted := time.Since(run.started)
			if p.o.Session {
				// The student's session is this VM: it ends with it, and so does the
				// overlay; the greeter comes back.
				v := run
				p.cleanup(v)
				run = nil
				if v.err != nil {
					p.o.Log.Error("course VM ended; the session ends", "image", cur.Image, "ran", lasted.Round(time.Second), "exit", v.err, "stderr", v.stderr.String())
					return fmt.Errorf("course VM %s %s ended: %v: %s", cur.Image, cur.Version, v.err, v.stderr.String())
				}
				p.o.Log.Info("course VM ended; the session ends", "image", cur.Image, "ran", lasted.Round(time.Second))
				return nil
			}
			p.o.Log.Warn("course VM exited; starting a fresh one", "image", cur.Image, "ran", lasted.Round(time.Second), "exit", run.err, "stderr", run.stderr.String(), "after", backoff)
			p.cleanup(run)
			run, exited = nil, true
			if lasted >= p.o.ResetAfter {
				backoff = p.o.RestartBackoff
			}
			later(backoff)
			backoff = min(2*backoff, p.o.MaxBackoff)
		case <-retryC:
			retry, retryC = nil, nil
			start(exited)
		case <-giveUpC:
			why := "no course VM is named for this PC now (the spec file is absent or empty: not a course-vm mode, or the node agent has not written it)"
			switch {
			case cur != nil && cur.Unavailable != "":
				why = "course VM unavailable: " + cur.Unavailable
			case p.LastError() != "":
				why = p.LastError()
			}
			p.o.Log.Error("no course VM ran; the session ends", "waited", p.o.SessionWait, "why", why)
			return fmt.Errorf("%w within %v: %s", ErrNoCourseVM, p.o.SessionWait, why)
		}
	}
}

// start prepares and starts the VM of s.
func (p *Player) start(ctx context.Context, s *Spec) (*vm, error) {
	desc, err := vmspec.Read(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("course VM %s %s: %w", s.Image, s.Version, err)
	}
	disk := filepath.Join(s.Dir, desc.Disk)
	fi, err := os.Stat(disk)
	if err != nil {
		return nil, fmt.Errorf("course VM %s %s: disk: %w", s.Image, s.Version, err)
	}
	if desc.DiskBytes > 0 && fi.Size() != desc.DiskBytes {
		return nil, fmt.Errorf("course VM %s %s: %s has %d bytes, vm.json says %d: %w", s.Image, s.Version, desc.Disk, fi.Size(), desc.DiskBytes, artefact.ErrMismatch)
	}
	if p.o.VerifyDisk {
		if _, err := artefact.Verify(s.Dir); err != nil {
			return nil, fmt.Errorf("course VM %s %s: %w", s.Image, s.Version, err)
		}
	}
	// Defence in depth: the site manager checked the disk before it published it; the
	// PC checks again, before QEMU or VMware opens it, that it is one self-contained disk
	// of the format vm.json says (a backing file or extent would be opened as the
	// session's user and its content handed to the guest).
	info, err := diskcheck.Inspect(ctx, disk, diskcheck.Options{QemuImg: p.o.QemuImg, Formats: []string{desc.DiskFormat}, NoDamageCheck: true})
	if err != nil {
		return nil, fmt.Errorf("course VM %s %s: disk refused: %w", s.Image, s.Version, err)
	}
	dir, err := os.MkdirTemp(p.o.StateDir, "run-")
	if err != nil {
		return nil, err
	}
	var name string
	var args []string
	switch desc.Backend {
	case vmspec.BackendVMware:
		name, args, err = p.vmwareCommand(desc, disk, dir)
	default:
		name, args, err = p.qemuCommand(ctx, desc, disk, info, dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(name, args...)
	tail := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = io.Discard, tail
	if p.o.SerialLog == "-" {
		cmd.Stdout = os.Stdout
	}
	// Its own process group (stop signals the group); killed with the player.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("course VM %s %s: %w", s.Image, s.Version, err)
	}
	v := &vm{cmd: cmd, dir: dir, started: time.Now(), done: make(chan struct{}), stderr: tail}
	p.pid.Store(int64(cmd.Process.Pid))
	p.running.Set(1)
	go func() {
		v.err = cmd.Wait()
		close(v.done)
	}()
	p.o.Log.Info("course VM started", "image", s.Image, "version", s.Version, "pid", cmd.Process.Pid, "backend", desc.Backend, "cmd", name)
	return v, nil
}

// qemuCommand makes the overlay and QEMU's command line. The chain is exactly the overlay
// on the checked base: qemu-img creates the overlay without opening the base (-u, the
// size given, the base's format given with -F: nothing is probed), and QEMU gets the
// chain spelled out (-blockdev) with the base's format and no backing of its own, so
// that neither follows anything the base's header might name.
func (p *Player) qemuCommand(ctx context.Context, desc vmspec.VM, disk string, info *diskcheck.Info, dir string) (string, []string, error) {
	if _, err := exec.LookPath(p.o.QEMU); err != nil {
		return "", nil, fmt.Errorf("backend unavailable: qemu: %s is not installed (Debian package qemu-system-x86)", p.o.QEMU)
	}
	overlay := filepath.Join(dir, "overlay.qcow2")
	if out, err := exec.CommandContext(ctx, p.o.QemuImg, "create", "-q", "-f", "qcow2", "-u", "-b", disk, "-F", info.Format, overlay, strconv.FormatInt(info.VirtualSize, 10)).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("overlay: qemu-img create: %v: %s", err, strings.TrimSpace(string(out)))
	}
	drive, err := json.Marshal(map[string]any{
		"node-name": "disk0", "driver": "qcow2", "discard": "unmap",
		"file": map[string]any{"driver": "file", "filename": overlay},
		"backing": map[string]any{
			"driver": info.Format, "read-only": true,
			"file":    map[string]any{"driver": "file", "filename": disk, "read-only": true},
			"backing": nil,
		},
	})
	if err != nil {
		return "", nil, err
	}
	accel, why := p.o.Accel()
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	mem := desc.MemoryMB
	if limit := p.o.HostMemMB * p.o.MemoryPercent / 100; limit > 0 && mem > limit {
		mem = limit
	}
	mem = max(mem, vmspec.MinMemoryMB)
	cpus := min(desc.CPUs, p.o.HostCPUs)
	p.o.Log.Info("course VM resources", "accel", accel, "why", why, "memoryMB", mem, "cpus", cpus)
	args := []string{
		"-name", "overtime-course-vm,debug-threads=on",
		"-machine", "q35,accel=" + accel, "-cpu", cpu,
		"-m", strconv.Itoa(mem), "-smp", strconv.Itoa(cpus),
		"-nodefaults", "-no-user-config",
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-blockdev", string(drive),
	}
	switch desc.DiskBus {
	case vmspec.BusVirtio:
		args = append(args, "-device", "virtio-blk-pci,drive=disk0,bootindex=1")
	default: // sata and ide: q35's AHCI controller
		args = append(args, "-device", "ide-hd,drive=disk0,bus=ide.0,bootindex=1")
	}
	if desc.Firmware == vmspec.FirmwareEFI {
		if _, err := os.Stat(p.o.OVMFCode); err != nil {
			return "", nil, fmt.Errorf("backend unavailable: qemu: the VM needs EFI firmware and %s is missing (Debian package ovmf)", p.o.OVMFCode)
		}
		vars := filepath.Join(dir, "efivars.fd")
		b, err := os.ReadFile(p.o.OVMFVars)
		if err != nil {
			return "", nil, fmt.Errorf("backend unavailable: qemu: EFI variable store: %w", err)
		}
		if err := os.WriteFile(vars, b, 0o600); err != nil {
			return "", nil, err
		}
		args = append(args, "-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+qemuPath(p.o.OVMFCode),
			"-drive", "if=pflash,format=raw,unit=1,file="+qemuPath(vars))
	}
	switch desc.Network {
	case vmspec.NetNone:
		args = append(args, "-nic", "none")
	default:
		args = append(args, "-nic", "user,model=e1000")
	}
	switch p.o.Display {
	case "none":
		args = append(args, "-display", "none", "-vga", "std")
	case "sdl":
		args = append(args, "-display", "sdl", "-full-screen", "-vga", "std", "-usb", "-device", "usb-tablet")
	default:
		args = append(args, "-display", "gtk,full-screen=on,zoom-to-fit=on", "-vga", "std", "-usb", "-device", "usb-tablet")
	}
	switch p.o.SerialLog {
	case "":
	case "-":
		// The player's standard output: the journal when systemd runs it headless.
		args = append(args, "-chardev", "stdio,id=serial0,signal=off", "-serial", "chardev:serial0")
	default:
		args = append(args, "-chardev", "file,id=serial0,append=on,path="+qemuPath(p.o.SerialLog), "-serial", "chardev:serial0")
	}
	if p.o.Share != "" {
		share, err := p.share()
		if err != nil {
			return "", nil, err
		}
		// security_model=none: files are created as the student (QEMU runs as them) and
		// the guest's chown is ignored, not stored in xattrs an NFS home may not keep.
		args = append(args, "-fsdev", "local,id=share0,security_model=none,path="+qemuPath(share),
			"-device", "virtio-9p-pci,fsdev=share0,mount_tag="+ShareTag)
	}
	args = append(args, p.o.ExtraArgs...)
	return p.o.QEMU, args, nil
}

// share makes Options.Share (0700, the student's) and returns its absolute path. It
// must be a directory: a symlink put there is refused rather than followed, so that
// the VM sees no more than the folder the session names.
func (p *Player) share() (string, error) {
	dir, err := filepath.Abs(p.o.Share)
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("the folder shared with the VM: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("the folder shared with the VM: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("the folder shared with the VM: %s is not a directory (%s)", dir, fi.Mode().Type())
	}
	return dir, nil
}

// qemuPath escapes a path for a QEMU option value (a comma is doubled).
func qemuPath(p string) string { return strings.ReplaceAll(p, ",", ",,") }

// vmwareCommand writes a .vmx whose disk is the read-only base as an
// independent-nonpersistent disk (VMware keeps its redo log in the VM's working
// directory, dir, and discards it at power-off) and runs VMware Player full screen.
func (p *Player) vmwareCommand(desc vmspec.VM, disk, dir string) (string, []string, error) {
	player, err := exec.LookPath(p.o.VMPlayer)
	if err != nil {
		return "", nil, fmt.Errorf("backend unavailable: vmware: the course VM asks for VMware Player and %s is not installed on this PC; import it with --backend qemu to run it in QEMU", p.o.VMPlayer)
	}
	guestOS := desc.OSType
	if guestOS == "" || strings.Contains(guestOS, ":") {
		guestOS = "other-64"
	}
	mem := desc.MemoryMB
	if limit := p.o.HostMemMB * p.o.MemoryPercent / 100; limit > 0 && mem > limit {
		mem = limit
	}
	var b bytes.Buffer
	q := func(k, v string) { fmt.Fprintf(&b, "%s = %q\n", k, v) }
	q(".encoding", "UTF-8")
	q("config.version", "8")
	q("virtualHW.version", "14")
	q("displayName", desc.Name)
	q("guestOS", guestOS)
	q("memsize", strconv.Itoa(mem))
	q("numvcpus", strconv.Itoa(min(desc.CPUs, p.o.HostCPUs)))
	if desc.Firmware == vmspec.FirmwareEFI {
		q("firmware", "efi")
	}
	q("workingDir", dir)
	q("sata0.present", "TRUE")
	q("sata0:0.present", "TRUE")
	q("sata0:0.fileName", disk)
	q("sata0:0.mode", "independent-nonpersistent")
	if desc.Network == vmspec.NetNAT {
		q("ethernet0.present", "TRUE")
		q("ethernet0.connectionType", "nat")
		q("ethernet0.virtualDev", "e1000")
	}
	q("usb.present", "TRUE")
	q("msg.autoAnswer", "TRUE")
	if p.o.Share != "" {
		share, err := p.share()
		if err != nil {
			return "", nil, err
		}
		q("isolation.tools.hgfs.disable", "FALSE")
		q("sharedFolder.maxNum", "1")
		q("sharedFolder0.present", "TRUE")
		q("sharedFolder0.enabled", "TRUE")
		q("sharedFolder0.readAccess", "TRUE")
		q("sharedFolder0.writeAccess", "TRUE")
		q("sharedFolder0.hostPath", share)
		q("sharedFolder0.guestName", ShareTag)
		q("sharedFolder0.expiration", "never")
	} else {
		q("isolation.tools.hgfs.disable", "TRUE")
	}
	q("isolation.tools.dnd.disable", "TRUE")
	vmx := filepath.Join(dir, "course-vm.vmx")
	if err := os.WriteFile(vmx, b.Bytes(), 0o600); err != nil {
		return "", nil, err
	}
	return player, []string{"-X", vmx}, nil
}

// stop ends a running VM: SIGTERM to its process group (QEMU powers off at once), SIGKILL
// after 5 s, then its overlay is deleted.
func (p *Player) stop(v *vm) {
	if v == nil {
		return
	}
	pgid := v.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-v.done
	}
	p.cleanup(v)
	p.o.Log.Info("course VM stopped; overlay deleted")
}

func (p *Player) cleanup(v *vm) {
	p.pid.Store(0)
	p.running.Set(0)
	if err := os.RemoveAll(v.dir); err != nil {
		p.o.Log.Error("deleting the course VM's overlay", "dir", v.dir, "err", err)
	}
}

// cleanStale deletes overlay directories a previous player left (it was killed).
func (p *Player) cleanStale() {
	old, _ := filepath.Glob(filepath.Join(p.o.StateDir, "run-*"))
	for _, d := range old {
		p.o.Log.Info("deleting a stale course VM overlay", "dir", d)
		os.RemoveAll(d)
	}
}

// tailBuffer keeps the last max bytes written (QEMU's messages, for the log).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
