package guestrun

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/cgroup/cgrouptest"
	"github.com/overtime-hpc/overtime/node-agent/interference"
)

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
	agentDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if agentDir != "" {
		os.RemoveAll(agentDir)
	}
	os.Exit(code)
}

// agent builds the static overtime-agent binary once per test process, as the release
// builds it (CGO_ENABLED=0): the guests run it as guest-load (and as a VM's init).
func agent(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		agentDir, agentErr = os.MkdirTemp("", "guestrun-agent-")
		if agentErr != nil {
			return
		}
		agentPath = filepath.Join(agentDir, "overtime-agent")
		cmd := exec.Command("go", "build", "-o", agentPath, "github.com/overtime-hpc/overtime/cmd/overtime-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = err
			t.Logf("go build: %s", out)
		}
	})
	if agentErr != nil {
		t.Fatalf("building overtime-agent: %v", agentErr)
	}
	return agentPath
}

// parent is a throwaway parent group for the test's guests.
func parent(t *testing.T) *cgroup.Group {
	t.Helper()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	return cgrouptest.TestParent(t, h)
}

// exercise starts cpu with one thread on r, sees its progress increase, checks that its
// processes are in its group, stops it and checks that nothing is left: no process, no
// group.
func exercise(t *testing.T, r interference.Runner, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	g, err := r.Start(ctx, "cpu", 1)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = g.Stop(context.Background())
		}
	})
	first, err := g.Progress()
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the guest's progress to increase", within, func() bool {
		w, err := g.Progress()
		return err == nil && w > first
	})
	last, _ := g.Progress()
	t.Logf("%s: progress %g -> %g flop", r.Name(), first, last)
	pids, err := g.PIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) == 0 {
		t.Fatal("no PIDs")
	}
	t.Logf("%s: group %s, pids %v", r.Name(), g.Group().Path(), pids)
	inGroup, err := g.Group().AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !slices.Contains(inGroup, pid) {
			t.Errorf("pid %d is not in the guest's group %s (%v)", pid, g.Group().Path(), inGroup)
		}
	}
	// A freezing policy leaves the group frozen when the matrix stops the guest: Stop must
	// end it all the same.
	if err := g.Group().Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if g.Group().Exists() {
		t.Errorf("group %s still exists after Stop", g.Group().Path())
	}
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join("/proc", itoa(pid))); err == nil {
			t.Errorf("pid %d still runs after Stop", pid)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestProcess(t *testing.T) {
	needs.Servers(t, "root (cgroups)")
	p := &Process{Parent: parent(t), Agent: agent(t), Dir: t.TempDir()}
	exercise(t, p, time.Minute)
}

func TestStartRejects(t *testing.T) {
	p := &Process{Parent: &cgroup.Group{}}
	for _, tc := range []struct {
		name    string
		threads int
	}{{"nope", 1}, {"cpu", 0}} {
		if _, err := p.Start(context.Background(), tc.name, tc.threads); err == nil {
			t.Errorf("Start(%q, %d): no error", tc.name, tc.threads)
		}
	}
}

func TestContainer(t *testing.T) {
	needs.Servers(t, "root, crun (Debian package crun)")
	c := &Container{Parent: parent(t), Agent: agent(t), WorkDir: t.TempDir()}
	exercise(t, c, time.Minute)
	if ents, _ := os.ReadDir(c.WorkDir); len(ents) != 0 {
		t.Errorf("Stop left %d entries in the work directory", len(ents))
	}
}

func TestQEMU(t *testing.T) {
	needs.Servers(t, "root, QEMU (Debian package qemu-system-x86), a kernel (the test image's cache)")
	// The kernel the test image build cached; where none is cached yet, build the image
	// (as the VM tests do) and take its kernel.
	kernel, err := FindKernel()
	if err != nil {
		t.Logf("%v: building the test image", err)
		kernel = testimage.Get(t).Path(testimage.Kernel)
	}
	t.Logf("kernel %s", kernel)
	q := &QEMU{Parent: parent(t), Agent: agent(t), Kernel: kernel, WorkDir: t.TempDir()}
	exercise(t, q, 3*time.Minute)
	if ents, _ := os.ReadDir(q.WorkDir); len(ents) != 0 {
		t.Errorf("Stop left %d entries in the work directory", len(ents))
	}
}
