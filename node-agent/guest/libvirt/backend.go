// Package libvirt runs the compute guest through libvirt: QEMU/KVM (TCG when /dev/kvm is
// not usable) and Xen (libxl). It drives libvirt with virsh: the libvirt Go bindings are
// not served by the Go module proxy, and a cgo binding would make the agent binary depend
// on libvirt.so on desktops that run containers only. One virsh call costs ~20 ms here
// (suspend, resume, schedinfo measured), well inside the agent's reaction budget, and
// lifecycle events come from one long-running `virsh event --loop`.
//
// Domains are transient (`virsh create`): libvirt forgets them when they stop, and
// nothing about a guest survives a reboot of the desktop. So that Stop still finds the
// overlay of a guest whose QEMU died, Start links its state directory in Options.RunDir. Limits are set through libvirt
// (cputune shares, SCHED_IDLE vCPUs and emulator, global_quota, memtune, blkiotune), so
// they live in libvirt's cgroups and hold while the agent is down; the agent adds cpu.idle
// on the domain's cgroup where the kernel has it, which libvirt does not manage.
package libvirt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Options configure a Backend.
type Options struct {
	Kind    model.GuestBackend // qemu or xen
	URI     string             // libvirt connection; default qemu:///system or xen:///system
	Virsh   string             // default "virsh"
	QemuImg string             // default "qemu-img"
	// DomainType forces the libvirt domain type for QEMU ("kvm" or "qemu"); empty: probe.
	DomainType string
	// ProbeKVM reports whether KVM can run a guest here (and why not). Nil: KVM is used when
	// libvirt's capabilities offer it.
	ProbeKVM func() (ok bool, reason string)
	// SetIdle puts the cgroup of a process (QEMU's) into the idle class; nil: skipped.
	SetIdle func(pid int) error
	// RunDir keeps, for each guest, a link to its state directory (NAME.state), so that
	// Stop discards the overlay of a guest whose transient domain libvirt has already
	// forgotten (QEMU crashed or was killed), by this agent or a restarted one. Default
	// DefaultRunDir.
	RunDir string
	Log    *slog.Logger
}

// DefaultRunDir is Options.RunDir of the agent (tmpfs, like the state directories).
const DefaultRunDir = "/run/overtime/libvirt"

// Backend is a libvirt guest backend.
type Backend struct {
	o Options

	mu      sync.Mutex
	domType string
	why     string
}

// New returns a backend; nothing is contacted until a method is called.
func New(o Options) *Backend {
	if o.Kind == "" {
		o.Kind = model.BackendQEMU
	}
	if o.URI == "" {
		if o.Kind == model.BackendXen {
			o.URI = "xen:///system"
		} else {
			o.URI = "qemu:///system"
		}
	}
	if o.Virsh == "" {
		o.Virsh = "virsh"
	}
	if o.QemuImg == "" {
		o.QemuImg = "qemu-img"
	}
	if o.RunDir == "" {
		o.RunDir = DefaultRunDir
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Backend{o: o}
}

func (b *Backend) Kind() model.GuestBackend { return b.o.Kind }

// virshError is a failed virsh call with libvirt's message.
type virshError struct {
	args []string
	msg  string
}

func (e *virshError) Error() string {
	return fmt.Sprintf("virsh %s: %s", strings.Join(e.args, " "), e.msg)
}

func (b *Backend) virsh(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"-q", "-c", b.o.URI}, args...)
	cmd := exec.CommandContext(ctx, b.o.Virsh, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		msg = strings.TrimPrefix(msg, "error: ")
		msg = strings.ReplaceAll(msg, "\nerror: ", ": ")
		if msg == "" {
			msg = err.Error()
		}
		return "", &virshError{args: args, msg: msg}
	}
	return stdout.String(), nil
}

// notFound reports whether a virsh error says the domain does not exist.
func notFound(err error) bool {
	var ve *virshError
	return errors.As(err, &ve) && (strings.Contains(ve.msg, "Domain not found") || strings.Contains(ve.msg, "failed to get domain"))
}

