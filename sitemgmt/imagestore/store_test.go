package imagestore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func newStore(t *testing.T, lim Limits) *Store {
	return New(t.TempDir(), lim, slog.New(slog.DiscardHandler), nil)
}

// failingReader fails after its content: a client that went away.
type failingReader struct{ r io.Reader }

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection reset")
	}
	return n, err
}

// TestUpload: admission before a byte is read, the record of a received file, and a
// body that fails to read told apart from the store's failures.
func TestUpload(t *testing.T) {
	st := newStore(t, Limits{MaxUpload: 100, UploadsPerUser: 1, StagedPerUser: 150})
	for _, tc := range []struct {
		name, file string
		length     int64
		want       func(error) bool
	}{
		{"bad name", "../x", 1, func(err error) bool { s, _, _ := errstatus.Of(err); return s == http.StatusBadRequest }},
		{"over the limit", "a", 101, func(err error) bool { return errors.As(err, new(errstatus.TooLarge)) }},
	} {
		if up, err := st.BeginUpload("carol", "vm", "1", tc.file, tc.length); err == nil || !tc.want(err) {
			t.Errorf("%s: %v", tc.name, err)
			if up != nil {
				up.Close()
			}
		}
	}
	up, err := st.BeginUpload("carol", "vm", "1", "disk.qcow2", 80)
	if err != nil {
		t.Fatal(err)
	}
	// One upload in flight per user here; one writer per file.
	if _, err := st.BeginUpload("carol", "vm", "1", "other", 1); !errors.As(err, new(*TooMany)) {
		t.Errorf("a second upload of carol: %v, want TooMany", err)
	}
	if _, err := st.BeginUpload("eve", "vm", "1", "disk.qcow2", 1); statusOf(err) != http.StatusConflict {
		t.Errorf("the same file by another user: %v, want 409", err)
	}
	res, err := up.Receive(strings.NewReader(strings.Repeat("x", 80)))
	up.Close()
	if err != nil || res.Size != 80 || res.Name != "disk.qcow2" {
		t.Fatalf("receive: %+v %v", res, err)
	}
	b, err := os.ReadFile(filepath.Join(st.stagingDir("vm", "1"), RecordName("disk.qcow2")))
	if rec, ok := ParseRecord(b); err != nil || !ok || rec.SHA256 != res.SHA256 || rec.UID != "carol" {
		t.Errorf("record %q %v", b, err)
	}
	// What carol keeps staged is bounded: 80 + 80 > 150.
	if _, err := st.BeginUpload("carol", "vm", "2", "disk.qcow2", 80); !errors.As(err, new(errstatus.StoreFull)) {
		t.Errorf("over the staged bound: %v, want StoreFull", err)
	}
	up, err = st.BeginUpload("carol", "vm", "2", "disk.qcow2", -1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = up.Receive(&failingReader{strings.NewReader("part")})
	up.Close()
	var rerr *ReadError
	if !errors.As(err, &rerr) || rerr.N != 4 {
		t.Errorf("a body that fails: %v, want ReadError after 4 bytes", err)
	}
	if ents, _ := os.ReadDir(st.stagingDir("vm", "2")); len(ents) != 0 {
		t.Errorf("a failed upload left %v", ents)
	}
	if existed, err := st.Discard("vm", "1"); err != nil || !existed {
		t.Errorf("discard: %v %v", existed, err)
	}
	if _, err := os.Stat(st.stagingDir("vm", "1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("discarded files still there: %v", err)
	}
}

func statusOf(err error) int {
	if err == nil {
		return 0
	}
	s, _, _ := errstatus.Of(err)
	return s
}

// TestStageMove: Stage checks without changing anything, Move's undo restores the
// staging area, Done removes the records.
func TestStageMove(t *testing.T) {
	st := newStore(t, Limits{})
	ctx := context.Background()
	if _, err := st.Stage(ctx, "desk", "1", model.ImageDesktop, wire.PublishRequest{}); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("nothing staged: %v", err)
	}
	for _, f := range []string{model.ImageRoot, model.ImageKernel} {
		up, err := st.BeginUpload("carol", "desk", "1", f, -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.Receive(strings.NewReader(f)); err != nil {
			t.Fatal(err)
		}
		up.Close()
	}
	for _, tc := range []struct {
		req    wire.PublishRequest
		status int
	}{
		{wire.PublishRequest{Files: []string{model.ImageRoot}}, http.StatusBadRequest},
		{wire.PublishRequest{Root: "missing"}, http.StatusBadRequest},
	} {
		if _, err := st.Stage(ctx, "desk", "1", model.ImageDesktop, tc.req); statusOf(err) != tc.status {
			t.Errorf("%+v: %v, want %d", tc.req, err, tc.status)
		}
	}
	s, err := st.Stage(ctx, "desk", "1", model.ImageDesktop, wire.PublishRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Root != model.ImageRoot || !slices.Equal(s.Names, []string{model.ImageRoot, model.ImageKernel}) && !slices.Equal(s.Names, []string{model.ImageKernel, model.ImageRoot}) {
		t.Errorf("staged %+v", s)
	}
	// Reserved: no upload into it meanwhile.
	if _, err := st.BeginUpload("eve", "desk", "1", "x", 1); statusOf(err) != http.StatusConflict {
		t.Errorf("upload while publishing: %v", err)
	}
	undo, err := s.Move()
	if err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(st.Root, "desk", "1")
	if _, err := artefact.Verify(final); err != nil {
		t.Fatalf("moved: %v", err)
	}
	undo()
	if _, err := os.Stat(final); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("undo left %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, artefact.SumsFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("undo left SHA256SUMS in staging: %v", err)
	}
	if _, err := s.Move(); err != nil {
		t.Fatal(err)
	}
	s.Done()
	s.Release()
	if _, err := os.Stat(filepath.Join(final, RecordName(model.ImageRoot))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("record published: %v", err)
	}
	if err := st.CheckNew("desk", "1"); statusOf(err) != http.StatusConflict {
		t.Errorf("CheckNew of a published directory: %v", err)
	}
	if _, err := st.Stage(ctx, "desk", "1", model.ImageDesktop, wire.PublishRequest{}); statusOf(err) != http.StatusConflict {
		t.Errorf("staging a published version: %v", err)
	}
	// The store's copy is what the catalogue may register, by size and sha256.
	v := &model.ImageVersion{Version: "1", SHA256: s.RootSHA256, Size: s.RootSize}
	if err := st.CheckVersion("desk", v); err != nil {
		t.Errorf("CheckVersion: %v", err)
	}
	v.SHA256 = strings.Repeat("00", 32)
	if err := st.CheckVersion("desk", v); statusOf(err) != http.StatusBadRequest {
		t.Errorf("CheckVersion of another sha256: %v", err)
	}
}

func TestListsRoot(t *testing.T) {
	a, b := strings.Repeat("aa", 32), strings.Repeat("bb", 32)
	for _, tc := range []struct {
		files []artefact.File
		want  string
		ok    bool
	}{
		{[]artefact.File{{Name: model.ImageRoot, SHA256: a}, {Name: "vmlinuz", SHA256: b}}, a, true},
		{[]artefact.File{{Name: model.ImageRoot, SHA256: a}, {Name: "vmlinuz", SHA256: b}}, b, false}, // not the root image
		{[]artefact.File{{Name: "disk.qcow2", SHA256: b}}, b, true},                                   // no root.squashfs: any file
		{nil, a, false},
	} {
		if got := ListsRoot(tc.files, tc.want); got != tc.ok {
			t.Errorf("ListsRoot(%v, %s) = %v", tc.files, tc.want[:4], got)
		}
	}
}

// TestOpen: only regular files by clean paths, nothing below a dot directory, nothing
// outside the directory.
func TestOpen(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	for _, f := range []string{"desk/1/vmlinuz", ".incoming/desk/2/vmlinuz"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("k"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want error // nil: served
	}{
		{"desk/1/vmlinuz", nil},
		{"desk/1", ErrNotServed},
		{".incoming/desk/2/vmlinuz", ErrNotServed},
		{"desk/.x", ErrNotServed},
		{"desk/../desk/1/vmlinuz", ErrBadPath},
		{"", ErrBadPath},
		{"desk/9", fs.ErrNotExist},
		{"out", ErrOutside},
	} {
		f, err := Open(dir, tc.name)
		if f != nil {
			f.Close()
		}
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Open(%q): %v, want %v", tc.name, err, tc.want)
		}
	}
}
