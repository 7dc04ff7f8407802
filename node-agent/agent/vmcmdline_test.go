package agent

import (
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// A VM guest boots its image's kernel with Overtime's initramfs taking the image from its
// disk under a tmpfs overlay (boot/initramfs overtime.root=disk:, TestBootDisk): a bare
// squashfs root is read-only, which neither systemd nor guest-init survives.
func TestVMGuestCommandLine(t *testing.T) {
	for _, c := range []struct {
		backend model.GuestBackend
		want    string
	}{
		{model.BackendQEMU, "boot=overtime overtime.root=disk:/dev/vda overtime.kind=compute overtime.host=pc1 console=ttyS0 panic=30 overtime.guest=pc1 init=/usr/lib/overtime/guest-init"},
		{model.BackendXen, "boot=overtime overtime.root=disk:/dev/xvda overtime.kind=compute overtime.host=pc1 console=hvc0 panic=30 overtime.guest=pc1 init=/usr/lib/overtime/guest-init"},
	} {
		g := &guestLifecycle{imageRoot: "/srv/images", stateDir: "/run/overtime", hostCPUs: 2, hostMemMB: 4096}
		cfg := &wire.AgentConfig{Host: "pc1", MAC: "52:54:00:0c:00:01", Policy: model.Policy{GuestMemory: 50},
			Guest: &wire.AgentGuest{Name: "overtime-pc1", ImageKind: model.ImageCompute,
				Resolved: model.ImageVersion{Path: "compute/v1"}}}
		cfg.Guest.Backend, cfg.Guest.KernelArgs, cfg.Guest.Network = c.backend, "init=/usr/lib/overtime/guest-init", model.NetNone
		s, err := g.Spec(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.Cmdline != c.want {
			t.Errorf("%s: command line\n %q\nwant\n %q", c.backend, s.Cmdline, c.want)
		}
		if s.Kernel != "/srv/images/compute/v1/vmlinuz" || s.Initrd != "/srv/images/compute/v1/initrd.img" ||
			s.BaseImage != "/srv/images/compute/v1/root.squashfs" || !strings.HasSuffix(s.StateDir, "/overtime-pc1") {
			t.Errorf("%s: kernel %s initrd %s base %s state %s", c.backend, s.Kernel, s.Initrd, s.BaseImage, s.StateDir)
		}
	}
}
