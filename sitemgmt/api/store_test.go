package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// storeFile puts a file of the store (ImagesDir-relative path) in place.
func storeFile(t *testing.T, root, rel string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVersionPathIsDerived: a version lives in IMAGE/VERSION of the store; whoever
// writes a version (a lecturer through the API, an admin through the site file) cannot
// name another directory: another image's, the staging area, the image's own root.
func TestVersionPathIsDerived(t *testing.T) {
	env := uploadEnv(t, api.Options{})
	carol := env.Client("carol", "carol-secret") // lecturer of lab-a, publishes bio101-vm
	sha := strings.Repeat("ab", 32)
	created := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)
	for _, path := range []string{"debian-desktop/2026.11.20-1", ".incoming", ".incoming/bio101-vm/x-1", "bio101-vm", "bio101-vm/ws2026-1", "bio101-vm/x-1/sub", "other/x-1"} {
		v := model.ImageVersion{Version: "x-1", SHA256: sha, Path: path, Created: created}
		err := carol.Send("POST", "/api/v1/images/bio101-vm/versions", nil, v, nil)
		if status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "bio101-vm/x-1") || !strings.Contains(err.Error(), "x-1") {
			t.Errorf("lecturer publishing bio101-vm x-1 with path %q: %v, want 400 naming the path bio101-vm/x-1", path, err)
		}
	}
	// The site file (whole-site PUT) is held to the same rule.
	site := mustSite(t, env)
	im := site.Image("debian-desktop")
	im.Versions = append(im.Versions, model.ImageVersion{Version: "2026.12.01-1", SHA256: sha, Path: "compute-guest/2026.11.20-1", Created: created})
	if err := env.Admin().Send("PUT", "/api/v1/site", nil, site, nil); status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "debian-desktop/2026.12.01-1") {
		t.Errorf("site file with a version in another image's directory: %v", err)
	}
	// The derived path is accepted, and so is none: the server fills it in.
	if err := carol.Send("POST", "/api/v1/images/bio101-vm/versions", nil, model.ImageVersion{Version: "x-1", SHA256: sha, Path: "bio101-vm/x-1", Created: created}, nil); err != nil {
		t.Fatal(err)
	}
	if err := carol.Send("POST", "/api/v1/images/bio101-vm/versions", nil, model.ImageVersion{Version: "x-2", SHA256: sha, Created: created}, nil); err != nil {
		t.Fatal(err)
	}
	if v := mustSite(t, env).Image("bio101-vm").Version("x-2"); v == nil || v.Path != "bio101-vm/x-2" {
		t.Errorf("version published without a path: %+v", v)
	}
}

