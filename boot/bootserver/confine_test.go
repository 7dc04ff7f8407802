package bootserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
)

// TestSyncOwnsOnlyItsVersions: a catalogue from an older release may hold a version
// whose path is another version's directory, or the image's directory around it. A boot
// server neither replaces nor deletes another version's directory for such a version:
// the version it fetched keeps being held, and after gc of the stray versions its
// directory is still there.
func TestSyncOwnsOnlyItsVersions(t *testing.T) {
	store := t.TempDir()
	env := testenv.New(t, testenv.Options{API: api.Options{ImagesDir: store}})
	admin := env.Admin()
	if err := admin.Send(http.MethodPut, "/api/v1/site", nil, distSite(), nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Send(http.MethodPost, "/api/v1/users", nil, api.UserRequest{UID: "bs1", Password: "bs1-secret"}, nil); err != nil {
		t.Fatal(err)
	}
	bs := &Config{Client: env.Client("bs1", "bs1-secret"), Name: "bs1", StateDir: t.TempDir(), ExportRoot: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	v1 := buildVersion(t, store, "1", 4096)
	if err := admin.Send(http.MethodPost, "/api/v1/images/desk/versions", nil, v1, nil); err != nil {
		t.Fatal(err)
	}
	if held, err := bs.SyncImagesOnce(ctx, nil); err != nil || len(held) != 1 {
		t.Fatalf("first sync: %v %v", held, err)
	}
	own := filepath.Join(bs.ExportRoot, "desk", "1", "root.squashfs")
	if _, err := os.Stat(own); err != nil {
		t.Fatal(err)
	}
	// Older data: newer versions stated in desk/1 (the newest: wanted, what PCs boot) and desk.
	cur, err := env.Store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := cur.Clone()
	im := next.Image("desk")
	stray := v1
	stray.Version, stray.Path, stray.SHA256, stray.Created = "2", "desk/1", "ab"+v1.SHA256[2:], v1.Created.Add(2*time.Hour)
	around := stray
	around.Version, around.Path, around.Created = "3", "desk", v1.Created.Add(time.Hour)
	im.Versions = append(im.Versions, stray, around)
	if _, err := env.Store.Apply(ctx, cur, next); err != nil {
		t.Fatal(err)
	}
	if err := env.Svc.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	held, _ := bs.SyncImagesOnce(ctx, nil)
	if _, err := os.Stat(own); err != nil {
		t.Fatalf("a sync for versions stated in another's directory deleted it: %v", err)
	}
	if len(held) != 1 || held[0].Version != "1" {
		t.Errorf("held %v, want desk/1 only", held)
	}
	// gc drops the strays (version 1 is current: pinned as current below).
	if err := admin.Send(http.MethodPut, "/api/v1/images/desk/current", nil, map[string]string{"version": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Send(http.MethodPost, "/api/v1/images/gc", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if held, _ := bs.SyncImagesOnce(ctx, nil); len(held) != 1 || held[0].Version != "1" {
		t.Errorf("after gc: held %v, want desk/1", held)
	}
	if _, err := os.Stat(own); err != nil {
		t.Fatalf("after gc of versions stated in another's directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(store, "desk", "1", "root.squashfs")); err != nil {
		t.Fatalf("gc deleted the store's copy of a remaining version: %v", err)
	}
}
