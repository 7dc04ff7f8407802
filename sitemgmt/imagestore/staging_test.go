package imagestore

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRecord(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	r := Record{SHA256: sum, Size: 42, UID: "carol"}
	got, ok := ParseRecord(r.Format())
	if !ok || got != r {
		t.Fatalf("round trip: %+v %v", got, ok)
	}
	// A record of an earlier release names no uploader.
	if got, ok := ParseRecord([]byte(sum + " 42\n")); !ok || got.UID != "" || got.Size != 42 {
		t.Errorf("two-field record: %+v %v", got, ok)
	}
	for _, bad := range []string{"", sum, "zz 1 carol", sum + " -1 carol", sum + " x carol", sum + " 1 carol extra"} {
		if _, ok := ParseRecord([]byte(bad)); ok {
			t.Errorf("ParseRecord(%q) accepted", bad)
		}
	}
}

// stage writes a staged file with its record into root's staging area.
func stage(t *testing.T, root, image, version, file, uid string, size int, at time.Time) {
	t.Helper()
	dir := filepath.Join(root, Incoming, image, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := Record{SHA256: strings.Repeat("cd", 32), Size: int64(size), UID: uid}
	if err := os.WriteFile(filepath.Join(dir, RecordName(file)), rec.Format(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, file), filepath.Join(dir, RecordName(file)), dir} {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStagedBytes(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	if n, err := StagedBytes(root, "carol"); err != nil || n != 0 {
		t.Fatalf("empty store: %d %v", n, err)
	}
	stage(t, root, "vm-a", "1", "disk.qcow2", "carol", 300, now)
	stage(t, root, "vm-a", "1", "vm.json", "carol", 20, now)
	stage(t, root, "vm-b", "2", "disk.qcow2", "carol", 100, now)
	stage(t, root, "vm-b", "2", "other.qcow2", "eve", 1000, now)
	// A part still streaming has no record: it is bounded by the uploads in flight.
	if err := os.WriteFile(filepath.Join(root, Incoming, "vm-b", "2", ".x.part-1"), make([]byte, 500), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := StagedBytes(root, "carol"); err != nil || n != 420 {
		t.Errorf("carol's staged bytes: %d %v, want 420", n, err)
	}
	if n, _ := StagedBytes(root, "eve"); n != 1000 {
		t.Errorf("eve's staged bytes: %d, want 1000", n)
	}
}

func TestSweepStaging(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	old := now.Add(-8 * 24 * time.Hour)
	stage(t, root, "vm-a", "old", "disk.qcow2", "carol", 10, old)
	stage(t, root, "vm-a", "busy", "disk.qcow2", "carol", 10, old)
	stage(t, root, "vm-b", "old", "disk.qcow2", "eve", 10, old)
	stage(t, root, "vm-b", "fresh", "disk.qcow2", "eve", 10, now.Add(-time.Hour))
	// A version whose directory is old but one of whose files was written lately.
	stage(t, root, "vm-b", "mixed", "disk.qcow2", "eve", 10, old)
	if err := os.Chtimes(filepath.Join(root, Incoming, "vm-b", "mixed", "disk.qcow2"), now, now); err != nil {
		t.Fatal(err)
	}
	busy := func(key string) bool { return key == "vm-a/busy" }
	removed, err := SweepStaging(root, DefaultStagingTTL, now, busy)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{"vm-a/old", "vm-b/old"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, kept := range []string{"vm-a/busy", "vm-b/fresh", "vm-b/mixed"} {
		if _, err := os.Stat(filepath.Join(root, Incoming, kept, "disk.qcow2")); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}
	// Nothing outside the staging area is looked at.
	if err := os.MkdirAll(filepath.Join(root, "vm-a", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(root, "vm-a", "1"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := SweepStaging(root, DefaultStagingTTL, now, busy); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "vm-a", "1")); err != nil {
		t.Errorf("a published version's directory: %v", err)
	}
}
