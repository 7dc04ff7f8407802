// Package cgrouptest is the behavioural test suite of package cgroup, runnable against any
// hierarchy: cgroup's own tests run it on the host they run on (v1 hybrid on the
// development machines), and the same `go test ./node-agent/cgroup/ -run Conformance`
// inside a VM with a unified hierarchy (Debian 12) runs it against v2. Other packages can
// call Conformance with a hierarchy of their own.
//
// Every check goes through the files and, where it is cheap, through behaviour: a frozen
// busy loop accrues no CPU time, a 0.2-CPU quota holds a busy loop well under a core, an
// idle group yields its CPU to a normal one, a memory limit OOM-kills a process that
// touches more. Processes are plain /bin/sh loops started blocked on stdin, moved into
// the group, then released, so nothing runs outside the group first.
//
// The suite needs root. It makes its groups below a throwaway parent (TestParent) and
// removes them, and the processes it started, when the test ends, failed or not.
package cgrouptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
)

// TestParent creates a uniquely named parent group for a test's groups (ParentGroup) and
// removes it (and everything below, killing what runs there) at cleanup.
func TestParent(t testing.TB, h *cgroup.Hierarchy) *cgroup.Group {
	t.Helper()
	needs.Servers(t, "root (cgroup writes)")
	var b [4]byte
	_, _ = rand.Read(b[:])
	g, err := ParentGroup(h, "ot-test-"+hex.EncodeToString(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveAll(t, g) })
	return g
}

// ParentGroup is where tests put a parent group called name (not created): on v1 below
// the calling process's own groups (so that a memory cgroup the test runs in keeps
// accounting for it), on v2 at the root (a group that holds processes cannot pass
// controllers down). A child process of the test gets the same group for the same name.
func ParentGroup(h *cgroup.Hierarchy, name string) (*cgroup.Group, error) {
	if h.Version() == cgroup.V2 {
		return h.Group(name), nil
	}
	self, err := h.Self()
	if err != nil {
		return nil, err
	}
	return self.Child(name), nil
}

// RemoveAll kills everything in g and below and removes the groups; failures are test
// errors.
func RemoveAll(t testing.TB, g *cgroup.Group) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Kill(ctx); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// Proc is a shell started blocked and moved into a group.
type Proc struct {
	Cmd  *exec.Cmd
	PID  int
	in   io.WriteCloser
	done chan error
}

// Start runs `/bin/sh -c script` in g: the shell waits on stdin until it has been moved
// into g, then runs script. The process is killed at cleanup.
func Start(t testing.TB, g *cgroup.Group, script string) *Proc {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "read _ || exit 1\n"+script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, PID: cmd.Process.Pid, in: in, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	if g != nil {
		if err := g.AddProc(p.PID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	return p
}

// Wait waits up to d for the process to exit and returns its error (nil: exit 0).
func (p *Proc) Wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(d):
		t.Fatalf("process %d still running after %s", p.PID, d)
		return nil
	}
}

// Eventually is poll.Until (kept for its many callers).
func Eventually(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	poll.Until(t, what, d, cond)
}

// Usage measures the CPUs g used over a wall-clock window. The sleep is the measurement,
// not synchronisation.
func Usage(t testing.TB, g *cgroup.Group, window time.Duration) float64 {
	t.Helper()
	u0, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(window)
	u1, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	return cgroup.CPUs(u1-u0, time.Since(t0))
}

