// Package imagetest gives tests the real images of images/recipes (desktop-minimal,
// compute-guest), built by images/build.sh from the .debs `make deb` makes of the
// checkout, cached by their key in ${OVERTIME_CACHE:-/var/cache/overtime}/images (outside
// the checkout: CI clones afresh, and an unchanged recipe and unchanged packages are not
// rebuilt).
package imagetest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// Manifest is the part of a build's manifest.json tests read.
type Manifest struct {
	Recipe string `json:"recipe"`
	Key    string `json:"key"`
	Kernel string `json:"kernel"`
	Built  string `json:"built"`
	Files  map[string]struct {
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
	Packages []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"packages"`
}

// Image is a built image directory.
type Image struct {
	Dir      string
	Manifest Manifest
}

// Root is the image's root.squashfs: its path, sha256 and size.
func (im *Image) Root() (path, sha string, size int64) {
	f := im.Manifest.Files["root.squashfs"]
	return filepath.Join(im.Dir, "root.squashfs"), f.SHA256, f.Size
}

// Package is the version of a Debian package in the image ("" if absent).
func (im *Image) Package(name string) string {
	for _, p := range im.Manifest.Packages {
		if p.Name == name {
			return p.Version
		}
	}
	return ""
}

var (
	debsOnce sync.Once
	debsOut  string
	debsErr  error

	mu    sync.Mutex
	built = map[string]*Image{}
)

// Debs runs `make deb` once per test binary and returns the directory of the .debs.
func Debs(t testing.TB) string {
	t.Helper()
	needs.Servers(t, "root", "dpkg-buildpackage (debhelper)")
	root := testenv.RepoRoot(t)
	debsOnce.Do(func() {
		out, err := exec.Command("make", "-C", root, "deb").CombinedOutput()
		debsOut, debsErr = string(out), err
	})
	if debsErr != nil {
		out := debsOut
		if len(out) > 4000 {
			out = "..." + out[len(out)-4000:]
		}
		t.Fatalf("make deb: %v\n%s", debsErr, out)
	}
	return filepath.Join(root, "bin", "deb")
}

// CacheDir is where builds are kept, as images/build.sh's.
func CacheDir() string {
	if d := os.Getenv("OVERTIME_CACHE"); d != "" {
		return filepath.Join(d, "images")
	}
	return "/var/cache/overtime/images"
}

// Get builds (or finds in the cache) recipe's image and checks its SHA256SUMS.
func Get(t testing.TB, recipe string) *Image {
	t.Helper()
	needs.Servers(t, "root", "mmdebstrap", "squashfs-tools")
	debs := Debs(t)
	mu.Lock()
	defer mu.Unlock()
	if im, ok := built[recipe]; ok {
		return im
	}
	script := filepath.Join(testenv.RepoRoot(t), "images", "build.sh")
	keyCmd := exec.Command(script, "--debs", debs, "--key", recipe)
	keyCmd.Env = BuildEnv()
	out, err := keyCmd.Output()
	if err != nil {
		t.Fatalf("%s --key %s: %v %s", script, recipe, err, stderr(err))
	}
	key := strings.TrimSpace(string(out))
	dir := filepath.Join(CacheDir(), "out", recipe+"-"+key)
	start := time.Now()
	build := exec.Command(script, "--debs", debs, recipe, dir)
	build.Env = BuildEnv()
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", script, recipe, err, tail(string(b), 6000))
	} else {
		t.Logf("image %s (%s): %s", recipe, time.Since(start).Round(time.Second), strings.TrimSpace(tail(string(b), 300)))
	}
	im, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if im.Manifest.Key != key {
		t.Fatalf("%s: manifest key %s, want %s", dir, im.Manifest.Key, key)
	}
	built[recipe] = im
	prune(filepath.Dir(dir), recipe, filepath.Base(dir))
	return im
}

// BuildEnv is the environment of images/build.sh for tests: zstd level 3 unless the
// caller set one (OVERTIME_SQUASHFS_LEVEL). A test reads the image once; the default
// level 15 would spend most of a cold build squashing the desktop flavour
// (docs/benchmarks/images.md).
func BuildEnv() []string {
	env := os.Environ()
	if os.Getenv("OVERTIME_SQUASHFS_LEVEL") == "" {
		env = append(env, "OVERTIME_SQUASHFS_LEVEL=3")
	}
	return env
}

// Load reads a built image directory, verifying every artefact against its SHA256SUMS.
func Load(dir string) (*Image, error) {
	if _, err := artefact.Verify(dir); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	im := &Image{Dir: dir}
	if err := json.Unmarshal(b, &im.Manifest); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	return im, nil
}

// prune removes builds of recipe under other keys not used for a day (another checkout
// sharing the cache may still use its own).
func prune(dir, recipe, keep string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == keep || !strings.HasPrefix(e.Name(), recipe+"-") || len(e.Name()) != len(keep) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
