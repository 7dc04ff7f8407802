package service_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// statusOf is the HTTP status a front end answers err with (0: no error).
func statusOf(err error) int {
	if err == nil {
		return 0
	}
	status, _, _ := errstatus.Of(err)
	return status
}

// TestImagesSetCurrent: the one operation behind PUT /api/v1/images/{name}/current and
// the web UI's switch and rollback, with its errors.
func TestImagesSetCurrent(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	ctx := context.Background()
	im := env.Svc.Snapshot().Site.Image("debian-desktop")
	if im == nil || len(im.Versions) == 0 {
		t.Fatal("the example has no debian-desktop versions")
	}
	some := im.Versions[0].Version
	for _, tc := range []struct {
		name, image, version string
		dryRun               bool
		status               int    // 0: done
		msg                  string // in the error
		current              string // afterwards
	}{
		{name: "unknown image", image: "nope", version: some, status: http.StatusNotFound, msg: "nope"},
		{name: "unknown version", image: "debian-desktop", version: "1999.01.01-1", status: http.StatusBadRequest, msg: "published: ["},
		{name: "dry run", image: "debian-desktop", version: some, dryRun: true, current: ""},
		{name: "switch", image: "debian-desktop", version: some, current: some},
		{name: "follow the newest", image: "debian-desktop", version: "", current: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.Svc.Images.SetCurrent(ctx, nil, tc.dryRun, tc.image, tc.version)
			if statusOf(err) != tc.status || tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("SetCurrent(%q, %q): %v, want status %d naming %q", tc.image, tc.version, err, tc.status, tc.msg)
			}
			if got := env.Svc.Snapshot().Site.Image("debian-desktop").Current; err == nil && got != tc.current {
				t.Errorf("current %q, want %q", got, tc.current)
			}
		})
	}
	// The authoriser decides: a refusal writes nothing.
	refuse := func(cur, next *model.Site, changes []model.Change) error { return model.Invalid("no") }
	if _, err := env.Svc.Images.SetCurrent(ctx, refuse, false, "debian-desktop", some); err == nil {
		t.Error("a refused switch succeeded")
	}
	if got := env.Svc.Snapshot().Site.Image("debian-desktop").Current; got != "" {
		t.Errorf("a refused switch wrote current %q", got)
	}
}

// stageFile puts file into the staging area of store for image's version, with the
// record an upload writes.
func stageFile(t *testing.T, root, image, version, file, content string) string {
	t.Helper()
	dir := filepath.Join(root, imagestore.Incoming, image, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, file)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, size, err := artefact.Sum(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, imagestore.RecordName(file)), imagestore.Record{SHA256: sum, Size: size, UID: "admin"}.Format(), 0o644); err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestImagesAddVersion: registering a version, immutable, and checked against the
// store's copy when there is a store.
func TestImagesAddVersion(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	ctx := context.Background()
	root := t.TempDir()
	store := imagestore.New(root, imagestore.Limits{}, nil, nil)
	existing := env.Svc.Snapshot().Site.Image("debian-desktop").Versions[0].Version
	sum := strings.Repeat("ab", 32)
	version := func(v string) model.ImageVersion {
		return model.ImageVersion{Version: v, SHA256: sum, Size: 4, Path: model.VersionPath("debian-desktop", v), Created: time.Now().UTC().Truncate(time.Second)}
	}
	// A copy in the store whose root image has another size than registered.
	if err := os.MkdirAll(filepath.Join(root, "debian-desktop", "2027.01.02-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "debian-desktop", "2027.01.02-1", model.ImageRoot), []byte("truncated?"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, image string
		v           model.ImageVersion
		store       *imagestore.Store
		dryRun      bool
		status      int
		registered  bool
	}{
		{name: "unknown image", image: "nope", v: version("2027.01.01-1"), status: http.StatusNotFound},
		{name: "immutable", image: "debian-desktop", v: version(existing), status: http.StatusConflict},
		{name: "store copy refused", image: "debian-desktop", v: version("2027.01.02-1"), store: store, status: http.StatusBadRequest},
		{name: "dry run", image: "debian-desktop", v: version("2027.01.01-1"), store: store, dryRun: true},
		{name: "registered", image: "debian-desktop", v: version("2027.01.01-1"), store: store, registered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.Svc.Images.AddVersion(ctx, nil, tc.store, tc.dryRun, tc.image, tc.v)
			if statusOf(err) != tc.status {
				t.Fatalf("AddVersion: %v, want status %d", err, tc.status)
			}
			im := env.Svc.Snapshot().Site.Image("debian-desktop")
			if got := im.Version(tc.v.Version) != nil; got != tc.registered && tc.v.Version != existing {
				t.Errorf("registered %v, want %v", got, tc.registered)
			}
		})
	}
}

