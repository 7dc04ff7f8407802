package test

// The compute guest's VM form (issue 29, QEMU guests), as far as it goes: the real
// compute-guest image booted by the libvirt backend the way the node agent boots it — the
// image's own kernel and initrd, its root from its disk under the initramfs's tmpfs
// overlay (overtime.root=disk:), guest-init as init — reads its host name, the agent's
// URL, its size and the munge key from the configuration disk the backend writes, and
// starts munged with that key and slurmd as the host's node. No controller here: the
// guest's Slurm joining a cluster from a VM is not tested yet.

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/libvirtenv"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/guest/libvirt"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestComputeGuestVM(t *testing.T) {
	img := imagetest.Get(t, "compute-guest")
	env := libvirtenv.Start(t, nil)
	ctx := context.Background()
	b := libvirt.New(libvirt.Options{URI: env.URI, DomainType: "qemu", RunDir: t.TempDir()})
	if err := b.Available(ctx); err != nil {
		t.Fatal(err)
	}
	root, _, _ := img.Root()
	key := []byte(strings.Repeat("0123456789abcdef", 64)) // munged wants 32 bytes at least
	s := guest.Spec{
		Name: "overtime-vm1", VCPUs: 1, MemoryMB: 512,
		Kernel: filepath.Join(img.Dir, model.ImageKernel), Initrd: filepath.Join(img.Dir, model.ImageInitrd),
		// As the agent renders it (node-agent/agent TestVMGuestCommandLine), with the
		// mode's kernelArgs naming guest-init.
		Cmdline:   "boot=overtime overtime.root=disk:/dev/vda overtime.kind=compute overtime.host=vm1 console=ttyS0 panic=30 overtime.guest=vm1 init=/usr/lib/overtime/guest-init",
		BaseImage: root, BaseFormat: "squashfs",
		StateDir: filepath.Join(t.TempDir(), "overtime-vm1"),
		Network:  model.NetNone, CPUIdle: true,
		Host: "vm1", AgentURL: "http://10.9.9.9:9101",
		Secrets: map[string][]byte{"munge.key": key},
	}
	if err := b.Start(ctx, s); err != nil {
		t.Fatalf("start: %v\n%s", err, env.Log())
	}
	t.Cleanup(func() { _ = b.Stop(context.Background(), s.Name) })
	console := filepath.Join(s.StateDir, "console.log")
	read := func() string { c, _ := os.ReadFile(console); return string(c) }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console:\n%s", tail(read(), 6000))
		}
	})
	slurmdLine := regexp.MustCompile(`guest-init: vm1: 1 CPUs, \d+ MB, controller from DNS SRV, agent http://10\.9\.9\.9:9101`)
	bootlab.Eventually(t, "guest-init starting slurmd as vm1", 240*time.Second, func() bool {
		return slurmdLine.MatchString(read()) || strings.Contains(read(), "guest-init: ERROR")
	})
	c := read()
	if strings.Contains(c, "guest-init: ERROR") {
		t.Fatalf("guest-init failed")
	}
	for _, want := range []string{
		"overtime: image disk:/dev/vda:", // the initramfs took the image from its disk
		"overtime: root: overlay",        // under a tmpfs overlay
		"guest-init: configuration from /dev/vdb",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("console lacks %q", want)
		}
	}
	// The key reached munged (it refuses to start without one; guest-init dies then).
	if strings.Contains(c, "no munge key") || strings.Contains(c, "munged did not start") {
		t.Error("munged did not get the key from the configuration disk")
	}
}
