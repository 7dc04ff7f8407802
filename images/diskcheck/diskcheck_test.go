package diskcheck

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

func qemuImg(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("qemu-img", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInspect: self-contained disks of the allowed formats pass; every way a disk can
// name another file (a backing file by relative or absolute path or as a URL, an external
// data file, a VMware extent, a VMware snapshot's parent) is refused naming the file and
// the reason, and the refusal never names the directory the disk is in.
func TestInspect(t *testing.T) {
	needs.Servers(t, "qemu-img")
	ctx := context.Background()
	dir := t.TempDir()
	raw := write(t, filepath.Join(dir, "boot.raw"), bootsector.Disk("DISKCHECK\r\n", 1<<20))
	qemuImg(t, dir, "convert", "-f", "raw", "-O", "qcow2", raw, "good.qcow2")
	qemuImg(t, dir, "convert", "-f", "raw", "-O", "vmdk", "-o", "subformat=monolithicSparse", raw, "good.vmdk")
	qemuImg(t, dir, "convert", "-f", "raw", "-O", "vmdk", "-o", "subformat=streamOptimized", raw, "stream.vmdk")
	qemuImg(t, dir, "convert", "-f", "raw", "-O", "vdi", raw, "good.vdi")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-b", "boot.raw", "-F", "raw", "rel.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", "abs.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-u", "-b", `json:{"driver":"nbd","server":{"type":"inet","host":"127.0.0.1","port":"1"},"export":"x"}`, "-F", "raw", "json.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-u", "-b", "nbd://127.0.0.1:1/x", "-F", "raw", "nbd.qcow2", "1M")
	// The data file lives elsewhere: creating the image makes it there.
	qemuImg(t, dir, "create", "-q", "-f", "qcow2", "-o", "data_file="+filepath.Join(t.TempDir(), "data.raw"), "datafile.qcow2", "1M")
	qemuImg(t, dir, "create", "-q", "-f", "vmdk", "-b", "good.vmdk", "-F", "vmdk", "snapshot.vmdk", "1M")
	write(t, filepath.Join(dir, "passwd.vmdk"), []byte("# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n\n# Extent description\nRW 2048 FLAT \"/etc/passwd\" 0\n"))
	write(t, filepath.Join(dir, "notes.qcow2"), []byte(strings.Repeat("not a disk\n", 100)))
	// A name QEMU would read as a protocol, were it given as it is.
	qemuImg(t, dir, "convert", "-f", "raw", "-O", "qcow2", raw, "./nbd:x.qcow2")

	for _, c := range []struct {
		file    string
		formats []string
		want    string // "" passes; else in the refusal
		format  string
		// pre: refused from the header alone, before any qemu code opens the file
		// (checked with a qemu-img that does not exist)
		pre bool
	}{
		{"good.qcow2", nil, "", QCOW2, false},
		{"good.vmdk", nil, "", VMDK, false},
		{"stream.vmdk", nil, "", VMDK, false},
		{"nbd:x.qcow2", nil, "", QCOW2, false},
		{"good.vdi", ImportFormats, "", VDI, false},
		{"boot.raw", ImportFormats, "", Raw, false},
		{"good.vdi", nil, "a vdi disk; allowed here: qcow2, vmdk", "", false},
		{"boot.raw", nil, "not a disk image of an allowed format", "", false},
		{"rel.qcow2", nil, "backing file (boot.raw)", "", true},
		{"abs.qcow2", nil, "backing file (/etc/passwd)", "", true},
		{"json.qcow2", nil, `backing file (json:{"driver":"nbd"`, "", true},
		{"nbd.qcow2", nil, "backing file (nbd://127.0.0.1:1/x)", "", true},
		{"datafile.qcow2", nil, "external data file", "", true},
		{"snapshot.vmdk", nil, "backing file (good.vmdk)", "", true},
		{"passwd.vmdk", ImportFormats, "data lives in other files (/etc/passwd)", "", true},
		{"notes.qcow2", ImportFormats, "not a disk image", "", false},
	} {
		t.Run(c.file+"/"+strings.Join(c.formats, ","), func(t *testing.T) {
			info, err := Inspect(ctx, filepath.Join(dir, c.file), Options{Formats: c.formats})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if info.Format != c.format || info.VirtualSize != 1<<20 {
					t.Errorf("info %+v, want %s of 1 MiB", info, c.format)
				}
				return
			}
			var r *Refusal
			if !errors.As(err, &r) || r.File != c.file || !strings.Contains(r.Reason, c.want) {
				t.Fatalf("Inspect = %v, want a refusal of %s saying %q", err, c.file, c.want)
			}
			if strings.Contains(err.Error(), dir) {
				t.Errorf("the refusal names the directory: %v", err)
			}
			t.Logf("refused: %v", err)
			if c.pre {
				_, err := Inspect(ctx, filepath.Join(dir, c.file), Options{Formats: c.formats, QemuImg: "/nonexistent/qemu-img"})
				if !errors.As(err, &r) || !strings.Contains(r.Reason, c.want) {
					t.Errorf("without qemu-img: %v, want the same refusal", err)
				}
			}
		})
	}
	// A FIFO would block whoever opens it for reading: refused at once.
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.qcow2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(ctx, filepath.Join(dir, "fifo.qcow2"), Options{}); !IsRefusal(err) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v", err)
	}
}

