package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// countingReader counts what the HTTP client read from the body.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ left int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	p.left -= int64(len(b))
	return len(b), nil
}

// uploadEnv is a site manager with an image store, the example site and eve as lecturer
// of lab-b (another pool than bio101-vm's).
func uploadEnv(t *testing.T, opt api.Options) *testenv.Env {
	t.Helper()
	opt.ImagesDir = t.TempDir()
	env := testenv.New(t, testenv.Options{API: opt})
	env.ApplyExample(t)
	if err := env.Admin().Send("PUT", "/api/v1/roles/lab-b-lecturers", nil,
		model.RoleGrant{Name: "lab-b-lecturers", Role: model.RoleLecturer, Pool: "lab-b", Members: []string{"eve"}}, nil); err != nil {
		t.Fatal(err)
	}
	return env
}

// TestUploads: who may upload to which image (decided before the body is read), the
// size cap (by Content-Length before reading, and while streaming), publishing (SHA256SUMS,
// the registered version, immutability), discarding.
func TestUploads(t *testing.T) {
	env := uploadEnv(t, api.Options{MaxUpload: 1 << 20})
	ctx := context.Background()
	carol := env.Client("carol", "carol-secret")
	disk := courseDisk(t) // publishing checks it (diskcheck_test.go)
	vmjson := []byte(`{"name":"bio"}` + "\n")

	t.Run("refused before the body is read", func(t *testing.T) {
		for _, c := range []struct {
			user, image string
			want        int
		}{
			{"eve", "bio101-vm", http.StatusForbidden},        // lecturer of another pool
			{"bob", "bio101-vm", http.StatusForbidden},        // pool admin of another pool
			{"dave", "bio101-vm", http.StatusForbidden},       // viewer
			{"carol", "debian-desktop", http.StatusForbidden}, // lecturer, not a course-vm image
			{"carol", "no-such-image", http.StatusNotFound},
		} {
			body := &countingReader{r: bytes.NewReader(make([]byte, 512<<10))}
			_, err := env.Client(c.user, c.user+"-secret").UploadImageFile(ctx, c.image, "v1", "disk.qcow2", body, 512<<10)
			if status(err) != c.want {
				t.Errorf("%s uploading to %s: %v (status %d), want %d", c.user, c.image, err, status(err), c.want)
			}
			if n := body.n.Load(); n != 0 {
				t.Errorf("%s uploading to %s: the client sent %d bytes of a refused body", c.user, c.image, n)
			}
		}
	})

	t.Run("size cap", func(t *testing.T) {
		body := &countingReader{r: &patternReader{left: 2 << 20}}
		_, err := carol.UploadImageFile(ctx, "bio101-vm", "big", "disk.qcow2", body, 2<<20)
		if status(err) != http.StatusRequestEntityTooLarge || body.n.Load() != 0 {
			t.Errorf("declared 2 MiB over a 1 MiB cap: %v, %d bytes sent", err, body.n.Load())
		}
		// No length declared: cut off while streaming, nothing left behind.
		_, err = carol.UploadImageFile(ctx, "bio101-vm", "big", "disk.qcow2", &patternReader{left: 2 << 20}, -1)
		if status(err) != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked 2 MiB over a 1 MiB cap: %v", err)
		}
		if left, _ := filepath.Glob(filepath.Join(env.ImagesDir, ".incoming", "bio101-vm", "big", "*")); len(left) != 0 {
			t.Errorf("an oversized upload left %v", left)
		}
		if left, _ := filepath.Glob(filepath.Join(env.ImagesDir, ".incoming", "bio101-vm", "big", ".*")); len(left) != 0 {
			t.Errorf("an oversized upload left %v", left)
		}
	})

	t.Run("bad names", func(t *testing.T) {
		for _, c := range []struct{ version, name string }{{"v1", "SHA256SUMS"}, {"v1", ".hidden"}, {"v1", "a..b/c"}, {"-v", "disk.qcow2"}} {
			_, err := carol.UploadImageFile(ctx, "bio101-vm", c.version, c.name, bytes.NewReader(disk), int64(len(disk)))
			if s := status(err); s != http.StatusBadRequest && s != http.StatusNotFound {
				t.Errorf("version %q file %q: %v (status %d), want 400", c.version, c.name, err, s)
			}
		}
	})

	t.Run("upload and publish", func(t *testing.T) {
		up, err := carol.UploadImageFile(ctx, "bio101-vm", "ws2026-9", "disk.qcow2", bytes.NewReader(disk), int64(len(disk)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(disk)
		if up.SHA256 != hex.EncodeToString(sum[:]) || up.Size != int64(len(disk)) {
			t.Fatalf("uploaded %+v", up)
		}
		// Not published yet: not served, not in the catalogue.
		if resp, err := http.Get(env.HTTP.URL + "/images/.incoming/bio101-vm/ws2026-9/disk.qcow2"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("staged file served: %v %v", resp.Status, err)
		}
		// A publish that expects a file that never came is refused; nothing moves.
		if _, err := carol.PublishImageVersion(ctx, "bio101-vm", "ws2026-9", []string{"disk.qcow2", "vm.json"}, "disk.qcow2", false); status(err) != http.StatusBadRequest {
			t.Fatalf("publish with a missing file: %v", err)
		}
		if _, err := carol.UploadImageFile(ctx, "bio101-vm", "ws2026-9", "vm.json", bytes.NewReader(vmjson), int64(len(vmjson))); err != nil {
			t.Fatal(err)
		}
		// eve may not publish what carol staged.
		if _, err := env.Client("eve", "eve-secret").PublishImageVersion(ctx, "bio101-vm", "ws2026-9", nil, "", false); status(err) != http.StatusForbidden {
			t.Fatalf("eve publishing in lab-a: %v", err)
		}
		ch, err := carol.PublishImageVersion(ctx, "bio101-vm", "ws2026-9", []string{"disk.qcow2", "vm.json"}, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Changes) != 1 || !strings.Contains(ch.Changes[0], "bio101-vm/ws2026-9") {
			t.Errorf("changes %v", ch.Changes)
		}
		dir := filepath.Join(env.ImagesDir, "bio101-vm", "ws2026-9")
		files, err := artefact.Verify(dir)
		if err != nil || len(files) != 2 {
			t.Fatalf("published directory: %v %v", files, err)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 3 {
			t.Errorf("published directory holds %d entries, want disk.qcow2, vm.json, SHA256SUMS", len(ents))
		}
		var im model.Image
		if _, err := carol.Get("/api/v1/images/bio101-vm", nil, &im); err != nil {
			t.Fatal(err)
		}
		v := im.Version("ws2026-9")
		if v == nil || v.Path != "bio101-vm/ws2026-9" || v.SHA256 != hex.EncodeToString(sum[:]) || v.Size != int64(len(disk)) {
			t.Fatalf("registered version %+v", v)
		}
		// Served read-only like every published file.
		resp, err := http.Get(env.HTTP.URL + "/images/bio101-vm/ws2026-9/disk.qcow2")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("published file: %v %v", resp, err)
		}
		resp.Body.Close()
		// Immutable: no upload, publish or discard reaches it again.
		body := &countingReader{r: bytes.NewReader(disk)}
		if _, err := carol.UploadImageFile(ctx, "bio101-vm", "ws2026-9", "disk.qcow2", body, int64(len(disk))); status(err) != http.StatusConflict || body.n.Load() != 0 {
			t.Errorf("re-upload to a published version: %v, %d bytes sent", err, body.n.Load())
		}
		if _, err := carol.PublishImageVersion(ctx, "bio101-vm", "ws2026-9", nil, "", false); status(err) != http.StatusConflict {
			t.Errorf("second publish: %v", err)
		}
	})

	t.Run("discard", func(t *testing.T) {
		alice := env.Client("alice", "alice-secret") // pool admin of lab-a
		if _, err := alice.UploadImageFile(ctx, "bio101-vm", "scratch", "disk.qcow2", bytes.NewReader(disk), int64(len(disk))); err != nil {
			t.Fatal(err)
		}
		if err := alice.DiscardUpload(ctx, "bio101-vm", "scratch"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(env.ImagesDir, ".incoming", "bio101-vm", "scratch")); !os.IsNotExist(err) {
			t.Errorf("discarded upload still staged: %v", err)
		}
		if _, err := alice.PublishImageVersion(ctx, "bio101-vm", "scratch", nil, "", false); status(err) != http.StatusBadRequest {
			t.Errorf("publish after discard: %v", err)
		}
	})

	t.Run("uploads per user", func(t *testing.T) {
		// Two uploads that block until released hold carol's quota (2); a third is 429.
		release := make(chan struct{})
		var wg sync.WaitGroup
		started := make(chan struct{}, 2)
		for i, name := range []string{"a.bin", "b.bin"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr, pw := io.Pipe()
				go func() {
					pw.Write([]byte{byte(i)})
					started <- struct{}{}
					<-release
					pw.Close()
				}()
				carol.UploadImageFile(ctx, "bio101-vm", "quota", name, pr, -1)
			}()
		}
		<-started
		<-started
		_, err := carol.UploadImageFile(ctx, "bio101-vm", "quota", "c.bin", bytes.NewReader(disk), int64(len(disk)))
		close(release)
		wg.Wait()
		if status(err) != http.StatusTooManyRequests {
			t.Errorf("third concurrent upload: %v", err)
		}
		carol.DiscardUpload(ctx, "bio101-vm", "quota")
	})
}

