package sensor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// cgroup2Mount is where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on hybrid hosts).
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if ok && strings.HasPrefix(post, "cgroup2 ") {
			return strings.Fields(pre)[4]
		}
	}
	t.Fatal("no cgroup v2 hierarchy mounted")
	return ""
}

// testCgroup makes a cgroup for the test's processes and removes it at the end.
func testCgroup(t *testing.T) (dir string, fd int) {
	t.Helper()
	needs.Servers(t, "root (a cgroup of its own)")
	dir = filepath.Join(cgroup2Mount(t), fmt.Sprintf("overtime-sensor-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		// The cgroup is empty once its processes are reaped; removal may lag a moment.
		var err error
		removed := poll.WaitEvery(10*time.Second, 50*time.Millisecond, func() bool {
			err = os.Remove(dir)
			return err == nil || errors.Is(err, os.ErrNotExist)
		})
		if !removed {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir, int(d.Fd())
}

// spin starts n busy shell loops (in the cgroup cgfd when >= 0) and returns their pids and
// a function that stops and reaps them; it also runs at the end of the test.
func spin(t *testing.T, n, cgfd int) (pids []int, stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if cgfd >= 0 {
			c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, cgfd
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		pids = append(pids, c.Process.Pid)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range cmds {
			_ = c.Process.Kill()
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
	t.Cleanup(stop)
	return pids, stop
}

// TestPressure: real CPU pressure — more busy processes than the host has cores (2),
// in a cgroup of the test's own so that other tests' load does not blur the picture —
// wakes the sensor through a PSI trigger on the cgroup's cpu.pressure, values rise while
// the stall goes on, and once the processes are gone one more event reports the pressure
// below Below. The system-wide sensor (/proc/pressure, the default) fires as well.
func TestPressure(t *testing.T) {
	cg, cgfd := testCgroup(t)
	const below = 20
	out := runSensor(t, &Pressure{Sources: []string{cg}, Stall: 100 * time.Millisecond, Window: time.Second,
		Below: below, Recheck: time.Second})
	system := runSensor(t, &Pressure{})
	noEvent(t, out, 500*time.Millisecond, "no pressure in an empty cgroup")

	start := time.Now()
	_, stop := spin(t, 6, cgfd)
	ev := nextEvent(t, out, 20*time.Second, "a pressure event under load")
	if ev.Kind != KindPressure || !strings.HasPrefix(ev.Source, cg+"/") {
		t.Fatalf("event %+v, want pressure from %s", ev, cg)
	}
	t.Logf("first trigger %v after the load started: %s avg10 %.2f", time.Since(start), ev.Source, ev.Value)
	peak := ev.Value
	for peak < 1.5*below {
		ev = nextEvent(t, out, 30*time.Second, fmt.Sprintf("pressure rising to %.0f (now %.2f)", 1.5*below, peak))
		t.Logf("%v: %s avg10 %.2f", time.Since(start).Round(time.Millisecond), ev.Source, ev.Value)
		if ev.Value > peak {
			peak = ev.Value
		}
	}
	t.Logf("avg10 %.2f after %v", peak, time.Since(start))
	sev := nextEvent(t, system, 20*time.Second, "a system-wide pressure event")
	if sev.Kind != KindPressure || !strings.HasPrefix(sev.Source, DefaultPressure+"/") {
		t.Errorf("system-wide event %+v", sev)
	}

	stop()
	stopped := time.Now()
	for {
		ev = nextEvent(t, out, 60*time.Second, "the pressure falling below the threshold")
		if ev.Value < below {
			break
		}
	}
	t.Logf("avg10 %.2f < %d reported %v after the load stopped", ev.Value, below, time.Since(stopped))
}

// TestPressureUnavailable: without pressure files the sensor cannot work and says so.
func TestPressureUnavailable(t *testing.T) {
	err := (&Pressure{Sources: []string{t.TempDir()}}).Run(context.Background(), make(chan Event))
	if err == nil || !strings.Contains(err.Error(), "no PSI trigger") {
		t.Fatalf("Run: %v", err)
	}
}
