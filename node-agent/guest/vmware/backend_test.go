package vmware

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// fakeHost is a host with VMware "installed" under a fake root: the probe finds vmrun,
// vmware-vmx and /dev/vmmon, and a fake Runner plays vmrun, keeping VMs and their
// vmware-vmx processes (in the fake /proc) the way VMware does. It never runs a binary.
type fakeHost struct {
	t         *testing.T
	root, bin string
	stateRoot string

	mu      sync.Mutex
	calls   []string
	running map[string]int // vmx -> pid
	paused  map[string]bool
	nextPID int
	noProc  bool   // start without a vmware-vmx process
	failOp  string // this vmrun operation fails
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{t: t, root: t.TempDir(), bin: t.TempDir(), stateRoot: t.TempDir(),
		running: map[string]int{}, paused: map[string]bool{}, nextPID: 4242}
	writeExec(t, filepath.Join(h.bin, "vmrun"), 0o755)
	writeExec(t, filepath.Join(h.root, "usr/lib/vmware/bin/vmware-vmx"), 0o4755)
	for _, d := range []string{"dev/vmmon", "dev/vmnet0", "dev/vmnet8"} {
		writeFile(t, filepath.Join(h.root, d), "")
	}
	writeFile(t, filepath.Join(h.root, "proc/modules"), "vmmon 126976 0 - Live 0x0 (OE)\nvmnet 73728 13 - Live 0x0 (OE)\n")
	writeFile(t, filepath.Join(h.root, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), "3000000\n")
	t.Setenv("PATH", h.bin)
	return h
}

func (h *fakeHost) backend(c Config) *Backend {
	c.VMrun = filepath.Join(h.bin, "vmrun")
	c.Run = h.run
	if c.StateRoot == "" {
		c.StateRoot = h.stateRoot
	}
	if c.StartWait == 0 {
		c.StartWait = 2 * time.Second
	}
	b := New(c)
	b.root = h.root
	return b
}

func (h *fakeHost) spec(name string) guest.Spec {
	s := baseSpec()
	s.Name = name
	s.StateDir = filepath.Join(h.stateRoot, name)
	s.BaseImage = filepath.Join(h.root, "srv/images/root.img")
	if _, err := os.Stat(s.BaseImage); err != nil {
		writeFile(h.t, s.BaseImage, strings.Repeat("\x00", 1<<20))
	}
	return s
}

func (h *fakeHost) callLog() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *fakeHost) resetCalls() {
	h.mu.Lock()
	h.calls = nil
	h.mu.Unlock()
}

func (h *fakeHost) procDir(pid int) string { return filepath.Join(h.root, "proc", fmt.Sprint(pid)) }

// exit makes a VM's vmware-vmx go away as if the guest powered itself off.
func (h *fakeHost) exit(vmx string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	os.RemoveAll(h.procDir(h.running[vmx]))
	delete(h.running, vmx)
	delete(h.paused, vmx)
}