func readTrim(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

const busy = "while :; do :; done"

// Conformance runs the whole suite against h with groups below parent (see TestParent).
// It needs the cpu, cpuacct (v1), memory and freezer controllers.
func Conformance(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	Core(t, h, parent)
	t.Run("Idle", func(t *testing.T) { testIdle(t, h, parent) })
	t.Run("CPUMax", func(t *testing.T) { testCPUMax(t, h, parent) })
	t.Run("Memory", func(t *testing.T) { testMemory(t, h, parent) })
	t.Run("IOWeight", func(t *testing.T) { testIOWeight(t, h, parent) })
}

// Core runs the part of the suite that needs no controller on v2 (group life cycle,
// processes, FindByPID, freezer, kill, CPU usage, pressure): it can run on the
// controller-less cgroup2 mount of a hybrid host (cgroup.NewUnified).
func Core(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	t.Run("CreateRemove", func(t *testing.T) { testCreateRemove(t, h, parent) })
	t.Run("ProcsFind", func(t *testing.T) { testProcsFind(t, h, parent) })
	t.Run("FreezeUsage", func(t *testing.T) { testFreeze(t, h, parent) })
	t.Run("Kill", func(t *testing.T) { testKill(t, h, parent) })
	t.Run("Pressure", func(t *testing.T) { testPressure(t, h, parent) })
}

func newGroup(t *testing.T, parent *cgroup.Group, name string) *cgroup.Group {
	t.Helper()
	g := parent.Child(name)
	if err := g.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveAll(t, g) })
	return g
}

