package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	for name, tc := range map[string]struct {
		old  []byte // nil: no file before
		data []byte
		perm os.FileMode
	}{
		"new file":           {nil, []byte("hello\n"), 0o644},
		"replace":            {[]byte("old content that is longer\n"), []byte("new\n"), 0o644},
		"secret":             {nil, []byte("token\n"), 0o600},
		"empty":              {[]byte("x"), []byte{}, 0o640},
		"mode beyond umask":  {nil, []byte("x"), 0o666},
		"replace keeps perm": {[]byte("x"), []byte("y"), 0o600},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.conf")
			if tc.old != nil {
				if err := os.WriteFile(path, tc.old, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, tc.data, tc.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(tc.data) {
				t.Errorf("content %q, want %q", got, tc.data)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tc.perm)
			}
			assertOnly(t, dir, "f.conf")
		})
	}
}

// TestWriteFileFailure: a write that cannot complete leaves the old file as it was and no
// temporary file behind.
func TestWriteFileFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.conf")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory in place of the target: everything up to the rename succeeds, the rename
	// fails, so the clean-up path after a written temporary file is exercised.
	blocked := filepath.Join(dir, "sub")
	if err := os.Mkdir(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blocked, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(blocked, []byte("new\n"), 0o644); err == nil {
		t.Fatal("replacing a non-empty directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(blocked, "keep")); err != nil {
		t.Errorf("what was at the target is gone after a failed write: %v", err)
	}
	// A directory that does not exist: the temporary file cannot be created.
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "old\n" {
		t.Fatalf("old file = %q, %v; want it intact", got, err)
	}
	assertOnly(t, dir, "f.conf", "sub")
}

// assertOnly fails unless dir holds exactly the given names (no temporary files).
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, e := range ents {
		if !want[e.Name()] {
			t.Errorf("unexpected file %s left in %s", e.Name(), dir)
		}
		delete(want, e.Name())
	}
	for n := range want {
		t.Errorf("%s missing from %s", n, dir)
	}
}
