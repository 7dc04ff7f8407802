package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps lists the packages the package pattern pkg links (`go list -deps`, run in the
// repository root), for tests that keep a binary free of what it must not carry. Skips
// when the go command is not installed (a test binary run on its own).
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", pkg)
	cmd.Dir = RepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

// ForbiddenDeps returns the packages of deps that are one of forbidden or below one.
func ForbiddenDeps(deps, forbidden []string) []string {
	var bad []string
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}