func testCreateRemove(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	g := parent.Child("life")
	if g.Exists() {
		t.Fatalf("%s exists before Create", g.Path())
	}
	if err := g.Create(); err != nil {
		t.Fatal(err)
	}
	if err := g.Create(); err != nil {
		t.Fatalf("Create again: %v", err)
	}
	sub := g.Child("a").Child("b")
	if err := sub.Create(); err != nil {
		t.Fatal(err)
	}
	for k, p := range g.Paths() {
		d := g.Dir(k)
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("controller %q path %s: directory %s missing: %v", k, p, d, err)
		}
	}
	if h.Version() == cgroup.V2 && parent.Path() != "/" {
		// The parent passes its controllers down to the new group.
		want, _ := os.ReadFile(filepath.Join(parent.Dir(""), "cgroup.subtree_control"))
		have, _ := os.ReadFile(filepath.Join(g.Dir(""), "cgroup.controllers"))
		for _, c := range strings.Fields(string(want)) {
			if !slices.Contains(strings.Fields(string(have)), c) {
				t.Errorf("controller %s enabled in the parent but not available in %s", c, g.Path())
			}
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if g.Exists() || sub.Exists() {
		t.Fatal("group still exists after Remove")
	}
	for k := range g.Paths() {
		if _, err := os.Stat(g.Dir(k)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("controller %q: %s still there: %v", k, g.Dir(k), err)
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatalf("Remove of an absent group: %v", err)
	}
	// Errors name the file.
	if err := g.SetCPUMax(1); err == nil || !strings.Contains(err.Error(), g.Path()) {
		t.Errorf("SetCPUMax on a removed group: error %v does not name the file", err)
	}
}

func testProcsFind(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	g := newGroup(t, parent, "procs")
	p := Start(t, g, "exec sleep 600")
	pids, err := g.Procs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, p.PID) {
		t.Fatalf("Procs %v lacks %d", pids, p.PID)
	}
	f, err := h.FindByPID(p.PID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path() != g.Path() {
		t.Fatalf("FindByPID: %s, want %s", f.Path(), g.Path())
	}
	for k, want := range g.Paths() {
		if got := f.Paths()[k]; got != want {
			t.Errorf("FindByPID controller %q: %s, want %s", k, got, want)
		}
	}
	// The found group is usable: its usage is readable.
	if _, err := f.CPUUsage(); err != nil {
		t.Fatal(err)
	}
	// A removed group with a process in it refuses removal with a clear error.
	if err := g.Remove(); err == nil || !strings.Contains(err.Error(), "processes") {
		t.Fatalf("Remove of a busy group: %v", err)
	}
}

func testFreeze(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	g := newGroup(t, parent, "freeze")
	Start(t, g, busy)
	u0, err := g.CPUUsage()
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, "the busy loop accruing CPU time", 10*time.Second, func() bool {
		u, err := g.CPUUsage()
		return err == nil && u > u0+20*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if fr, err := g.Frozen(); err != nil || !fr {
		t.Fatalf("Frozen after Freeze: %v %v", fr, err)
	}
	if h.Version() == cgroup.V1 {
		if s := readTrim(t, filepath.Join(g.Dir("freezer"), "freezer.state")); s != "FROZEN" {
			t.Fatalf("freezer.state %q", s)
		}
	} else if s := readTrim(t, filepath.Join(g.Dir(""), "cgroup.freeze")); s != "1" {
		t.Fatalf("cgroup.freeze %q", s)
	}
	if c := Usage(t, g, 400*time.Millisecond); c > 0.01 {
		t.Fatalf("frozen busy loop used %.3f CPUs", c)
	}
	if err := g.Freeze(ctx); err != nil {
		t.Fatalf("Freeze again: %v", err)
	}
	if err := g.Thaw(ctx); err != nil {
		t.Fatal(err)
	}
	if fr, err := g.Frozen(); err != nil || fr {
		t.Fatalf("Frozen after Thaw: %v %v", fr, err)
	}
	u1, _ := g.CPUUsage()
	Eventually(t, "the thawed loop accruing CPU time", 10*time.Second, func() bool {
		u, err := g.CPUUsage()
		return err == nil && u > u1+20*time.Millisecond
	})
	if err := g.Thaw(ctx); err != nil {
		t.Fatalf("Thaw again: %v", err)
	}
}

func testKill(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	g := newGroup(t, parent, "kill")
	sub := g.Child("sub")
	if err := sub.Mkdir(); err != nil {
		t.Fatal(err)
	}
	p := Start(t, g, "sleep 600 & sleep 600 & "+busy)
	q := Start(t, sub, "exec sleep 600")
	Eventually(t, "three processes in the group", 10*time.Second, func() bool {
		pids, _ := g.Procs()
		return len(pids) == 3
	})
	// Kill works on a frozen group too.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if pids, err := g.AllProcs(); err != nil || len(pids) != 0 {
		t.Fatalf("after Kill: %v %v", pids, err)
	}
	for _, x := range []*Proc{p, q} {
		var ee *exec.ExitError
		if err := x.Wait(t, 10*time.Second); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("process %d: %v, want killed", x.PID, err)
		}
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

func testPressure(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	sys, err := cgroup.PressureFromProc()
	if err != nil {
		t.Fatal(err)
	}
	if sys.MaxSome() < 0 || sys.MaxSome() > 100 {
		t.Fatalf("system pressure %+v", sys)
	}
	g := newGroup(t, parent, "psi")
	if h.UnifiedMount() == "" {
		if _, err := g.Pressure(); !errors.Is(err, cgroup.ErrNotSupported) {
			t.Fatalf("Pressure without cgroup2: %v", err)
		}
		return
	}
	Start(t, g, busy)
	Start(t, g, busy)
	Start(t, g, busy)
	p0, err := g.Pressure()
	if err != nil {
		t.Fatal(err)
	}
	// Three busy loops on (at most) two CPUs of this size stall each other: the total
	// some-stall of the group's CPU pressure grows.
	Eventually(t, "CPU pressure total growing", 10*time.Second, func() bool {
		p, err := g.Pressure()
		return err == nil && p.CPU.Some.Total > p0.CPU.Some.Total
	})
}

// pinned starts a busy loop in g bound to cpu.
func pinned(t *testing.T, g *cgroup.Group, cpu int) *Proc {
	p := Start(t, g, busy)
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(p.PID, &set); err != nil {
		t.Fatal(err)
	}
	return p
}

func testIdle(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	idle := newGroup(t, parent, "idle")
	normal := newGroup(t, parent, "normal")
	if err := idle.SetIdle(true); err != nil {
		t.Fatal(err)
	}
	if on, err := idle.Idle(); err != nil || !on {
		t.Fatalf("Idle: %v %v", on, err)
	}
	d := idle.Dir("cpu")
	if _, err := os.Stat(filepath.Join(d, "cpu.idle")); err == nil {
		if s := readTrim(t, filepath.Join(d, "cpu.idle")); s != "1" {
			t.Fatalf("cpu.idle %q", s)
		}
	} else if h.Version() == cgroup.V1 {
		if s := readTrim(t, filepath.Join(d, "cpu.shares")); s != "2" {
			t.Fatalf("cpu.shares %q", s)
		}
	}
	// Behaviour: on one CPU, a busy loop in the idle group gets next to nothing while a
	// normal group's loop runs.
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := 0; i < 1024; i++ {
		if set.IsSet(i) {
			cpu = i
		}
	}
	pinned(t, idle, cpu)
	pinned(t, normal, cpu)
	usage := func(g *cgroup.Group) time.Duration {
		u, err := g.CPUUsage()
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	// One-second windows until one in which the CPU was there for the normal loop at all
	// (a virtual CPU can be descheduled by its host for a while).
	var di, dn time.Duration
	Eventually(t, "a window in which the normal loop ran", 20*time.Second, func() bool {
		u0i, u0n := usage(idle), usage(normal)
		time.Sleep(time.Second) // measurement window
		di, dn = usage(idle)-u0i, usage(normal)-u0n
		return dn >= 100*time.Millisecond
	})
	t.Logf("one CPU shared: idle group %v, normal group %v", di, dn)
	if di*5 > dn {
		t.Fatalf("idle group used %v against the normal group's %v on one CPU", di, dn)
	}
	if err := idle.SetIdle(false); err != nil {
		t.Fatal(err)
	}
	if on, err := idle.Idle(); err != nil || on {
		t.Fatalf("Idle after SetIdle(false): %v %v", on, err)
	}
}

func testCPUMax(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	g := newGroup(t, parent, "cpumax")
	if v, err := g.CPUMax(); err != nil || v != 0 {
		t.Fatalf("fresh group CPUMax %v %v", v, err)
	}
	if err := g.SetCPUMax(0.2); err != nil {
		t.Fatal(err)
	}
	if v, err := g.CPUMax(); err != nil || v < 0.199 || v > 0.201 {
		t.Fatalf("CPUMax %v %v", v, err)
	}
	d := g.Dir("cpu")
	if h.Version() == cgroup.V2 {
		if s := readTrim(t, filepath.Join(d, "cpu.max")); s != "20000 100000" {
			t.Fatalf("cpu.max %q", s)
		}
	} else {
		q, p := readTrim(t, filepath.Join(d, "cpu.cfs_quota_us")), readTrim(t, filepath.Join(d, "cpu.cfs_period_us"))
		if q != "20000" || p != "100000" {
			t.Fatalf("cfs quota %s period %s", q, p)
		}
	}
	Start(t, g, busy)
	Start(t, g, busy)
	c := Usage(t, g, 1500*time.Millisecond)
	t.Logf("two busy loops under a 0.2 CPU cap: %.3f CPUs", c)
	if c > 0.3 {
		t.Fatalf("capped at 0.2 CPUs, two busy loops used %.3f", c)
	}
	th, err := g.Throttled()
	if err != nil {
		t.Fatal(err)
	}
	// The loops did run into the cap (the upper bound above is not vacuous).
	if th.Periods == 0 || th.Throttled == 0 || th.Time == 0 {
		t.Fatalf("throttling %+v", th)
	}
	if err := g.ClearCPUMax(); err != nil {
		t.Fatal(err)
	}
	if v, err := g.CPUMax(); err != nil || v != 0 {
		t.Fatalf("CPUMax after clear %v %v", v, err)
	}
	if h.Version() == cgroup.V2 {
		if s := readTrim(t, filepath.Join(d, "cpu.max")); s != "max 100000" {
			t.Fatalf("cpu.max %q", s)
		}
	} else if q := readTrim(t, filepath.Join(d, "cpu.cfs_quota_us")); q != "-1" {
		t.Fatalf("cfs quota %s", q)
	}
	// Uncapped, the loops get past the old cap (retried: other load may hold them back).
	Eventually(t, "two uncapped busy loops above 0.3 CPUs", 20*time.Second, func() bool {
		return Usage(t, g, 300*time.Millisecond) > 0.3
	})
}

func testMemory(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	g := newGroup(t, parent, "mem")
	const mib = 1 << 20
	if err := g.SetMemoryMax(32 * mib); err != nil {
		t.Fatal(err)
	}
	if err := g.SetSwapMax(0); err != nil && !errors.Is(err, cgroup.ErrNotSupported) {
		t.Fatal(err)
	}
	if v, err := g.MemoryMax(); err != nil || v != 32*mib {
		t.Fatalf("MemoryMax %v %v", v, err)
	}
	d := g.Dir("memory")
	file := "memory.max"
	if h.Version() == cgroup.V1 {
		file = "memory.limit_in_bytes"
	}
	if s := readTrim(t, filepath.Join(d, file)); s != strconv.Itoa(32*mib) {
		t.Fatalf("%s %q", file, s)
	}
	// Raising and lowering keeps v1's memory <= memory+swap ordering.
	if err := g.SetMemoryMax(64 * mib); err != nil {
		t.Fatal(err)
	}
	if err := g.SetMemoryMax(32 * mib); err != nil {
		t.Fatal(err)
	}
	if err := g.SetMemoryLow(16 * mib); err != nil {
		t.Fatal(err)
	}
	low := "memory.low"
	if h.Version() == cgroup.V1 {
		low = "memory.soft_limit_in_bytes"
	}
	if s := readTrim(t, filepath.Join(d, low)); s != strconv.Itoa(16*mib) {
		t.Fatalf("%s %q", low, s)
	}
	// Behaviour: touching 8 MiB is fine, 96 MiB gets the process OOM-killed.
	small := Start(t, g, "exec dd if=/dev/zero of=/dev/null bs=8M count=2 status=none")
	if err := small.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("dd with an 8 MiB buffer under a 32 MiB limit: %v", err)
	}
	big := Start(t, g, "exec dd if=/dev/zero of=/dev/null bs=96M count=1 status=none")
	var ee *exec.ExitError
	if err := big.Wait(t, 30*time.Second); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("dd with a 96 MiB buffer under a 32 MiB limit: %v, want OOM kill", err)
	}
	if u, err := g.MemoryUsage(); err != nil || u < 0 {
		t.Fatalf("MemoryUsage %v %v", u, err)
	}
	if err := g.SetMemoryMax(0); err != nil {
		t.Fatal(err)
	}
	if v, err := g.MemoryMax(); err != nil || v != 0 {
		t.Fatalf("MemoryMax after removing the limit %v %v", v, err)
	}
}

func testIOWeight(t *testing.T, h *cgroup.Hierarchy, parent *cgroup.Group) {
	g := newGroup(t, parent, "io")
	note, err := g.SetIOWeight(10)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, file, want := "blkio", "blkio.weight", "10"
	if h.Version() == cgroup.V2 {
		ctrl, file, want = "io", "io.weight", "default 10"
	}
	p := filepath.Join(g.Dir(ctrl), file)
	if _, err := os.Stat(p); err != nil {
		if note == "" || !strings.Contains(note, file) {
			t.Fatalf("%s missing and the note %q does not say so", file, note)
		}
		t.Logf("note: %s", note)
		return
	}
	if s := readTrim(t, p); !strings.HasPrefix(s, want) {
		t.Fatalf("%s %q, want %q", file, s, want)
	}
}

// Describe is a one-line account of h for test logs.
func Describe(h *cgroup.Hierarchy) string {
	c, _ := h.Controllers()
	return fmt.Sprintf("%s, controllers %s", h, strings.Join(c, " "))
}
