// Package vmware runs the compute guest in VMware Workstation or Player (model.BackendVMware),
// as the seed paper did: a generated .vmx whose one disk is the read-only base image in mode
// "independent-nonpersistent" (VMware keeps the guest's writes in a redo log in the tmpfs
// state directory and discards it at power-off), driven through the `vmrun` CLI:
//
//	vmrun -T ws|player start <vmx> nogui    Start
//	vmrun -T ws|player stop <vmx> hard      Stop (evict: nothing to save)
//	vmrun -T ws|player pause|unpause <vmx>  Freeze / Thaw
//	vmrun -T ws|player list                 Status (running .vmx paths)
//
// VMware has no idle scheduling class or CPU cap a Workstation VM honours, so the limits are
// the host's: the agent puts the vmware-vmx process in the guest's idle cgroup and caps it
// with cpu.max through the Cgroups interface, which the agent wires to node-agent/cgroup.
//
// VMware is proprietary and needs its kernel modules (vmmon, vmnet); where it is not
// installed every method returns a *guest.UnavailableError naming what is missing. See
// docs/node-agent-vmware.md.
package vmware

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Product selects vmrun's host type (-T).
type Product string

const (
	Workstation Product = "ws"
	Player      Product = "player"
)

// Cgroups is what the backend needs from the agent's cgroup code (node-agent/cgroup) for
// the guest's vmware-vmx process, which runs the guest's vCPUs as its threads. The lead
// wires an implementation in; without one Start refuses guests that must be confined and
// SetCPULimit fails (never a silent no-op).
type Cgroups interface {
	// Adopt moves process pid with all its threads into the guest's cgroup for name:
	// idle class when idle (cgroup v2 cpu.idle=1, v1 cpu.shares=2, and SCHED_IDLE + nice 19
	// on its threads), memory.max of memoryMB plus VMware's overhead, cpu.max of cpus CPUs
	// when cpus > 0.
	Adopt(name string, pid int, idle bool, memoryMB int, cpus float64) error
	// SetCPULimit sets the cpu.max of the cgroup process pid is in to cpus CPUs, or "max"
	// when cpus <= 0.
	SetCPULimit(pid int, cpus float64) error
	// CPULimit reads back the cgroup of process pid (path relative to the cgroup root) and
	// the cap in force in CPUs (0: none).
	CPULimit(pid int) (cgroup string, cpus float64, err error)
}

// Runner runs a command and returns its standard output and error, combined (vmrun prints
// its errors on standard output). A non-zero exit is an error.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// Config configures the backend. The zero value probes the host and uses the defaults.
type Config struct {
	// Product is vmrun's -T: ws or player. "": player when /etc/vmware/config names
	// VMware Player, otherwise ws.
	Product Product
	// VMrun is the vmrun binary; "": looked up in PATH.
	VMrun string
	// VMX is the vmware-vmx binary (only probed: vmrun starts it); "": the libdir of
	// /etc/vmware/config, then /usr/lib/vmware/bin, then PATH.
	VMX string
	// VMXOptions are written into every .vmx; HostMHz 0: read from the host.
	VMXOptions VMXOptions
	// StateRoot is where a restarted agent looks for NAME/NAME.vmx of a guest it did not
	// start itself; default /run/overtime/guest (Spec.StateDir is StateRoot/NAME).
	StateRoot string
	// Cgroups confines the vmware-vmx process (see the interface).
	Cgroups Cgroups
	// NATGuestIP is the fixed vmnet8 address of a NAT guest (reserved for its MAC): the
	// target of its port forwards. Required for NAT guests with port forwards.
	NATGuestIP netip.Addr
	// ManageNAT lets Start add the guest's reservation and forwards to the networking file
	// and restart VMware's networks (vmware-networks --stop/--start). Otherwise Start
	// only checks that they are there and names the missing lines.
	ManageNAT bool
	// Networking is VMware's host network configuration; default /etc/vmware/networking.
	Networking string
	// Run runs commands; default os/exec.
	Run Runner
	// Timeout bounds each vmrun call; default 2 minutes.
	Timeout time.Duration
	// StartWait is how long Start waits for the guest's vmware-vmx process; default 30 s.
	StartWait time.Duration
}

