package initramfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/nfsenv"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

// Boot tests: the test image's kernel and initrd (made by mkinitramfs from this directory)
// booted directly by QEMU (-kernel/-initrd/-append, as iPXE and lpxelinux would pass them)
// in a network namespace with dnsmasq (DHCP, DNS) and nfs-ganesha (NFSv3 and v4, read-only,
// root squash) on the bridge. The whole PXE chain is tested elsewhere; these tests prove
// the initramfs.
//
// Under TCG a boot to the test image's shell takes 10-30 s; the tests run in parallel.

const (
	subnet     = "10.77.0"
	serverIP   = subnet + ".1"
	serverName = "nfs.overtime.test"
	// bootWithin bounds one boot to the test init (TCG, two VMs sharing two cores).
	bootWithin = 180 * time.Second
	cmdWithin  = 30 * time.Second
)

type bootEnv struct {
	img    *testimage.Image
	net    *vmtest.Net
	nfs    *nfsenv.Server
	export string
}

// newBootEnv makes the network, the export directory and the NFS server (started when
// start is true).
func newBootEnv(t *testing.T, start bool) *bootEnv {
	t.Helper()
	img := testimage.Get(t)
	n := vmtest.NewNet(t, vmtest.NetConfig{Subnet: subnet, DHCP: true, Domain: "overtime.test",
		Hosts: map[string]string{serverName: serverIP}})
	export := filepath.Join(t.TempDir(), "images", "test", "v1")
	if err := os.MkdirAll(export, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := nfsenv.New(nfsenv.Config{NS: n.NS, Addr: serverIP, Export: export, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ganesha log:\n%s", srv.Log())
		}
		srv.Stop()
	})
	if start {
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return &bootEnv{img: img, net: n, nfs: srv, export: export}
}

// addImage copies the test image's root.squashfs into the export as name (world-readable:
// the export squashes root).
func (e *bootEnv) addImage(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(e.img.Path(testimage.Root))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(e.export, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// cmdline is the kernel command line the site manager renders (render.KernelCommandLine)
// for root, plus a serial console and extra.
func (e *bootEnv) cmdline(root string, extra ...string) string {
	args := []string{"console=ttyS0,115200", "ip=dhcp", "boot=overtime", "overtime.root=nfs:" + root,
		"overtime.sha256=" + e.img.RootSHA256, "overtime.size=" + fmt.Sprint(e.img.RootSize),
		"overtime.mode=cluster", "overtime.kind=cluster", "overtime.host=pc-a04",
		"overtime.url=http://" + serverIP + ":8080/overtime"}
	return strings.Join(append(args, extra...), " ")
}

func (e *bootEnv) boot(t *testing.T, name, cmdline string) *vmtest.VM {
	t.Helper()
	cfg := e.net.VMConfig(t, name)
	cfg.Kernel = e.img.Path(testimage.Kernel)
	cfg.Initrd = e.img.Path(testimage.Initrd)
	cfg.Append = cmdline
	t.Logf("kernel command line: %s", cmdline)
	return vmtest.StartT(t, cfg)
}

func expect(t *testing.T, vm *vmtest.VM, re string, within time.Duration) []string {
	t.Helper()
	m, err := vm.Console.Expect(regexp.MustCompile(re), within)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// expectUp waits for the test init's first line, failing at once on a line that means
// the boot went wrong instead.
func expectUp(t *testing.T, vm *vmtest.VM) {
	t.Helper()
	m := expect(t, vm, `(overtime-test: up mode=cluster host=pc-a04\r?\n|overtime: ERROR: [^\r\n]*\r?\n|overtime: WARNING: NFS server [^\r\n]*\r?\n|Kernel panic[^\r\n]*\r?\n|\(initramfs\) )`, bootWithin)
	if !strings.HasPrefix(m[1], "overtime-test: up") {
		t.Fatalf("boot failed: %q; console:\n%s", m[1], vm.Console.Tail(3000))
	}
}

func run(t *testing.T, vm *vmtest.VM, cmd string) string {
	t.Helper()
	out, err := vm.Console.Run(cmd, cmdWithin)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mounts parses /proc/mounts of the guest into mount point -> "source type options".
func mounts(t *testing.T, vm *vmtest.VM) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, l := range strings.Split(run(t, vm, "cat /proc/mounts"), "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 {
			m[f[1]] = f[:4] // source mountpoint type options; a later mount on the same point wins
		}
	}
	return m
}

func hasOpt(opts, opt string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// TestBootSquashfs (a): the image boots with the parameters of the command line, the root
// is an overlay of a tmpfs over the squashfs loop-mounted from a read-only NFSv3 mount, the
// root is writable, boot.env tells userspace what was booted, and a reboot is pristine.
// The server is given by name (DNS from DHCP).
func TestBootSquashfs(t *testing.T) {
	t.Parallel()
	e := newBootEnv(t, true)
	e.addImage(t, "root.squashfs")
	root := serverName + ":" + e.export + "/root.squashfs"
	vm := e.boot(t, "squashfs", e.cmdline(root))

	expect(t, vm, `overtime: mode=cluster kind=cluster host=pc-a04 root=nfs:`+regexp.QuoteMeta(root)+` verify=size`, bootWithin)
	expectUp(t, vm)
	if !regexp.MustCompile(`overtime: image ` + regexp.QuoteMeta(root) + `: \d+ bytes, squashfs, size as expected`).MatchString(vm.Console.Output()) {
		t.Error("the console does not report the checked image")
	}

	mnt := mounts(t, vm)
	if r := mnt["/"]; r == nil || r[2] != "overlay" || !strings.Contains(r[3], "lowerdir=/run/overtime/lower") ||
		!strings.Contains(r[3], "upperdir=/run/overtime/rw/upper") || !hasOpt(r[3], "rw") {
		t.Errorf("/ is not the overlay over /run/overtime/lower: %v", r)
	}
	if l := mnt["/run/overtime/lower"]; l == nil || l[2] != "squashfs" || !hasOpt(l[3], "ro") || !strings.HasPrefix(l[0], "/dev/loop") {
		t.Errorf("/run/overtime/lower is not a read-only squashfs on a loop device: %v", l)
	}
	if n := mnt["/run/overtime/nfs"]; n == nil || n[2] != "nfs" || !hasOpt(n[3], "ro") || !hasOpt(n[3], "vers=3") ||
		n[0] != serverName+":"+e.export {
		t.Errorf("/run/overtime/nfs is not the read-only NFSv3 mount of %s:%s: %v", serverName, e.export, n)
	}
	if w := mnt["/run/overtime/rw"]; w == nil || w[2] != "tmpfs" {
		t.Errorf("/run/overtime/rw is not a tmpfs: %v", w)
	}
	if got := strings.TrimSpace(run(t, vm, "cat /sys/block/loop0/loop/backing_file")); got != "/run/overtime/nfs/root.squashfs" {
		t.Errorf("loop0 is backed by %q, want /run/overtime/nfs/root.squashfs", got)
	}
	if !strings.Contains(run(t, vm, "cat /etc/overtime-test-image"), e.img.Key) {
		t.Error("/etc/overtime-test-image is not the one of the test image")
	}
	if got := strings.TrimSpace(run(t, vm, "hostname")); got != "pc-a04" {
		t.Errorf("hostname %q, want pc-a04 (overtime.host)", got)
	}

	env := run(t, vm, "cat /run/overtime/boot.env")
	for _, want := range []string{
		"OVERTIME_MODE='cluster'", "OVERTIME_KIND='cluster'", "OVERTIME_HOST='pc-a04'",
		"OVERTIME_URL='http://" + serverIP + ":8080/overtime'", "OVERTIME_ROOT='nfs:" + root + "'",
		"OVERTIME_ROOT_TYPE='squashfs'", "OVERTIME_NFS_VERS='3'", "OVERTIME_SHA256='" + e.img.RootSHA256 + "'",
		"OVERTIME_MAC='" + vm.MAC + "'",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("boot.env lacks %s:\n%s", want, env)
		}
	}
	if !regexp.MustCompile(`OVERTIME_IP='` + regexp.QuoteMeta(subnet) + `\.1\d\d'`).MatchString(env) {
		t.Errorf("boot.env lacks the DHCP lease (%s.100-199) as OVERTIME_IP:\n%s", subnet, env)
	}
	// The file is shell: sourcing it gives the values back.
	if got := strings.TrimSpace(run(t, vm, `(. /run/overtime/boot.env && echo "$OVERTIME_MODE/$OVERTIME_HOST/$OVERTIME_LOWER")`)); got != "cluster/pc-a04//run/overtime/lower" {
		t.Errorf("sourcing boot.env gives %q", got)
	}

	// Writes go to the tmpfs; the layers below are read-only.
	run(t, vm, "echo written-before-reboot > /marker && grep -q written-before-reboot /marker")
	run(t, vm, "echo changed >> /etc/overtime-test-image")
	if _, err := vm.Console.Run("touch /run/overtime/lower/x", cmdWithin); err == nil {
		t.Error("writing to the squashfs lower layer succeeded")
	}
	if _, err := vm.Console.Run("touch /run/overtime/nfs/x", cmdWithin); err == nil {
		t.Error("writing to the NFS mount succeeded")
	}
	if _, err := os.Stat(filepath.Join(e.export, "x")); err == nil {
		t.Error("a file appeared in the export")
	}

	// Reboot: the same image, pristine again.
	if err := vm.Console.Send("reboot -f"); err != nil {
		t.Fatal(err)
	}
	expectUp(t, vm)
	if out, err := vm.Console.Run("test -e /marker", cmdWithin); err == nil {
		t.Errorf("/marker survived the reboot: %s", out)
	}
	if strings.Contains(run(t, vm, "cat /etc/overtime-test-image"), "changed") {
		t.Error("a change to an image file survived the reboot")
	}
}

// unpackRoot unpacks the test image's squashfs into dir (a plain directory root).
func (e *bootEnv) unpackRoot(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("unsquashfs", "-quiet", "-no-progress", "-d", dir, e.img.Path(testimage.Root)).CombinedOutput(); err != nil {
		t.Fatalf("unsquashfs: %v: %s", err, out)
	}
}

// TestBootDirectory (b): a plain NFS directory is used directly as the read-only lower
// layer. Two ways to get there: a directory inside the export, over NFSv4.1
// (overtime.nfs_opts), and a directory that is itself the export while its parent is not
// exported (over NFSv3, where the server refuses the parent and the path itself is mounted).
func TestBootDirectory(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		nfsOpts  string
		vers     string
		exported bool // the directory is the export itself
	}{
		{name: "in-export-v4", nfsOpts: "vers=4.1", vers: "4.1"},
		{name: "is-export-v3", vers: "3", exported: true},
	} {
		c := c
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newBootEnv(t, !c.exported)
			dir := filepath.Join(e.export, "rootdir")
			if c.exported {
				// Serve the directory itself, not its parent.
				e.unpackRoot(t, dir)
				srv, err := nfsenv.New(nfsenv.Config{NS: e.net.NS, Addr: serverIP, Export: dir, Dir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				if err := srv.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(srv.Stop)
			} else {
				e.unpackRoot(t, dir)
			}
			root := serverIP + ":" + dir
			extra := []string{}
			if c.nfsOpts != "" {
				extra = append(extra, "overtime.nfs_opts="+c.nfsOpts)
			}
			vm := e.boot(t, c.name, e.cmdline(root, extra...))
			expectUp(t, vm)
			out := vm.Console.Output()
			if !strings.Contains(out, "overtime: lower layer: dir "+root+" at /run/overtime/lower (read-only)") {
				t.Error("the console does not report a directory lower layer")
			}
			if !strings.Contains(out, "overtime: WARNING: overtime.sha256/overtime.size do not apply to a directory root") {
				t.Error("no warning that sha256/size are not checked for a directory")
			}
			mnt := mounts(t, vm)
			wantSrc := serverIP + ":" + e.export
			if c.exported {
				wantSrc = serverIP + ":" + dir
			}
			n := mnt["/run/overtime/nfs"]
			if n == nil || !strings.HasPrefix(n[2], "nfs") || !hasOpt(n[3], "ro") || !hasOpt(n[3], "vers="+c.vers) || n[0] != wantSrc {
				t.Errorf("/run/overtime/nfs is not the read-only NFS %s mount of %s: %v", c.vers, wantSrc, n)
			}
			if l := mnt["/run/overtime/lower"]; l == nil || !strings.HasPrefix(l[2], "nfs") {
				t.Errorf("/run/overtime/lower is not the NFS directory: %v", l)
			}
			if r := mnt["/"]; r == nil || r[2] != "overlay" {
				t.Errorf("/ is not an overlay: %v", r)
			}
			if c.vers != "3" {
				// PCs from one image must not share an NFSv4 client identity.
				if got := strings.TrimSpace(run(t, vm, "cat /sys/module/nfs/parameters/nfs4_unique_id")); got != vm.MAC {
					t.Errorf("nfs4_unique_id %q, want the MAC %s", got, vm.MAC)
				}
			}
			env := run(t, vm, "cat /run/overtime/boot.env")
			if !strings.Contains(env, "OVERTIME_ROOT_TYPE='dir'") || !strings.Contains(env, "OVERTIME_NFS_VERS='"+c.vers+"'") {
				t.Errorf("boot.env:\n%s", env)
			}
			run(t, vm, "echo hello > /etc/written && grep -q hello /etc/written")
			if _, err := os.Stat(filepath.Join(dir, "etc", "written")); err == nil {
				t.Error("a write to / reached the NFS directory")
			}
		})
	}
}

// expectFailure waits for the boot to stop with an overtime error line matching re, and
// then for initramfs-tools' panic (its rescue shell, without panic=).
func expectFailure(t *testing.T, vm *vmtest.VM, re string) []string {
	t.Helper()
	m := expect(t, vm, `overtime: ERROR: ([^\r\n]*)\r?\n|overtime-test: up`, bootWithin)
	if m[0] == "overtime-test: up" {
		t.Fatal("the image booted; expected the boot to fail")
	}
	got := regexp.MustCompile(re).FindStringSubmatch(m[1])
	if got == nil {
		t.Fatalf("error line %q does not match %q", m[1], re)
	}
	expect(t, vm, `overtime: boot failed: `, cmdWithin)
	expect(t, vm, `\(initramfs\) `, cmdWithin)
	return got
}

// TestBootChecksumMismatch (c): overtime.verify=sha256 with an image of the right size
// and magic but other content: a message naming server, path, expected and actual
// checksum, then the panic shell; no hang, no boot.
func TestBootChecksumMismatch(t *testing.T) {
	t.Parallel()
	e := newBootEnv(t, true)
	p := e.addImage(t, "root.squashfs")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Corrupt the middle, keep the size and the superblock.
	for i := len(data) / 2; i < len(data)/2+64; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	root := serverIP + ":" + p
	vm := e.boot(t, "checksum", e.cmdline(root, "overtime.verify=sha256"))
	m := expectFailure(t, vm, `^checksum mismatch for image `+regexp.QuoteMeta(root)+`: expected sha256 ([0-9a-f]{64}) \(overtime.sha256\), got ([0-9a-f]{64})$`)
	if m[1] != e.img.RootSHA256 {
		t.Errorf("expected checksum reported as %s, want %s", m[1], e.img.RootSHA256)
	}
	sum := sha256.Sum256(data)
	if m[2] != hex.EncodeToString(sum[:]) {
		t.Errorf("actual checksum reported as %s, want %s", m[2], hex.EncodeToString(sum[:]))
	}
	if !strings.Contains(vm.Console.Output(), "overtime: verifying the SHA-256 of "+root) {
		t.Error("no message that the checksum is being computed")
	}

	// An administrator repairs the image and leaves the rescue shell: the boot is tried
	// again (after undoing the first attempt's mounts) and now succeeds.
	e.addImage(t, "root.squashfs")
	if err := vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	expectUp(t, vm)
	if !strings.Contains(run(t, vm, "cat /run/overtime/boot.env"), "OVERTIME_SHA256='"+e.img.RootSHA256+"'") {
		t.Error("boot.env after the retried boot lacks the checksum")
	}
}

// TestBootImageMissing (d): the export exists but has no such image: "image not found"
// naming server and path; with panic=1 initramfs-tools then reboots the machine. A path
// the server does not export at all is refused a few times (a starting server may refuse
// for a moment), then reported the same clear way.
func TestBootImageMissing(t *testing.T) {
	t.Parallel()
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		e := newBootEnv(t, true)
		e.addImage(t, "root.squashfs") // another image is there, the named one is not
		root := serverIP + ":" + e.export + "/missing.squashfs"
		vm := e.boot(t, "missing", e.cmdline(root, "panic=1"))
		m := expect(t, vm, `overtime: ERROR: ([^\r\n]*)\r?\n`, bootWithin)
		want := "image not found: " + root + " does not exist (the server exports " + serverIP + ":" + e.export + ", which has no missing.squashfs)"
		if m[1] != want {
			t.Errorf("error line\n%q, want\n%q", m[1], want)
		}
		expect(t, vm, `Rebooting automatically due to panic= boot argument`, cmdWithin)
		// The machine starts over: the kernel prints its banner again.
		expect(t, vm, `Linux version `, bootWithin)
	})
	t.Run("export", func(t *testing.T) {
		t.Parallel()
		e := newBootEnv(t, true)
		path := "/srv/not-exported/v9/root.squashfs"
		vm := e.boot(t, "no-export", e.cmdline(serverIP+":"+path))
		for i := 1; i <= 2; i++ {
			m := expect(t, vm, `overtime: WARNING: NFS server `+regexp.QuoteMeta(serverIP)+` refuses the mount \(attempt (\d+), [^\r\n]*denied by server[^\r\n]*\r?\n`, bootWithin)
			if m[1] != fmt.Sprint(i) {
				t.Errorf("refusal message for attempt %s, want %d", m[1], i)
			}
		}
		expectFailure(t, vm, `^not found: NFS server `+regexp.QuoteMeta(serverIP)+` exports neither /srv/not-exported/v9 nor `+regexp.QuoteMeta(path)+` \(/srv/not-exported/v9: mount.nfs: access denied by server[^;]*; `+regexp.QuoteMeta(path)+`: mount.nfs: access denied by server`)
	})
}

