// Package images holds the image recipes and their builder (build.sh); its tests run the
// builder itself.
package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// TestBuildReproducible: a second build of compute-guest from the same inputs (the base
// cached, the same .debs, recipe and SOURCE_DATE_EPOCH) is bit for bit the first: the
// same root.squashfs, kernel, initrd and manifest (the package list among it).
func TestBuildReproducible(t *testing.T) {
	first := imagetest.Get(t, "compute-guest")
	again := filepath.Join(t.TempDir(), "again")
	cmd := exec.Command("./build.sh", "--debs", imagetest.Debs(t), "compute-guest", again)
	cmd.Env = imagetest.BuildEnv() // the squashfs level of the first build is among the inputs
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("second build: %v\n%s", err, out)
	}
	a, err := artefact.Read(first.Dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := artefact.Verify(again)
	if err != nil {
		t.Fatal(err)
	}
	if string(artefact.Format(a)) != string(artefact.Format(b)) {
		t.Errorf("two builds of the same inputs differ:\n%s\n%s", artefact.Format(a), artefact.Format(b))
	}
}

// TestBuildFailureKeepsOutput: a recipe whose customize script fails publishes nothing:
// the output directory keeps what it had, and the error names the script.
func TestBuildFailureKeepsOutput(t *testing.T) {
	imagetest.Get(t, "compute-guest") // the base of the same packages is cached
	recipes := t.TempDir()
	src, err := os.ReadFile(filepath.Join("recipes", "compute-guest", "recipe"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(recipes, "broken")
	os.MkdirAll(filepath.Join(dir, "customize.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "recipe"), src, 0o644)
	os.WriteFile(filepath.Join(dir, "customize.d", "50-fails.sh"), []byte("echo 'site tweak failed' >&2\nexit 3\n"), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "marker"), []byte("previous build"), 0o644)
	cmd := exec.Command("./build.sh", "--debs", imagetest.Debs(t), "broken", out)
	cmd.Env = append(imagetest.BuildEnv(), "OVERTIME_RECIPES="+recipes)
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "50-fails.sh") || !strings.Contains(string(b), "site tweak failed") {
		t.Fatalf("a failing customize script: %v\n%s", err, b)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "marker")); string(got) != "previous build" {
		t.Errorf("the output directory changed after a failed build")
	}
	if _, err := os.Stat(filepath.Join(out, "root.squashfs")); err == nil {
		t.Errorf("a failed build left a root.squashfs")
	}
}

// TestBuildRefuses: bad recipe names and missing inputs are refused with a clear message
// before anything is built.
func TestBuildRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--key", "no-such"}, "", "no recipe no-such"},
		{[]string{"--key", "../etc"}, "", "letters, digits and - only"},
		{[]string{"--key", "Desktop"}, "", "letters, digits and - only"},
		{[]string{"--debs", t.TempDir(), "--key", "compute-guest"}, "", "run make deb first"},
		{[]string{"compute-guest"}, "", "usage"},
	} {
		cmd := exec.Command("./build.sh", c.args...)
		cmd.Env = append(os.Environ(), c.env)
		b, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(b), c.want) {
			t.Errorf("build.sh %v: %v %q, want an error saying %q", c.args, err, b, c.want)
		}
	}
}

// TestRecipesShellcheck: the builder and every customize script pass shellcheck.
func TestRecipesShellcheck(t *testing.T) {
	needs.Servers(t, "shellcheck")
	files, _ := filepath.Glob("recipes/*/customize.d/*.sh")
	if out, err := exec.Command("shellcheck", append([]string{"build.sh"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
	if out, err := exec.Command("shellcheck", "-s", "sh", "-e", "SC2034", filepath.Join("..", "scheduler-plugin", "guest", "guest-init"), filepath.Join("..", "scheduler-plugin", "guest", "guest-udhcpc")).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}
