// Package testimage gives tests the Overtime test image (build.sh in this directory): a
// Debian cloud kernel, an initrd made by mkinitramfs from boot/initramfs, and a busybox
// root.squashfs with a few kernel modules its init loads (Image.RootModules). Dir builds it once per machine and input state: build.sh caches by a key
// over its inputs and serialises concurrent builds (test binaries of several packages run
// in parallel) with flock.
package testimage

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// Files of an image directory.
const (
	Kernel   = "vmlinuz"
	Initrd   = "initrd.img"
	Root     = "root.squashfs"
	Manifest = "manifest"
)

// Image is a built test image.
type Image struct {
	Dir           string
	Key           string // cache key of the inputs
	KernelVersion string // e.g. 6.1.0-56-cloud-amd64
	KernelPackage string // Debian package and version it came from
	RootSHA256    string
	RootSize      int64
	// RootModules are the kernel modules the root carries (with their dependencies) and
	// its init loads at boot, e.g. evdev.
	RootModules []string
}

// Path is the path of one of the image's files (Kernel, Initrd, Root).
func (im *Image) Path(name string) string { return filepath.Join(im.Dir, name) }

var (
	mu    sync.Mutex
	built = map[string]*Image{} // by cache directory, for the life of the process
)

// RepoRoot is the repository's top directory (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// CacheDir is ${OVERTIME_CACHE:-<repo>/.cache}, as in build.sh.
func CacheDir() string {
	if d := os.Getenv("OVERTIME_CACHE"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".cache")
}

// Build builds (or finds in the cache) the image for the current inputs.
func Build() (*Image, error) {
	mu.Lock()
	defer mu.Unlock()
	cache := CacheDir()
	if im, ok := built[cache]; ok {
		return im, nil
	}
	script := filepath.Join(RepoRoot(), "images", "testimage", "build.sh")
	out, err := exec.Command(script, "--key").Output()
	if err != nil {
		return nil, fmt.Errorf("testimage: %s --key: %v: %s", script, err, stderrOf(err))
	}
	key := strings.TrimSpace(string(out))
	dir := filepath.Join(cache, "testimage", key)
	cmd := exec.Command(script, dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("testimage: %s %s: %v\n%s", script, dir, err, b)
	}
	im, err := Load(dir)
	if err != nil {
		return nil, err
	}
	if im.Key != key {
		return nil, fmt.Errorf("testimage: %s has key %s, want %s", dir, im.Key, key)
	}
	built[cache] = im
	pruneOld(filepath.Dir(dir), key)
	return im, nil
}

// pruneOld removes images of other keys (earlier states of the inputs) not modified for a
// day: every edit of boot/initramfs leaves a 25 MB directory behind otherwise. A day, not
// at once: another checkout sharing OVERTIME_CACHE may still use its own key.
func pruneOld(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == keep || len(e.Name()) != 16 || strings.Trim(e.Name(), "0123456789abcdef") != "" {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// Get is Build for a test: it fails the test when the image cannot be built.
func Get(t testing.TB) *Image {
	t.Helper()
	needs.Servers(t, "the test image (Debian packages: kmod, initramfs-tools-core, squashfs-tools)")
	im, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// Dir returns the directory with vmlinuz, initrd.img, root.squashfs and manifest.
func Dir(t testing.TB) string {
	t.Helper()
	return Get(t).Dir
}

// Load reads an image directory's manifest and checks that its files are there.
func Load(dir string) (*Image, error) {
	f, err := os.Open(filepath.Join(dir, Manifest))
	if err != nil {
		return nil, fmt.Errorf("testimage: %w", err)
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	size, err := strconv.ParseInt(kv["ROOT_SIZE"], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("testimage: %s: ROOT_SIZE: %v", dir, err)
	}
	im := &Image{Dir: dir, Key: kv["KEY"], KernelVersion: kv["KERNEL_VERSION"],
		KernelPackage: kv["KERNEL_PACKAGE"] + " " + kv["KERNEL_PACKAGE_VERSION"],
		RootSHA256:    kv["ROOT_SHA256"], RootSize: size, RootModules: strings.Fields(kv["ROOT_MODULES"])}
	if im.Key == "" || im.KernelVersion == "" || len(im.RootSHA256) != 64 {
		return nil, fmt.Errorf("testimage: %s: incomplete manifest %v", dir, kv)
	}
	for _, name := range []string{Kernel, Initrd, Root} {
		if _, err := os.Stat(im.Path(name)); err != nil {
			return nil, fmt.Errorf("testimage: %w", err)
		}
	}
	return im, nil
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}