// TestGCOwnsOnlyItsVersions: the catalogue of an older site may hold versions whose path
// is another image's directory, the staging area, an upload in progress, the image's own
// root, a directory a remaining version uses, or a symbolic link out of the store. Such
// a site still loads and takes writes; gc drops those versions from the catalogue but
// deletes only the one directory it can prove is the removed version's own.
func TestGCOwnsOnlyItsVersions(t *testing.T) {
	env := uploadEnv(t, api.Options{})
	ctx := context.Background()
	root := env.ImagesDir
	outside := t.TempDir()
	kept := []string{
		"debian-desktop/2026.11.20-1/root.squashfs",
		"compute-guest/2026.11.20-1/root.squashfs",
		"bio101-vm/ws2026-1/disk.qcow2",
		"bio101-vm/ws2026-1/SHA256SUMS",
	}
	for _, f := range append(slices.Clone(kept), "bio101-vm/old-1/disk.qcow2") {
		storeFile(t, root, f)
	}
	storeFile(t, outside, "precious")
	if err := os.Symlink(outside, filepath.Join(root, "bio101-vm", "old-link")); err != nil {
		t.Fatal(err)
	}
	// An upload in progress: staged, not published.
	carol := env.Client("carol", "carol-secret")
	staged := []byte("staged course vm")
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "up-1", "data.bin", bytes.NewReader(staged), int64(len(staged))); err != nil {
		t.Fatal(err)
	}
	// Older data, written to the directory as an earlier release allowed.
	cur := mustSite(t, env)
	next := cur.Clone()
	sha := strings.Repeat("cd", 32)
	created := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC) // older than the current ws2026-1: gc removes them
	crafted := map[string]string{
		"old-1":      "bio101-vm/old-1", // its own directory: the one gc deletes
		"old-link":   "bio101-vm/old-link",
		"x-desk":     "debian-desktop/2026.11.20-1",
		"x-incoming": ".incoming",
		"x-staged":   ".incoming/bio101-vm/up-1",
		"x-image":    "bio101-vm",
		"x-shared":   "bio101-vm/ws2026-1",
		"x-other":    "compute-guest",
	}
	for v, p := range crafted {
		next.Image("bio101-vm").Versions = append(next.Image("bio101-vm").Versions, model.ImageVersion{Version: v, SHA256: sha, Path: p, Created: created})
	}
	next.Sort()
	if _, err := env.Store.Apply(ctx, cur, next); err != nil {
		t.Fatal(err)
	}
	if err := env.Svc.Reload(ctx); err != nil {
		t.Fatalf("a site with older version paths must still load: %v", err)
	}
	// ... and take writes that do not touch those versions.
	admin := env.Admin()
	if err := admin.Send("PUT", "/api/v1/images/debian-desktop/current", nil, map[string]string{"version": "2026.11.20-1"}, nil); err != nil {
		t.Fatalf("a write beside older version paths: %v", err)
	}

	var res wire.GCResult
	if err := admin.Send("POST", "/api/v1/images/gc", url.Values{"image": {"bio101-vm"}}, nil, &res); err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, b := range res.Removed {
		removed = append(removed, b.Version)
	}
	if len(removed) != len(crafted) {
		t.Errorf("gc removed versions %v from the catalogue, want all of %d crafted ones", removed, len(crafted))
	}
	if strings.Join(res.FilesRemoved, ",") != "bio101-vm/old-1" {
		t.Errorf("gc deleted %v from the store, want only bio101-vm/old-1", res.FilesRemoved)
	}
	for _, f := range kept {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("gc deleted %s, which a remaining version uses: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "precious")); err != nil {
		t.Errorf("gc followed a symbolic link out of the store: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "bio101-vm", "old-link")); err != nil {
		t.Errorf("gc removed a symbolic link it cannot prove is the version's: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "bio101-vm", "old-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removed version's own directory is still there: %v", err)
	}
	// The upload in progress survived as it was.
	if b, err := os.ReadFile(filepath.Join(root, incoming, "bio101-vm", "up-1", "data.bin")); err != nil || !bytes.Equal(b, staged) {
		t.Errorf("the upload in progress during gc: %q %v", b, err)
	}
}

// tmpfsStore mounts a tmpfs of size bytes as an image store (root only).
func tmpfsStore(t *testing.T, size string) string {
	t.Helper()
	needs.Servers(t, "root (mounts a tmpfs)")
	if os.Geteuid() != 0 {
		t.Fatal("needs root to mount a tmpfs as a small image store")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting the tmpfs: %v", err)
		}
	})
	return dir
}

// fill writes a file into dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the store: %v", err)
			}
			break
		}
	}
	// The page cache may take a last partial page: fill byte-wise what is left.
	for {
		if _, err := f.Write([]byte{0}); err != nil {
			break
		}
	}
	return p
}