// TestUploadStreams: a 384 MiB upload costs the process (client and server both) a
// bounded amount of heap, not the body's size.
func TestUploadStreams(t *testing.T) {
	env := uploadEnv(t, api.Options{})
	const size = 384 << 20
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	up, err := env.Client("carol", "carol-secret").UploadImageFile(context.Background(), "bio101-vm", "big-1", "disk.qcow2", &patternReader{left: size}, size)
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if up.Size != size {
		t.Fatalf("stored %d bytes", up.Size)
	}
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("heap in use grew by %.1f MiB during a %d MiB upload", float64(grew)/(1<<20), size>>20)
	if grew > 48<<20 {
		t.Errorf("heap grew by %d MiB during a %d MiB upload: the body is buffered", grew>>20, size>>20)
	}
	fi, err := os.Stat(filepath.Join(env.ImagesDir, ".incoming", "bio101-vm", "big-1", "disk.qcow2"))
	if err != nil || fi.Size() != size {
		t.Fatalf("staged file: %v %v", fi, err)
	}
}

// TestUploadNeedsImagesDir: a site manager without a store says so.
func TestUploadNeedsImagesDir(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	body := &countingReader{r: bytes.NewReader([]byte("x"))}
	_, err := env.Client("carol", "carol-secret").UploadImageFile(context.Background(), "bio101-vm", "v1", "disk.qcow2", body, 1)
	if status(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "--images-dir") {
		t.Fatalf("upload without --images-dir: %v", err)
	}
}

