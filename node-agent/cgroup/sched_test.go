package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	testpoll "github.com/overtime-hpc/overtime/internal/testenv/poll" // cgroup has a poll of its own
)

func TestMain(m *testing.M) {
	if os.Getenv("OT_CGROUP_TEST_BLOCK") == "1" {
		// A multi-threaded process to make idle (the Go runtime runs several threads).
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestIdleProcess(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), "OT_CGROUP_TEST_BLOCK=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	task := filepath.Join("/proc", strconv.Itoa(pid), "task")
	testpoll.Until(t, "the child to have more than one thread", 10*time.Second, func() bool {
		ents, _ := os.ReadDir(task)
		return len(ents) > 1
	})
	if err := IdleProcess(pid); err != nil {
		t.Fatal(err)
	}
	stats, _ := filepath.Glob(filepath.Join(task, "*", "stat"))
	if len(stats) < 2 {
		t.Fatalf("threads: %v", stats)
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if nice, policy := fields[19-3], fields[41-3]; nice != "19" || policy != "5" {
			t.Errorf("%s: nice %s policy %s, want 19 and 5 (SCHED_IDLE)", f, nice, policy)
		}
	}
	if err := IdleProcess(1 << 30); err == nil {
		t.Fatal("no such process: no error")
	}
}