func (h *fakeHost) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, filepath.Base(name)+" "+strings.Join(args, " "))
	if filepath.Base(name) == "vmware-networks" {
		return nil, nil
	}
	if name != filepath.Join(h.bin, "vmrun") || len(args) < 3 || args[0] != "-T" {
		return nil, fmt.Errorf("unexpected command %s %q", name, args)
	}
	op := args[2]
	if op == h.failOp {
		return []byte("Error: Cannot open VM: " + op + " failed\n"), fmt.Errorf("exit status 255")
	}
	vmErr := func(msg string) ([]byte, error) { return []byte("Error: " + msg + "\n"), fmt.Errorf("exit status 255") }
	switch {
	case op == "list" && len(args) == 3:
		out := fmt.Sprintf("Total running VMs: %d\n", len(h.running))
		for vmx := range h.running {
			out += vmx + "\n"
		}
		return []byte(out), nil
	case op == "start" && len(args) == 5 && args[4] == "nogui":
		vmx := args[3]
		if _, ok := h.running[vmx]; ok {
			return vmErr("The file is already in use")
		}
		data, err := os.ReadFile(vmx)
		if err != nil {
			return vmErr("Cannot open VM: " + vmx + ", The virtual machine cannot be found")
		}
		if _, err := ParseVMX(data); err != nil {
			return vmErr("Unable to parse the configuration file")
		}
		pid := h.nextPID
		h.nextPID++
		h.running[vmx] = pid
		if !h.noProc {
			argv := []string{"/usr/lib/vmware/bin/vmware-vmx", "-s", "vmx.stdio.keep=TRUE", "-#",
				"product=1;name=VMware Workstation;version=17.5.0;buildnumber=22583795;", "-@", "duplex=3;msgs=ui", vmx}
			writeFile(h.t, filepath.Join(h.procDir(pid), "cmdline"), strings.Join(argv, "\x00")+"\x00")
			// utime 250 + stime 50 ticks = 3 s
			writeFile(h.t, filepath.Join(h.procDir(pid), "stat"),
				fmt.Sprintf("%d (vmware-vmx) S 1 %d %d 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0\n", pid, pid, pid))
		}
		return nil, nil
	case op == "stop" && len(args) == 5 && args[4] == "hard":
		vmx := args[3]
		if _, ok := h.running[vmx]; !ok {
			return vmErr("The virtual machine is not powered on: " + vmx)
		}
		if h.paused[vmx] {
			return vmErr("The virtual machine is paused") // the backend unpauses first
		}
		os.RemoveAll(h.procDir(h.running[vmx]))
		delete(h.running, vmx)
		return nil, nil
	case (op == "pause" || op == "unpause") && len(args) == 4:
		vmx := args[3]
		if _, ok := h.running[vmx]; !ok {
			return vmErr("The virtual machine is not powered on")
		}
		if h.paused[vmx] == (op == "pause") {
			return vmErr("The virtual machine is already in that state")
		}
		h.paused[vmx] = op == "pause"
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected vmrun arguments %q", args)
}

// fakeCgroups records what the backend asks of the agent's cgroup code.
type fakeCgroups struct {
	mu       sync.Mutex
	adopted  []string
	limits   map[int]float64
	adoptErr error
}

func (c *fakeCgroups) Adopt(name string, pid int, idle bool, memoryMB int, cpus float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adopted = append(c.adopted, fmt.Sprintf("%s pid=%d idle=%v mem=%d cpus=%g", name, pid, idle, memoryMB, cpus))
	if c.adoptErr != nil {
		return c.adoptErr
	}
	if c.limits == nil {
		c.limits = map[int]float64{}
	}
	c.limits[pid] = cpus
	return nil
}

func (c *fakeCgroups) SetCPULimit(pid int, cpus float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.limits[pid]; !ok {
		return fmt.Errorf("pid %d not adopted", pid)
	}
	c.limits[pid] = max(cpus, 0)
	return nil
}

func (c *fakeCgroups) CPULimit(pid int) (string, float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cpus, ok := c.limits[pid]
	if !ok {
		return "", 0, fmt.Errorf("pid %d not adopted", pid)
	}
	return fmt.Sprintf("overtime.slice/guest-%d", pid), cpus, nil
}