// runUploadSuite (run by runAPISuite, so through the OpenAPI checker): upload, publish
// and discard, and their refusals, in the shapes the spec describes. Without an image
// store every call is 503.
func runUploadSuite(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	carol := env.Client("carol", "carol-secret")
	data := []byte("a tiny course vm disk")
	if env.ImagesDir == "" {
		if _, err := carol.UploadImageFile(ctx, "bio101-vm", "up-1", "disk.qcow2", bytes.NewReader(data), int64(len(data))); status(err) != http.StatusServiceUnavailable {
			t.Fatalf("upload without a store: %v", err)
		}
		if _, err := carol.PublishImageVersion(ctx, "bio101-vm", "up-1", nil, "", false); status(err) != http.StatusServiceUnavailable {
			t.Fatalf("publish without a store: %v", err)
		}
		if err := carol.DiscardUpload(ctx, "bio101-vm", "up-1"); status(err) != http.StatusServiceUnavailable {
			t.Fatalf("discard without a store: %v", err)
		}
		return
	}
	if _, err := env.Client("dave", "dave-secret").UploadImageFile(ctx, "bio101-vm", "up-1", "disk.qcow2", bytes.NewReader(data), int64(len(data))); status(err) != http.StatusForbidden {
		t.Fatalf("viewer upload: %v", err)
	}
	// A course VM publishes only as a real disk with its vm.json (diskcheck_test.go).
	data = courseDisk(t)
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "up-1", "disk.qcow2", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "up-1", "vm.json", bytes.NewReader(courseVMJSON), int64(len(courseVMJSON))); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.PublishImageVersion(ctx, "bio101-vm", "up-1", []string{"disk.qcow2", "vm.json"}, "", true); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if _, err := carol.PublishImageVersion(ctx, "bio101-vm", "up-1", []string{"disk.qcow2", "vm.json"}, "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "up-1", "disk.qcow2", bytes.NewReader(data), int64(len(data))); status(err) != http.StatusConflict {
		t.Fatalf("upload to a published version: %v", err)
	}
	if _, err := carol.UploadImageFile(ctx, "bio101-vm", "up-2", "disk.qcow2", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := carol.DiscardUpload(ctx, "bio101-vm", "up-2"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client("eve", "eve-secret").DiscardUpload(ctx, "bio101-vm", "up-2"); status(err) != http.StatusForbidden {
		t.Fatalf("eve discarding: %v", err)
	}
}

// TestUploadsOpenAPI runs the upload suite against a server with an image store through
// the OpenAPI checker: the answers of real uploads match the spec too
// (TestOpenAPICoverage runs it without a store).
func TestUploadsOpenAPI(t *testing.T) {
	chk := newSpecChecker(t)
	env := testenv.New(t, testenv.Options{Wrap: chk.wrap, API: api.Options{ImagesDir: t.TempDir()}})
	env.ApplyExample(t)
	if err := env.Admin().Send("PUT", "/api/v1/roles/lab-b-lecturers", nil,
		model.RoleGrant{Name: "lab-b-lecturers", Role: model.RoleLecturer, Pool: "lab-b", Members: []string{"eve"}}, nil); err != nil {
		t.Fatal(err)
	}
	runUploadSuite(t, env)
}