// Backend implements guest.Backend with VMware Workstation/Player.
type Backend struct {
	cfg Config
	// root prefixes every host path the backend reads (/dev, /proc, /sys, /etc/vmware,
	// /usr/lib/vmware): "/" in production, a fake tree in tests.
	root string

	mu     sync.Mutex
	guests map[string]string // name -> .vmx path, for guests this agent started or found
}

var _ guest.Backend = (*Backend)(nil)

// New returns a backend. It does not probe: Available does, on every call.
func New(c Config) *Backend {
	if c.StateRoot == "" {
		c.StateRoot = paths.GuestState
	}
	if c.Networking == "" {
		c.Networking = "/etc/vmware/networking"
	}
	if c.Run == nil {
		c.Run = execRun
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.StartWait == 0 {
		c.StartWait = 30 * time.Second
	}
	return &Backend{cfg: c, root: "/", guests: map[string]string{}}
}

func execRun(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Kind is model.BackendVMware.
func (b *Backend) Kind() model.GuestBackend { return model.BackendVMware }

func (b *Backend) host(p string) string { return filepath.Join(b.root, p) }

func (b *Backend) unavailable(format string, a ...any) error {
	return guest.Unavailable(model.BackendVMware, format, a...)
}

// probed is what Available found.
type probed struct {
	vmrun   string
	product Product
}

// Available reports whether VMware guests can run here. The error names every missing
// piece: vmrun, vmware-vmx, the vmmon module and its device.
func (b *Backend) Available(ctx context.Context) error {
	_, err := b.probe()
	return err
}

func (b *Backend) probe() (probed, error) {
	var reasons []string
	var p probed

	// vmrun
	if b.cfg.VMrun != "" {
		if err := checkExec(b.cfg.VMrun); err != nil {
			reasons = append(reasons, "vmrun "+err.Error())
		} else {
			p.vmrun = b.cfg.VMrun
		}
	} else {
		path, why := lookPath("vmrun")
		if path == "" {
			reasons = append(reasons, why)
		}
		p.vmrun = path
	}

	// vmware-vmx, and the product from VMware's own configuration
	conf := b.vmwareConfig()
	vmx, why := b.findVMX(conf)
	if vmx == "" {
		reasons = append(reasons, why)
	}
	p.product = b.cfg.Product
	if p.product == "" {
		p.product = Workstation
		if name, _ := conf.Get("product.name"); strings.Contains(name, "Player") {
			p.product = Player
		}
	}
	if p.product != Workstation && p.product != Player {
		reasons = append(reasons, fmt.Sprintf("unknown product %q (ws or player)", p.product))
	}

	// vmmon: VMware's monitor module and its device
	_, devErr := os.Stat(b.host("/dev/vmmon"))
	modLoaded, modKnown := b.moduleLoaded("vmmon")
	switch {
	case devErr != nil && modKnown && !modLoaded:
		reasons = append(reasons, "/dev/vmmon missing: vmmon kernel module not loaded (vmware-modconfig --console --install-all; modprobe vmmon)")
	case devErr != nil:
		reasons = append(reasons, "/dev/vmmon missing (vmmon kernel module not loaded or not built)")
	case modKnown && !modLoaded:
		reasons = append(reasons, "vmmon kernel module not loaded (/proc/modules)")
	}

	if len(reasons) > 0 {
		return p, b.unavailable("%s", strings.Join(reasons, "; "))
	}
	return p, nil
}

// checkExec says why path cannot be run, or nil.
func checkExec(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("not found at %s", path)
	case st.IsDir():
		return fmt.Errorf("at %s is a directory", path)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("at %s is not executable", path)
	}
	return nil
}

// lookPath finds an executable in PATH; when there is none it says why, naming a file of
// that name that is not executable.
func lookPath(name string) (string, string) {
	var notExec string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never run a binary from the working directory
		}
		p := filepath.Join(dir, name)
		err := checkExec(p)
		if err == nil {
			return p, ""
		}
		if notExec == "" {
			if _, statErr := os.Stat(p); statErr == nil {
				notExec = fmt.Sprintf("%s %v", name, err)
			}
		}
	}
	if notExec != "" {
		return "", notExec
	}
	return "", name + " not in PATH"
}

