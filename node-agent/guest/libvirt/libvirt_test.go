package libvirt

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/libvirtenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// eventually polls cond (every 100 ms: it asks libvirt) until it holds or the deadline
// passes, and fails with cond's last detail.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var detail string
	if !poll.WaitEvery(within, 100*time.Millisecond, func() bool {
		var ok bool
		ok, detail = cond()
		return ok
	}) {
		t.Fatalf("%s not reached within %s: %s", what, within, detail)
	}
}

func sha(t *testing.T, path string) [32]byte {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

func readInt(t *testing.T, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// schedPolicy is the scheduling policy of a thread (field 41 of /proc/PID/task/TID/stat).
func schedPolicy(pid, tid string) int {
	b, err := os.ReadFile("/proc/" + pid + "/task/" + tid + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	v, _ := strconv.Atoi(f[41-3])
	return v
}

// cpuCgroupDir is where the cgroup v1 cpu controller shows a group (this machine's layout).
func cpuCgroupDir(t *testing.T, rel string, ctrl string) string {
	return filepath.Join("/sys/fs/cgroup", ctrl, rel)
}

// TestGuestLifecycle runs the test image as a guest under the real libvirtd + QEMU (TCG
// here) through the backend: start, idle scheduling, CPU cap, freeze, thaw, stop, with
// the read-only base untouched and the overlay discarded.
func TestGuestLifecycle(t *testing.T) {
	img := testimage.Get(t)
	env := libvirtenv.Start(t, nil)
	ctx := context.Background()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	idled := 0
	setIdle := IdleDomainCgroup(h) // the agent's, on this machine's real libvirt layout
	b := New(Options{URI: env.URI, DomainType: "qemu", RunDir: t.TempDir(), SetIdle: func(pid int) error {
		idled++
		return setIdle(pid)
	}})
	if err := b.Available(ctx); err != nil {
		t.Fatal(err)
	}
	stateRoot := t.TempDir()
	// The base lives in a read-only directory, as on the NFS export.
	base := img.Path(testimage.Root)
	before := sha(t, base)
	s := guest.Spec{
		Name: "overtime-lc", VCPUs: 1, MemoryMB: 256,
		Kernel: img.Path(testimage.Kernel), Initrd: img.Path(testimage.Initrd),
		Cmdline:   "root=/dev/vda rootfstype=squashfs ro console=ttyS0 panic=-1",
		BaseImage: base, BaseFormat: "squashfs",
		StateDir: filepath.Join(stateRoot, "overtime-lc"),
		Network:  model.NetNone, CPUIdle: true,
	}
	if err := b.Start(ctx, s); err != nil {
		t.Fatalf("start: %v\n%s", err, env.Log())
	}
	if err := b.Start(ctx, s); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second start: %v, want refusal", err)
	}
	consoleLog := filepath.Join(s.StateDir, consoleLog)
	eventually(t, 90*time.Second, "guest booted", func() (bool, string) {
		b, _ := os.ReadFile(consoleLog)
		return strings.Contains(string(b), "overtime-test: root"), string(b)
	})
	st, err := b.Status(ctx, s.Name)
	if err != nil || st.State != guest.StateRunning || st.PID == 0 || st.Cgroup == "" || st.CPUTime <= 0 {
		t.Fatalf("status: %+v %v", st, err)
	}
	// Idle class: cpu.idle on the domain's group (the weight of SCHED_IDLE, which reads as
	// cpu.shares 3), SCHED_IDLE (5) on QEMU's threads.
	if v := readInt(t, filepath.Join(cpuCgroupDir(t, st.Cgroup, "cpu"), "cpu.idle")); v != 1 || idled != 1 {
		t.Errorf("cpu.idle %d (SetIdle called %d times), want 1", v, idled)
	}
	if v := readInt(t, filepath.Join(cpuCgroupDir(t, st.Cgroup, "cpu"), "cpu.shares")); v > 3 {
		t.Errorf("cpu.shares %d, want <= 3", v)
	}
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(st.PID) + "/task")
	idle := 0
	for _, tk := range tasks {
		if schedPolicy(strconv.Itoa(st.PID), tk.Name()) == 5 {
			idle++
		}
	}
	if idle == 0 {
		t.Errorf("no QEMU thread runs SCHED_IDLE (%d threads)", len(tasks))
	}
	// Memory hard limit: 256 MiB + overhead.
	if v := readInt(t, filepath.Join(cpuCgroupDir(t, st.Cgroup, "memory"), "memory.limit_in_bytes")); v != int64(256+overheadMiB(256))<<20 {
		t.Errorf("memory limit %d", v)
	}

	// Throttle: the cap lands in the domain's cgroup.
	if err := b.SetCPULimit(ctx, s.Name, 0.25); err != nil {
		t.Fatal(err)
	}
	if v := readInt(t, filepath.Join(cpuCgroupDir(t, st.Cgroup, "cpu"), "cpu.cfs_quota_us")); v != 25000 {
		t.Errorf("cfs_quota_us %d, want 25000", v)
	}
	if st, _ := b.Status(ctx, s.Name); st.CPULimit != 0.25 {
		t.Errorf("status cap %g", st.CPULimit)
	}
	if err := b.SetCPULimit(ctx, s.Name, 0); err != nil {
		t.Fatal(err)
	}
	if v := readInt(t, filepath.Join(cpuCgroupDir(t, st.Cgroup, "cpu"), "cpu.cfs_quota_us")); v != -1 {
		t.Errorf("cfs_quota_us %d after removing the cap, want -1", v)
	}

	// Freeze: paused, and no CPU time accrues (vCPUs stopped).
	if err := b.Freeze(ctx, s.Name); err != nil {
		t.Fatal(err)
	}
	if err := b.Freeze(ctx, s.Name); err != nil {
		t.Fatalf("second freeze: %v", err)
	}
	st, _ = b.Status(ctx, s.Name)
	if st.State != guest.StatePaused {
		t.Fatalf("after freeze: %+v", st)
	}
	if err := b.Thaw(ctx, s.Name); err != nil {
		t.Fatal(err)
	}
	if err := b.Thaw(ctx, s.Name); err != nil {
		t.Fatalf("second thaw: %v", err)
	}
	if st, _ := b.Status(ctx, s.Name); st.State != guest.StateRunning {
		t.Fatalf("after thaw: %+v", st)
	}

	// Stop: gone, overlay discarded, base unchanged.
	if err := b.Stop(ctx, s.Name); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Status(ctx, s.Name); st.State != guest.StateAbsent {
		t.Fatalf("after stop: %+v", st)
	}
	if _, err := os.Stat(s.StateDir); !os.IsNotExist(err) {
		t.Errorf("state directory left behind: %v", err)
	}
	if sha(t, base) != before {
		t.Error("the base image changed")
	}
	if err := b.Stop(ctx, s.Name); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if err := b.Freeze(ctx, s.Name); !errors.Is(err, guest.ErrNotFound) {
		t.Errorf("freeze of an absent guest: %v", err)
	}
}

// TestCrashEvent: QEMU killed → a crashed lifecycle event from Watch, and the guest is gone.
func TestCrashEvent(t *testing.T) {
	img := testimage.Get(t)
	env := libvirtenv.Start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := New(Options{URI: env.URI, DomainType: "qemu", RunDir: t.TempDir()})
	events, err := b.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := guest.Spec{
		Name: "overtime-crash", VCPUs: 1, MemoryMB: 128,
		Kernel: img.Path(testimage.Kernel), Initrd: img.Path(testimage.Initrd), Cmdline: "console=ttyS0",
		BaseImage: img.Path(testimage.Root), StateDir: filepath.Join(t.TempDir(), "overtime-crash"),
		Network: model.NetNone,
	}
	if err := b.Start(ctx, s); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Status(ctx, s.Name)
	if st.PID == 0 {
		t.Fatalf("no QEMU pid: %+v", st)
	}
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Name == s.Name && ev.State == guest.StateCrashed {
				if st, _ := b.Status(ctx, s.Name); st.State != guest.StateAbsent {
					t.Fatalf("after crash: %+v", st)
				}
				return
			}
		case <-deadline:
			t.Fatal("no crash event within 30 s")
		}
	}
}

// Xen cannot run here: the backend says why instead of failing later.
func TestXenUnavailable(t *testing.T) {
	b := New(Options{Kind: model.BackendXen})
	err := b.Available(context.Background())
	if !guest.IsUnavailable(err) || !strings.Contains(err.Error(), "backend unavailable: xen: ") {
		t.Fatalf("Available: %v", err)
	}
	t.Log(err)
}
