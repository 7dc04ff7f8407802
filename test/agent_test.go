package test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/bootlab"
	"github.com/overtime-hpc/overtime/internal/libvirtenv"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/model"
)

const agentMAC = "52:54:00:0b:00:01"

// agentSite: one desktop in pool lab whose desktop mode runs the test image as a QEMU
// guest. The policy is the default with short times, so that a test sees every
// transition within seconds.
func agentSite(sum string, size int64, ownerActive model.GuestAction) string {
	return fmt.Sprintf(`name: lab
timezone: Europe/Berlin
defaultMode: desktop
bootServers:
  - {name: bs1, ip: 10.30.0.1, httpURL: "http://10.30.0.1:8080", dhcp: full, subnet: 10.30.0.0/24}
images:
  - name: compute
    kind: compute
    versions:
      - {version: v1, sha256: %s, size: %d, path: compute/v1, created: "2026-11-20T09:00:00Z"}
  - name: desk
    kind: desktop
    versions:
      - {version: v1, sha256: %s, size: %d, path: desk/v1, created: "2026-11-20T09:00:00Z"}
modes:
  - name: desktop
    kind: desktop
    image: desk
    guest: {image: compute, backend: qemu, vcpus: 1, memoryMB: 256, network: none, kernelArgs: "panic=-1"}
pools:
  - name: lab
    bootServer: bs1
    policy:
      idleAfter: 3s
      hold: 2s
      evictAfter: 4s
      throttleCPU: 20
      actions: {owner-active: %s}
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
  - {name: pc1, mac: "%s", pool: lab}
`, sum, size, sum, size, ownerActive, agentMAC)
}

func putSite(t *testing.T, env *testenv.Env, doc string) {
	t.Helper()
	var s model.Site
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	if err := env.Admin().Send(http.MethodPut, "/api/v1/site", nil, &s, nil); err != nil {
		t.Fatalf("apply site: %v", err)
	}
}

// session is a logged-in terminal session as the agent's utmp sensor sees it: a utmp
// USER_PROCESS record for a real pseudo-terminal. Typing is a write to the terminal's
// master and a read by the "shell" on the slave: the same kernel path as a key pressed in
// an ssh session.
type session struct {
	master, slave *os.File
	line          string
}

