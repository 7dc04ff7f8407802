// Package guesttest is the behavioural conformance suite of guest.Backend: what the node
// agent relies on from every guest backend, checked against the real thing (libvirtd and
// QEMU, crun and cgroups), the way cgroup/cgrouptest checks every cgroup hierarchy. Each
// backend's tests call Run with a Harness built from their own fixtures (tiny guest images,
// internal/testenv environments); nothing of libvirt, systemd or the kernel is mocked.
//
// The steps, in the order the agent meets them:
//
//   - Start: a transient guest runs, reports its PID and cgroup, and a second Start of the
//     same name is refused without disturbing it.
//   - Throttle: SetCPULimit lands in the guest's cgroup (cpu.max / cpu.cfs_quota_us, read
//     from the files, not through the backend) and in Status; a busy guest stays under it
//     and is throttled, and is throttled no more once the cap is removed.
//   - Freeze: Freeze pauses the guest (a busy guest accrues no CPU time), Thaw resumes it,
//     both idempotent.
//   - Adopt: a new Backend instance (an agent restarted) finds the running guest with its
//     PID, cgroup, frozen state and cap, refuses a second one, re-asserts its limits and
//     takes over.
//   - Evict: Stop ends a frozen guest at once and leaves nothing behind (state directory,
//     mounts, the backend's records; the base image unchanged); what the guest wrote does
//     not come back on the next start; Freeze, Thaw and SetCPULimit then say ErrNotFound.
//   - CrashReason: a guest that dies is reported with why, by Status or by a Watch event.
//
// A backend that cannot run here (VMware, proprietary; Xen on a desktop without the
// hypervisor) declares Caps.Unavailable and goes through the same entry: then every step
// must fail with a *guest.UnavailableError that says why, never a silent no-op. A backend
// that cannot do a step at all declares it (Caps.NoFreeze) and the suite asserts the
// documented error (guest.ErrUnsupported) instead of skipping.
//
// The suite skips only under -short (internal/testenv/needs), like every test that needs
// root and real servers.
package guesttest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/guest"
)

// CrashReport says where a backend reports why a guest died.
type CrashReport int

const (
	// CrashInStatus: Status keeps the dead guest as guest.StateCrashed with a Reason until
	// Stop cleans it up (container: the monitor records how init ended).
	CrashInStatus CrashReport = iota
	// CrashInEvent: the guest disappears with its death (libvirt's transient domains), and
	// the backend's Watch (guest.Watcher) sends a guest.StateCrashed event with the Reason.
	CrashInEvent
)

// Caps declares what a backend can do. The zero value is a backend that runs here and does
// every step, reporting crashes through Status.
type Caps struct {
	// Unavailable: guests cannot run on this machine. Every method must then fail with a
	// *guest.UnavailableError for the backend's Kind that says why, and Start must leave
	// nothing on the host.
	Unavailable bool
	// NoFreeze: the backend cannot pause a guest; Freeze and Thaw must return an error
	// wrapping guest.ErrUnsupported and leave the guest running.
	NoFreeze bool
	// Crash is where the reason of a dead guest shows.
	Crash CrashReport
	// CrashReason is a word the reason of a guest killed by Harness.Kill must contain
	// (e.g. "signal", "Failed"); "" accepts any non-empty reason.
	CrashReason string
}

// Harness is what the suite needs from a backend's tests.
type Harness struct {
	// Backend returns a new instance of the backend under test over the same host state
	// (the same libvirtd, run directory, cgroup parent): the suite calls it once to start
	// with and again for the adopt step, which plays an agent restarted. Each instance is
	// independent, as two agent processes would be.
	Backend func(t *testing.T) guest.Backend
	// Spec is a guest called name that runs until it is stopped (t is the test the guest
	// lives in: the suite's own for the main guest, so temporary directories made with it
	// outlive each step), with a fresh StateDir
	// whose parent directory only this guest uses (the suite checks that Stop leaves
	// nothing there), a CPULimit of 0 and the base image the backend's tests use.
	Spec func(t *testing.T, name string) guest.Spec
	// Booted, when set, waits until the guest started from s runs its workload (a VM's
	// kernel has booted); nil: Start returning is enough.
	Booted func(t *testing.T, s guest.Spec)
	// Busy says the guest of Spec keeps at least one CPU busy: the throttle and freeze
	// steps then also measure its CPU time (under a cap, frozen, thawed).
	Busy bool
	// Kill makes the running guest st of s die as a crash would; nil: SIGKILL to st.PID
	// (QEMU, the container's init).
	Kill func(t *testing.T, s guest.Spec, st guest.Status)
	// Scribble writes a file into the running guest's disk, and Scribbled reports whether
	// it is there: the evict step checks that a restarted guest does not see it. Both nil:
	// the check is the state directory (which holds the overlay) being gone.
	Scribble  func(t *testing.T, s guest.Spec, st guest.Status)
	Scribbled func(t *testing.T, s guest.Spec, st guest.Status) bool
	// Leftovers are host paths of guest s, besides its state directory, that must not
	// exist once it is stopped: the backend's records, its cgroup directories.
	Leftovers func(s guest.Spec) []string
	// Kept are paths next to the state directory that Stop leaves on purpose (the
	// container's console of the run that ended, the only record of why it ended).
	Kept func(s guest.Spec) []string
	Caps Caps
}

