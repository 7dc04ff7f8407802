package tools

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "ot-test-tool")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "ot-not-exec"), []byte("x"), 0o644)
	t.Setenv("PATH", "")
	for _, tc := range []struct{ name, want string }{
		{"ot-test-tool", exe},                  // found in the extra directories
		{"ot-not-exec", ""},                    // not executable
		{"ot-missing", ""},                     // nowhere
		{"/opt/x/scontrol", "/opt/x/scontrol"}, // a path is taken as is
	} {
		if got := Find(tc.name, "/nonexistent", dir); got != tc.want {
			t.Errorf("Find(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	t.Setenv("PATH", dir)
	if got := Find("ot-test-tool"); got != exe {
		t.Errorf("Find through PATH = %q", got)
	}
}