func wantCalls(t *testing.T, h *fakeHost, want ...string) {
	t.Helper()
	if got := h.callLog(); !reflect.DeepEqual(got, want) {
		t.Errorf("commands:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	h.resetCalls()
}

func wantState(t *testing.T, b *Backend, name string, want guest.State) guest.Status {
	t.Helper()
	st, err := b.Status(context.Background(), name)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.State != want {
		t.Fatalf("state %s (%s), want %s", st.State, st.Reason, want)
	}
	return st
}

func TestLifecycle(t *testing.T) {
	h := newFakeHost(t)
	cg := &fakeCgroups{}
	b := h.backend(Config{Cgroups: cg})
	ctx := context.Background()
	s := h.spec("overtime-pc-a01")
	s.CPULimit = 0.5
	vmx := filepath.Join(s.StateDir, s.Name+".vmx")

	wantState(t, b, s.Name, guest.StateAbsent)
	h.resetCalls()
	if err := b.Start(ctx, s); err != nil {
		t.Fatalf("Start: %v", err)
	}
	wantCalls(t, h, "vmrun -T ws list", "vmrun -T ws start "+vmx+" nogui")
	if want := []string{"overtime-pc-a01 pid=4242 idle=true mem=2048 cpus=0.5"}; !reflect.DeepEqual(cg.adopted, want) {
		t.Errorf("adopted %q, want %q", cg.adopted, want)
	}
	data, err := os.ReadFile(vmx)
	if err != nil {
		t.Fatal(err)
	}
	kv := validateVMX(t, data, s)
	if kv["sched.cpu.max"] != "1500" { // 0.5 CPU of a 3000 MHz host (cpuinfo_max_freq)
		t.Errorf("sched.cpu.max = %q, want 1500", kv["sched.cpu.max"])
	}
	desc, err := os.ReadFile(filepath.Join(s.StateDir, RawDescriptorFile))
	if err != nil || !strings.Contains(string(desc), fmt.Sprintf("RW 2048 FLAT %q 0", s.BaseImage)) {
		t.Errorf("descriptor (%v):\n%s", err, desc)
	}
	for _, f := range []string{s.StateDir, vmx} {
		if st, _ := os.Stat(f); st == nil || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is readable by others", f)
		}
	}

	st := wantState(t, b, s.Name, guest.StateRunning)
	if st.PID != 4242 || st.CPUTime != 3*time.Second || st.Cgroup != "overtime.slice/guest-4242" || st.CPULimit != 0.5 {
		t.Errorf("status %+v", st)
	}
	if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("second Start: %v", err)
	}

	h.resetCalls()
	if err := b.SetCPULimit(ctx, s.Name, 0.25); err != nil {
		t.Fatal(err)
	}
	if st := wantState(t, b, s.Name, guest.StateRunning); st.CPULimit != 0.25 {
		t.Errorf("CPULimit %g after SetCPULimit(0.25)", st.CPULimit)
	}
	if err := b.SetCPULimit(ctx, s.Name, 0); err != nil {
		t.Fatal(err)
	}

	h.resetCalls()
	for range 2 { // idempotent: the second Freeze does not pause again
		if err := b.Freeze(ctx, s.Name); err != nil {
			t.Fatalf("Freeze: %v", err)
		}
	}
	wantCalls(t, h, "vmrun -T ws list", "vmrun -T ws pause "+vmx, "vmrun -T ws list")
	wantState(t, b, s.Name, guest.StatePaused)
	h.resetCalls()
	for range 2 {
		if err := b.Thaw(ctx, s.Name); err != nil {
			t.Fatalf("Thaw: %v", err)
		}
	}
	wantCalls(t, h, "vmrun -T ws list", "vmrun -T ws unpause "+vmx, "vmrun -T ws list")
	wantState(t, b, s.Name, guest.StateRunning)

	// Stop a frozen guest: unpause, power off hard, state gone.
	if err := b.Freeze(ctx, s.Name); err != nil {
		t.Fatal(err)
	}
	h.resetCalls()
	if err := b.Stop(ctx, s.Name); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	wantCalls(t, h, "vmrun -T ws list", "vmrun -T ws unpause "+vmx, "vmrun -T ws stop "+vmx+" hard")
	if _, err := os.Stat(s.StateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory left after Stop: %v", err)
	}
	wantState(t, b, s.Name, guest.StateAbsent)
	if err := b.Stop(ctx, s.Name); err != nil {
		t.Errorf("Stop of an absent guest: %v", err)
	}
	for name, call := range map[string]func() error{
		"Freeze":      func() error { return b.Freeze(ctx, s.Name) },
		"Thaw":        func() error { return b.Thaw(ctx, s.Name) },
		"SetCPULimit": func() error { return b.SetCPULimit(ctx, s.Name, 1) },
	} {
		if err := call(); !errors.Is(err, guest.ErrNotFound) {
			t.Errorf("%s on an absent guest: %v, want ErrNotFound", name, err)
		}
	}
}

func TestPlayerProduct(t *testing.T) {
	h := newFakeHost(t)
	writeFile(t, filepath.Join(h.root, "etc/vmware/config"), "libdir = \"/usr/lib/vmware\"\nproduct.name = \"VMware Workstation Player\"\n")
	b := h.backend(Config{Cgroups: &fakeCgroups{}})
	s := h.spec("overtime-pc-a02")
	if err := b.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, h, "vmrun -T player list", "vmrun -T player start "+filepath.Join(s.StateDir, s.Name+".vmx")+" nogui")
}