// TestStoreFull: a full store answers 507 naming the image, version and file, never the
// server's paths; the client reads that answer (the body is drained), and nothing is left
// half-written: a publish that could not write SHA256SUMS leaves the staged files as they
// were, and publishes once there is room again.
func TestStoreFull(t *testing.T) {
	store := tmpfsStore(t, "4m")
	env := testenv.New(t, testenv.Options{API: api.Options{ImagesDir: store}})
	env.ApplyExample(t)
	ctx := context.Background()
	carol := env.Client("carol", "carol-secret")
	noPath := func(what string, err error) {
		t.Helper()
		if err != nil && (strings.Contains(err.Error(), store) || strings.Contains(err.Error(), "/tmp") || strings.Contains(err.Error(), incoming)) {
			t.Errorf("%s: the answer names the server's files: %v", what, err)
		}
	}

	t.Run("declared too big", func(t *testing.T) {
		_, err := carol.UploadImageFile(ctx, "bio101-vm", "big-1", "data.bin", &patternReader{left: 8 << 20}, 8<<20)
		if status(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "bio101-vm") || !strings.Contains(err.Error(), "big-1") {
			t.Errorf("declared 8 MiB into a 4 MiB store: %v", err)
		}
		noPath("declared too big", err)
	})

	t.Run("full while streaming", func(t *testing.T) {
		// No length declared: the store fills while the body streams.
		_, err := carol.UploadImageFile(ctx, "bio101-vm", "big-2", "data.bin", &patternReader{left: 8 << 20}, -1)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "bio101-vm") ||
			!strings.Contains(err.Error(), "big-2") || !strings.Contains(err.Error(), "data.bin") {
			t.Fatalf("8 MiB streamed into a 4 MiB store: %v, want the 507 answer naming image, version and file", err)
		}
		noPath("full while streaming", err)
		if left, _ := filepath.Glob(filepath.Join(store, incoming, "bio101-vm", "big-2", "*")); len(left) != 0 {
			t.Errorf("a failed upload left %v", left)
		}
		if left, _ := filepath.Glob(filepath.Join(store, incoming, "bio101-vm", "big-2", ".*")); len(left) != 0 {
			t.Errorf("a failed upload left %v", left)
		}
	})

	t.Run("full at publish", func(t *testing.T) {
		admin := env.Admin()
		data := []byte("a desktop image that fits")
		if _, err := admin.UploadImageFile(ctx, "debian-desktop", "ok-1", "root.squashfs", bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		stagedDir := filepath.Join(store, incoming, "debian-desktop", "ok-1")
		before := listDir(t, stagedDir, true)
		filler := fill(t, store)
		_, err := admin.PublishImageVersion(ctx, "debian-desktop", "ok-1", []string{"root.squashfs"}, "", false)
		if status(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "debian-desktop") || !strings.Contains(err.Error(), "ok-1") || !strings.Contains(err.Error(), "SHA256SUMS") {
			t.Fatalf("publish into a full store: %v, want 507 naming image, version and SHA256SUMS", err)
		}
		noPath("full at publish", err)
		if after := listDir(t, stagedDir, true); !slices.Equal(before, after) {
			t.Errorf("a failed publish changed the staging area: %v, was %v", after, before)
		}
		if _, err := os.Lstat(filepath.Join(store, "debian-desktop", "ok-1")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a failed publish left a version directory: %v", err)
		}
		if v := mustSite(t, env).Image("debian-desktop").Version("ok-1"); v != nil {
			t.Errorf("a failed publish registered %+v", v)
		}
		// Room again: the same staged files publish.
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.PublishImageVersion(ctx, "debian-desktop", "ok-1", []string{"root.squashfs"}, "", false); err != nil {
			t.Fatalf("publish after room was made: %v", err)
		}
		if got := listDir(t, filepath.Join(store, "debian-desktop", "ok-1"), false); strings.Join(got, ",") != "SHA256SUMS,root.squashfs" {
			t.Errorf("published directory: %v", got)
		}
	})
}

const incoming = ".incoming"

// listDir names dir's entries with their sizes (names only with sizes false).
func listDir(t *testing.T, dir string, sizes bool) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if sizes {
			out = append(out, fmt.Sprintf("%s:%d", e.Name(), fi.Size()))
		} else {
			out = append(out, e.Name())
		}
	}
	return out
}
