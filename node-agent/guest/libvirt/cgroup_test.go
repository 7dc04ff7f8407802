package libvirt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
)

// fakeUnified is a cgroup v2 hierarchy "mounted" at a temporary directory (from mountinfo
// text: nothing is mounted), so that group files are plain files.
func fakeUnified(t *testing.T) (*cgroup.Hierarchy, string) {
	t.Helper()
	dir := t.TempDir()
	h, err := cgroup.ParseMountinfo(strings.NewReader("30 24 0:26 / " + dir + " rw,nosuid shared:4 - cgroup2 cgroup2 rw\n"))
	if err != nil {
		t.Fatal(err)
	}
	return h, dir
}

const domain = `/machine.slice/machine-qemu\x2d1\x2dovertime\x2dpc.scope`

func TestDomainGroup(t *testing.T) {
	h, _ := fakeUnified(t)
	for _, tc := range []struct{ qemu, want string }{
		{domain + "/libvirt/emulator", domain + "/libvirt"}, // libvirt >= 7 under systemd
		{domain + "/emulator", domain},                      // older libvirt
		{domain, domain},                                    // no per-thread groups
	} {
		if got := DomainGroup(h.Group(tc.qemu)).Path(); got != tc.want {
			t.Errorf("DomainGroup(%s) = %s, want %s", tc.qemu, got, tc.want)
		}
	}
}

// TestDomainGroupIdle: the idle class lands on the domain's group, not on emulator's.
func TestDomainGroupIdle(t *testing.T) {
	h, root := fakeUnified(t)
	for _, g := range []string{domain, domain + "/emulator"} {
		d := filepath.Join(root, filepath.FromSlash(g))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cpu.idle"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := DomainGroup(h.Group(domain + "/emulator")).SetIdle(true); err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]string{domain: "1", domain + "/emulator": "0"} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(g), "cpu.idle"))
		if got := strings.TrimSpace(string(b)); err != nil || got != want {
			t.Errorf("%s/cpu.idle = %q (%v), want %q", g, got, err, want)
		}
	}
}

func TestIdleDomainCgroupWithoutCgroups(t *testing.T) {
	if IdleDomainCgroup(nil) != nil {
		t.Error("IdleDomainCgroup(nil) is not nil: the backend would call it without cgroups")
	}
}