// TestRestartedAgent: a new backend (agent restarted, nothing in memory) finds the running
// guest through vmrun list, in the default state root and elsewhere.
func TestRestartedAgent(t *testing.T) {
	h := newFakeHost(t)
	cg := &fakeCgroups{}
	ctx := context.Background()
	a := h.spec("overtime-pc-a01")
	other := h.spec("overtime-pc-a03")
	other.StateDir = filepath.Join(t.TempDir(), "elsewhere")
	b1 := h.backend(Config{Cgroups: cg})
	for _, s := range []guest.Spec{a, other} {
		if err := b1.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	b2 := h.backend(Config{Cgroups: cg})
	for _, s := range []guest.Spec{a, other} {
		if st := wantState(t, b2, s.Name, guest.StateRunning); st.PID == 0 {
			t.Errorf("%s: no PID", s.Name)
		}
		if err := b2.Freeze(ctx, s.Name); err != nil {
			t.Fatal(err)
		}
		wantState(t, h.backend(Config{Cgroups: cg}), s.Name, guest.StatePaused)
		if err := b2.Stop(ctx, s.Name); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(s.StateDir); err == nil {
			t.Errorf("%s: state left", s.Name)
		}
	}
	// A VM that merely has the same file name but is not ours is never touched.
	foreign := filepath.Join(t.TempDir(), "overtime-pc-a09.vmx")
	writeFile(t, foreign, "displayName = \"overtime-pc-a09\"\n")
	h.running[foreign] = 1
	wantState(t, b2, "overtime-pc-a09", guest.StateAbsent)
	if err := b2.Stop(ctx, "overtime-pc-a09"); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.running[foreign]; !ok {
		t.Errorf("Stop stopped a foreign VM")
	}
}

func TestShutoffAndCrash(t *testing.T) {
	h := newFakeHost(t)
	b := h.backend(Config{Cgroups: &fakeCgroups{}})
	ctx := context.Background()
	s := h.spec("overtime-pc-a01")
	vmx := filepath.Join(s.StateDir, s.Name+".vmx")
	if err := b.Start(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.exit(vmx)
	wantState(t, b, s.Name, guest.StateShutoff)
	wantState(t, h.backend(Config{}), s.Name, guest.StateShutoff) // found on disk after a restart
	if err := b.Freeze(ctx, s.Name); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Freeze of a stopped guest: %v", err)
	}
	writeFile(t, filepath.Join(s.StateDir, "vmware.log"), "2026-01-05T10:00:00.000Z In(05) vcpu-0 Msg_Post: Error\n"+
		"2026-01-05T10:00:00.001Z In(05) vcpu-0 VMware Workstation unrecoverable error: (vcpu-0)\n")
	if st := wantState(t, b, s.Name, guest.StateCrashed); !strings.Contains(st.Reason, "unrecoverable error: (vcpu-0)") {
		t.Errorf("reason %q", st.Reason)
	}
	// Start again replaces the leftover state.
	if err := b.Start(ctx, s); err != nil {
		t.Fatalf("Start after a crash: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.StateDir, "vmware.log")); err == nil {
		t.Errorf("old vmware.log survived the restart")
	}
	h.resetCalls()
	h.exit(vmx)
	if err := b.Stop(ctx, s.Name); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, h, "vmrun -T ws list") // nothing to power off, state removed
	if _, err := os.Stat(s.StateDir); err == nil {
		t.Errorf("state left")
	}
}

func TestStartFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("no cgroups for an idle guest", func(t *testing.T) {
		h := newFakeHost(t)
		b := h.backend(Config{})
		s := h.spec("overtime-pc-a01")
		if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "no cgroup controller") {
			t.Fatalf("Start: %v", err)
		}
		wantCalls(t, h)
		// Without limits to apply it runs; SetCPULimit then says why it cannot.
		s.CPUIdle = false
		if err := b.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := b.SetCPULimit(ctx, s.Name, 1); err == nil || !strings.Contains(err.Error(), "no cgroup controller") {
			t.Errorf("SetCPULimit: %v", err)
		}
	})
	t.Run("adopt fails", func(t *testing.T) {
		h := newFakeHost(t)
		b := h.backend(Config{Cgroups: &fakeCgroups{adoptErr: errors.New("cgroup.procs: permission denied")}})
		s := h.spec("overtime-pc-a01")
		vmx := filepath.Join(s.StateDir, s.Name+".vmx")
		err := b.Start(ctx, s)
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("Start: %v", err)
		}
		wantCalls(t, h, "vmrun -T ws list", "vmrun -T ws start "+vmx+" nogui", "vmrun -T ws stop "+vmx+" hard")
		if _, err := os.Stat(s.StateDir); err == nil {
			t.Errorf("state left")
		}
		wantState(t, b, s.Name, guest.StateAbsent)
	})
	t.Run("no vmware-vmx process", func(t *testing.T) {
		h := newFakeHost(t)
		h.noProc = true
		b := h.backend(Config{Cgroups: &fakeCgroups{}, StartWait: 200 * time.Millisecond})
		s := h.spec("overtime-pc-a01")
		if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "no vmware-vmx process") {
			t.Fatalf("Start: %v", err)
		}
		if len(h.running) != 0 {
			t.Errorf("VM left running: %v", h.running)
		}
	})
	t.Run("vmrun start fails", func(t *testing.T) {
		h := newFakeHost(t)
		h.failOp = "start"
		b := h.backend(Config{Cgroups: &fakeCgroups{}})
		s := h.spec("overtime-pc-a01")
		if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "exit status 255") {
			t.Fatalf("Start: %v", err)
		}
		if _, err := os.Stat(s.StateDir); err == nil {
			t.Errorf("state left")
		}
	})
	t.Run("state dir not empty", func(t *testing.T) {
		h := newFakeHost(t)
		b := h.backend(Config{Cgroups: &fakeCgroups{}})
		s := h.spec("overtime-pc-a01")
		writeFile(t, filepath.Join(s.StateDir, "precious"), "x")
		if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("Start: %v", err)
		}
		if _, err := os.Stat(filepath.Join(s.StateDir, "precious")); err != nil {
			t.Errorf("foreign file removed")
		}
	})
	t.Run("vmnet0 missing", func(t *testing.T) {
		h := newFakeHost(t)
		os.Remove(filepath.Join(h.root, "dev/vmnet0"))
		b := h.backend(Config{Cgroups: &fakeCgroups{}})
		err := b.Start(ctx, h.spec("overtime-pc-a01"))
		if !guest.IsUnavailable(err) || !strings.Contains(err.Error(), "backend unavailable: vmware: /dev/vmnet0 missing") {
			t.Fatalf("Start: %v", err)
		}
	})
	t.Run("vmnet0 bridged elsewhere", func(t *testing.T) {
		h := newFakeHost(t)
		writeFile(t, filepath.Join(h.root, "etc/vmware/networking"), "VERSION=1,0\nadd_bridge_mapping eth0 0\n")
		b := h.backend(Config{Cgroups: &fakeCgroups{}})
		err := b.Start(ctx, h.spec("overtime-pc-a01"))
		if err == nil || !strings.Contains(err.Error(), "vmnet0 is bridged to eth0") || !strings.Contains(err.Error(), "add_bridge_mapping br0 0") {
			t.Fatalf("Start: %v", err)
		}
	})
	t.Run("invalid spec touches nothing", func(t *testing.T) {
		h := newFakeHost(t)
		b := h.backend(Config{Cgroups: &fakeCgroups{}})
		s := h.spec("overtime-pc-a01")
		s.StateDir += "\"\nevil = \""
		if err := b.Start(ctx, s); err == nil {
			t.Fatal("Start accepted an injected state directory")
		}
		wantCalls(t, h)
	})
}