// TestBootServerDown (e): the NFS server is down when the PC boots: a message per attempt,
// and the boot completes once the server is back.
func TestBootServerDown(t *testing.T) {
	t.Parallel()
	e := newBootEnv(t, false)
	e.addImage(t, "root.squashfs")
	root := serverIP + ":" + e.export + "/root.squashfs"
	vm := e.boot(t, "server-down", e.cmdline(root))
	pat := `overtime: WARNING: NFS server ` + regexp.QuoteMeta(serverIP) + ` does not answer \(attempt (\d+), \d+s of 600s\): ([^\r\n]*); retrying in \d+s\r?\n`
	m := expect(t, vm, pat, bootWithin)
	if m[1] != "1" {
		t.Errorf("first retry message is for attempt %s", m[1])
	}
	t.Logf("mount error while the server is down: %s", m[2])
	m = expect(t, vm, pat, bootWithin)
	if m[1] != "2" {
		t.Errorf("second retry message is for attempt %s", m[1])
	}
	if err := e.nfs.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	m = expect(t, vm, `overtime: NFS server `+regexp.QuoteMeta(serverIP)+` answered after (\d+) attempts`, bootWithin)
	t.Logf("mounted %v after the server started (attempt %s)", time.Since(started).Round(time.Second), m[1])
	expectUp(t, vm)
	if n := mounts(t, vm)["/run/overtime/nfs"]; n == nil || !hasOpt(n[3], "ro") {
		t.Errorf("no read-only NFS mount after the retries: %v", n)
	}
}

