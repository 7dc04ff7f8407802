package coursevm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

const banner = "OVERTIME-COURSE-VM-BOOTED"

// version makes a published course-VM version directory: a qcow2 disk whose boot sector
// prints banner on COM1, vm.json, SHA256SUMS.
func version(t *testing.T, edit func(*vmspec.VM)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bio", "ws-1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(raw, bootsector.Disk(banner+"\r\n", 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, vmspec.DiskFile)
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, disk).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	fi, _ := os.Stat(disk)
	vm := vmspec.VM{Name: "BIO101", MemoryMB: 64, CPUs: 1, Network: vmspec.NetNone, DiskBytes: fi.Size(), DiskVirtualSize: 1 << 20}.WithDefaults()
	if edit != nil {
		edit(&vm)
	}
	doc, _ := vm.Marshal()
	if err := os.WriteFile(filepath.Join(dir, vmspec.File), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := artefact.Write(dir, vmspec.DiskFile, vmspec.File); err != nil {
		t.Fatal(err)
	}
	return dir
}

// versionWith makes a version directory whose disk (vm.Disk, after defaults) mk makes at
// the path it is given; vm.json records its size, SHA256SUMS both files.
func versionWith(t *testing.T, vm vmspec.VM, mk func(t *testing.T, disk string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bio", "ws-1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	vm = vm.WithDefaults()
	disk := filepath.Join(dir, vm.Disk)
	mk(t, disk)
	fi, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}
	vm.DiskBytes = fi.Size()
	doc, _ := vm.Marshal()
	if err := os.WriteFile(filepath.Join(dir, vmspec.File), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := artefact.Write(dir, vm.Disk, vmspec.File); err != nil {
		t.Fatal(err)
	}
	return dir
}

// qemuImg runs qemu-img in dir.
func qemuImg(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("qemu-img", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func entries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestPlayer runs a real course VM under QEMU (TCG here: kvmprobe decides): it boots
// from the read-only version (its serial output appears), the base disk stays unchanged,
// a killed QEMU is started again with a fresh overlay (counted), a mode change stops it
// and deletes the overlay, and so does the end of Run.
func TestPlayer(t *testing.T) {
	needs.Servers(t, "qemu-system-x86", "qemu-img")
	dir := version(t, nil)
	base := filepath.Join(dir, vmspec.DiskFile)
	before := fileSum(t, base)
	state := t.TempDir()
	serial := filepath.Join(t.TempDir(), "serial.log")
	// A stale overlay of a player that died is deleted at start.
	os.MkdirAll(filepath.Join(state, "run-stale"), 0o700)
	p := New(Options{StateDir: state, Display: "none", SerialLog: serial, RestartBackoff: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	specs := make(chan *Spec, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, specs) }()
	defer func() {
		cancel()
		<-done
	}()
	booted := func() int {
		b, _ := os.ReadFile(serial)
		return strings.Count(string(b), banner)
	}
	spec := &Spec{Mode: "course-bio101", Image: "bio", Version: "ws-1", Dir: dir}
	specs <- spec
	poll.Until(t, "the course VM's serial output", 60*time.Second, func() bool { return booted() >= 1 })
	pid := p.PID()
	if pid == 0 || p.LastError() != "" {
		t.Fatalf("pid %d, last error %q", pid, p.LastError())
	}
	runs, _ := filepath.Glob(filepath.Join(state, "run-*", "overlay.qcow2"))
	if len(runs) != 1 || strings.Contains(runs[0], "stale") {
		t.Fatalf("overlays while running: %v (state dir %v)", runs, entries(state))
	}
	// The overlay is backed by the read-only base.
	if out, err := exec.Command("qemu-img", "info", "-U", "--output=json", runs[0]).Output(); err != nil || !strings.Contains(string(out), base) {
		t.Errorf("overlay: %s %v", out, err)
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	// The chain is spelled out: the overlay on the base, and nothing below the base.
	if !strings.Contains(string(cmdline), "-sandbox") || !strings.Contains(string(cmdline), "overlay.qcow2") || !strings.Contains(string(cmdline), `"backing":null`) {
		t.Errorf("QEMU command line: %q", cmdline)
	}

	// Killed: started again, fresh overlay, counted.
	first := runs[0]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a restarted course VM", 60*time.Second, func() bool { return booted() >= 2 && p.PID() != 0 && p.PID() != pid })
	if p.Restarts() != 1 {
		t.Errorf("restarts %d, want 1", p.Restarts())
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the killed VM's overlay is still there: %v", err)
	}
	rec := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "overtime_coursevm_restarts_total 1") {
		t.Errorf("metrics:\n%s", rec.Body.String())
	}

	// The mode changes: stopped, nothing kept.
	pid = p.PID()
	specs <- nil
	poll.Until(t, "the course VM to stop", 30*time.Second, func() bool { return p.PID() == 0 && len(entries(state)) == 0 })
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("QEMU %d still runs after the mode changed", pid)
	}

	// Again, then the player ends: stopped, nothing kept.
	specs <- spec
	poll.Until(t, "the course VM's third boot", 60*time.Second, func() bool { return booted() >= 3 })
	pid = p.PID()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	if n := entries(state); len(n) != 0 {
		t.Errorf("state directory after the player ended: %v", n)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("QEMU %d still runs after the player ended", pid)
	}
	if fileSum(t, base) != before {
		t.Error("the read-only base disk changed")
	}
	if _, err := artefact.Verify(dir); err != nil {
		t.Error(err)
	}
}

// TestPlayerRefuses: a VM that cannot run says why (and is retried), never silently.
func TestPlayerRefuses(t *testing.T) {
	needs.Servers(t, "qemu-img")
	qemuVM := vmspec.VM{Name: "BIO101", MemoryMB: 64, CPUs: 1, Network: vmspec.NetNone}
	vmware := qemuVM
	vmware.Backend = vmspec.BackendVMware
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
		opt  func(*Options)
		want string
	}{
		{"vmware without vmplayer", func(t *testing.T) string {
			return versionWith(t, vmware, func(t *testing.T, disk string) {
				raw := filepath.Join(t.TempDir(), "disk.raw")
				os.WriteFile(raw, bootsector.Disk(banner+"\r\n", 1<<20), 0o644)
				qemuImg(t, "", "convert", "-f", "raw", "-O", "vmdk", raw, disk)
			})
		}, func(o *Options) { o.VMPlayer = "/nonexistent/vmplayer" }, "backend unavailable: vmware"},
		// The disk names other files: refused before QEMU, VMware or an overlay opens it.
		{"base with a backing file /etc/passwd", func(t *testing.T) string {
			return versionWith(t, qemuVM, func(t *testing.T, disk string) {
				qemuImg(t, "", "create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", disk, "1M")
			})
		}, nil, "disk refused: disk.qcow2: a qcow2 disk with a backing file (/etc/passwd)"},
		{"base with a backing file beside it", func(t *testing.T) string {
			return versionWith(t, qemuVM, func(t *testing.T, disk string) {
				os.WriteFile(filepath.Join(filepath.Dir(disk), "base.raw"), bootsector.Disk(banner+"\r\n", 1<<20), 0o644)
				qemuImg(t, filepath.Dir(disk), "create", "-q", "-f", "qcow2", "-b", "base.raw", "-F", "raw", disk, "1M")
			})
		}, nil, "disk refused: disk.qcow2: a qcow2 disk with a backing file (base.raw)"},
		{"base with a backing URL", func(t *testing.T) string {
			return versionWith(t, qemuVM, func(t *testing.T, disk string) {
				qemuImg(t, "", "create", "-q", "-f", "qcow2", "-u", "-b", "nbd://127.0.0.1:1/x", "-F", "raw", disk, "1M")
			})
		}, nil, "a qcow2 disk with a backing file (nbd://127.0.0.1:1/x)"},
		{"vmware descriptor naming /etc/passwd", func(t *testing.T) string {
			return versionWith(t, vmware, func(t *testing.T, disk string) {
				os.WriteFile(disk, []byte("# Disk DescriptorFile\nversion=1\ncreateType=\"monolithicFlat\"\nRW 2048 FLAT \"/etc/passwd\" 0\n"), 0o644)
			})
		}, func(o *Options) { o.VMPlayer = "/nonexistent/vmplayer" }, "disk refused: disk.vmdk: a VMware disk whose data lives in other files (/etc/passwd)"},
		{"disk of another format than vm.json says", func(t *testing.T) string {
			return versionWith(t, qemuVM, func(t *testing.T, disk string) {
				raw := filepath.Join(t.TempDir(), "disk.raw")
				os.WriteFile(raw, bootsector.Disk(banner+"\r\n", 1<<20), 0o644)
				qemuImg(t, "", "convert", "-f", "raw", "-O", "vmdk", raw, disk)
			})
		}, nil, "disk refused: disk.qcow2: a vmdk disk; allowed here: qcow2"},
		{"efi without firmware", func(t *testing.T) string {
			return version(t, func(v *vmspec.VM) { v.Firmware = vmspec.FirmwareEFI })
		}, func(o *Options) { o.OVMFCode = "/nonexistent/OVMF_CODE.fd" }, "backend unavailable: qemu"},
		{"vm.json changed", func(t *testing.T) string {
			d := version(t, nil)
			os.WriteFile(filepath.Join(d, vmspec.File), []byte(`{"name":"x","memoryMB":99999}`), 0o644)
			return d
		}, nil, "does not match"},
		{"truncated disk", func(t *testing.T) string {
			d := version(t, nil)
			os.Truncate(filepath.Join(d, vmspec.DiskFile), 1000)
			return d
		}, nil, "vm.json says"},
		{"not a course VM", func(t *testing.T) string { return t.TempDir() }, nil, "SHA256SUMS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			o := Options{StateDir: state, Display: "none", RestartBackoff: time.Hour, QEMU: "/bin/true",
				Accel: func() (string, string) { return "tcg", "test" }, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
			if c.opt != nil {
				c.opt(&o)
			}
			p := New(o)
			ctx, cancel := context.WithCancel(context.Background())
			specs := make(chan *Spec, 1)
			specs <- &Spec{Image: "bio", Version: "ws-1", Dir: c.dir(t)}
			done := make(chan struct{})
			go func() { p.Run(ctx, specs); close(done) }()
			poll.Until(t, "the refusal", 10*time.Second, func() bool { return p.LastError() != "" })
			cancel()
			<-done
			if !strings.Contains(p.LastError(), c.want) || p.PID() != 0 {
				t.Errorf("last error %q (pid %d), want %q", p.LastError(), p.PID(), c.want)
			}
			if n := entries(state); len(n) != 0 {
				t.Errorf("a refused start left %v", n)
			}
		})
	}
}

// TestSpecFile: the agent's spec file as the player follows it.
func TestSpecFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "course-vm.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := WatchSpec(ctx, path, 10*time.Millisecond, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if s := <-ch; s != nil {
		t.Fatalf("no file: %+v", s)
	}
	want := &Spec{Mode: "course", Image: "bio", Version: "ws-1", Dir: "/run/overtime/images/bio/ws-1"}
	if err := WriteSpec(path, want); err != nil {
		t.Fatal(err)
	}
	if s := <-ch; s == nil || *s != *want {
		t.Fatalf("got %+v", s)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("spec file mode %v: the session's player must read it", fi.Mode())
	}
	if err := WriteSpec(path, nil); err != nil {
		t.Fatal(err)
	}
	if s := <-ch; s != nil {
		t.Fatalf("after removal: %+v", s)
	}
	os.WriteFile(path, []byte(`{"dir":"relative/path"}`), 0o644)
	if _, err := ReadSpec(path); err == nil {
		t.Error("a relative dir was accepted")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// The folder shared with the VM: VMware Player gets it as its one shared folder (and
// shared folders stay off without it); it is made 0700 when missing; a symlink in its
// place is refused, not followed to what it names.
func TestShareFolder(t *testing.T) {
	home := t.TempDir()
	share := filepath.Join(home, "coursevm")
	desc := vmspec.VM{Name: "BIO101", MemoryMB: 64, CPUs: 1}.WithDefaults()
	vmx := func(o Options) (string, error) {
		t.Helper()
		o.VMPlayer = "/bin/true" // found on PATH's terms; never run here
		dir := t.TempDir()
		if _, _, err := New(o).vmwareCommand(desc, "/images/bio/ws-1/disk.vmdk", dir); err != nil {
			return "", err
		}
		b, err := os.ReadFile(filepath.Join(dir, "course-vm.vmx"))
		return string(b), err
	}
	with, err := vmx(Options{Share: share})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`isolation.tools.hgfs.disable = "FALSE"`, `sharedFolder0.hostPath = "` + share + `"`,
		`sharedFolder0.guestName = "home"`, `sharedFolder0.writeAccess = "TRUE"`, `sharedFolder.maxNum = "1"`} {
		if !strings.Contains(with, want) {
			t.Errorf("vmx with a share: no %s in\n%s", want, with)
		}
	}
	if fi, err := os.Stat(share); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("the shared folder: %v %v, want a 0700 directory", fi, err)
	}
	without, err := vmx(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(without, `isolation.tools.hgfs.disable = "TRUE"`) || strings.Contains(without, "sharedFolder") {
		t.Errorf("vmx without a share:\n%s", without)
	}

	link := filepath.Join(home, "elsewhere")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	if _, err := vmx(Options{Share: link}); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a symlink as the shared folder: %v, want refused", err)
	}
}