// TestConfined: qemu-img runs under the address-space, CPU-time and file-size limits, in
// the disk's directory on a relative name, and a run past the time limit is a refusal.
// (A script stands in for qemu-img here to report what it was given: the limits are
// what is tested, not qemu-img.)
func TestConfined(t *testing.T) {
	dir := t.TempDir()
	disk := write(t, filepath.Join(dir, "disk.qcow2"), append([]byte("QFI\xfb\x00\x00\x00\x03"), make([]byte, 200)...))
	// A v3 header with cluster_bits 16 and header length 104.
	b, _ := os.ReadFile(disk)
	b[23], b[103] = 16, 104
	write(t, disk, b)
	// It reports on its standard error (it may write no file: --fsize=0), which the
	// refusal quotes with the directory left out.
	fake := write(t, filepath.Join(t.TempDir(), "qemu-img"), []byte("#!/bin/sh\n"+
		"echo limits $(ulimit -v) $(ulimit -t) $(ulimit -f) in $(pwd): \"$@\" >&2\n"+
		"case \"$*\" in *slow*) exec sleep 60;; esac\n"+
		"exit 1\n"))
	os.Chmod(fake, 0o755)
	_, err := Inspect(context.Background(), disk, Options{QemuImg: fake, MaxMemory: 256 << 20, Timeout: 30 * time.Second})
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("a failing qemu-img info: %v, want a refusal", err)
	}
	if want := "limits 262144 30 0 in .: info -U -f qcow2 --output=json ./disk.qcow2"; !strings.Contains(r.Reason, want) {
		t.Errorf("qemu-img ran as %q, want %q", r.Reason, want)
	}

	slow := write(t, filepath.Join(dir, "slow.qcow2"), b)
	start := time.Now()
	_, err = Inspect(context.Background(), slow, Options{QemuImg: fake, Timeout: 500 * time.Millisecond})
	if !IsRefusal(err) || !strings.Contains(err.Error(), "did not finish within") {
		t.Fatalf("a qemu-img that hangs: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the hung qemu-img was waited for %v", d)
	}
	if strings.Contains(err.Error(), dir) {
		t.Errorf("the refusal names the directory: %v", err)
	}
}

// TestCourseVMVersion: the version rule the site manager applies before publishing.
func TestCourseVMVersion(t *testing.T) {
	needs.Servers(t, "qemu-img")
	ctx := context.Background()
	src := t.TempDir()
	raw := write(t, filepath.Join(src, "boot.raw"), bootsector.Disk("V\r\n", 1<<20))
	mk := func(t *testing.T, vm *vmspec.VM, extra map[string][]byte) (string, []string) {
		dir := t.TempDir()
		qemuImg(t, dir, "convert", "-f", "raw", "-O", "qcow2", raw, vmspec.DiskFile)
		files := []string{vmspec.DiskFile}
		if vm != nil {
			doc, _ := vm.Marshal()
			write(t, filepath.Join(dir, vmspec.File), doc)
			files = append(files, vmspec.File)
		}
		for n, b := range extra {
			write(t, filepath.Join(dir, n), b)
			files = append(files, n)
		}
		return dir, files
	}
	good := vmspec.VM{Name: "v", MemoryMB: 64, CPUs: 1}.WithDefaults()
	dir, files := mk(t, &good, nil)
	if err := CourseVMVersion(ctx, dir, files, Options{}); err != nil {
		t.Fatalf("a good version: %v", err)
	}
	vmdk := good
	vmdk.Backend, vmdk.Disk, vmdk.DiskFormat = vmspec.BackendVMware, vmspec.DiskFile, vmspec.FormatVMDK
	sized := good
	sized.DiskBytes = 12345
	for _, c := range []struct {
		name       string
		vm         *vmspec.VM
		extra      map[string][]byte
		file, want string
	}{
		{"no vm.json", nil, nil, "vm.json", "missing"},
		{"format differs", &vmdk, nil, "disk.qcow2", "says diskFormat vmdk"},
		{"size differs", &sized, nil, "disk.qcow2", "diskBytes 12345"},
		{"another file is no disk", &good, map[string][]byte{"readme.txt": []byte("hello\n")}, "readme.txt", "not a disk image"},
		{"another file names /etc/passwd", &good, map[string][]byte{"data.vmdk": []byte("# Disk DescriptorFile\nversion=1\ncreateType=\"monolithicFlat\"\nRW 2048 FLAT \"/etc/passwd\" 0\n")}, "data.vmdk", "/etc/passwd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, files := mk(t, c.vm, c.extra)
			err := CourseVMVersion(ctx, dir, files, Options{})
			var r *Refusal
			if !errors.As(err, &r) || r.File != c.file || !strings.Contains(r.Reason, c.want) {
				t.Fatalf("CourseVMVersion = %v, want a refusal of %s saying %q", err, c.file, c.want)
			}
		})
	}
	t.Run("vm.json invalid", func(t *testing.T) {
		dir, files := mk(t, nil, map[string][]byte{vmspec.File: []byte(`{"name":"x","memoryMB":1}`)})
		err := CourseVMVersion(ctx, dir, files, Options{})
		var r *Refusal
		if !errors.As(err, &r) || r.File != vmspec.File || !strings.Contains(r.Reason, "memoryMB") {
			t.Fatalf("CourseVMVersion = %v", err)
		}
	})
	t.Run("disk not uploaded", func(t *testing.T) {
		dir, _ := mk(t, &good, nil)
		err := CourseVMVersion(ctx, dir, []string{vmspec.File}, Options{})
		var r *Refusal
		if !errors.As(err, &r) || r.File != vmspec.DiskFile || !strings.Contains(r.Reason, "not uploaded") {
			t.Fatalf("CourseVMVersion = %v", err)
		}
	})
}
