package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/paths"
)

// guestChecks is the guest's init for TestIsolation: every probe runs inside the guest,
// under its user namespace, seccomp filter and capabilities, and prints what it found.
// A line starting with LEAK is a failure; the others are parsed by the test.
const guestChecks = `
for p in $MARKERS; do
	[ -e "$p" ] && echo "LEAK visible $p"
	cat "$p" >/dev/null 2>&1 && echo "LEAK readable $p"
done
ls -a /home 2>/dev/null | grep -q overtime-test && echo "LEAK the host /home listed"
for d in /dev/sda /dev/vda /dev/nvme0n1 /dev/kvm /dev/mem /dev/kmem /dev/port /dev/input /dev/loop-control /dev/fuse /dev/dri /dev/snd /dev/net/tun; do
	[ -e "$d" ] && echo "LEAK device $d"
done
mknod /tmp/blk b 8 0 2>/dev/null && echo "LEAK mknod block device"
mknod /tmp/mem c 1 1 2>/dev/null && echo "LEAK mknod /dev/mem"
grep -E "^(Seccomp|CapEff|CapBnd|CapPrm|NoNewPrivs):" /proc/self/status
echo "UIDMAP $(cat /proc/self/uid_map)"
echo "UNSHARE $(unshare -U true 2>&1 && echo allowed)"
echo "MOUNT $(mount -t tmpfs none /mnt 2>&1 && echo allowed)"
echo "NSENTER $(nsenter -t 1 -U true 2>&1 && echo allowed)"
echo "ETCOWNER $(stat -c %u:%g /etc)"
echo "WRITE $(echo x > /etc/written-by-guest && cat /etc/written-by-guest)"
echo "SECRET $(cat /run/secrets/munge.key)"
echo "SECRETWRITE $(echo x 2>&1 > /run/secrets/munge.key && echo allowed)"
echo CHECKS-DONE
while :; do sleep 1; done`

// TestIsolation: from inside a running guest, the desktop user's /home, the agent's
// credential and the host's devices are out of reach; seccomp is on and refuses
// namespace and mount calls; the guest's root is an unprivileged host uid with the
// reduced capability set.
//
// Both ways of showing the read-only base to the guest's root are checked: an idmapped
// mount (Linux 6.2+ for squashfs) and, for older kernels, ownership shifted in the
// overlay (shiftOwnership).
func TestIsolation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noIdmap bool
	}{{"idmapped", false}, {"shifted", true}} {
		t.Run(tc.name, func(t *testing.T) { testIsolation(t, tc.noIdmap) })
	}
}

func testIsolation(t *testing.T, noIdmap bool) {
	e := newEnv(t)
	root, image := buildBase(t, t.TempDir(), true)

	// Markers: a real directory in the host's /home, one in a temporary directory, the
	// credential at a temporary path and at its real default path (if no agent uses it).
	home, err := os.MkdirTemp("/home", "overtime-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	markers := []string{filepath.Join(home, "thesis.tex"), filepath.Join(t.TempDir(), "desktop-user-file"), filepath.Join(t.TempDir(), "agent.token")}
	if gone(paths.AgentToken) {
		if err := os.MkdirAll(filepath.Dir(paths.AgentToken), 0o755); err != nil {
			t.Fatal(err)
		}
		markers = append(markers, paths.AgentToken)
		t.Cleanup(func() { os.Remove(paths.AgentToken) })
	} else {
		t.Logf("%s exists (an agent here): checking it without replacing it", paths.AgentToken)
	}
	for _, m := range markers {
		if gone(m) {
			if err := os.WriteFile(m, []byte("secret\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	markers = append(markers, paths.AgentToken, home, "/run/overtime")

	b := e.backend(Options{NoIdmap: noIdmap})
	name := randName("ot-iso")
	s := e.spec(name, image, "MARKERS=\""+strings.Join(markers, " ")+"\"; "+guestChecks)
	s.Secrets = map[string][]byte{"munge.key": []byte("the-munge-key")}
	st := start(t, b, s)
	console := filepath.Join(s.StateDir, "console.log")
	var out string
	eventually(t, "the guest's checks", 30*time.Second, func() bool {
		c, _ := os.ReadFile(console)
		out = string(c)
		return strings.Contains(out, "CHECKS-DONE")
	})
	t.Logf("guest:\n%s", out)
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "LEAK") {
			t.Errorf("from inside the guest: %s", l)
		}
		if k, v, ok := strings.Cut(l, ":"); ok && !strings.Contains(k, " ") {
			got[k] = strings.TrimSpace(v)
		} else if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = strings.TrimSpace(v)
		}
	}
	// (d) seccomp filter mode, and denied calls fail with EPERM. A user namespace's root
	// may unshare a nested user namespace without any capability: only the filter stops it.
	if got["Seccomp"] != "2" {
		t.Errorf("Seccomp: %q, want 2 (filter)", got["Seccomp"])
	}
	for _, k := range []string{"UNSHARE", "MOUNT", "NSENTER"} {
		if v := strings.ToLower(got[k]); strings.Contains(v, "allowed") || !(strings.Contains(v, "not permitted") || strings.Contains(v, "permission denied")) {
			t.Errorf("%s inside the guest: %q, want EPERM", k, got[k])
		}
	}
	// (e) the guest's root is UIDBase on the host.
	if f := strings.Fields(got["UIDMAP"]); len(f) != 3 || f[0] != "0" || f[1] != strconv.Itoa(DefaultUIDBase) || f[2] != "65536" {
		t.Errorf("uid_map inside: %q, want 0 %d 65536", got["UIDMAP"], DefaultUIDBase)
	}
	if uid := procStatus(t, st.PID, "Uid"); strings.Fields(uid)[0] != strconv.Itoa(DefaultUIDBase) {
		t.Errorf("the guest's init runs as host uid %s, want %d", uid, DefaultUIDBase)
	}
	// The secrets the agent handed over: readable by the guest's root, read-only.
	if got["SECRET"] != "the-munge-key" || strings.Contains(got["SECRETWRITE"], "allowed") || !strings.Contains(strings.ToLower(got["SECRETWRITE"]), "read-only") {
		t.Errorf("secrets inside the guest: read %q, write %q; want the key, and EROFS", got["SECRET"], got["SECRETWRITE"])
	}
	// (f) the reduced capability set, and no way to gain more.
	want := fmt.Sprintf("%016x", capMask())
	for _, k := range []string{"CapEff", "CapBnd", "CapPrm"} {
		if got[k] != want {
			t.Errorf("%s inside: %q, want %s", k, got[k], want)
		}
	}
	if got["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs inside: %q", got["NoNewPrivs"])
	}
	// The image's root-owned tree is the guest root's own, and writable (into the
	// overlay, never the base).
	if got["ETCOWNER"] != "0:0" || got["WRITE"] != "x" {
		t.Errorf("inside the guest: /etc owned by %q, writing to it gave %q; want 0:0 and x", got["ETCOWNER"], got["WRITE"])
	}
	if err := b.Stop(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc", "written-by-guest")); err == nil {
		t.Error("the guest's write reached the base image's tree")
	}
}