// vmwareConfig reads /etc/vmware/config (same key = "value" format as a .vmx); empty if
// absent or unreadable.
func (b *Backend) vmwareConfig() VMX {
	data, err := os.ReadFile(b.host("/etc/vmware/config"))
	if err != nil {
		return nil
	}
	v, _ := ParseVMX(data)
	return v
}

func (b *Backend) findVMX(conf VMX) (string, string) {
	if b.cfg.VMX != "" {
		if err := checkExec(b.cfg.VMX); err != nil {
			return "", "vmware-vmx " + err.Error()
		}
		return b.cfg.VMX, ""
	}
	var looked []string
	var cands []string
	if libdir, ok := conf.Get("libdir"); ok && filepath.IsAbs(libdir) {
		cands = append(cands, filepath.Join(libdir, "bin", "vmware-vmx"))
	}
	cands = append(cands, "/usr/lib/vmware/bin/vmware-vmx")
	for _, c := range cands {
		looked = append(looked, c)
		if err := checkExec(b.host(c)); err == nil {
			return c, ""
		} else if _, statErr := os.Stat(b.host(c)); statErr == nil {
			// name the host path, not the test root's
			return "", "vmware-vmx " + strings.Replace(err.Error(), b.host(c), c, 1)
		}
	}
	if p, _ := lookPath("vmware-vmx"); p != "" {
		return p, ""
	}
	return "", fmt.Sprintf("vmware-vmx not found (looked in %s and PATH)", strings.Join(looked, ", "))
}

// moduleLoaded reports whether /proc/modules lists mod; known is false when /proc/modules
// cannot be read (containers).
func (b *Backend) moduleLoaded(mod string) (loaded, known bool) {
	data, err := os.ReadFile(b.host("/proc/modules"))
	if err != nil {
		return false, false
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == mod {
			return true, true
		}
	}
	return false, true
}

// hostMHz is the clock of one host CPU in MHz: cpufreq's maximum, else the highest
// "cpu MHz" of /proc/cpuinfo (the current clock), else 0.
func (b *Backend) hostMHz() int {
	if data, err := os.ReadFile(b.host("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")); err == nil {
		if khz, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && khz > 0 {
			return khz / 1000
		}
	}
	data, err := os.ReadFile(b.host("/proc/cpuinfo"))
	if err != nil {
		return 0
	}
	best := 0.0
	for l := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > best {
			best = f
		}
	}
	return int(best)
}

// vmrun runs one vmrun command.
func (b *Backend) vmrun(ctx context.Context, p probed, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	out, err := b.cfg.Run(ctx, p.vmrun, append([]string{"-T", string(p.product)}, args...)...)
	if err != nil {
		return out, fmt.Errorf("vmware: %w", err)
	}
	return out, nil
}

// ParseVMList parses the output of `vmrun list`:
//
//	Total running VMs: 2
//	/run/overtime/guest/overtime-pc-a01/overtime-pc-a01.vmx
//	/home/user/vmware/Other/Other.vmx
//
// It returns the .vmx paths and checks that their number matches the header.
func ParseVMList(out []byte) ([]string, error) {
	text := strings.ReplaceAll(string(out), "\r\n", "\n")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	const head = "Total running VMs:"
	i := 0
	for i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), head) {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "Error:") {
			return nil, fmt.Errorf("vmware: vmrun list: %s", strings.TrimSpace(lines[i]))
		}
		i++
	}
	if i == len(lines) {
		return nil, fmt.Errorf("vmware: vmrun list: no %q line in %q", head, text)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), head)))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("vmware: vmrun list: bad count in %q", lines[i])
	}
	var paths []string
	for _, l := range lines[i+1:] {
		if l = strings.TrimSpace(l); l != "" {
			paths = append(paths, l)
		}
	}
	if len(paths) != n {
		return nil, fmt.Errorf("vmware: vmrun list: header says %d running VMs, %d listed", n, len(paths))
	}
	return paths, nil
}