func natSpec(h *fakeHost) guest.Spec {
	s := h.spec("overtime-pc-b07")
	s.Network, s.Bridge, s.MAC = model.NetNAT, "", "02:00:00:ab:cd:ef"
	s.Ports = []guest.PortForward{{HostPort: 6818, GuestPort: 6818}, {HostPort: 2222, GuestPort: 22}}
	return s
}

func TestNAT(t *testing.T) {
	ctx := context.Background()
	ip := netip.MustParseAddr("192.168.77.10")
	networking := "VERSION=1,0\nanswer VNET_8_NAT yes\nanswer VNET_8_HOSTONLY_SUBNET 192.168.77.0\n"
	t.Run("no guest address", func(t *testing.T) {
		h := newFakeHost(t)
		err := h.backend(Config{Cgroups: &fakeCgroups{}}).Start(ctx, natSpec(h))
		if err == nil || !strings.Contains(err.Error(), "Config.NATGuestIP") {
			t.Fatalf("Start: %v", err)
		}
	})
	t.Run("check only", func(t *testing.T) {
		h := newFakeHost(t)
		writeFile(t, filepath.Join(h.root, "etc/vmware/networking"), networking)
		b := h.backend(Config{Cgroups: &fakeCgroups{}, NATGuestIP: ip})
		err := b.Start(ctx, natSpec(h))
		for _, w := range []string{"lacks the guest's NAT settings", "add_dhcp_mac_to_ip 8 00:50:56:2b:cd:ef 192.168.77.10",
			"add_nat_portfwd 8 tcp 6818 192.168.77.10 6818", "add_nat_portfwd 8 tcp 2222 192.168.77.10 22"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Start: %v; want %q", err, w)
			}
		}
		wantCalls(t, h)
		// With the lines in place (any spacing, any case) it starts.
		lines, _ := NATNetworking("02:00:00:ab:cd:ef", ip, natSpec(h).Ports)
		writeFile(t, filepath.Join(h.root, "etc/vmware/networking"), networking+strings.ToUpper(strings.Join(lines, "  \n"))+"\n")
		if err := b.Start(ctx, natSpec(h)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("managed", func(t *testing.T) {
		h := newFakeHost(t)
		writeExec(t, filepath.Join(h.bin, "vmware-networks"), 0o755)
		path := filepath.Join(h.root, "etc/vmware/networking")
		writeFile(t, path, networking+"add_nat_portfwd 8 tcp 6818 192.168.77.99 6818\n")
		b := h.backend(Config{Cgroups: &fakeCgroups{}, NATGuestIP: ip, ManageNAT: true})
		s := natSpec(h)
		vmx := filepath.Join(s.StateDir, s.Name+".vmx")
		if err := b.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, h, "vmware-networks --stop", "vmware-networks --start", "vmrun -T ws list", "vmrun -T ws start "+vmx+" nogui")
		got, _ := os.ReadFile(path)
		want := networking + "add_dhcp_mac_to_ip 8 00:50:56:2b:cd:ef 192.168.77.10\n" +
			"add_nat_portfwd 8 tcp 6818 192.168.77.10 6818\nadd_nat_portfwd 8 tcp 2222 192.168.77.10 22\n"
		if string(got) != want {
			t.Errorf("networking:\n%s\nwant:\n%s", got, want)
		}
		for _, f := range []string{NATNetworkingFile, NATConfFile} {
			if _, err := os.Stat(filepath.Join(s.StateDir, f)); err != nil {
				t.Errorf("fragment %s: %v", f, err)
			}
		}
		data, _ := os.ReadFile(vmx)
		if kv := validateVMX(t, data, s); kv["ethernet0.connectionType"] != "nat" || kv["ethernet0.address"] != "00:50:56:2b:cd:ef" {
			t.Errorf("ethernet0 %q %q", kv["ethernet0.connectionType"], kv["ethernet0.address"])
		}
		// Next start: nothing to change, no network restart.
		if err := b.Stop(ctx, s.Name); err != nil {
			t.Fatal(err)
		}
		h.resetCalls()
		if err := b.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, h, "vmrun -T ws list", "vmrun -T ws start "+vmx+" nogui")
	})
}

func TestHostMHz(t *testing.T) {
	b := New(Config{})
	b.root = t.TempDir()
	if got := b.hostMHz(); got != 0 {
		t.Errorf("no sources: %d", got)
	}
	writeFile(t, filepath.Join(b.root, "proc/cpuinfo"), "processor\t: 0\ncpu MHz\t\t: 2596.152\n\nprocessor\t: 1\ncpu MHz\t\t: 3100.000\n")
	if got := b.hostMHz(); got != 3100 {
		t.Errorf("cpuinfo: %d, want 3100", got)
	}
	writeFile(t, filepath.Join(b.root, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), "4200000\n")
	if got := b.hostMHz(); got != 4200 {
		t.Errorf("cpufreq: %d, want 4200", got)
	}
}
