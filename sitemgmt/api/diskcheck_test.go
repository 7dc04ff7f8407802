package api_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// qemuImgIn runs qemu-img in dir.
func qemuImgIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("qemu-img", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// courseDisk is a small self-contained qcow2 whose boot sector prints a line: what
// `overtime image import` uploads.
func courseDisk(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "boot.raw"), bootsector.Disk("COURSE\r\n", 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	qemuImgIn(t, dir, "convert", "-f", "raw", "-O", "qcow2", "boot.raw", "disk.qcow2")
	return readFile(t, filepath.Join(dir, "disk.qcow2"))
}

// courseVMJSON is the vm.json of a course VM whose disk is disk.qcow2.
var courseVMJSON = []byte(`{"name":"bio","memoryMB":64,"cpus":1}` + "\n")

// TestPublishChecksDisks: whatever arrives through the upload API, a course-VM version is
// published only when every disk in it is one self-contained disk of an allowed format.
// Disks that name other files (a qcow2 backing file by relative path, by absolute path
// and as a URL; a qcow2 external data file; a VMware descriptor whose extent is
// /etc/passwd) and a file that is no disk are refused with 400 naming the image, version,
// file and reason, and never a directory of the server; nothing is published, not even
// by a pool admin, and a dry run is refused alike. A good disk publishes.
func TestPublishChecksDisks(t *testing.T) {
	env := uploadEnv(t, api.Options{})
	ctx := context.Background()
	carol := env.Client("carol", "carol-secret")
	good := courseDisk(t)

	bad := t.TempDir()
	qemuImgIn(t, bad, "create", "-q", "-f", "qcow2", "-b", "base.raw", "-F", "raw", "-u", "relative.qcow2", "1M")
	qemuImgIn(t, bad, "create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", "absolute.qcow2", "1M")
	qemuImgIn(t, bad, "create", "-q", "-f", "qcow2", "-u", "-b", `json:{"driver":"file","filename":"/etc/passwd"}`, "-F", "raw", "json.qcow2", "1M")
	qemuImgIn(t, bad, "create", "-q", "-f", "qcow2", "-u", "-b", "nbd://127.0.0.1:10809/export", "-F", "raw", "nbd.qcow2", "1M")
	qemuImgIn(t, bad, "create", "-q", "-f", "qcow2", "-o", "data_file="+filepath.Join(t.TempDir(), "data.raw"), "datafile.qcow2", "1M")
	descriptor := []byte("# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType=\"monolithicFlat\"\n\n# Extent description\nRW 2048 FLAT \"/etc/passwd\" 0\n")

	type file struct {
		name string
		data []byte
	}
	for i, c := range []struct {
		name  string
		user  string
		files []file
		bad   string // the file the refusal names
		want  string // in the refusal
		dry   bool
	}{
		{"qcow2 backing file, relative", "carol", []file{{"disk.qcow2", readFile(t, filepath.Join(bad, "relative.qcow2"))}, {"base.raw", bootsector.Disk("X\r\n", 1<<20)}, {"vm.json", courseVMJSON}},
			"disk.qcow2", "backing file (base.raw)", false},
		{"qcow2 backing file /etc/passwd", "carol", []file{{"disk.qcow2", readFile(t, filepath.Join(bad, "absolute.qcow2"))}, {"vm.json", courseVMJSON}},
			"disk.qcow2", "backing file (/etc/passwd)", false},
		{"qcow2 backing json: URL", "carol", []file{{"disk.qcow2", readFile(t, filepath.Join(bad, "json.qcow2"))}, {"vm.json", courseVMJSON}},
			"disk.qcow2", `backing file (json:{"driver":"file","filename":"/etc/passwd"})`, false},
		{"qcow2 backing nbd: URL", "carol", []file{{"disk.qcow2", readFile(t, filepath.Join(bad, "nbd.qcow2"))}, {"vm.json", courseVMJSON}},
			"disk.qcow2", "backing file (nbd://127.0.0.1:10809/export)", false},
		{"qcow2 external data file", "carol", []file{{"disk.qcow2", readFile(t, filepath.Join(bad, "datafile.qcow2"))}, {"vm.json", courseVMJSON}},
			"disk.qcow2", "external data file", false},
		{"vmdk descriptor naming /etc/passwd", "carol", []file{{"disk.qcow2", good}, {"extra.vmdk", descriptor}, {"vm.json", courseVMJSON}},
			"extra.vmdk", "data lives in other files (/etc/passwd)", false},
		{"vmdk descriptor as the VMware disk", "carol", []file{{"disk.vmdk", descriptor}, {"vm.json", []byte(`{"name":"bio","backend":"vmware"}`)}},
			"disk.vmdk", "data lives in other files (/etc/passwd)", false},
		{"not a disk", "carol", []file{{"disk.qcow2", bytes.Repeat([]byte("course vm disk "), 1000)}, {"vm.json", courseVMJSON}},
			"disk.qcow2", "not a disk image", false},
		{"no vm.json", "carol", []file{{"disk.qcow2", good}},
			"vm.json", "missing", false},
		{"pool admin, backing file", "alice", []file{{"disk.qcow2", readFile(t, filepath.Join(bad, "absolute.qcow2"))}, {"vm.json", courseVMJSON}},
			"disk.qcow2", "backing file (/etc/passwd)", false},
		{"dry run, backing file", "carol", []file{{"disk.qcow2", readFile(t, filepath.Join(bad, "absolute.qcow2"))}, {"vm.json", courseVMJSON}},
			"disk.qcow2", "backing file (/etc/passwd)", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			version := "refused-" + string(rune('a'+i))
			cl := env.Client(c.user, c.user+"-secret")
			var names []string
			for _, f := range c.files {
				if _, err := cl.UploadImageFile(ctx, "bio101-vm", version, f.name, bytes.NewReader(f.data), int64(len(f.data))); err != nil {
					t.Fatalf("upload %s: %v", f.name, err)
				}
				names = append(names, f.name)
			}
			root := ""
			if c.files[0].name == "disk.vmdk" {
				root = "disk.vmdk"
			}
			_, err := cl.PublishImageVersion(ctx, "bio101-vm", version, names, root, c.dry)
			if status(err) != http.StatusBadRequest {
				t.Fatalf("publish: %v (status %d), want 400", err, status(err))
			}
			msg := err.Error()
			for _, w := range []string{"image bio101-vm version " + version, c.bad + ": ", c.want} {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, env.ImagesDir) || strings.Contains(msg, ".incoming") {
				t.Errorf("refusal %q names the server's directories", msg)
			}
			t.Logf("refused: %s", msg)
			if _, err := os.Stat(filepath.Join(env.ImagesDir, "bio101-vm", version)); !os.IsNotExist(err) {
				t.Errorf("a refused version is in the store: %v", err)
			}
			var im model.Image
			if _, err := carol.Get("/api/v1/images/bio101-vm", nil, &im); err != nil {
				t.Fatal(err)
			}
			if im.Version(version) != nil {
				t.Errorf("a refused version was registered")
			}
			if err := cl.DiscardUpload(ctx, "bio101-vm", version); err != nil {
				t.Error(err)
			}
		})
	}

	t.Run("a good disk publishes", func(t *testing.T) {
		for _, f := range []struct {
			name string
			data []byte
		}{{"disk.qcow2", good}, {"vm.json", courseVMJSON}} {
			if _, err := carol.UploadImageFile(ctx, "bio101-vm", "good-1", f.name, bytes.NewReader(f.data), int64(len(f.data))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := carol.PublishImageVersion(ctx, "bio101-vm", "good-1", []string{"disk.qcow2", "vm.json"}, "", false); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(env.ImagesDir, "bio101-vm", "good-1", "disk.qcow2")); !bytes.Equal(got, good) {
			t.Error("the published disk differs from the uploaded one")
		}
	})
}
