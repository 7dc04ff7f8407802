package testimage

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBuild: the image has what the boot tests rely on: the manifest describes
// root.squashfs truthfully, the initrd carries this repository's boot script and the virtio
// drivers, the root has the test init, and a second Build is the cached one.
func TestBuild(t *testing.T) {
	im := Get(t)
	t.Logf("test image %s: kernel %s (%s)", im.Dir, im.KernelVersion, im.KernelPackage)

	data, err := os.ReadFile(im.Path(Root))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != im.RootSHA256 {
		t.Errorf("manifest ROOT_SHA256 %s, file has %s", im.RootSHA256, got)
	}
	if int64(len(data)) != im.RootSize {
		t.Errorf("manifest ROOT_SIZE %d, file has %d bytes", im.RootSize, len(data))
	}
	if string(data[:4]) != "hsqs" {
		t.Errorf("root.squashfs starts with %q, not the squashfs magic", data[:4])
	}

	out, err := exec.Command("lsinitramfs", im.Path(Initrd)).Output()
	if err != nil {
		t.Fatalf("lsinitramfs: %v", err)
	}
	list := string(out)
	for _, want := range []string{"scripts/overtime", "scripts/overtime.d/30-nfs", "/virtio_net.ko", "/virtio_pci.ko", "/squashfs.ko", "/overlay.ko", "usr/sbin/mount.nfs"} {
		if !strings.Contains(list, want) {
			t.Errorf("initrd lacks %s", want)
		}
	}
	// The initrd's boot script is this repository's.
	mine, err := os.ReadFile(filepath.Join(RepoRoot(), "boot", "initramfs", "scripts", "overtime"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("unmkinitramfs", im.Path(Initrd), dir).CombinedOutput(); err != nil {
		t.Fatalf("unmkinitramfs: %v: %s", err, out)
	}
	theirs, err := os.ReadFile(filepath.Join(dir, "scripts", "overtime"))
	if err != nil {
		t.Fatal(err)
	}
	if string(theirs) != string(mine) {
		t.Error("the initrd's scripts/overtime differs from boot/initramfs/scripts/overtime")
	}

	if out, err := exec.Command("unsquashfs", "-cat", im.Path(Root), "sbin/init").CombinedOutput(); err != nil || !strings.Contains(string(out), "overtime-test: up") {
		t.Errorf("root.squashfs has no test init: %v: %s", err, out)
	}

	// The root's kernel modules, with the load order the init reads.
	ls, err := exec.Command("unsquashfs", "-l", im.Path(Root)).CombinedOutput()
	if err != nil {
		t.Fatalf("unsquashfs -l: %v: %s", err, ls)
	}
	mdir := "/lib/modules/" + im.KernelVersion + "/"
	load, err := exec.Command("unsquashfs", "-cat", im.Path(Root), mdir+"overtime.load").Output()
	if err != nil {
		t.Fatalf("root.squashfs has no %sovertime.load: %v", mdir, err)
	}
	for _, want := range []string{"evdev", "overlay"} {
		found := false
		for _, m := range im.RootModules {
			found = found || m == want
		}
		if !found {
			t.Errorf("manifest ROOT_MODULES %v lacks %s", im.RootModules, want)
		}
		if !regexp.MustCompile(`(?m)/` + want + `\.ko$`).Match(load) {
			t.Errorf("overtime.load lacks %s.ko:\n%s", want, load)
		}
	}
	for _, f := range strings.Fields(string(load)) {
		if !strings.Contains(string(ls), mdir+f+"\n") {
			t.Errorf("root.squashfs lacks %s%s", mdir, f)
		}
	}
	if !strings.Contains(string(ls), mdir+"modules.dep\n") {
		t.Errorf("root.squashfs lacks %smodules.dep", mdir)
	}
	if init, err := exec.Command("unsquashfs", "-cat", im.Path(Root), "sbin/init").Output(); err != nil || !strings.Contains(string(init), "overtime.load") {
		t.Errorf("the test init does not load the root's modules (%v)", err)
	}

	again, err := Build()
	if err != nil || again.Dir != im.Dir {
		t.Errorf("second Build: %v, %v (want the cached %s)", again, err, im.Dir)
	}
}
