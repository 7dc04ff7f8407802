package container

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestLifecycleDir(t *testing.T)      { testLifecycle(t, false) }
func TestLifecycleSquashfs(t *testing.T) { testLifecycle(t, true) }

// hostMarkers writes files the guest must never see: in the test's own temporary
// directory, in /home and in /run/user (the desktop user's places).
func hostMarkers(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{t.TempDir(), "/home", "/run/user"} {
		if gone(dir) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(dir) })
		}
		p := filepath.Join(dir, randName(".ot-marker"))
		if err := os.WriteFile(p, []byte("desktop user's data\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
		out = append(out, p)
	}
	return append(out, filepath.Dir(out[0]))
}

func testLifecycle(t *testing.T, sqfs bool) {
	e := newEnv(t)
	root, image := buildBase(t, t.TempDir(), sqfs)
	base := root
	if sqfs {
		base = image
	}
	treeBefore := treeDigest(t, root)
	imageBefore := ""
	if sqfs {
		imageBefore = fileDigest(t, image)
	}
	markers := hostMarkers(t)
	b := e.backend(Options{})
	name := randName("ot-life")
	s := e.spec(name, base, "sleep 100000 & while :; do sleep 1; done")
	s.CPULimit = 0.5
	st := start(t, b, s)
	pid := st.PID
	ctx := context.Background()

	// PID 1 of its own PID namespace, with its own hostname, seeing only its processes.
	if !nsInit(pid) {
		t.Fatalf("pid %d is not a namespace init: NSpid %s", pid, procStatus(t, pid, "NSpid"))
	}
	if c := strings.TrimSpace(mustExecIn(t, pid, "cat", "/proc/1/comm")); c != "sh" {
		t.Fatalf("/proc/1/comm inside: %q", c)
	}
	if h := strings.TrimSpace(mustExecIn(t, pid, "hostname")); h != name {
		t.Fatalf("hostname inside %q, want %q", h, name)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(mustExecIn(t, pid, "sh", "-c", "ls /proc | grep -c '^[0-9]'"))); n < 2 || n > 8 {
		t.Fatalf("%d processes visible inside", n)
	}

	// The desktop's files are not there.
	for _, m := range markers {
		if out, err := execIn(t, pid, "test", "-e", m); err == nil {
			t.Errorf("host path %s is visible in the guest (%s)", m, out)
		}
	}
	if ls := strings.Fields(mustExecIn(t, pid, "ls", "/")); !slices.Equal(ls, []string{"bin", "dev", "etc", "linuxrc", "proc", "root", "run", "sbin", "sys", "tmp", "usr", "var"}) {
		t.Errorf("guest root: %v", ls)
	}
	mounts := containerMounts(t, pid)
	for mp, m := range mounts {
		if mp != "/" && !strings.HasPrefix(mp, "/proc") && !strings.HasPrefix(mp, "/sys") && !strings.HasPrefix(mp, "/dev") {
			t.Errorf("unexpected mount in the guest: %s %s", mp, m)
		}
	}
	rt := filepath.Join(s.StateDir, "rt")
	if m := mounts["/"]; !strings.HasPrefix(m, "overlay ") || !strings.Contains(m, "lowerdir="+rt+"/lower") || !strings.Contains(m, "upperdir="+rt+"/upper") {
		t.Errorf("guest root: %s", m)
	}
	for mp, want := range map[string]string{"/proc": "proc rw,", "/sys": "sysfs ro,", "/dev": "tmpfs rw,", "/dev/pts": "devpts rw,", "/dev/shm": "tmpfs rw,", "/dev/mqueue": "mqueue rw,", "/proc/sys": "proc ro,"} {
		if !strings.HasPrefix(mounts[mp], want) {
			t.Errorf("guest %s: %q, want %s...", mp, mounts[mp], want)
		}
	}
	if ls := strings.Fields(mustExecIn(t, pid, "ls", "/dev")); !slices.Equal(ls, []string{"core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}) {
		t.Errorf("guest /dev: %v", ls)
	}
	if out, err := execIn(t, pid, "sh", "-c", "echo x > /sys/kernel/uevent_helper"); err == nil {
		t.Errorf("/sys is writable: %s", out)
	}
	// Nothing of the guest is mounted in the host's mount namespace.
	if m := hostMounts(t, s.StateDir, root, base); len(m) > 0 {
		t.Errorf("host mounts: %v", m)
	}
	if sqfs {
		if loopsBacking(t, image) != 1 {
			t.Errorf("no loop device backs %s", image)
		}
	}

	// Writes go to the overlay; the base stays as it was.
	mustExecIn(t, pid, "sh", "-c", "echo guest > /etc/written && echo more >> /etc/motd && rm /bin/ls && mkdir -p /var/new && echo x > /var/new/f")
	if c := readTrim(t, fmt.Sprintf("/proc/%d/root/etc/written", pid)); c != "guest" {
		t.Fatalf("written file through /proc/PID/root: %q", c)
	}
	if c := readTrim(t, fmt.Sprintf("/proc/%d/root/etc/motd", pid)); c != "base image\nmore" {
		t.Fatalf("appended file: %q", c)
	}
	if d := treeDigest(t, root); d != treeBefore {
		t.Fatal("the base tree changed")
	}
	if sqfs && fileDigest(t, image) != imageBefore {
		t.Fatal("the squashfs image changed")
	}

	// Limits and privileges.
	g := b.group(name)
	if st.Cgroup != g.Path() {
		t.Fatalf("Status.Cgroup %s, want %s", st.Cgroup, g.Path())
	}
	if procs, _ := g.Procs(); !slices.Contains(procs, pid) {
		t.Fatalf("init %d not in %s (%v)", pid, g.Path(), procs)
	}
	checkCgroupFiles(t, e.h, g, 0.5, 128<<20)
	if st.CPULimit < 0.499 || st.CPULimit > 0.501 {
		t.Fatalf("Status.CPULimit %v", st.CPULimit)
	}
	var procs []int
	eventually(t, "init's background sleep running", 10*time.Second, func() bool {
		procs, _ = g.Procs()
		for _, p := range procs {
			if p != pid && isLongSleep(p) {
				return true
			}
		}
		return false
	})
	checked := 0
	for _, p := range procs {
		// (The loop's "sleep 1" processes come and go, and so do the shell's forks before
		// they exec it, which still carry the whole script as their command line.)
		if p != pid && !isLongSleep(p) {
			continue
		}
		checked++
		if got, want := procStatus(t, p, "CapBnd"), fmt.Sprintf("%016x", capMask()); got != want {
			t.Errorf("pid %d CapBnd %s, want %s", p, got, want)
		}
		if got := procStatus(t, p, "CapEff"); got != fmt.Sprintf("%016x", capMask()) {
			t.Errorf("pid %d CapEff %s", p, got)
		}
		if got := procStatus(t, p, "NoNewPrivs"); got != "1" {
			t.Errorf("pid %d NoNewPrivs %s", p, got)
		}
		if nice, policy := statField(t, p, 19), statField(t, p, 41); nice != "19" || policy != "5" {
			t.Errorf("pid %d nice %s policy %s, want 19 and 5 (SCHED_IDLE)", p, nice, policy)
		}
	}
	if checked != 2 {
		t.Fatalf("checked %d processes (init and its child), procs %v", checked, procs)
	}

	// No second container.
	if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start: %v", err)
	}

	if err := b.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	checkGone(t, b, s)
	eventually(t, "init reaped", 10*time.Second, func() bool { return gone(fmt.Sprintf("/proc/%d", pid)) })
	if sqfs {
		eventually(t, "loop device detached", 10*time.Second, func() bool { return loopsBacking(t, image) == 0 })
	}
	if err := b.Stop(ctx, name); err != nil {
		t.Fatalf("Stop of an absent guest: %v", err)
	}

	// A new run starts from the base again: the writes were discarded.
	st = start(t, b, s)
	if !gone(fmt.Sprintf("/proc/%d/root/etc/written", st.PID)) {
		t.Fatal("a file written by the previous run is back")
	}
	if c := readTrim(t, fmt.Sprintf("/proc/%d/root/etc/motd", st.PID)); c != "base image" {
		t.Fatalf("motd %q", c)
	}
}