// Available checks the connection and the tools a guest needs.
func (b *Backend) Available(ctx context.Context) error {
	if err := b.reachable(ctx); err != nil {
		return err
	}
	if _, err := exec.LookPath(b.o.QemuImg); err != nil {
		return guest.Unavailable(b.o.Kind, "qemu-img not found (Debian package qemu-utils): it makes the transient overlay")
	}
	if b.o.Kind == model.BackendQEMU {
		if _, _, err := b.domainType(ctx); err != nil {
			return guest.Unavailable(b.o.Kind, "%v", err)
		}
	}
	return nil
}

// reachable is the part of Available that libvirt's events need: virsh, the hypervisor
// (Xen) and a connection, without probing KVM.
func (b *Backend) reachable(ctx context.Context) error {
	if _, err := exec.LookPath(b.o.Virsh); err != nil {
		return guest.Unavailable(b.o.Kind, "virsh not found (Debian package libvirt-clients)")
	}
	if b.o.Kind == model.BackendXen {
		if _, err := os.Stat("/proc/xen"); err != nil {
			return guest.Unavailable(b.o.Kind, "this desktop does not run on the Xen hypervisor (no /proc/xen)")
		}
	}
	if _, err := b.virsh(ctx, "version"); err != nil {
		return guest.Unavailable(b.o.Kind, "cannot connect to libvirt at %s: %v", b.o.URI, err)
	}
	return nil
}

// unavailableOr is err, unless the backend cannot run guests here at all (no libvirtd to
// connect to, no Xen hypervisor): then it is the *guest.UnavailableError that says why, so
// that every method fails the way Available does rather than with a connection error.
func (b *Backend) unavailableOr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if uerr := b.Available(ctx); uerr != nil {
		return uerr
	}
	return err
}

// domainType decides kvm or qemu (TCG) once: KVM only when libvirt offers it and the probe
// ran a guest under it.
func (b *Backend) domainType(ctx context.Context) (string, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.domType != "" {
		return b.domType, b.why, nil
	}
	if b.o.Kind == model.BackendXen {
		b.domType, b.why = "xen", "libxl"
		return b.domType, b.why, nil
	}
	if b.o.DomainType != "" {
		b.domType, b.why = b.o.DomainType, "configured"
		return b.domType, b.why, nil
	}
	caps, err := b.virsh(ctx, "capabilities")
	if err != nil {
		return "", "", err
	}
	if !strings.Contains(caps, "<domain type='qemu'") {
		return "", "", fmt.Errorf("libvirt offers no QEMU domains (is libvirt-daemon-driver-qemu and qemu-system-x86 installed?)")
	}
	b.domType, b.why = "qemu", "libvirt offers no KVM domains"
	if strings.Contains(caps, "<domain type='kvm'") {
		b.domType, b.why = "kvm", "libvirt offers KVM"
		if b.o.ProbeKVM != nil {
			if ok, reason := b.o.ProbeKVM(); !ok {
				b.domType, b.why = "qemu", "KVM unusable: "+reason
			}
		}
	}
	b.o.Log.Info("libvirt domain type", "type", b.domType, "why", b.why)
	return b.domType, b.why, nil
}

