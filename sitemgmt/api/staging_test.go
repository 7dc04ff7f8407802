package api_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
)

// TestStagingBounds: what one user keeps in unpublished uploads is bounded per user, so
// a lecturer who uploads and never publishes cannot fill the store for everyone; what
// they discard counts no more, and another user's uploads are not counted against them.
func TestStagingBounds(t *testing.T) {
	env := uploadEnv(t, api.Options{MaxUpload: 1 << 20, StagedPerUser: 1000, StagingTTL: 100 * 365 * 24 * time.Hour})
	ctx := context.Background()
	carol := env.Client("carol", "carol-secret") // lecturer of lab-a (bio101-vm)
	alice := env.Client("alice", "alice-secret") // pool admin of lab-a
	data := bytes.Repeat([]byte{7}, 600)
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "s-1", "data.bin", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	_, err := carol.UploadImageFile(ctx, "bio101-vm", "s-2", "data.bin", bytes.NewReader(data), int64(len(data)))
	if status(err) != http.StatusInsufficientStorage || !strings.Contains(err.Error(), "carol has 600 bytes in unpublished uploads") ||
		!strings.Contains(err.Error(), "at most 1000") || !strings.Contains(err.Error(), "s-2") {
		t.Fatalf("carol's second 600 bytes with 1000 allowed staged: %v, want 507 naming her staged bytes and the limit", err)
	}
	if left, _ := filepath.Glob(filepath.Join(env.ImagesDir, incoming, "bio101-vm", "s-2", "*")); len(left) != 0 {
		t.Errorf("a refused upload left %v", left)
	}
	// Someone else's staging is theirs.
	if _, err := alice.UploadImageFile(ctx, "bio101-vm", "s-2", "data.bin", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("alice's upload counted against carol's staging: %v", err)
	}
	// A discarded upload counts no more.
	if err := carol.DiscardUpload(ctx, "bio101-vm", "s-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "s-3", "data.bin", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("carol's upload after discarding her staged one: %v", err)
	}
}

// TestStagingExpires: a staged version nobody touched for the staging TTL is removed at
// the next upload; one touched since is kept.
func TestStagingExpires(t *testing.T) {
	// The server's clock is the real one (fixed at the test's start): staged files are
	// written at real times, and their age is judged by the server's clock.
	env := testenv.New(t, testenv.Options{Now: time.Now(), API: api.Options{ImagesDir: t.TempDir(), StagingTTL: time.Hour}})
	env.ApplyExample(t)
	ctx := context.Background()
	carol := env.Client("carol", "carol-secret")
	data := []byte("staged and forgotten")
	for _, v := range []string{"old-1", "fresh-1"} {
		if _, err := carol.UploadImageFile(ctx, "bio101-vm", v, "data.bin", bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	// old-1 was last written two hours before the server's clock, fresh-1 at it.
	age := func(version string, at time.Time) {
		dir := filepath.Join(env.ImagesDir, incoming, "bio101-vm", version)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if err := os.Chtimes(filepath.Join(dir, e.Name()), at, at); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, at, at); err != nil {
			t.Fatal(err)
		}
	}
	age("old-1", env.Now.Add(-2*time.Hour))
	age("fresh-1", env.Now)
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "next-1", "data.bin", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(env.ImagesDir, incoming, "bio101-vm", "old-1")); !os.IsNotExist(err) {
		t.Errorf("a staged version untouched for two hours (TTL one hour) is still there: %v", err)
	}
	for _, v := range []string{"fresh-1", "next-1"} {
		if _, err := os.Stat(filepath.Join(env.ImagesDir, incoming, "bio101-vm", v, "data.bin")); err != nil {
			t.Errorf("staged version %s: %v", v, err)
		}
	}
}