// Run runs the suite against the backend of h. The main guest goes through Start,
// Throttle, Freeze, Adopt and Evict in order (each step needs the one before); CrashReason
// uses a guest of its own.
func Run(t *testing.T, h Harness) {
	if h.Caps.Unavailable {
		// Needs nothing but the machine as it is: runs under -short too.
		runUnavailable(t, h)
		return
	}
	needs.Servers(t, "root", "the guest backend's runtime")
	c := &course{h: h, top: t, name: Name("ot-conf")}
	c.b = h.Backend(t)
	t.Cleanup(func() { c.cleanup(t) })
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"Start", c.start},
		{"Throttle", c.throttle},
		{"Freeze", c.freeze},
		{"Adopt", c.adopt},
		{"Evict", c.evict},
	}
	for i, step := range steps {
		if !t.Run(step.name, step.run) {
			var later []string
			for _, s := range steps[i+1:] {
				later = append(later, s.name)
			}
			// A failure, not a skip: the test has failed already.
			t.Errorf("step %s failed: not run, as they need it: %s", step.name, strings.Join(later, ", "))
			break
		}
	}
	t.Run("CrashReason", func(t *testing.T) { crashReason(t, h) })
}

// Name is prefix with a random suffix: a valid guest name ([a-z0-9-]) that no other test
// run uses.
func Name(prefix string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

const (
	// stepTimeout bounds one backend call; Start under TCG and a loaded machine is the
	// slowest.
	stepTimeout = 2 * time.Minute
	// capCPUs is the cap of the throttle step: low enough that a busy loop runs into it.
	capCPUs = 0.2
	// adoptCap is the cap the guest has when its agent "dies" in the adopt step.
	adoptCap = 0.5
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	t.Cleanup(cancel)
	return ctx
}

// course is the main guest's way through the steps.
type course struct {
	h    Harness
	top  *testing.T // the guest outlives each step: its Spec is made with the suite's t
	name string
	b    guest.Backend // the current agent's instance (replaced in Adopt)
	s    guest.Spec
	st   guest.Status // as of Start (PID, cgroup)
	base string       // digest of the base image before Start
	// before lists the state directory's parent before Start.
	before []string
}

// cleanup stops the main guest whatever step failed.
func (c *course) cleanup(t *testing.T) {
	if c.s.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if st, err := c.b.Status(ctx, c.name); err == nil && st.State == guest.StateAbsent {
		return
	}
	if err := c.b.Stop(ctx, c.name); err != nil {
		t.Errorf("cleanup: stop %s: %v", c.name, err)
	}
}

func status(t *testing.T, b guest.Backend, name string) guest.Status {
	t.Helper()
	st, err := b.Status(ctxFor(t), name)
	if err != nil {
		t.Fatalf("Status(%s): %v", name, err)
	}
	return st
}

func near(a, b float64) bool { return a > b-0.001 && a < b+0.001 }

// cgroupCap reads the cap from the guest's cgroup files (cpu.max, or cpu.cfs_quota_us and
// cpu.cfs_period_us on v1), not through the backend.
func cgroupCap(t *testing.T, st guest.Status) float64 {
	t.Helper()
	if st.Cgroup == "" {
		t.Fatalf("status %+v names no cgroup", st)
	}
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.Group(st.Cgroup).CPUMax()
	if err != nil {
		t.Fatalf("the guest's cgroup %s: %v", st.Cgroup, err)
	}
	return v
}

// usage is the CPUs the guest used over window, by its Status.CPUTime. The sleep is the
// measurement, not synchronisation.
func usage(t *testing.T, b guest.Backend, name string, window time.Duration) float64 {
	t.Helper()
	u0, t0 := status(t, b, name).CPUTime, time.Now()
	time.Sleep(window)
	return cgroup.CPUs(status(t, b, name).CPUTime-u0, time.Since(t0))
}

// accrues waits until the guest has used some CPU time (a busy guest that runs).
func accrues(t *testing.T, b guest.Backend, name, what string) {
	t.Helper()
	u0 := status(t, b, name).CPUTime
	poll.Until(t, what, 30*time.Second, func() bool {
		return status(t, b, name).CPUTime > u0+50*time.Millisecond
	})
}

func (c *course) start(t *testing.T) {
	ctx := ctxFor(t)
	if err := c.b.Available(ctx); err != nil {
		t.Fatalf("Available: %v", err)
	}
	s := c.h.Spec(c.top, c.name)
	if s.Name != c.name || s.StateDir == "" || s.CPULimit != 0 {
		t.Fatalf("harness spec %+v: want name %s, a state directory and no CPU limit", s, c.name)
	}
	c.s = s
	c.base = Digest(t, s.BaseImage)
	c.before = list(t, filepath.Dir(s.StateDir))
	if st := status(t, c.b, s.Name); st.State != guest.StateAbsent {
		t.Fatalf("before Start: %+v, want absent", st)
	}
	if err := c.b.Start(ctx, s); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st := status(t, c.b, s.Name)
	if st.State != guest.StateRunning || st.PID <= 0 || st.Cgroup == "" || st.CPULimit != 0 {
		t.Fatalf("after Start: %+v, want running with a PID, a cgroup and no cap", st)
	}
	c.st = st
	if err := c.b.Start(ctx, s); err == nil {
		t.Fatal("a second Start of a running guest succeeded")
	} else {
		t.Logf("second Start refused: %v", err)
	}
	if st := status(t, c.b, s.Name); st.State != guest.StateRunning || st.PID != c.st.PID {
		t.Fatalf("after the refused second Start: %+v, want the first guest (pid %d) running", st, c.st.PID)
	}
	if c.h.Booted != nil {
		c.h.Booted(t, s)
	}
	if c.h.Scribble != nil {
		c.h.Scribble(t, s, st)
		if !c.h.Scribbled(t, s, st) {
			t.Fatal("the file the guest wrote is not there")
		}
	}
	if c.h.Busy {
		accrues(t, c.b, s.Name, "the busy guest accruing CPU time")
	}
}

func (c *course) throttle(t *testing.T) {
	ctx := ctxFor(t)
	for range 2 { // the second time: idempotent
		if err := c.b.SetCPULimit(ctx, c.name, capCPUs); err != nil {
			t.Fatalf("SetCPULimit(%g): %v", capCPUs, err)
		}
	}
	st := status(t, c.b, c.name)
	if st.State != guest.StateRunning || !near(st.CPULimit, capCPUs) {
		t.Fatalf("capped at %g: status %+v", capCPUs, st)
	}
	if v := cgroupCap(t, st); !near(v, capCPUs) {
		t.Fatalf("capped at %g: the cgroup %s says %g", capCPUs, st.Cgroup, v)
	}
	if c.h.Busy {
		// Retried: the first window may still see CPU time used before the cap.
		var used float64
		poll.Until(t, fmt.Sprintf("a capped busy guest under %.2f CPUs", capCPUs+0.1), 20*time.Second, func() bool {
			used = usage(t, c.b, c.name, 1500*time.Millisecond)
			return used <= capCPUs+0.1
		})
		t.Logf("busy guest capped at %g CPUs used %.3f", capCPUs, used)
		// The guest ran into the cap (the bound above is not vacuous on a loaded machine).
		th0 := throttled(t, st)
		poll.Until(t, "the capped busy guest throttled", 30*time.Second, func() bool { return throttled(t, st) > th0 })
	}
	if err := c.b.SetCPULimit(ctx, c.name, 0); err != nil {
		t.Fatalf("SetCPULimit(0): %v", err)
	}
	st = status(t, c.b, c.name)
	if st.CPULimit != 0 {
		t.Fatalf("after removing the cap: status %+v", st)
	}
	if v := cgroupCap(t, st); v != 0 {
		t.Fatalf("after removing the cap: the cgroup %s says %g", st.Cgroup, v)
	}
	if c.h.Busy {
		// Uncapped, the busy guest is throttled no more: a window without a new throttled
		// period (not its usage, which other load on the machine may hold down).
		poll.Until(t, "a second of the uncapped busy guest without throttling", 10*time.Second, func() bool {
			th0 := throttled(t, st)
			time.Sleep(time.Second) // measurement window
			return throttled(t, st) == th0
		})
	}
}

// throttled is the count of periods in which the guest's cgroup was throttled.
func throttled(t *testing.T, st guest.Status) int64 {
	t.Helper()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	th, err := h.Group(st.Cgroup).Throttled()
	if err != nil {
		t.Fatalf("the guest's cgroup %s: %v", st.Cgroup, err)
	}
	return th.Throttled
}

func (c *course) freeze(t *testing.T) {
	ctx := ctxFor(t)
	if c.h.Caps.NoFreeze {
		for verb, call := range map[string]func(context.Context, string) error{"Freeze": c.b.Freeze, "Thaw": c.b.Thaw} {
			if err := call(ctx, c.name); !errors.Is(err, guest.ErrUnsupported) {
				t.Errorf("%s of a backend declared unable to freeze: %v, want guest.ErrUnsupported", verb, err)
			}
		}
		if st := status(t, c.b, c.name); st.State != guest.StateRunning {
			t.Fatalf("after the unsupported Freeze: %+v, want running", st)
		}
		return
	}
	for range 2 {
		if err := c.b.Freeze(ctx, c.name); err != nil {
			t.Fatalf("Freeze: %v", err)
		}
	}
	st := status(t, c.b, c.name)
	if st.State != guest.StatePaused || st.PID != c.st.PID {
		t.Fatalf("frozen: %+v, want paused, pid %d", st, c.st.PID)
	}
	if c.h.Busy {
		if u := usage(t, c.b, c.name, 500*time.Millisecond); u > 0.01 {
			t.Fatalf("the frozen busy guest used %.3f CPUs", u)
		}
	}
	for range 2 {
		if err := c.b.Thaw(ctx, c.name); err != nil {
			t.Fatalf("Thaw: %v", err)
		}
	}
	if st := status(t, c.b, c.name); st.State != guest.StateRunning || st.PID != c.st.PID {
		t.Fatalf("thawed: %+v, want running, pid %d", st, c.st.PID)
	}
	if c.h.Busy {
		accrues(t, c.b, c.name, "the thawed busy guest accruing CPU time")
	}
}

func (c *course) adopt(t *testing.T) {
	ctx := ctxFor(t)
	// The agent leaves the guest capped and frozen, and dies: nothing of its Backend
	// instance is used again.
	if err := c.b.SetCPULimit(ctx, c.name, adoptCap); err != nil {
		t.Fatal(err)
	}
	want := guest.StateRunning
	if !c.h.Caps.NoFreeze {
		if err := c.b.Freeze(ctx, c.name); err != nil {
			t.Fatal(err)
		}
		want = guest.StatePaused
	}
	b := c.h.Backend(t)
	c.b = b
	if err := b.Available(ctx); err != nil {
		t.Fatalf("Available: %v", err)
	}
	st := status(t, b, c.name)
	if st.State != want || st.PID != c.st.PID || st.Cgroup != c.st.Cgroup || !near(st.CPULimit, adoptCap) {
		t.Fatalf("adopted: %+v, want %s, pid %d, cgroup %s, cap %g", st, want, c.st.PID, c.st.Cgroup, adoptCap)
	}
	if err := b.Start(ctx, c.s); err == nil {
		t.Fatal("the restarted agent's Start of the running guest succeeded")
	}
	if r, ok := b.(guest.Reasserter); ok {
		for range 2 {
			if err := r.Reassert(ctx, c.s); err != nil {
				t.Fatalf("Reassert: %v", err)
			}
		}
		if st := status(t, b, c.name); st.State != want || st.PID != c.st.PID || !near(st.CPULimit, adoptCap) {
			t.Fatalf("after Reassert: %+v, want %s, pid %d, cap %g", st, want, c.st.PID, adoptCap)
		}
	}
	if err := b.Thaw(ctx, c.name); err != nil && !(c.h.Caps.NoFreeze && errors.Is(err, guest.ErrUnsupported)) {
		t.Fatalf("Thaw by the restarted agent: %v", err)
	}
	if err := b.SetCPULimit(ctx, c.name, 0); err != nil {
		t.Fatalf("SetCPULimit by the restarted agent: %v", err)
	}
	st = status(t, b, c.name)
	if st.State != guest.StateRunning || st.CPULimit != 0 || st.PID != c.st.PID {
		t.Fatalf("taken over: %+v, want running uncapped, pid %d", st, c.st.PID)
	}
	if v := cgroupCap(t, st); v != 0 {
		t.Fatalf("taken over: the cgroup %s still capped at %g", st.Cgroup, v)
	}
}

func (c *course) evict(t *testing.T) {
	ctx := ctxFor(t)
	// The agent evicts a guest it has frozen (the desktop's user came back).
	if !c.h.Caps.NoFreeze {
		if err := c.b.Freeze(ctx, c.name); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the second time: an absent guest
		if err := c.b.Stop(ctx, c.name); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
	checkGone(t, c.h, c.b, c.s, c.before)
	if Digest(t, c.s.BaseImage) != c.base {
		t.Fatalf("the base image %s changed", c.s.BaseImage)
	}
	for verb, call := range map[string]func() error{
		"Freeze":      func() error { return c.b.Freeze(ctx, c.name) },
		"Thaw":        func() error { return c.b.Thaw(ctx, c.name) },
		"SetCPULimit": func() error { return c.b.SetCPULimit(ctx, c.name, 1) },
	} {
		err := call()
		if c.h.Caps.NoFreeze && verb != "SetCPULimit" && errors.Is(err, guest.ErrUnsupported) {
			continue
		}
		if !errors.Is(err, guest.ErrNotFound) {
			t.Errorf("%s of the stopped guest: %v, want guest.ErrNotFound", verb, err)
		}
	}
	if c.h.Scribble == nil {
		return
	}
	// Non-persistent: the next run starts from the base again.
	if err := c.b.Start(ctx, c.s); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	st := status(t, c.b, c.name)
	if c.h.Booted != nil {
		c.h.Booted(t, c.s)
	}
	if c.h.Scribbled(t, c.s, st) {
		t.Fatal("what the previous run wrote is back")
	}
	if err := c.b.Stop(ctx, c.name); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	checkGone(t, c.h, c.b, c.s, c.before)
}

// checkGone verifies that nothing of s is left after Stop: the backend says absent, the
// state directory, the harness's Leftovers and any mount of the state directory are gone,
// and next to the state directory there is nothing new but the harness's Kept.
func checkGone(t *testing.T, h Harness, b guest.Backend, s guest.Spec, before []string) {
	t.Helper()
	if st := status(t, b, s.Name); st.State != guest.StateAbsent {
		t.Fatalf("after Stop: %+v, want absent", st)
	}
	left := []string{s.StateDir}
	if h.Leftovers != nil {
		left = append(left, h.Leftovers(s)...)
	}
	for _, p := range left {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("left after Stop: %s (%v)", p, err)
		}
	}
	var kept []string
	if h.Kept != nil {
		kept = h.Kept(s)
	}
	for _, p := range list(t, filepath.Dir(s.StateDir)) {
		if !slices.Contains(before, p) && !slices.Contains(kept, p) {
			t.Errorf("left after Stop next to the state directory: %s", p)
		}
	}
	if m := mountsUnder(t, s.StateDir); len(m) > 0 {
		t.Errorf("mounts left after Stop: %v", m)
	}
}

// crashReason starts a guest of its own, kills it, and wants to be told why it died.
func crashReason(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	b := h.Backend(t)
	name := Name("ot-crash")
	s := h.Spec(t, name)
	before := list(t, filepath.Dir(s.StateDir))
	var events <-chan guest.Event
	if h.Caps.Crash == CrashInEvent {
		w, ok := b.(guest.Watcher)
		if !ok {
			t.Fatalf("%T reports crashes by event but is no guest.Watcher", b)
		}
		wctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		var err error
		if events, err = w.Watch(wctx); err != nil {
			t.Fatalf("Watch: %v", err)
		}
	}
	if err := b.Start(ctx, s); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })
	// Killed as soon as it runs (not necessarily booted): a crash is a crash.
	st := status(t, b, name)
	if st.State != guest.StateRunning || st.PID <= 0 {
		t.Fatalf("after Start: %+v", st)
	}
	if h.Kill != nil {
		h.Kill(t, s, st)
	} else if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	reasonOK := func(r string) bool { return r != "" && strings.Contains(r, h.Caps.CrashReason) }
	switch h.Caps.Crash {
	case CrashInStatus:
		poll.Until(t, "the killed guest reported crashed", 30*time.Second, func() bool {
			st = status(t, b, name)
			return st.State == guest.StateCrashed
		})
		if !reasonOK(st.Reason) || st.PID != 0 {
			t.Fatalf("crashed: %+v, want no PID and a reason with %q", st, h.Caps.CrashReason)
		}
		// An agent restarted after the crash learns the same.
		if st2 := status(t, h.Backend(t), name); st2.State != guest.StateCrashed || !reasonOK(st2.Reason) {
			t.Fatalf("crashed, seen by a new instance: %+v", st2)
		}
		t.Logf("crash reason: %s", st.Reason)
	case CrashInEvent:
		deadline := time.After(30 * time.Second)
	wait:
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("Watch ended before the crash event")
				}
				if ev.Name == name && ev.State == guest.StateCrashed {
					if !reasonOK(ev.Reason) {
						t.Fatalf("crash event %+v: want a reason with %q", ev, h.Caps.CrashReason)
					}
					t.Logf("crash event: %+v", ev)
					break wait
				}
			case <-deadline:
				t.Fatal("no crash event within 30 s")
			}
		}
		if st := status(t, b, name); st.State == guest.StateRunning || st.State == guest.StatePaused {
			t.Fatalf("after the crash event: %+v", st)
		}
	}
	// The agent's answer to a crash: Stop, which leaves nothing behind here either.
	if err := b.Stop(ctx, name); err != nil {
		t.Fatalf("Stop of the crashed guest: %v", err)
	}
	checkGone(t, h, b, s, before)
}