// Start creates the overlay and the transient domain.
func (b *Backend) Start(ctx context.Context, s guest.Spec) error {
	st, err := b.Status(ctx, s.Name)
	if err != nil {
		return err // Status says when the backend is unavailable
	}
	if st.State != guest.StateAbsent {
		return fmt.Errorf("libvirt: guest %s already exists (%s)", s.Name, st.State)
	}
	domType, _, err := b.domainType(ctx)
	if err != nil {
		return err
	}
	x, err := DomainXML(b.o.Kind, domType, s)
	if err != nil {
		return err
	}
	baseFmt := "raw"
	switch s.BaseFormat {
	case "qcow2":
		baseFmt = "qcow2"
	case "raw", "squashfs", "":
	default:
		return fmt.Errorf("libvirt: guest %s: base format %q cannot be a VM disk", s.Name, s.BaseFormat)
	}
	if _, err := os.Stat(s.BaseImage); err != nil {
		return fmt.Errorf("libvirt: guest %s: base image: %w", s.Name, err)
	}
	// A stale state directory (a guest that crashed) is discarded: transient means transient.
	if err := os.RemoveAll(s.StateDir); err != nil {
		return err
	}
	if err := os.MkdirAll(s.StateDir, 0o700); err != nil {
		return err
	}
	if err := b.linkStateDir(s.Name, s.StateDir); err != nil {
		os.RemoveAll(s.StateDir)
		return err
	}
	overlay := filepath.Join(s.StateDir, overlayFile)
	// The base is opened read-only by QEMU through the overlay's backing chain; writes land
	// in the overlay on tmpfs.
	out, err := exec.CommandContext(ctx, b.o.QemuImg, "create", "-q", "-f", "qcow2", "-F", baseFmt,
		"-b", s.BaseImage, overlay).CombinedOutput()
	if err != nil {
		b.discard(s.Name, s.StateDir)
		return fmt.Errorf("libvirt: guest %s: qemu-img create overlay: %v: %s", s.Name, err, bytes.TrimSpace(out))
	}
	if hasConfig(s) {
		cfg, err := guestConfig(s)
		if err == nil {
			err = os.WriteFile(filepath.Join(s.StateDir, configFile), cfg, 0o600)
		}
		if err != nil {
			b.discard(s.Name, s.StateDir)
			return fmt.Errorf("libvirt: guest %s: configuration disk: %w", s.Name, err)
		}
	}
	xmlPath := filepath.Join(s.StateDir, domainFile)
	if err := os.WriteFile(xmlPath, x, 0o600); err != nil {
		b.discard(s.Name, s.StateDir)
		return err
	}
	_, err = b.virsh(ctx, "create", xmlPath)
	if err != nil && strings.Contains(err.Error(), noIOWeight) {
		// The host's disks have no proportional I/O scheduler: the guest goes without its
		// I/O weight (as the container backend does), rather than not at all.
		if x, err = domainXMLOf(b.o.Kind, domType, s, false); err == nil {
			if err = os.WriteFile(xmlPath, x, 0o600); err == nil {
				_, err = b.virsh(ctx, "create", xmlPath)
			}
		}
		if err == nil {
			b.o.Log.Info("libvirt: I/O weight not applied: the host's disks have no bfq or cfq scheduler", "guest", s.Name)
		}
	}
	if err != nil {
		b.discard(s.Name, s.StateDir)
		return fmt.Errorf("libvirt: start %s: %w", s.Name, err)
	}
	if err := b.Reassert(ctx, s); err != nil {
		b.virsh(ctx, "destroy", s.Name)
		b.discard(s.Name, s.StateDir)
		return err
	}
	return nil
}

// noIOWeight is how libvirt refuses a domain's <blkiotune><weight> on a host whose disks
// have no proportional I/O scheduler.
const noIOWeight = "blkio device weight is valid only for"

// stateLink is RunDir/NAME.state, the link to the guest's state directory.
func (b *Backend) stateLink(name string) string {
	return filepath.Join(b.o.RunDir, name+".state")
}

// linkStateDir records where the guest's state directory is (see Options.RunDir).
func (b *Backend) linkStateDir(name, stateDir string) error {
	if err := os.MkdirAll(b.o.RunDir, 0o700); err != nil {
		return fmt.Errorf("libvirt: %w", err)
	}
	link := b.stateLink(name)
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("libvirt: %w", err)
	}
	if err := os.Symlink(stateDir, link); err != nil {
		return fmt.Errorf("libvirt: %w", err)
	}
	return nil
}

