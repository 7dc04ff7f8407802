package api_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Boot files: kernel, initrd and syslinux modules come over HTTP from the directories
// given at start-up, and nothing else does.
func TestBootFiles(t *testing.T) {
	dir := t.TempDir()
	images, files, syslinux := filepath.Join(dir, "images"), filepath.Join(dir, "files"), filepath.Join(dir, "syslinux")
	ver := filepath.Join(images, "debian-desktop", "2026.11.20-1")
	for _, d := range []string{ver, files, syslinux} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, content string) {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ver, "vmlinuz"), "KERNEL")
	write(filepath.Join(ver, "initrd.img"), "INITRD")
	write(filepath.Join(files, "memtest.bin"), "MEMTEST")
	write(filepath.Join(syslinux, "menu.c32"), "MENU")
	write(filepath.Join(syslinux, "other.c32"), "OTHER")
	write(filepath.Join(dir, "secret"), "SECRET")
	if err := os.Symlink(filepath.Join(dir, "secret"), filepath.Join(ver, "escape")); err != nil {
		t.Fatal(err)
	}

	env := testenv.New(t, testenv.Options{API: api.Options{ImagesDir: images, FilesDir: files, SyslinuxDir: syslinux}})
	env.ApplyExample(t)
	base := env.HTTP.URL

	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/images/debian-desktop/2026.11.20-1/vmlinuz", 200, "KERNEL"},
		{"/images/debian-desktop/2026.11.20-1/initrd.img", 200, "INITRD"},
		{"/files/memtest.bin", 200, "MEMTEST"},
		{"/menu.c32", 200, "MENU"},
		{"/other.c32", 404, ""},                                        // not a module the menu needs
		{"/images/debian-desktop/2026.11.20-1/root.squashfs", 404, ""}, // not there
		{"/images/debian-desktop/2026.11.20-1/", 404, ""},              // no listings
		{"/images/debian-desktop/2026.11.20-1/escape", 403, ""},        // symlink out of the tree
		{"/images/debian-desktop/%2e%2e/%2e%2e/%2e%2e/secret", 400, ""},
	} {
		code, body := get(t, base+c.path)
		if code != c.code || (c.body != "" && body != c.body) || strings.Contains(body, "SECRET") {
			t.Errorf("GET %s = %d %q, want %d %q", c.path, code, body, c.code, c.body)
		}
	}

	// Range requests work (resumable downloads, curl -C).
	req, _ := http.NewRequest("GET", base+"/images/debian-desktop/2026.11.20-1/vmlinuz", nil)
	req.Header.Set("Range", "bytes=2-3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 206 || string(b) != "RN" {
		t.Errorf("range: %d %q", resp.StatusCode, b)
	}

	// The scheduled image has no root.squashfs on this server: pc-a01's menu shows the
	// mode unavailable and defaults to the local disk instead of a kernel that would not
	// find its root.
	code, script := get(t, base+"/boot/ipxe/52:54:00:0a:00:01")
	if code != 200 || !strings.Contains(script, "has no root.squashfs on the boot server") || !strings.Contains(script, "choose --default mode-local-disk") {
		t.Fatalf("missing image not shown or not fallen back from (%d):\n%s", code, script)
	}
	// Wrong size: the catalogue says 2 GiB (a sparse file of another size stands in).
	f, err := os.Create(filepath.Join(ver, "root.squashfs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	_, script = get(t, base+"/boot/ipxe/52:54:00:0a:00:01")
	if !strings.Contains(script, "root.squashfs on the boot server has the wrong size") {
		t.Fatalf("wrong size not reported:\n%s", script)
	}
	// Right size: the scheduled mode boots, with the size on the command line.
	if err := f.Truncate(2147483648); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, script = get(t, base+"/boot/ipxe/52:54:00:0a:00:01")
	if strings.Contains(script, "UNAVAILABLE") || !strings.Contains(script, "overtime.size=2147483648") || !strings.Contains(script, "choose --default mode-course-bio101") {
		t.Fatalf("complete image not booted:\n%s", script)
	}
}
