package test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/node-agent/coursevm"
)

// A course VM sees the folder its session shares, and nothing else of the student's
// home: a Linux guest (the desktop image's kernel, a busybox initramfs) run by the real
// player under QEMU mounts the share by its tag (virtio-9p), reads what the student put
// there, writes a file the student finds after the VM is gone, and lists no file of the
// home around the folder.
func TestCourseVMSharesFolder(t *testing.T) {
	desk := imagetest.Get(t, "desktop")
	initrd := shareInitramfs(t, desk)

	home := t.TempDir()
	share := filepath.Join(home, "coursevm")
	if err := os.Mkdir(share, 0o700); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{
		filepath.Join(share, "from-student"):  "exercise 4, started at home\n",
		filepath.Join(home, "secret-in-home"): "the student's mail\n",
	} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The course VM's own disk never boots: QEMU boots the kernel it is given (ExtraArgs,
	// as a test's display is), the disk is the player's as always.
	dir := filepath.Join(t.TempDir(), "lab", "v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, vmspec.DiskFile+".raw"), bootsector.Disk("NOT-THIS\r\n", 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", filepath.Join(dir, vmspec.DiskFile+".raw"), filepath.Join(dir, vmspec.DiskFile)).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	os.Remove(filepath.Join(dir, vmspec.DiskFile+".raw"))
	fi, err := os.Stat(filepath.Join(dir, vmspec.DiskFile))
	if err != nil {
		t.Fatal(err)
	}
	vm := vmspec.VM{Name: "LAB", MemoryMB: 256, CPUs: 1, Network: vmspec.NetNone, DiskBytes: fi.Size(), DiskVirtualSize: 1 << 20}.WithDefaults()
	doc, _ := vm.Marshal()
	if err := os.WriteFile(filepath.Join(dir, vmspec.File), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := artefact.Write(dir, vmspec.DiskFile, vmspec.File); err != nil {
		t.Fatal(err)
	}

	serial := filepath.Join(t.TempDir(), "serial.log")
	p := coursevm.New(coursevm.Options{StateDir: t.TempDir(), Display: "none", SerialLog: serial, Session: true,
		SessionWait: time.Minute, Share: share, Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		ExtraArgs: []string{"-kernel", filepath.Join(desk.Dir, "vmlinuz"), "-initrd", initrd,
			"-append", "console=ttyS0 panic=-1 rdinit=/init"}})
	specs := make(chan *coursevm.Spec, 1)
	specs <- &coursevm.Spec{Mode: "lab", Image: "lab", Version: "v1", Dir: dir}
	// The session ends when the guest powers off; 5 minutes bound a guest that hangs
	// under TCG.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := p.Run(ctx, specs); err != nil {
		b, _ := os.ReadFile(serial)
		t.Fatalf("the course VM session: %v\nserial:\n%s", err, tail(string(b), 4000))
	}
	b, _ := os.ReadFile(serial)
	out := string(b)
	for _, want := range []string{"SHARE-MOUNTED", "READ exercise 4, started at home", "LIST from-student", "SHARE-DONE"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the guest's serial output has no %q:\n%s", want, tail(out, 4000))
		}
	}
	if strings.Contains(out, "secret-in-home") {
		t.Errorf("the guest saw a file of the home outside the shared folder:\n%s", tail(out, 4000))
	}
	got, err := os.ReadFile(filepath.Join(share, "from-vm"))
	if err != nil || string(got) != "written in the course VM\n" {
		t.Fatalf("the file the VM wrote, after it ended: %q %v", got, err)
	}
}

// shareInitramfs makes a busybox initramfs for desk's kernel that loads the virtio and 9p
// modules (from the image, with what modules.dep says they need), mounts the share tagged
// coursevm.ShareTag, reads, lists and writes it, and powers off.
func shareInitramfs(t *testing.T, desk *imagetest.Image) string {
	t.Helper()
	root, _, _ := desk.Root()
	ex := t.TempDir()
	// Only the module tree's index and the drivers needed come out of the squashfs.
	const mods = "usr/lib/modules/*/"
	args := []string{"-n", "-d", filepath.Join(ex, "r"), root, mods + "modules.dep"}
	for _, d := range []string{"kernel/drivers/virtio", "kernel/fs/9p", "kernel/net/9p", "kernel/fs/netfs", "kernel/fs/fscache"} {
		args = append(args, mods+d)
	}
	if out, err := exec.Command("unsquashfs", args...).CombinedOutput(); err != nil {
		t.Fatalf("unsquashfs: %v\n%s", err, out)
	}
	deps, _ := filepath.Glob(filepath.Join(ex, "r", mods+"modules.dep"))
	if len(deps) != 1 {
		t.Fatalf("modules.dep in the desktop image: %v", deps)
	}
	kdir := filepath.Dir(deps[0])
	dep := map[string][]string{}
	b, err := os.ReadFile(deps[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		mod, needs, ok := strings.Cut(l, ":")
		if ok {
			dep[mod] = strings.Fields(needs)
		}
	}
	// Load order: each module after what it needs (modules.dep lists a module's needs,
	// deepest last).
	var order []string
	seen := map[string]bool{}
	var add func(m string)
	add = func(m string) {
		if seen[m] {
			return
		}
		seen[m] = true
		for i := len(dep[m]) - 1; i >= 0; i-- {
			add(dep[m][i])
		}
		order = append(order, m)
	}
	for _, want := range []string{"virtio_pci.ko", "9pnet_virtio.ko", "9p.ko"} {
		found := ""
		for m := range dep {
			if filepath.Base(m) == want {
				found = m
			}
		}
		if found == "" {
			t.Fatalf("the desktop image's kernel has no module %s", want)
		}
		add(found)
	}

	ir := filepath.Join(ex, "initramfs")
	if err := os.MkdirAll(filepath.Join(ir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox (Debian package busybox-static): %v", err)
	}
	if err := os.WriteFile(filepath.Join(ir, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("#!/bin/busybox sh\n/bin/busybox --install -s /bin\nmkdir -p /proc /mnt\nmount -t proc proc /proc\n")
	for i, m := range order {
		name := fmt.Sprintf("%02d-%s", i, filepath.Base(m))
		c, err := os.ReadFile(filepath.Join(kdir, m))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ir, name), c, 0o644); err != nil {
			t.Fatal(err)
		}
		// A module the kernel has built in answers "File exists": harmless.
		fmt.Fprintf(&script, "insmod /%s 2>/dev/null\n", name)
	}
	fmt.Fprintf(&script, `mount -t 9p -o trans=virtio,version=9p2000.L %s /mnt && echo SHARE-MOUNTED
echo "READ $(cat /mnt/from-student)"
for f in /mnt/*; do echo "LIST ${f##*/}"; done
echo 'written in the course VM' >/mnt/from-vm
sync
umount /mnt
echo SHARE-DONE
poweroff -f
`, coursevm.ShareTag)
	if err := os.WriteFile(filepath.Join(ir, "init"), []byte(script.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(ex, "initramfs.cpio")
	cmd := exec.Command("sh", "-c", "find . | cpio -o -H newc --quiet > "+out)
	cmd.Dir = ir
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v %s", err, msg)
	}
	return out
}