// found is where a guest is.
type found struct {
	vmx     string // .vmx path; "" when the guest is absent
	running bool   // listed by vmrun list (running or paused)
}

func (f found) dir() string { return filepath.Dir(f.vmx) }

func (f found) paused() bool {
	_, err := os.Stat(filepath.Join(f.dir(), pausedMarkerFile))
	return err == nil
}

// isOurs reports whether the .vmx at path is a guest this backend generated for name.
func isOurs(path, name string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	v, err := ParseVMX(data)
	if err != nil {
		return false
	}
	dn, _ := v.Get("displayName")
	ann, _ := v.Get("annotation")
	return dn == name && ann == annotationSentinel
}

// locate finds a guest by name: the .vmx this agent wrote (or StateRoot/NAME/NAME.vmx after
// a restart), and whether vmrun lists it as running.
func (b *Backend) locate(ctx context.Context, p probed, name string) (found, error) {
	if names.Hostname(name) != nil {
		return found{}, fmt.Errorf("vmware: invalid guest name %q", name)
	}
	out, err := b.vmrun(ctx, p, "list")
	if err != nil {
		return found{}, err
	}
	running, err := ParseVMList(out)
	if err != nil {
		return found{}, err
	}
	b.mu.Lock()
	known := b.guests[name]
	b.mu.Unlock()
	if known == "" {
		cand := filepath.Join(b.cfg.StateRoot, name, name+".vmx")
		if isOurs(cand, name) {
			known = cand
		}
	}
	for _, r := range running {
		if r == known {
			return found{vmx: r, running: true}, nil
		}
	}
	for _, r := range running {
		if filepath.Base(r) == name+".vmx" && isOurs(r, name) {
			b.remember(name, r)
			return found{vmx: r, running: true}, nil
		}
	}
	if known != "" {
		if _, err := os.Stat(known); err == nil {
			return found{vmx: known}, nil
		}
	}
	return found{}, nil
}

func (b *Backend) remember(name, vmx string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if vmx == "" {
		delete(b.guests, name)
	} else {
		b.guests[name] = vmx
	}
}

// Status reports the guest: running or paused while vmrun lists it (paused when Freeze left
// its marker), shutoff or crashed when its .vmx remains but vmware-vmx is gone, else absent.
func (b *Backend) Status(ctx context.Context, name string) (guest.Status, error) {
	p, err := b.probe()
	if err != nil {
		return guest.Status{}, err
	}
	f, err := b.locate(ctx, p, name)
	if err != nil {
		return guest.Status{}, err
	}
	switch {
	case f.vmx == "":
		return guest.Status{State: guest.StateAbsent}, nil
	case !f.running:
		if why := crashReason(filepath.Join(f.dir(), vmwareLogFile)); why != "" {
			return guest.Status{State: guest.StateCrashed, Reason: why}, nil
		}
		return guest.Status{State: guest.StateShutoff, Reason: "vmware-vmx exited (see " + filepath.Join(f.dir(), vmwareLogFile) + ")"}, nil
	}
	st := guest.Status{State: guest.StateRunning}
	if f.paused() {
		st.State, st.Reason = guest.StatePaused, "paused (vmrun pause)"
	}
	if pid := b.findPID(f.vmx); pid > 0 {
		st.PID = pid
		st.CPUTime = b.cpuTime(pid)
		if b.cfg.Cgroups != nil {
			cg, cpus, err := b.cfg.Cgroups.CPULimit(pid)
			if err != nil {
				return st, fmt.Errorf("vmware: %s: reading the cgroup of vmware-vmx %d: %w", name, pid, err)
			}
			st.Cgroup, st.CPULimit = cg, cpus
		}
	}
	return st, nil
}