// TestImagesPublish: judge first, then move, then write: a refused publication leaves
// the staging area as it was; a publication moves the files and registers the version.
func TestImagesPublish(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	ctx := context.Background()
	root := t.TempDir()
	store := imagestore.New(root, imagestore.Limits{}, nil, nil)
	const image, version = "debian-desktop", "2027.02.01-1"
	staging := filepath.Join(root, imagestore.Incoming, image, version)
	final := filepath.Join(root, image, version)
	now := time.Date(2027, 2, 1, 9, 0, 0, 0, time.UTC)

	if _, err := env.Svc.Images.Publish(ctx, nil, store, false, image, version, wire.PublishRequest{}, now); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("nothing staged: %v, want 400", err)
	}
	sum := stageFile(t, root, image, version, model.ImageRoot, "root image")
	stageFile(t, root, image, version, model.ImageKernel, "kernel")
	if _, err := env.Svc.Images.Publish(ctx, nil, store, false, image, version, wire.PublishRequest{Files: []string{model.ImageRoot}}, now); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("files other than the request's: %v, want 400", err)
	}
	refuse := func(cur, next *model.Site, changes []model.Change) error { return model.Invalid("refused") }
	if _, err := env.Svc.Images.Publish(ctx, refuse, store, false, image, version, wire.PublishRequest{}, now); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("refused publication: %v", err)
	}
	if _, err := env.Svc.Images.Publish(ctx, nil, store, true, image, version, wire.PublishRequest{}, now); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	for _, p := range []string{filepath.Join(staging, model.ImageRoot), filepath.Join(staging, imagestore.RecordName(model.ImageRoot))} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("after a refusal and a dry run the staging area changed: %v", err)
		}
	}
	if _, err := os.Stat(final); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused publication moved the files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(staging, artefact.SumsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused publication left SHA256SUMS: %v", err)
	}

	changes, err := env.Svc.Images.Publish(ctx, nil, store, false, image, version, wire.PublishRequest{}, now)
	if err != nil || len(changes) == 0 {
		t.Fatalf("publish: %v %v", changes, err)
	}
	v := env.Svc.Snapshot().Site.Image(image).Version(version)
	if v == nil || v.SHA256 != sum || v.Size != int64(len("root image")) || v.Path != model.VersionPath(image, version) || !v.Created.Equal(now) {
		t.Fatalf("registered %+v", v)
	}
	if files, err := artefact.Verify(final); err != nil || len(files) != 2 {
		t.Errorf("published directory: %v %v", files, err)
	}
	if _, err := os.Stat(filepath.Join(final, imagestore.RecordName(model.ImageRoot))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staging record was published: %v", err)
	}
	if _, err := os.Stat(staging); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staging left behind: %v", err)
	}
	// Published versions are immutable.
	stageFile(t, root, image, version, model.ImageRoot, "again")
	if _, err := env.Svc.Images.Publish(ctx, nil, store, false, image, version, wire.PublishRequest{}, now); statusOf(err) != http.StatusConflict {
		t.Errorf("publishing again: %v, want 409", err)
	}
}

// TestImagesMayUpload: what an upload, publish or discard is refused before any body is
// read, with the status each front end answers.
func TestImagesMayUpload(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	store := imagestore.New(t.TempDir(), imagestore.Limits{}, nil, nil)
	published := env.Svc.Snapshot().Site.Image("debian-desktop").Versions[0].Version
	admin := authz.Principal{UID: "admin", SiteAdmin: true}
	viewer := authz.Principal{UID: "vera"}
	for _, tc := range []struct {
		name           string
		p              authz.Principal
		store          *imagestore.Store
		image, version string
		status         int // 0: may
	}{
		{"may", admin, store, "debian-desktop", "2099.01.01-1", 0},
		{"bad image name", admin, store, "bad name", "2099.01.01-1", http.StatusBadRequest},
		{"bad version", admin, store, "debian-desktop", "../x", http.StatusBadRequest},
		{"no store here", admin, nil, "debian-desktop", "2099.01.01-1", http.StatusServiceUnavailable},
		{"unknown image", admin, store, "nope", "2099.01.01-1", http.StatusNotFound},
		{"not allowed", viewer, store, "debian-desktop", "2099.01.01-1", http.StatusForbidden},
		{"published already", admin, store, "debian-desktop", published, http.StatusConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, err := env.Svc.Images.MayUpload(tc.p, tc.store, tc.image, tc.version)
			if statusOf(err) != tc.status || err == nil && (im == nil || im.Name != tc.image) {
				t.Fatalf("MayUpload(%s, %q, %q) = %v, %v; want status %d", tc.p.UID, tc.image, tc.version, im, err, tc.status)
			}
		})
	}
}