// TestBootDisk: a VM guest of the node agent boots its image from its own disk
// (overtime.root=disk:/dev/vda: the squashfs as a read-only virtio disk, as libvirt
// attaches the base under its transient overlay). No network, no NFS and no OVERTIME-ID
// look-up (the guest is not a PC); the same tmpfs overlay over the squashfs.
func TestBootDisk(t *testing.T) {
	t.Parallel()
	img := testimage.Get(t)
	cmdline := "console=ttyS0,115200 boot=overtime overtime.root=disk:/dev/vda overtime.mode=cluster overtime.kind=cluster overtime.host=pc-a04"
	t.Logf("kernel command line: %s", cmdline)
	vm := vmtest.StartT(t, vmtest.Config{Name: "disk", Dir: t.TempDir(), Kernel: img.Path(testimage.Kernel),
		Initrd: img.Path(testimage.Initrd), Append: cmdline, Disks: []string{img.Path(testimage.Root)}})
	expect(t, vm, `overtime: mode=cluster kind=cluster host=pc-a04 root=disk:/dev/vda verify=size`, bootWithin)
	expectUp(t, vm)
	if !regexp.MustCompile(`overtime: image disk:/dev/vda: \d+ bytes, squashfs`).MatchString(vm.Console.Output()) {
		t.Error("the console does not report the checked disk")
	}
	for _, never := range []string{"configuring the network", "OVERTIME-ID", "mount.nfs"} {
		if strings.Contains(vm.Console.Output(), never) {
			t.Errorf("a disk boot did %q:\n%s", never, vm.Console.Tail(3000))
		}
	}
	mnt := mounts(t, vm)
	if r := mnt["/"]; r == nil || r[2] != "overlay" || !strings.Contains(r[3], "lowerdir=/run/overtime/lower") {
		t.Errorf("/ is not the overlay over /run/overtime/lower: %v", r)
	}
	if l := mnt["/run/overtime/lower"]; l == nil || l[0] != "/dev/vda" || l[2] != "squashfs" || !hasOpt(l[3], "ro") {
		t.Errorf("/run/overtime/lower is not the read-only squashfs of /dev/vda: %v", l)
	}
	if n := mnt["/run/overtime/nfs"]; n != nil {
		t.Errorf("a disk boot mounted NFS: %v", n)
	}
	if !strings.Contains(run(t, vm, "cat /etc/overtime-test-image"), img.Key) {
		t.Error("/etc/overtime-test-image is not the one of the test image")
	}
	env := run(t, vm, "cat /run/overtime/boot.env")
	for _, want := range []string{"OVERTIME_ROOT='disk:/dev/vda'", "OVERTIME_ROOT_TYPE='squashfs'", "OVERTIME_HOST='pc-a04'"} {
		if !strings.Contains(env, want) {
			t.Errorf("boot.env lacks %s:\n%s", want, env)
		}
	}
	run(t, vm, "echo written > /marker && grep -q written /marker")
	if _, err := vm.Console.Run("touch /run/overtime/lower/x", cmdWithin); err == nil {
		t.Error("writing to the squashfs lower layer succeeded")
	}
}