// crashReason looks for VMware's fatal error in vmware.log ("... unrecoverable error: ...",
// a VMX PANIC); "" when there is none.
func crashReason(log string) string {
	data, err := os.ReadFile(log)
	if err != nil {
		return ""
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(l, "unrecoverable error") || strings.Contains(l, "PANIC:") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// findPID returns the vmware-vmx process running vmx (its last argument), or 0.
func (b *Backend) findPID(vmx string) int {
	proc := b.host("/proc")
	ents, err := os.ReadDir(proc)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		data, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if strings.HasPrefix(filepath.Base(args[0]), "vmware-vmx") && args[len(args)-1] == vmx {
			return pid
		}
	}
	return 0
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on every Linux platform the
// agent runs on).
const clockTicks = 100

// cpuTime is the CPU time (user + system, all threads) of process pid.
func (b *Backend) cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(b.host(fmt.Sprintf("/proc/%d/stat", pid)))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / clockTicks
}

// Start writes the guest's .vmx (and, for a raw base, its VMDK descriptor) into
// Spec.StateDir, starts it with `vmrun start <vmx> nogui` and moves its vmware-vmx process
// into the guest's idle cgroup. Anything that fails undoes the rest.
func (b *Backend) Start(ctx context.Context, s guest.Spec) error {
	p, err := b.probe()
	if err != nil {
		return err
	}
	opts := b.cfg.VMXOptions
	if opts.HostMHz == 0 {
		opts.HostMHz = b.hostMHz()
	}
	data, err := GenerateVMX(s, opts)
	if err != nil {
		return err
	}
	if b.cfg.Cgroups == nil && (s.CPUIdle || s.CPULimit > 0) {
		return fmt.Errorf("vmware: no cgroup controller configured (Config.Cgroups): the guest would run outside its idle cgroup")
	}
	if err := b.checkNetwork(ctx, p, s); err != nil {
		return err
	}
	f, err := b.locate(ctx, p, s.Name)
	if err != nil {
		return err
	}
	if f.running {
		return fmt.Errorf("vmware: guest %s already runs (%s)", s.Name, f.vmx)
	}
	if f.vmx != "" { // left over from a guest that exited by itself
		if err := os.RemoveAll(f.dir()); err != nil {
			return fmt.Errorf("vmware: removing the old state of %s: %w", s.Name, err)
		}
	}
	if err := b.prepareStateDir(s); err != nil {
		return err
	}
	vmx := filepath.Join(s.StateDir, s.Name+".vmx")
	cleanup := func() { os.RemoveAll(s.StateDir) }
	if s.BaseFormat == "raw" {
		st, err := os.Stat(s.BaseImage)
		if err != nil {
			cleanup()
			return fmt.Errorf("vmware: base image: %w", err)
		}
		desc, err := RawDescriptor(s.BaseImage, st.Size())
		if err == nil {
			err = os.WriteFile(filepath.Join(s.StateDir, RawDescriptorFile), desc, 0o600)
		}
		if err != nil {
			cleanup()
			return err
		}
	}
	if err := os.WriteFile(vmx, data, 0o600); err != nil {
		cleanup()
		return fmt.Errorf("vmware: %w", err)
	}
	if err := b.writeNATFragments(s); err != nil {
		cleanup()
		return err
	}
	if _, err := b.vmrun(ctx, p, "start", vmx, "nogui"); err != nil {
		cleanup()
		return err
	}
	b.remember(s.Name, vmx)
	fail := func(err error) error {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Timeout)
		defer cancel()
		if _, serr := b.vmrun(stopCtx, p, "stop", vmx, "hard"); serr != nil {
			err = fmt.Errorf("%w (and stopping it failed: %v)", err, serr)
		}
		cleanup()
		b.remember(s.Name, "")
		return err
	}
	if b.cfg.Cgroups == nil {
		return nil
	}
	pid, err := b.waitPID(ctx, vmx)
	if err != nil {
		return fail(err)
	}
	if err := b.cfg.Cgroups.Adopt(s.Name, pid, s.CPUIdle, s.MemoryMB, s.CPULimit); err != nil {
		return fail(fmt.Errorf("vmware: confining vmware-vmx %d of %s: %w", pid, s.Name, err))
	}
	return nil
}

