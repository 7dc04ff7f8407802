package container

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/cgroup/cgrouptest"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/guest/guesttest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// starterEnv makes the test binary a "starter": a process that starts one container
// with a Backend of its own, prints its PID and waits to be killed (the adoption test).
const starterEnv = "OT_CONTAINER_TEST_STARTER"

type starterConfig struct {
	Parent string     `json:"parent"`
	RunDir string     `json:"runDir"`
	Spec   guest.Spec `json:"spec"`
}

func TestMain(m *testing.M) {
	MaybeInit()
	if c := os.Getenv(starterEnv); c != "" {
		starter(c)
	}
	os.Exit(m.Run())
}

func starter(c string) {
	var sc starterConfig
	if err := json.Unmarshal([]byte(c), &sc); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	h, err := cgroup.Detect()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	parent, err := cgrouptest.ParentGroup(h, sc.Parent)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	b := New(Options{Hierarchy: h, Parent: parent, RunDir: sc.RunDir, Systemd: systemdMode()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Start(ctx, sc.Spec); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	st, err := b.Status(ctx, sc.Spec.Name)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("started", st.PID)
	select {} // until killed
}

// systemdMode: direct placement, unless OT_CONTAINER_TEST_SYSTEMD=1 asks for the systemd
// scope path (inside a VM with cgroup v2 and systemd).
func systemdMode() SystemdMode {
	if os.Getenv("OT_CONTAINER_TEST_SYSTEMD") == "1" {
		return SystemdAuto
	}
	return SystemdOff
}

// env is one test's world: a cgroup parent, a run directory, a base image.
type env struct {
	t      *testing.T
	h      *cgroup.Hierarchy
	parent *cgroup.Group
	run    string
	pname  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	parent := cgrouptest.TestParent(t, h)
	return &env{t: t, h: h, parent: parent, run: filepath.Join(t.TempDir(), "run"), pname: filepath.Base(parent.Path())}
}

func (e *env) backend(o Options) *Backend {
	o.Hierarchy = e.h
	o.Parent = e.parent
	o.RunDir = e.run
	o.Systemd = systemdMode()
	o.Logf = e.t.Logf
	return New(o)
}

func randName(prefix string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// spec is a guest of 128 MiB whose init is the shell script script.
func (e *env) spec(name, base, script string) guest.Spec {
	return guest.Spec{
		Name:      name,
		VCPUs:     1,
		MemoryMB:  128,
		BaseImage: base,
		StateDir:  filepath.Join(e.t.TempDir(), "state"),
		Network:   model.NetNone,
		CPUIdle:   true,
		Cmdline:   "/bin/sh -c '" + script + "'",
	}
}

// start starts s and stops it at cleanup (checking that Stop works).
func start(t *testing.T, b *Backend, s guest.Spec) guest.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Start(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(context.Background(), s.Name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	st, err := b.Status(ctx, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != guest.StateRunning || st.PID <= 0 {
		t.Fatalf("after Start: %+v", st)
	}
	return st
}

// buildBase makes a busybox root tree (and, when sqfs, a squashfs image of it) in dir.
func buildBase(t *testing.T, dir string, sqfs bool) (root, image string) {
	t.Helper()
	needs.Servers(t, "busybox and mksquashfs (Debian packages busybox-static, squashfs-tools)")
	root = filepath.Join(dir, "base")
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "tmp", "root", "run", "var"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/busybox", "--list-full").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Fields(string(out)) {
		p := filepath.Join(root, l)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/bin/busybox", p); err != nil {
			t.Fatal(err)
		}
	}
	for f, c := range map[string]string{
		"etc/motd":   "base image\n",
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\ntty:x:5:\n",
	} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !sqfs {
		return root, ""
	}
	image = filepath.Join(dir, "base.sqfs")
	if out, err := exec.Command("mksquashfs", root, image, "-noappend", "-no-progress", "-quiet", "-all-root").CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v: %s", err, out)
	}
	return root, image
}

// treeDigest hashes a tree: names, modes, link targets and contents (guesttest.Digest).
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	return guesttest.Digest(t, root)
}

func fileDigest(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// execIn runs a command inside the container of init pid (all its namespaces and root)
// and returns its output.
func execIn(t *testing.T, pid int, args ...string) (string, error) {
	t.Helper()
	a := append([]string{"-t", fmt.Sprint(pid), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", "--"}, args...)
	out, err := exec.Command("nsenter", a...).CombinedOutput()
	return string(out), err
}

func mustExecIn(t *testing.T, pid int, args ...string) string {
	t.Helper()
	out, err := execIn(t, pid, args...)
	if err != nil {
		t.Fatalf("in the container: %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

// eventually polls cond every 10 ms until it holds or d has passed.
func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	poll.Until(t, what, d, cond)
}

// hostMounts lists this process's mount points and sources mentioning any of subs.
func hostMounts(t *testing.T, subs ...string) []string {
	t.Helper()
	return mountsMentioning(t, "/proc/self/mountinfo", subs...)
}

func mountsMentioning(t *testing.T, file string, subs ...string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, s := range subs {
			if strings.Contains(sc.Text(), s) {
				out = append(out, sc.Text())
				break
			}
		}
	}
	return out
}

// containerMounts parses /proc/PID/mountinfo: mount point -> "fstype options superoptions".
func containerMounts(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		sep := 0
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		out[cgroup.UnescapeMountinfo(f[4])] = f[sep+1] + " " + f[5] + " " + f[sep+3]
	}
	return out
}

func procStatus(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status: no %s", pid, key)
	return ""
}

// statField is field n (1-based, as in proc(5)) of /proc/PID/stat.
func statField(t *testing.T, pid, n int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[n-3]
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkGone verifies that nothing of guest name is left: no record, state directory,
// cgroup directory (in any controller) or mount.
func checkGone(t *testing.T, b *Backend, s guest.Spec) {
	t.Helper()
	st, err := b.Status(context.Background(), s.Name)
	if err != nil || st.State != guest.StateAbsent {
		t.Fatalf("after Stop: %+v %v", st, err)
	}
	g := b.group(s.Name)
	for k := range g.Paths() {
		if d := g.Dir(k); !gone(d) {
			t.Errorf("cgroup directory %s left", d)
		}
	}
	for _, p := range []string{s.StateDir, b.recordPath(s.Name), b.exitPath(s.Name)} {
		if !gone(p) {
			t.Errorf("%s left", p)
		}
	}
	if m := hostMounts(t, s.StateDir, s.BaseImage); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
}
