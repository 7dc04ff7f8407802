package test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/agentlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
)

// Policies of the agent tests: the default with short times, so that a test sees every
// transition within seconds. Desktop load and pressure are switched off (100 cores,
// 100%): other tests running beside this one load the machine, and the injected key
// presses are what this test is about (the sensors have tests of their own).
const (
	quiet          = "desktopLoad: 100, freezePressure: 100"
	throttlePolicy = "{idleAfter: 3s, hold: 2s, evictAfter: 4s, throttleCPU: 20, " + quiet + "}"
	freezePolicy   = "{idleAfter: 3s, hold: 2s, evictAfter: 4s, throttleCPU: 20, " + quiet + ", actions: {owner-active: freeze}}"
)

// TestAgentQEMU runs `overtime agent run` against the real site manager (slapd + API) and
// a private libvirtd with QEMU (TCG), with owner activity injected through a real
// pseudo-terminal session, and checks every transition in the guest's cgroup and in
// libvirt: run → throttle on the first key → run after idle+hold → (policy changed in
// the site manager) freeze on a key → evict after evictAfter → run again; adoption after
// SIGKILL; the cached configuration while the site manager is down; restart after a crash.
func TestAgentQEMU(t *testing.T) {
	l := agentlab.Start(t, agentlab.Options{Policy: throttlePolicy,
		ExtraFlags: []string{"--refresh", "1s", "--debug", "--check", "1s", "--restart-backoff", "1s", "--heartbeat", "1s"}})
	lv, sess, metrics := l.Libvirt, l.Session, l.Metric
	stateDir := l.StateDir()

	ag := l.StartAgent()

	const name = agentlab.GuestName
	within := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		bootlab.Eventually(t, what, d, cond)
	}
	var pid int
	var cg string
	within("guest started", 60*time.Second, func() bool {
		pid = agentlab.QEMUPID(name)
		cg = agentlab.QEMUCgroup(pid)
		return pid > 0 && cg != ""
	})
	within("owner idle (a session, no input), guest at full speed", 20*time.Second, func() bool {
		return metrics(`overtime_agent_owner_state{state="owner-idle"}`) == "1" &&
			agentlab.ReadCgroupInt("cpu", cg, "cpu.cfs_quota_us") == -1
	})
	within("guest cgroup in the idle class (cpu.idle 1)", 10*time.Second, func() bool {
		return agentlab.ReadCgroupInt("cpu", cg, "cpu.idle") == 1
	})
	// cpu.idle=1 gives the group the weight of SCHED_IDLE: cpu.shares reads 3.
	if v := agentlab.ReadCgroupInt("cpu", cg, "cpu.shares"); v > 3 {
		t.Errorf("guest cgroup cpu.shares = %d, want <= 3 (idle)", v)
	}

	// A key in the session: throttled to 20% of the host's CPUs.
	wantQuota := int64(float64(runtime.NumCPU()) * 0.20 * 100000)
	key(t, sess)
	within("throttled after a key press", 10*time.Second, func() bool {
		return agentlab.ReadCgroupInt("cpu", cg, "cpu.cfs_quota_us") == wantQuota
	})
	// Idle 3 s + hold 2 s: full speed again.
	within("full speed after idle + hold", 20*time.Second, func() bool {
		return agentlab.ReadCgroupInt("cpu", cg, "cpu.cfs_quota_us") == -1
	})

	// The pool admin changes the policy: owner activity freezes the guest.
	l.PutSite(freezePolicy)
	within("new policy fetched", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(stateDir, "config.json"))
		return strings.Contains(string(b), `"owner-active":"freeze"`)
	})
	key(t, sess)
	within("frozen (libvirt paused) after a key press", 10*time.Second, func() bool {
		out, _ := lv.Virsh("domstate", name)
		return strings.TrimSpace(out) == "paused"
	})
	// Keep typing: frozen for evictAfter (4 s) → evicted.
	stopTyping := make(chan struct{})
	go func() {
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopTyping:
				return
			case <-tk.C:
				sess.Key()
			}
		}
	}()
	within("evicted after 4 s frozen", 20*time.Second, func() bool {
		_, err := lv.Virsh("domstate", name)
		return err != nil && agentlab.QEMUPID(name) == 0
	})
	close(stopTyping)
	within("a new guest after the owner left (idle + hold)", 60*time.Second, func() bool {
		pid = agentlab.QEMUPID(name)
		return pid > 0
	})

	// SIGKILL right after the start: the guest keeps running; a new agent adopts it and
	// makes sure of its limits.
	ag.Kill()
	if agentlab.QEMUPID(name) != pid {
		t.Fatal("guest did not survive the agent's death")
	}
	ag = l.StartAgent()
	within("restarted agent adopted the guest", 20*time.Second, func() bool {
		return strings.Contains(ag.Log(), "adopted running guest")
	})
	if got := agentlab.QEMUPID(name); got != pid {
		t.Fatalf("guest replaced on adoption: pid %d, was %d", got, pid)
	}
	out, _ := lv.Virsh("list", "--name")
	if n := len(strings.Fields(out)); n != 1 {
		t.Fatalf("%d domains after adoption, want 1: %s", n, out)
	}
	// The guest booted its image through Overtime's initramfs from its own disk: a
	// writable root, the tmpfs overlay over the read-only squashfs (overtime.root=disk:).
	console := filepath.Join(stateDir, "guest", name, "console.log")
	rootLine := regexp.MustCompile(`overtime-test: root overtime / overlay \S*lowerdir=/run/overtime/lower`)
	within("the guest's root: the overlay over its disk", 150*time.Second, func() bool {
		b, _ := os.ReadFile(console)
		return rootLine.Match(b)
	})
	if b, _ := os.ReadFile(console); !strings.Contains(string(b), "overtime: image disk:/dev/vda:") {
		t.Errorf("the guest's console does not show the initramfs taking the image from /dev/vda:\n%s", b)
	}
	within("adopted guest in the idle class", 10*time.Second, func() bool {
		return agentlab.ReadCgroupInt("cpu", agentlab.QEMUCgroup(pid), "cpu.idle") == 1
	})
	// Killed again with everything applied: the limits live in the cgroup, not the agent.
	ag.Kill()
	if v := agentlab.ReadCgroupInt("cpu", agentlab.QEMUCgroup(pid), "cpu.idle"); v != 1 {
		t.Errorf("after the agent's death: cpu.idle = %d, want 1", v)
	}

	// Site manager down: a restarted agent works from its cached configuration.
	l.Env.HTTP.Close()
	ag = l.StartAgent()
	within("agent runs from the cache and sees the session", 20*time.Second, func() bool {
		return metrics(`overtime_agent_config_source{source="cache"}`) == "1" &&
			metrics(`overtime_agent_owner_state{state="owner-idle"}`) == "1"
	})
	key(t, sess)
	within("still acting on input without the site manager (frozen)", 10*time.Second, func() bool {
		out, _ := lv.Virsh("domstate", name)
		return strings.TrimSpace(out) == "paused"
	})
	within("thawed after idle + hold", 20*time.Second, func() bool {
		out, _ := lv.Virsh("domstate", name)
		return strings.TrimSpace(out) == "running"
	})

	// Crash: QEMU killed → a new guest after the backoff, counted.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	within("crashed guest restarted", 60*time.Second, func() bool {
		p := agentlab.QEMUPID(name)
		return p > 0 && p != pid && metrics("overtime_agent_guest_restarts_total") == "1"
	})
}

func key(t *testing.T, s *agentlab.Session) {
	t.Helper()
	if _, err := s.Key(); err != nil {
		t.Fatal(err)
	}
}