// prepareStateDir creates Spec.StateDir (0700). An existing directory must be empty: the
// backend never removes files it did not write.
func (b *Backend) prepareStateDir(s guest.Spec) error {
	ents, err := os.ReadDir(s.StateDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(s.StateDir, 0o700); err != nil {
			return fmt.Errorf("vmware: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("vmware: state directory: %w", err)
	case len(ents) > 0:
		return fmt.Errorf("vmware: state directory %s is not empty", s.StateDir)
	}
	return os.Chmod(s.StateDir, 0o700)
}

func (b *Backend) waitPID(ctx context.Context, vmx string) (int, error) {
	deadline := time.Now().Add(b.cfg.StartWait)
	for {
		if pid := b.findPID(vmx); pid > 0 {
			return pid, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("vmware: no vmware-vmx process for %s after %s", vmx, b.cfg.StartWait)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkNetwork checks the host side of the guest's network: the vmnet device, vmnet0's
// bridge, and for NAT forwards the lines of the networking file (adding them when
// Config.ManageNAT).
func (b *Backend) checkNetwork(ctx context.Context, p probed, s guest.Spec) error {
	switch s.Network {
	case model.NetBridged:
		if _, err := os.Stat(b.host("/dev/vmnet0")); err != nil {
			return b.unavailable("/dev/vmnet0 missing: bridged guests need the vmnet module and vmnet0 (vmware-networks --start)")
		}
		if data, err := os.ReadFile(b.host(b.cfg.Networking)); err == nil {
			if m := bridgeMapping(string(data)); m != "" && m != s.Bridge {
				return fmt.Errorf("vmware: vmnet0 is bridged to %s (%s), not to %s: VMware bridges by host interface, set add_bridge_mapping %s 0", m, b.cfg.Networking, s.Bridge, s.Bridge)
			}
		}
	case model.NetNAT:
		if _, err := os.Stat(b.host("/dev/vmnet8")); err != nil {
			return b.unavailable("/dev/vmnet8 missing: NAT guests need the vmnet module and vmnet8 (vmware-networks --start)")
		}
		if len(s.Ports) == 0 {
			return nil
		}
		if !b.cfg.NATGuestIP.Is4() {
			return fmt.Errorf("vmware: NAT port forwards need Config.NATGuestIP, the guest's fixed vmnet8 address")
		}
		want, err := NATNetworking(s.MAC, b.cfg.NATGuestIP, s.Ports)
		if err != nil {
			return err
		}
		path := b.host(b.cfg.Networking)
		data, err := os.ReadFile(path)
		if err != nil && !(b.cfg.ManageNAT && errors.Is(err, fs.ErrNotExist)) {
			return fmt.Errorf("vmware: NAT port forwards: %w", err)
		}
		miss := missingNetworking(string(data), want)
		if len(miss) == 0 {
			return nil
		}
		if !b.cfg.ManageNAT {
			return fmt.Errorf("vmware: %s lacks the guest's NAT settings; add:\n%s", b.cfg.Networking, strings.Join(miss, "\n"))
		}
		if err := atomicfile.WriteFile(path, []byte(mergeNetworking(string(data), want)), 0o644); err != nil {
			return fmt.Errorf("vmware: %w", err)
		}
		return b.restartNetworks(ctx)
	}
	return nil
}

// restartNetworks makes VMware re-read its networking file.
func (b *Backend) restartNetworks(ctx context.Context) error {
	bin, why := lookPath("vmware-networks")
	if bin == "" {
		return fmt.Errorf("vmware: cannot apply NAT settings: %s", why)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	for _, arg := range []string{"--stop", "--start"} {
		if _, err := b.cfg.Run(ctx, bin, arg); err != nil {
			return fmt.Errorf("vmware: %w", err)
		}
	}
	return nil
}

// writeNATFragments leaves the guest's NAT settings in its state directory, both as
// networking lines and as a nat.conf [incomingtcp] section.
func (b *Backend) writeNATFragments(s guest.Spec) error {
	if s.Network != model.NetNAT || len(s.Ports) == 0 {
		return nil
	}
	lines, err := NATNetworking(s.MAC, b.cfg.NATGuestIP, s.Ports)
	if err != nil {
		return err
	}
	conf, err := NATConf(b.cfg.NATGuestIP, s.Ports)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.StateDir, NATNetworkingFile), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("vmware: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.StateDir, NATConfFile), []byte(conf), 0o600); err != nil {
		return fmt.Errorf("vmware: %w", err)
	}
	return nil
}

// running finds a running guest for Freeze, Thaw and SetCPULimit.
func (b *Backend) running(ctx context.Context, name string) (probed, found, error) {
	p, err := b.probe()
	if err != nil {
		return p, found{}, err
	}
	f, err := b.locate(ctx, p, name)
	if err != nil {
		return p, f, err
	}
	if f.vmx == "" {
		return p, f, fmt.Errorf("vmware: %s: %w", name, guest.ErrNotFound)
	}
	if !f.running {
		return p, f, fmt.Errorf("vmware: guest %s is not running", name)
	}
	return p, f, nil
}

// Freeze pauses the guest (`vmrun pause`): its vCPUs stop, its memory stays. A marker in the
// state directory records it, because `vmrun list` shows paused VMs as running.
func (b *Backend) Freeze(ctx context.Context, name string) error {
	p, f, err := b.running(ctx, name)
	if err != nil {
		return err
	}
	if f.paused() {
		return nil
	}
	marker := filepath.Join(f.dir(), pausedMarkerFile)
	// The marker goes first: if it cannot be written the guest is not paused, and a
	// paused guest always has it, so Thaw always finds it.
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return fmt.Errorf("vmware: %w", err)
	}
	if _, err := b.vmrun(ctx, p, "pause", f.vmx); err != nil {
		os.Remove(marker)
		return err
	}
	return nil
}

// Thaw resumes a frozen guest (`vmrun unpause`); a running guest is left alone.
func (b *Backend) Thaw(ctx context.Context, name string) error {
	p, f, err := b.running(ctx, name)
	if err != nil {
		return err
	}
	if !f.paused() {
		return nil
	}
	if _, err := b.vmrun(ctx, p, "unpause", f.vmx); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(f.dir(), pausedMarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("vmware: %w", err)
	}
	return nil
}

// SetCPULimit caps the guest at cpus CPUs by writing cpu.max of its vmware-vmx process's
// cgroup (through Config.Cgroups); cpus <= 0 removes the cap.
func (b *Backend) SetCPULimit(ctx context.Context, name string, cpus float64) error {
	_, f, err := b.running(ctx, name)
	if err != nil {
		return err
	}
	if b.cfg.Cgroups == nil {
		return fmt.Errorf("vmware: no cgroup controller configured (Config.Cgroups): cannot limit %s", name)
	}
	pid := b.findPID(f.vmx)
	if pid == 0 {
		return fmt.Errorf("vmware: no vmware-vmx process for %s", f.vmx)
	}
	if err := b.cfg.Cgroups.SetCPULimit(pid, cpus); err != nil {
		return fmt.Errorf("vmware: %s: %w", name, err)
	}
	return nil
}

// Stop powers the guest off at once (`vmrun stop <vmx> hard`; a paused guest is unpaused
// first) and removes its state directory with the redo log. An absent guest is not an error.
func (b *Backend) Stop(ctx context.Context, name string) error {
	p, err := b.probe()
	if err != nil {
		return err
	}
	f, err := b.locate(ctx, p, name)
	if err != nil {
		return err
	}
	if f.vmx == "" {
		b.remember(name, "")
		return nil
	}
	if f.running {
		if f.paused() {
			// a paused VM must run to power off; an error here shows again in stop
			_, _ = b.vmrun(ctx, p, "unpause", f.vmx)
		}
		if _, err := b.vmrun(ctx, p, "stop", f.vmx, "hard"); err != nil {
			return err
		}
	}
	if !isOurs(f.vmx, name) {
		return fmt.Errorf("vmware: %s is not a guest .vmx of %s: not removing %s", f.vmx, name, f.dir())
	}
	if err := os.RemoveAll(f.dir()); err != nil {
		return fmt.Errorf("vmware: removing the state of %s: %w", name, err)
	}
	b.remember(name, "")
	return nil
}