func checkCgroupFiles(t *testing.T, h *cgroup.Hierarchy, g *cgroup.Group, cpus float64, mem int64) {
	t.Helper()
	quota := strconv.FormatInt(cgroup.QuotaFor(cpus).Microseconds(), 10)
	files := map[string]string{}
	if h.Version() == cgroup.V2 {
		d := g.Dir("")
		files[filepath.Join(d, "cpu.idle")] = "1"
		files[filepath.Join(d, "cpu.max")] = quota + " 100000"
		files[filepath.Join(d, "memory.max")] = strconv.FormatInt(mem, 10)
		if !gone(filepath.Join(d, "memory.swap.max")) {
			files[filepath.Join(d, "memory.swap.max")] = "0"
		}
	} else {
		files[filepath.Join(g.Dir("cpu"), "cpu.idle")] = "1"
		files[filepath.Join(g.Dir("cpu"), "cpu.cfs_quota_us")] = quota
		files[filepath.Join(g.Dir("cpu"), "cpu.cfs_period_us")] = "100000"
		files[filepath.Join(g.Dir("memory"), "memory.limit_in_bytes")] = strconv.FormatInt(mem, 10)
		if !gone(filepath.Join(g.Dir("memory"), "memory.memsw.limit_in_bytes")) {
			files[filepath.Join(g.Dir("memory"), "memory.memsw.limit_in_bytes")] = strconv.FormatInt(mem, 10)
		}
	}
	for f, want := range files {
		if got := readTrim(t, f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
}

// loopsBacking counts the loop devices whose backing file is file.
func loopsBacking(t *testing.T, file string) int {
	t.Helper()
	m, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	n := 0
	for _, p := range m {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == file {
			n++
		}
	}
	return n
}

func TestFreezeAndCPULimit(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	b := e.backend(Options{})
	name := randName("ot-frz")
	s := e.spec(name, root, "while :; do :; done")
	// Normal class: under the load of a full test run an idle-class loop may get next to
	// no CPU, and this test needs it to run (the idle class is checked elsewhere).
	s.CPUIdle = false
	start(t, b, s)
	ctx := context.Background()
	status := func() guest.Status {
		st, err := b.Status(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	c0 := status().CPUTime
	eventually(t, "the busy guest accruing CPU time", 20*time.Second, func() bool { return status().CPUTime > c0+50*time.Millisecond })

	if err := b.Freeze(ctx, name); err != nil {
		t.Fatal(err)
	}
	st := status()
	if st.State != guest.StatePaused || st.PID == 0 {
		t.Fatalf("frozen: %+v", st)
	}
	c1 := st.CPUTime
	time.Sleep(500 * time.Millisecond) // measurement window
	if c2 := status().CPUTime; c2-c1 > 5*time.Millisecond {
		t.Fatalf("frozen guest used %v in 500ms", c2-c1)
	}
	if err := b.Freeze(ctx, name); err != nil {
		t.Fatalf("Freeze again: %v", err)
	}
	if err := b.Thaw(ctx, name); err != nil {
		t.Fatal(err)
	}
	if st := status(); st.State != guest.StateRunning {
		t.Fatalf("thawed: %+v", st)
	}
	c3 := status().CPUTime
	eventually(t, "the thawed guest accruing CPU time", 20*time.Second, func() bool { return status().CPUTime > c3+50*time.Millisecond })
	if err := b.Thaw(ctx, name); err != nil {
		t.Fatalf("Thaw again: %v", err)
	}

	if err := b.SetCPULimit(ctx, name, 0.2); err != nil {
		t.Fatal(err)
	}
	if l := status().CPULimit; l < 0.199 || l > 0.201 {
		t.Fatalf("CPULimit %v", l)
	}
	u0, t0 := status().CPUTime, time.Now()
	time.Sleep(1500 * time.Millisecond) // measurement window
	if c := cgroup.CPUs(status().CPUTime-u0, time.Since(t0)); c > 0.3 {
		t.Fatalf("capped at 0.2 CPUs, the guest used %.3f", c)
	}
	if err := b.SetCPULimit(ctx, name, 0); err != nil {
		t.Fatal(err)
	}
	if l := status().CPULimit; l != 0 {
		t.Fatalf("CPULimit after removing the cap: %v", l)
	}

	for _, err := range []error{
		b.Freeze(ctx, "ot-no-such"), b.Thaw(ctx, "ot-no-such"), b.SetCPULimit(ctx, "ot-no-such", 1),
	} {
		if !errors.Is(err, guest.ErrNotFound) {
			t.Errorf("absent guest: %v", err)
		}
	}

	// Stop works on a frozen guest.
	if err := b.Freeze(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	checkGone(t, b, s)
}

func TestInitExit(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	b := e.backend(Options{})
	name := randName("ot-exit")
	ctx := context.Background()
	t.Cleanup(func() { _ = b.Stop(ctx, name) })
	s := e.spec(name, root, "echo bye; exit 3")
	if err := b.Start(ctx, s); err != nil {
		t.Fatal(err)
	}
	var st guest.Status
	eventually(t, "the guest reported crashed", 10*time.Second, func() bool {
		st, _ = b.Status(ctx, name)
		return st.State == guest.StateCrashed
	})
	if !strings.Contains(st.Reason, "status 3") || st.PID != 0 {
		t.Fatalf("crashed: %+v", st)
	}
	if c := readTrim(t, filepath.Join(s.StateDir, "console.log")); c != "bye" {
		t.Fatalf("console: %q", c)
	}
	// Start cleans up the remains and starts anew.
	s = e.spec(name, root, "exit 0")
	if err := b.Start(ctx, s); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the guest reported shut off", 10*time.Second, func() bool {
		st, _ = b.Status(ctx, name)
		return st.State == guest.StateShutoff
	})
	if err := b.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	checkGone(t, b, s)

	// A state directory with foreign files is refused (Stop would remove it), and left alone.
	s = e.spec(name, root, "exit 0")
	if err := os.MkdirAll(s.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(s.StateDir, "precious")
	if err := os.WriteFile(precious, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "not the guest's") {
		t.Fatalf("Start with a foreign state directory: %v", err)
	}
	if gone(precious) {
		t.Fatal("a foreign file in the state directory was removed")
	}
	if err := os.RemoveAll(s.StateDir); err != nil {
		t.Fatal(err)
	}
	checkGone(t, b, s)

	// An init the image lacks fails Start, and nothing is left.
	s = e.spec(name, root, "")
	s.Cmdline = "/sbin/no-such-init"
	err := b.Start(ctx, s)
	if err == nil || !strings.Contains(err.Error(), "/sbin/no-such-init not in the image") {
		t.Fatalf("Start with a missing init: %v", err)
	}
	checkGone(t, b, s)
}

// The container survives the agent that started it; a new Backend finds it, refuses a
// second one, and stops it.
func TestAdoption(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	name := randName("ot-adopt")
	s := e.spec(name, root, "while :; do sleep 1; done")

	// The orphaned init comes to us when the starter dies, so that we can reap it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	cfg, _ := json.Marshal(starterConfig{Parent: e.pname, RunDir: e.run, Spec: s})
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), starterEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(l)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(time.Minute):
		t.Fatal("the starter did not report")
	}
	pidStr, ok := strings.CutPrefix(line, "started ")
	if !ok {
		t.Fatalf("starter: %q", line)
	}
	pid, _ := strconv.Atoi(pidStr)
	b := e.backend(Options{})
	t.Cleanup(func() { _ = b.Stop(context.Background(), name) })

	// The agent dies.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	// The guest's monitor (init's parent and subreaper) survives the agent and comes to us.
	rec0, _ := b.readRecord(name)
	if rec0 == nil || rec0.Monitor == 0 {
		t.Fatalf("record %+v: no monitor", rec0)
	}
	monitor := rec0.Monitor
	eventually(t, "the orphaned monitor reparented to the test", 10*time.Second, func() bool {
		return procStatus(t, monitor, "PPid") == strconv.Itoa(os.Getpid())
	})
	if pp := procStatus(t, pid, "PPid"); pp != strconv.Itoa(monitor) {
		t.Fatalf("init's parent %s, want the monitor %d", pp, monitor)
	}

	ctx := context.Background()
	st, err := b.Status(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != guest.StateRunning || st.PID != pid || st.Cgroup != b.group(name).Path() {
		t.Fatalf("adopted: %+v, want running pid %d in %s", st, pid, b.group(name).Path())
	}
	// The cgroup alone finds it too (a lost record).
	rec, _ := b.readRecord(name)
	if got := findInit(nil, mustProcs(t, b.group(name))); got != pid {
		t.Fatalf("init from the cgroup: %d, want %d", got, pid)
	}
	if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start: %v", err)
	}
	inits := 0
	for _, p := range mustProcs(t, b.group(name)) {
		if nsInit(p) {
			inits++
		}
	}
	if inits != 1 {
		t.Fatalf("%d container inits in the group", inits)
	}
	if err := b.Freeze(ctx, name); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Status(ctx, name); st.State != guest.StatePaused {
		t.Fatalf("adopted and frozen: %+v", st)
	}
	if err := b.Thaw(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	checkGone(t, b, s)
	if rec == nil || rec.StateDir != s.StateDir {
		t.Fatalf("record %+v", rec)
	}
	eventually(t, "the adopted guest's monitor ended and reaped", 10*time.Second, func() bool {
		var ws unix.WaitStatus
		got, err := unix.Wait4(monitor, &ws, unix.WNOHANG, nil)
		return got == monitor || errors.Is(err, unix.ECHILD)
	})
	if !gone(fmt.Sprintf("/proc/%d", pid)) {
		t.Fatalf("init %d still there", pid)
	}
}

func mustProcs(t *testing.T, g *cgroup.Group) []int {
	t.Helper()
	p, err := g.AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A bridged guest reaches an address on the bridge through its veth (in a private network
// namespace standing in for the desktop's).
func TestBridged(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	ns, err := netns.New("ot-ct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := ns.AddBridge("br0", "10.231.7.1/24"); err != nil {
		t.Fatal(err)
	}
	b := e.backend(Options{HostNetNS: ns.Name})
	name := randName("ot-net")
	s := e.spec(name, root, `ip link set eth0 up && ip addr add 10.231.7.2/24 dev eth0 && i=0; while [ $i -lt 100 ]; do if ping -c1 -W1 10.231.7.1 >/dev/null 2>&1; then echo PING-OK; break; fi; i=$((i+1)); done; while :; do sleep 1; done`)
	s.Network, s.Bridge, s.MAC = model.NetBridged, "br0", "02:00:0a:e7:07:02"
	st := start(t, b, s)
	eventually(t, "the guest pinging the bridge", 60*time.Second, func() bool {
		c, _ := os.ReadFile(filepath.Join(s.StateDir, "console.log"))
		return strings.Contains(string(c), "PING-OK")
	})
	if mac := strings.TrimSpace(mustExecIn(t, st.PID, "cat", "/sys/class/net/eth0/address")); mac != s.MAC {
		t.Fatalf("eth0 address %s, want %s", mac, s.MAC)
	}
	if err := ns.Run("busybox", "ping", "-c1", "-W2", "10.231.7.2"); err != nil {
		t.Fatalf("bridge to guest: %v", err)
	}
	veth := hostVeth(name)
	out, err := ns.Command("ip", "-o", "link", "show", "dev", veth).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "master br0") {
		t.Fatalf("host end %s: %v %s", veth, err, out)
	}
	if exec.Command("ip", "link", "show", "dev", veth).Run() == nil {
		t.Fatalf("host end %s in the agent's own namespace", veth)
	}
	if err := b.Stop(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	checkGone(t, b, s)
	if ns.Command("ip", "link", "show", "dev", veth).Run() == nil {
		t.Fatalf("host end %s left after Stop", veth)
	}
}

// The guest boots like a VM: its uptime starts at its own start, not the desktop's boot
// (Slurm counts a powered-up node as resumed only when it reports a fresh boot).
func TestFreshBootTime(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	b := e.backend(Options{})
	name := randName("ot-uptime")
	ctx := context.Background()
	t.Cleanup(func() { _ = b.Stop(ctx, name) })
	s := e.spec(name, root, "cut -d. -f1 /proc/uptime; exit 0")
	if err := b.Start(ctx, s); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the guest shut off", 10*time.Second, func() bool {
		st, _ := b.Status(ctx, name)
		return st.State == guest.StateShutoff
	})
	host, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	hostUp, _ := strconv.ParseFloat(strings.Fields(string(host))[0], 64)
	c := readTrim(t, filepath.Join(s.StateDir, "console.log"))
	up, err := strconv.Atoi(c)
	if err != nil || up > 30 || (hostUp > 120 && float64(up) > hostUp/2) {
		t.Fatalf("guest uptime %q s (desktop's %.0f s); want the guest's own, a few seconds", c, hostUp)
	}
}

// isLongSleep reports whether pid runs the guest's "sleep 100000" (exactly: not a fork of
// the shell whose command line is the whole script).
func isLongSleep(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(b) == "sleep\x00100000\x00"
}
