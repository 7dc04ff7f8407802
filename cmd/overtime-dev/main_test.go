package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/testenv"
)

// TestBinaryDeps: overtime-dev is built for the demo and the tests, but links no testing
// package and no test environment either: its slapd is slapdenv's starter, not slapdtest.
func TestBinaryDeps(t *testing.T) {
	deps := testenv.Deps(t, "./cmd/overtime-dev")
	if bad := testenv.ForbiddenDeps(deps, []string{"testing", "github.com/overtime-hpc/overtime/internal/testenv"}); len(bad) > 0 {
		t.Errorf("cmd/overtime-dev links %v (`go list -deps ./cmd/overtime-dev` shows through which package)", bad)
	}
}

// TestCommands: the commands and flags the demo (scripts/demo.sh) and the boot lab
// (internal/testenv/bootlab) run, with the flags they require.
func TestCommands(t *testing.T) {
	root := newRoot()
	for _, tc := range []struct {
		cmd      string
		flags    []string
		required []string
	}{
		{"slapd", []string{"dir", "port", "base-dn", "root-password", "service-password", "tls-cert", "tls-key", "tls-ca", "ldaps-port"},
			[]string{"dir", "root-password"}},
		{"slapd-stop", []string{"dir"}, []string{"dir"}},
		{"forward", []string{"listen", "to", "netns"}, []string{"to", "netns"}},
		{"screen dump", []string{"monitor", "limit"}, []string{"monitor"}},
		{"screen changed", nil, nil},
		{"screen type", []string{"monitor", "pause", "enter"}, []string{"monitor"}},
		{"screen key", []string{"monitor"}, []string{"monitor"}},
	} {
		path := strings.Fields(tc.cmd)
		c, _, err := root.Find(path)
		if err != nil || c.Name() != path[len(path)-1] {
			t.Errorf("no %s command: %v", tc.cmd, err)
			continue
		}
		for _, f := range tc.flags {
			if c.Flags().Lookup(f) == nil {
				t.Errorf("%s has no --%s", tc.cmd, f)
			}
		}
		for _, f := range tc.required {
			if fl := c.Flags().Lookup(f); fl == nil || fl.Annotations[cobra.BashCompOneRequiredFlag] == nil {
				t.Errorf("%s: --%s is not required", tc.cmd, f)
			}
		}
	}
	if c, _, err := root.Find([]string{"dev"}); err == nil && c.Name() == "dev" {
		t.Error("overtime-dev has a dev command: its commands are at the top")
	}
}

// TestNotPackaged: no Debian package builds or installs overtime-dev (packaging/debian
// builds the binaries in rules and installs them by the *.install files).
func TestNotPackaged(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(t), "packaging", "debian")
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("packaging/debian: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a directory (source/)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue // the rules' comment saying why it is not built
			}
			if strings.Contains(line, "overtime-dev") {
				t.Errorf("%s:%d packages the development tools: %s", f, i+1, line)
			}
		}
	}
}
