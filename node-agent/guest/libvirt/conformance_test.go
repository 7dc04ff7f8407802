package libvirt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/libvirtenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/guest/guesttest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestConformance runs the guest backends' conformance suite on QEMU through a private
// libvirtd (TCG here): the test image booted from its kernel, each Backend instance a new
// connection to the same daemon (an agent restarted).
func TestConformance(t *testing.T) {
	img := testimage.Get(t)
	env := libvirtenv.Start(t, nil)
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	guesttest.Run(t, guesttest.Harness{
		Backend: func(*testing.T) guest.Backend {
			return New(Options{URI: env.URI, DomainType: "qemu", SetIdle: IdleDomainCgroup(h), RunDir: runDir})
		},
		Spec: func(t *testing.T, name string) guest.Spec {
			return guest.Spec{
				Name: name, VCPUs: 1, MemoryMB: 256,
				Kernel: img.Path(testimage.Kernel), Initrd: img.Path(testimage.Initrd),
				Cmdline:   "root=/dev/vda rootfstype=squashfs ro console=ttyS0 panic=-1",
				BaseImage: img.Path(testimage.Root), BaseFormat: "squashfs",
				StateDir: filepath.Join(t.TempDir(), name),
				Network:  model.NetNone, CPUIdle: true,
			}
		},
		Booted: func(t *testing.T, s guest.Spec) {
			poll.Until(t, "the guest booted (console)", 3*time.Minute, func() bool {
				b, _ := os.ReadFile(filepath.Join(s.StateDir, consoleLog))
				return strings.Contains(string(b), "overtime-test: root")
			})
		},
		Leftovers: func(s guest.Spec) []string {
			return []string{New(Options{RunDir: runDir}).stateLink(s.Name)}
		},
		// QEMU killed: libvirt's lifecycle event "Stopped Failed".
		Caps: guesttest.Caps{Crash: guesttest.CrashInEvent, CrashReason: "Failed"},
	})
}

// TestConformanceXen: Xen cannot run here (no hypervisor under this machine), and through
// the suite's one entry every step of the Xen backend says so instead of failing later
// with a libvirt connection error or doing nothing.
func TestConformanceXen(t *testing.T) {
	if _, err := os.Stat("/proc/xen"); err == nil {
		t.Log("this machine runs on Xen: the unavailable contract does not apply here")
		return
	}
	runDir := t.TempDir()
	guesttest.Run(t, guesttest.Harness{
		Backend: func(*testing.T) guest.Backend { return New(Options{Kind: model.BackendXen, RunDir: runDir}) },
		Spec: func(t *testing.T, name string) guest.Spec {
			return guest.Spec{
				Name: name, VCPUs: 1, MemoryMB: 256, BaseImage: "/srv/overtime/images/compute/3/root.img",
				BaseFormat: "raw", StateDir: filepath.Join(t.TempDir(), name), Network: model.NetNone,
			}
		},
		Caps: guesttest.Caps{Unavailable: true},
	})
}
