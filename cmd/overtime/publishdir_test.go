package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestPublishDir: `image publish --dir` uploads a build that verifies and publishes it
// into the store; a damaged build, or a wrong role, publishes nothing and leaves nothing
// staged.
func TestPublishDir(t *testing.T) {
	env := testenv.New(t, testenv.Options{API: api.Options{ImagesDir: t.TempDir()}})
	env.ApplyExample(t)
	as := func(user string, args ...string) (string, error) {
		t.Setenv("OVERTIME_PASSWORD", user+"-secret")
		return run(t, newRoot(), append([]string{"--server", env.HTTP.URL, "--user", user}, args...)...)
	}
	build := t.TempDir()
	for name, body := range map[string]string{"vmlinuz": "kernel", "initrd.img": "initrd", "root.squashfs": "hsqs root", "manifest.json": "{}"} {
		if err := os.WriteFile(filepath.Join(build, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := artefact.Write(build, "vmlinuz", "initrd.img", "root.squashfs", "manifest.json"); err != nil {
		t.Fatal(err)
	}
	version := func(v string) *model.ImageVersion {
		var im model.Image
		if _, err := env.Admin().Get("/api/v1/images/debian-desktop", nil, &im); err != nil {
			t.Fatal(err)
		}
		return im.Version(v)
	}

	// A pool admin may not publish a desktop image: refused, nothing staged or published.
	if out, err := as("alice", "image", "publish", "debian-desktop", "b1", "--dir", build); err == nil || !strings.Contains(err.Error(), "alice") {
		t.Fatalf("pool admin publishing a desktop image: %v\n%s", err, out)
	}
	// Damaged build: refused before anything is sent, naming the file.
	if err := os.WriteFile(filepath.Join(build, "root.squashfs"), []byte("hsqs roo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := as("admin", "image", "publish", "debian-desktop", "b1", "--dir", build); err == nil || !strings.Contains(err.Error(), "root.squashfs") || !strings.Contains(err.Error(), "nothing published") {
		t.Fatalf("damaged build: %v\n%s", err, out)
	}
	if version("b1") != nil {
		t.Fatal("a damaged build was published")
	}
	if err := os.WriteFile(filepath.Join(build, "root.squashfs"), []byte("hsqs root"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The good build: in the store, verified, recorded with the root's sha256 and size.
	out, err := as("admin", "image", "publish", "debian-desktop", "b1", "--dir", build)
	if err != nil || !strings.Contains(out, "+ image-version debian-desktop/b1") {
		t.Fatalf("publish --dir: %v\n%s", err, out)
	}
	files, err := artefact.Verify(filepath.Join(env.ImagesDir, "debian-desktop", "b1"))
	if err != nil || len(files) != 4 {
		t.Fatalf("published version in the store: %v %v", files, err)
	}
	sum, size, _ := artefact.Sum(filepath.Join(build, "root.squashfs"))
	if v := version("b1"); v == nil || v.SHA256 != sum || v.Size != size || v.Path != "debian-desktop/b1" {
		t.Fatalf("recorded version: %+v", v)
	}
	if ents, _ := os.ReadDir(filepath.Join(env.ImagesDir, ".incoming", "debian-desktop")); len(ents) != 0 {
		t.Errorf("staged uploads left behind: %v", ents)
	}
	// Immutable: the same version again is refused.
	if _, err := as("admin", "image", "publish", "debian-desktop", "b1", "--dir", build); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("second publish of b1: %v", err)
	}
}