// runUnavailable checks the contract of a backend that cannot run here: every method says
// "backend unavailable: KIND: why", and Start touches nothing.
func runUnavailable(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	b := h.Backend(t)
	want := b.Available(ctx)
	var u *guest.UnavailableError
	if !errors.As(want, &u) {
		t.Fatalf("Available: %v (%T), want a *guest.UnavailableError", want, want)
	}
	if u.Backend != b.Kind() || strings.TrimSpace(u.Reason) == "" {
		t.Fatalf("Available: %+v: want backend %s and a reason", u, b.Kind())
	}
	if prefix := "backend unavailable: " + string(b.Kind()) + ": "; !strings.HasPrefix(want.Error(), prefix) {
		t.Fatalf("Available: %q does not start %q", want, prefix)
	}
	t.Logf("unavailable: %v", want)
	s := h.Spec(t, Name("ot-unavail"))
	before := list(t, filepath.Dir(s.StateDir))
	calls := []struct {
		verb string
		call func() error
	}{
		{"Start", func() error { return b.Start(ctx, s) }},
		{"Status", func() error { _, err := b.Status(ctx, s.Name); return err }},
		{"SetCPULimit", func() error { return b.SetCPULimit(ctx, s.Name, capCPUs) }},
		{"Freeze", func() error { return b.Freeze(ctx, s.Name) }},
		{"Thaw", func() error { return b.Thaw(ctx, s.Name) }},
		{"Stop", func() error { return b.Stop(ctx, s.Name) }},
	}
	if w, ok := b.(guest.Watcher); ok {
		calls = append(calls, struct {
			verb string
			call func() error
		}{"Watch", func() error { _, err := w.Watch(ctx); return err }})
	}
	for _, c := range calls {
		err := c.call()
		if !guest.IsUnavailable(err) {
			t.Errorf("%s on an unavailable backend: %v, want a *guest.UnavailableError", c.verb, err)
		} else if err.Error() != want.Error() {
			t.Errorf("%s: %q, want the reason Available gives, %q", c.verb, err, want)
		}
	}
	if after := list(t, filepath.Dir(s.StateDir)); !slices.Equal(after, before) {
		t.Errorf("Start of an unavailable backend left %v next to the state directory (was %v)", after, before)
	}
}

// Digest is a SHA-256 over the base image: a file's content, or a tree's names, modes,
// link targets and contents.
func Digest(t *testing.T, base string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		fmt.Fprintf(h, "%s %v %d\n", rel, info.Mode(), info.Size())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %s\n", l)
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(h, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("base image: %v", err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// list is the sorted paths in dir (none if it does not exist).
func list(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}

// mountsUnder lists the mount points at or below dir in the test's mount namespace.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if mp := cgroup.UnescapeMountinfo(fields[4]); mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}