func newSession(t *testing.T, utmp string) *session {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	line := "pts/" + strconv.Itoa(n)
	s, err := os.OpenFile("/dev/"+line, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	// struct utmp (x86-64 glibc, 384 bytes): type, pid, line, id, user, host, ..., tv.
	rec := make([]byte, 384)
	binary.LittleEndian.PutUint16(rec[0:], 7) // USER_PROCESS
	binary.LittleEndian.PutUint32(rec[4:], uint32(os.Getpid()))
	copy(rec[8:40], line)
	copy(rec[40:44], strconv.Itoa(n))
	copy(rec[44:76], "student")
	copy(rec[76:332], "10.30.0.99") // remote (ssh)
	binary.LittleEndian.PutUint32(rec[340:], uint32(time.Now().Unix()))
	if err := os.WriteFile(utmp, rec, 0o644); err != nil {
		t.Fatal(err)
	}
	return &session{master: m, slave: s, line: line}
}

// key types one key: the terminal driver passes it to the slave, where the shell reads it.
func (s *session) key(t *testing.T) time.Time {
	t.Helper()
	at := time.Now()
	if _, err := s.master.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := s.slave.Read(buf); err != nil {
		t.Fatal(err)
	}
	return at
}

// agentProc is `overtime agent run` as a separate process (it is killed with SIGKILL).
type agentProc struct {
	cmd  *exec.Cmd
	out  *lockedBuf
	done chan struct{}
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startAgent(t *testing.T, bin string, args ...string) *agentProc {
	t.Helper()
	p := &agentProc{cmd: exec.Command(bin, append([]string{"agent", "run"}, args...)...), out: &lockedBuf{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("agent log:\n%s", p.out.String())
		}
	})
	return p
}

func (p *agentProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// metric reads one sample from the agent's /metrics ("" when absent).
func metric(addr, name string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

func readCgroupInt(t *testing.T, ctrl, rel, file string) int64 {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, rel, file))
	if err != nil {
		return -2
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

var emulatorRE = regexp.MustCompile(`(?m)^\d+:cpu:(/\S+)/emulator$`)

// guestCgroup is the domain's cgroup v1 cpu path, from QEMU's /proc/PID/cgroup.
func guestCgroup(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if m := emulatorRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

func qemuPIDOf(env *libvirtenv.Env, name string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "guest="+name+",") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// TestAgentQEMU runs `overtime agent run` against the real site manager (slapd + API) and
// a private libvirtd with QEMU (TCG), with owner activity injected through a real
// pseudo-terminal session, and checks every transition in the guest's cgroup and in
// libvirt: run → throttle on the first key → run after idle+hold → (policy changed in
// the site manager) freeze on a key → evict after evictAfter → run again; adoption after
// SIGKILL; the cached configuration while the site manager is down; restart after a crash.
func TestAgentQEMU(t *testing.T) {
	img := testimage.Get(t)
	sum, size := sha256File(t, img.Path(testimage.Root))
	env := testenv.New(t, testenv.Options{})
	putSite(t, env, agentSite(sum, size, model.ActionThrottle))
	lv := libvirtenv.Start(t, nil)
	bin := bootlab.Binary(t)

	dir := t.TempDir()
	// The image export as the agent sees it: <image root>/<version path>/{vmlinuz,...}.
	imageRoot := filepath.Join(dir, "images")
	for _, p := range []string{"compute/v1"} {
		if err := os.MkdirAll(filepath.Join(imageRoot, p), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{testimage.Kernel, testimage.Initrd, testimage.Root} {
			if err := os.Symlink(img.Path(f), filepath.Join(imageRoot, p, f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cred, err := env.Admin().CreateHostCredential(context.Background(), "pc1")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "agent.token")
	if err := os.WriteFile(tokenFile, []byte(cred.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	utmp := filepath.Join(dir, "utmp")
	sess := newSession(t, utmp)
	inputDir := filepath.Join(dir, "input") // no input devices on this machine
	os.MkdirAll(inputDir, 0o755)
	stateDir := filepath.Join(dir, "state")
	metrics := freePort(t)
	args := []string{"--server", env.HTTP.URL, "--token-file", tokenFile, "--mac", agentMAC,
		"--state-dir", stateDir, "--image-root", imageRoot, "--libvirt-uri", lv.URI,
		"--listen", metrics, "--utmp", utmp, "--input-dir", inputDir,
		"--refresh", "1s", "--debug", "--check", "1s", "--restart-backoff", "1s", "--heartbeat", "1s"}
	ag := startAgent(t, bin, args...)

	const name = "overtime-pc1"
	within := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		bootlab.Eventually(t, what, d, cond)
	}
	var pid int
	var cg string
	within("guest started", 60*time.Second, func() bool {
		pid = qemuPIDOf(lv, name)
		cg = guestCgroup(pid)
		return pid > 0 && cg != ""
	})
	within("owner idle (a session, no input), guest at full speed", 20*time.Second, func() bool {
		return metric(metrics, `overtime_agent_owner_state{state="owner-idle"}`) == "1" &&
			readCgroupInt(t, "cpu", cg, "cpu.cfs_quota_us") == -1
	})
	within("guest cgroup in the idle class (cpu.idle 1)", 10*time.Second, func() bool {
		return readCgroupInt(t, "cpu", cg, "cpu.idle") == 1
	})
	// cpu.idle=1 gives the group the weight of SCHED_IDLE: cpu.shares reads 3.
	if v := readCgroupInt(t, "cpu", cg, "cpu.shares"); v > 3 {
		t.Errorf("guest cgroup cpu.shares = %d, want <= 3 (idle)", v)
	}

	// A key in the session: throttled to 20% of the host's CPUs.
	wantQuota := int64(float64(runtime.NumCPU()) * 0.20 * 100000)
	sess.key(t)
	within("throttled after a key press", 10*time.Second, func() bool {
		return readCgroupInt(t, "cpu", cg, "cpu.cfs_quota_us") == wantQuota
	})
	// Idle 3 s + hold 2 s: full speed again.
	within("full speed after idle + hold", 20*time.Second, func() bool {
		return readCgroupInt(t, "cpu", cg, "cpu.cfs_quota_us") == -1
	})

	// The pool admin changes the policy: owner activity freezes the guest.
	putSite(t, env, agentSite(sum, size, model.ActionFreeze))
	within("new policy fetched", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(stateDir, "config.json"))
		return strings.Contains(string(b), `"owner-active":"freeze"`)
	})
	sess.key(t)
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
				sess.master.Write([]byte("x\n"))
				sess.slave.Read(make([]byte, 16))
			}
		}
	}()
	within("evicted after 4 s frozen", 20*time.Second, func() bool {
		_, err := lv.Virsh("domstate", name)
		return err != nil && qemuPIDOf(lv, name) == 0
	})
	close(stopTyping)
	within("a new guest after the owner left (idle + hold)", 60*time.Second, func() bool {
		pid = qemuPIDOf(lv, name)
		return pid > 0
	})

	// SIGKILL right after the start: the guest keeps running; a new agent adopts it and
	// makes sure of its limits.
	ag.kill()
	if qemuPIDOf(lv, name) != pid {
		t.Fatal("guest did not survive the agent's death")
	}
	ag = startAgent(t, bin, args...)
	within("restarted agent adopted the guest", 20*time.Second, func() bool {
		return strings.Contains(ag.out.String(), "adopted running guest")
	})
	if got := qemuPIDOf(lv, name); got != pid {
		t.Fatalf("guest replaced on adoption: pid %d, was %d", got, pid)
	}
	out, _ := lv.Virsh("list", "--name")
	if n := len(strings.Fields(out)); n != 1 {
		t.Fatalf("%d domains after adoption, want 1: %s", n, out)
	}
	within("adopted guest in the idle class", 10*time.Second, func() bool {
		return readCgroupInt(t, "cpu", guestCgroup(pid), "cpu.idle") == 1
	})
	// Killed again with everything applied: the limits live in the cgroup, not the agent.
	ag.kill()
	if v := readCgroupInt(t, "cpu", guestCgroup(pid), "cpu.idle"); v != 1 {
		t.Errorf("after the agent's death: cpu.idle = %d, want 1", v)
	}

	// Site manager down: a restarted agent works from its cached configuration.
	env.HTTP.Close()
	ag = startAgent(t, bin, args...)
	within("agent runs from the cache and sees the session", 20*time.Second, func() bool {
		return metric(metrics, `overtime_agent_config_source{source="cache"}`) == "1" &&
			metric(metrics, `overtime_agent_owner_state{state="owner-idle"}`) == "1"
	})
	sess.key(t)
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
		p := qemuPIDOf(lv, name)
		return p > 0 && p != pid && metric(metrics, "overtime_agent_guest_restarts_total") == "1"
	})
}