// discard removes the guest's state directory and the link to it. Only a directory named
// after the guest is removed (a record pointing elsewhere is not followed into data that
// is not the guest's).
func (b *Backend) discard(name, stateDir string) error {
	if stateDir != "" && filepath.IsAbs(stateDir) && filepath.Base(stateDir) == name {
		if err := os.RemoveAll(stateDir); err != nil {
			return err
		}
	}
	if err := os.Remove(b.stateLink(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Reassert sets the limits libvirt cannot take from the domain XML at start: the memory
// cap (live memtune) and cpu.idle on the domain's cgroup. Idempotent.
func (b *Backend) Reassert(ctx context.Context, s guest.Spec) error {
	if b.o.Kind != model.BackendQEMU {
		return nil
	}
	limit := strconv.Itoa((s.MemoryMB + overheadMiB(s.MemoryMB)) << 10) // KiB
	if _, err := b.virsh(ctx, "memtune", s.Name, "--live", "--hard-limit", limit); err != nil {
		return fmt.Errorf("libvirt: memory limit for %s: %w", s.Name, err)
	}
	if b.o.SetIdle != nil && s.CPUIdle {
		pid := qemuPID(s.Name)
		if pid == 0 {
			return fmt.Errorf("libvirt: %s: no QEMU process for cpu.idle", s.Name)
		}
		if err := b.o.SetIdle(pid); err != nil {
			b.o.Log.Warn("cpu.idle on the guest's cgroup", "guest", s.Name, "err", err)
		}
	}
	return nil
}

// Status reads the domain's state, CPU time and CPU cap.
func (b *Backend) Status(ctx context.Context, name string) (guest.Status, error) {
	out, err := b.virsh(ctx, "domstate", "--reason", name)
	if err != nil {
		if notFound(err) {
			return guest.Status{State: guest.StateAbsent}, nil
		}
		return guest.Status{}, b.unavailableOr(ctx, err)
	}
	st := guest.Status{}
	state, reason, _ := strings.Cut(strings.TrimSpace(out), " (")
	st.Reason = strings.TrimSuffix(reason, ")")
	switch state {
	case "running", "idle", "in shutdown", "blocked":
		st.State = guest.StateRunning
	case "paused", "pmsuspended":
		st.State = guest.StatePaused
	case "crashed":
		st.State = guest.StateCrashed
	default: // shut off, dying
		st.State = guest.StateShutoff
		if st.Reason == "crashed" || st.Reason == "failed" {
			st.State = guest.StateCrashed
		}
	}
	if st.State == guest.StateRunning || st.State == guest.StatePaused {
		if stats, err := b.virsh(ctx, "domstats", "--cpu-total", name); err == nil {
			for _, line := range strings.Split(stats, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cpu.time="); ok {
					ns, _ := strconv.ParseInt(v, 10, 64)
					st.CPUTime = durationNS(ns)
				}
			}
		}
		if si, err := b.virsh(ctx, "schedinfo", name); err == nil {
			st.CPULimit = parseCap(b.o.Kind, si)
		}
		if b.o.Kind == model.BackendQEMU {
			st.PID = qemuPID(name)
			st.Cgroup = domainCgroup(st.PID)
		}
	}
	return st, nil
}

// Freeze suspends the domain: vCPUs stop, memory stays.
func (b *Backend) Freeze(ctx context.Context, name string) error {
	return b.simple(ctx, name, "suspend", "Requested operation is not valid: domain is already suspended")
}

// Thaw resumes a suspended domain.
func (b *Backend) Thaw(ctx context.Context, name string) error {
	return b.simple(ctx, name, "resume", "domain is already running")
}

func (b *Backend) simple(ctx context.Context, name, verb, benign string) error {
	_, err := b.virsh(ctx, verb, name)
	switch {
	case err == nil:
		return nil
	case notFound(err):
		return fmt.Errorf("libvirt: %s %s: %w", verb, name, guest.ErrNotFound)
	case strings.Contains(err.Error(), benign) || strings.Contains(err.Error(), "not paused") || strings.Contains(err.Error(), "already"):
		return nil
	}
	if uerr := b.unavailableOr(ctx, err); uerr != err {
		return uerr
	}
	return fmt.Errorf("libvirt: %w", err)
}

// SetCPULimit caps the whole domain (vCPUs and emulator) at cpus CPUs through libvirt:
// QEMU's global_quota (the cgroup cpu.max / cfs_quota of the domain), Xen's credit cap.
func (b *Backend) SetCPULimit(ctx context.Context, name string, cpus float64) error {
	var args []string
	switch b.o.Kind {
	case model.BackendXen:
		c := 0 // no cap
		if cpus > 0 {
			c = max(1, int(cpus*100))
		}
		args = []string{"schedinfo", name, "--live", "cap=" + strconv.Itoa(c)}
	default:
		q := -1 // no quota: "max"
		if cpus > 0 {
			q = quota(cpus)
		}
		args = []string{"schedinfo", name, "--live", "global_period=" + strconv.Itoa(CPUPeriod), "global_quota=" + strconv.Itoa(q)}
	}
	if _, err := b.virsh(ctx, args...); err != nil {
		if notFound(err) {
			return fmt.Errorf("libvirt: cpu limit %s: %w", name, guest.ErrNotFound)
		}
		if uerr := b.unavailableOr(ctx, err); uerr != err {
			return uerr
		}
		return fmt.Errorf("libvirt: %w", err)
	}
	return nil
}

// LastWords is the reason the guest's init gave on its console before the guest stopped
// (guest.InitError), from the state directory Start linked in RunDir: the console of the
// guest's last start, until Stop discards it.
func (b *Backend) LastWords(name string) string {
	dir, err := os.Readlink(b.stateLink(name))
	if err != nil {
		return ""
	}
	f, err := os.Open(filepath.Join(dir, consoleLog))
	if err != nil {
		return ""
	}
	defer f.Close()
	// The end of the console is enough: the init's last words are its last lines.
	const tailBytes = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > tailBytes {
		_, _ = f.Seek(fi.Size()-tailBytes, io.SeekStart)
	}
	b2, _ := io.ReadAll(io.LimitReader(f, tailBytes))
	return guest.InitError(b2)
}

// Stop destroys the domain and discards its overlay. The state directory is the one in
// the domain's metadata, or, when libvirt no longer knows the domain (it crashed), the one
// Start linked in RunDir.
func (b *Backend) Stop(ctx context.Context, name string) error {
	stateDir := ""
	if md, err := b.virsh(ctx, "metadata", name, "https://overtime-hpc.org/xmlns/guest/1"); err == nil {
		if _, rest, ok := strings.Cut(md, "<stateDir>"); ok {
			stateDir, _, _ = strings.Cut(rest, "</stateDir>")
		}
	}
	if stateDir == "" {
		stateDir, _ = os.Readlink(b.stateLink(name))
	}
	if _, err := b.virsh(ctx, "destroy", name); err != nil && !notFound(err) {
		if uerr := b.unavailableOr(ctx, err); uerr != err {
			return uerr
		}
		return fmt.Errorf("libvirt: stop %s: %w", name, err)
	}
	return b.discard(name, stateDir)
}

// Watch follows libvirt's lifecycle events with one `virsh event --loop`. It checks that
// libvirt is reachable first: the loop would otherwise end at once, silently, where the
// backend cannot run (the agent calls Watch of every backend at its start; the KVM probe
// waits for the first guest).
func (b *Backend) Watch(ctx context.Context) (<-chan guest.Event, error) {
	if err := b.reachable(ctx); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, b.o.Virsh, "-q", "-c", b.o.URI, "event", "--all", "--loop")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan guest.Event, 16)
	go func() {
		defer close(ch)
		defer cmd.Wait()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ev, ok := parseEvent(sc.Text()); ok {
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}

// parseEvent reads a line of `virsh event --all --loop`, e.g.
//
//	event 'lifecycle' for domain 'overtime-pc-a01': Stopped Failed
func parseEvent(line string) (guest.Event, bool) {
	rest, ok := strings.CutPrefix(line, "event 'lifecycle' for domain '")
	if !ok {
		return guest.Event{}, false
	}
	name, what, ok := strings.Cut(rest, "': ")
	if !ok {
		return guest.Event{}, false
	}
	ev := guest.Event{Name: name, Reason: what}
	kind, detail, _ := strings.Cut(what, " ")
	switch kind {
	case "Started", "Resumed":
		ev.State = guest.StateRunning
	case "Suspended":
		ev.State = guest.StatePaused
	case "Crashed":
		ev.State = guest.StateCrashed
	case "Stopped", "Shutdown":
		ev.State = guest.StateShutoff
		if detail == "Failed" || detail == "Crashed" {
			ev.State = guest.StateCrashed
		}
	default:
		return guest.Event{}, false
	}
	return ev, true
}

// parseCap reads the CPU cap from `virsh schedinfo` output, in CPUs (0: none).
func parseCap(kind model.GuestBackend, out string) float64 {
	fields := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if kind == model.BackendXen {
		c, _ := strconv.Atoi(fields["cap"])
		return float64(c) / 100
	}
	q, err := strconv.ParseInt(fields["global_quota"], 10, 64)
	p, err2 := strconv.ParseInt(fields["global_period"], 10, 64)
	if err != nil || err2 != nil || q <= 0 || p <= 0 || q >= 17592186044415 {
		return 0
	}
	return float64(q) / float64(p)
}
