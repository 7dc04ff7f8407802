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

// fakeDeb builds dir/NAME_VERSION_amd64.deb holding nothing but its control file, with
// the given Depends (build.sh reads a .deb's name and dependencies, not its files).
func fakeDeb(t *testing.T, dir, name, version, depends string) string {
	t.Helper()
	return debWith(t, dir, name, version, depends, nil)
}

// build runs build.sh with args and the environment env (added to this one's).
func build(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("./build.sh", args...)
	cmd.Env = append(append(os.Environ(), "SOURCE_DATE_EPOCH=1"), env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestBuildSiteSlurm: the compute guest takes the site's Slurm as .debs (SLURM_DEBS):
// they go over the base like Overtime's own, in place of Debian's slurmd (whose
// packages leave the base), their dependencies come from Debian, and they are part of
// the image's key; overtime-slurm is the one built for that Slurm
// (scripts/site-slurm-deb.sh, TestSiteSlurmDeb), without Debian's libslurm. Checked
// with --list and --key, without building the image.
func TestBuildSiteSlurm(t *testing.T) {
	needs.Servers(t, "dpkg-deb", "gcc", "libslurm-dev", "libcurl4-openssl-dev", "libjson-c-dev")
	debs := t.TempDir()
	fakeDeb(t, debs, "overtime-slurm", "0.0.1", "libc6 (>= 2.34), libcurl4 (>= 7.16.2), libjson-c5 (>= 0.15), libslurm38 (>= 22.05.8)")
	fakeDeb(t, debs, "overtime-initramfs", "0.0.1", "initramfs-tools")
	// The -dev package with Debian's headers relabelled (siteslurm_test.go), the base
	// package with a plugin in SchedMD's PluginDir.
	site := siteDebs(t, sitePkg{name: "slurm-smd-dev", version: "24.11.5-1", headers: 0x180b05})
	debWith(t, site, "slurm-smd", "24.11.5-1", "libc6 (>= 2.34), libhwloc15 (>= 2.0), libmunge2 (>= 0.5.8), perl:any | perl-base",
		map[string][]byte{"usr/lib/x86_64-linux-gnu/slurm/select_cons_tres.so": []byte("a plugin of Slurm's\n")})
	smdSlurmd := fakeDeb(t, site, "slurm-smd-slurmd", "24.11.5-1", "slurm-smd (= 24.11.5-1), libhwloc15")

	list := func(env ...string) (debian, deb map[string]bool) {
		t.Helper()
		out, err := build(t, env, "--debs", debs, "--list", "compute-guest")
		if err != nil {
			t.Fatalf("--list: %v\n%s", err, out)
		}
		debian, deb = map[string]bool{}, map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			kind, what, _ := strings.Cut(line, " ")
			switch kind {
			case "debian":
				debian[what] = true
			case "deb":
				deb[filepath.Base(what)] = true
			default:
				t.Fatalf("--list line %q", line)
			}
		}
		return debian, deb
	}
	debian, deb := list()
	for _, p := range []string{"slurmd", "slurm-wlm-basic-plugins", "munge", "libslurm38", "libcurl4"} {
		if !debian[p] {
			t.Errorf("Debian's Slurm build: %s not in the base (%v)", p, debian)
		}
	}
	if len(deb) != 2 || !deb["overtime-slurm_0.0.1_amd64.deb"] || !deb["overtime-initramfs_0.0.1_amd64.deb"] {
		t.Errorf("Debian's Slurm build installs %v over the base, want overtime-slurm and overtime-initramfs only", deb)
	}

	debian, deb = list("SLURM_DEBS=" + site)
	for _, p := range []string{"slurmd", "slurm-wlm-basic-plugins", "slurm-smd", "slurm-smd-slurmd", "perl:any"} {
		if debian[p] {
			t.Errorf("with SLURM_DEBS: %s still comes from Debian", p)
		}
	}
	for _, p := range []string{"munge", "libhwloc15", "libmunge2", "perl", "libcurl4"} {
		if !debian[p] {
			t.Errorf("with SLURM_DEBS: %s (a dependency) not in the base (%v)", p, debian)
		}
	}
	if debian["libslurm38"] {
		t.Errorf("with SLURM_DEBS: Debian's libslurm38 still in the base: overtime-slurm not built for the site's Slurm")
	}
	for _, f := range []string{"overtime-slurm_0.0.1+slurm24.11_amd64.deb", "slurm-smd_24.11.5-1_amd64.deb", "slurm-smd-slurmd_24.11.5-1_amd64.deb", "slurm-smd-dev_24.11.5-1_amd64.deb"} {
		if !deb[f] {
			t.Errorf("with SLURM_DEBS: %s not installed over the base (%v)", f, deb)
		}
	}
	if deb["overtime-slurm_0.0.1_amd64.deb"] {
		t.Errorf("with SLURM_DEBS: the overtime-slurm built for Debian's Slurm still installed (%v)", deb)
	}

	// The site's packages are inputs of the image: another build of them is another image.
	key := func(env ...string) string {
		t.Helper()
		out, err := build(t, env, "--debs", debs, "--key", "compute-guest")
		if err != nil {
			t.Fatalf("--key: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	debian12, site1 := key(), key("SLURM_DEBS="+site)
	if debian12 == site1 {
		t.Errorf("the image key does not change with SLURM_DEBS: %s", site1)
	}
	os.Remove(smdSlurmd)
	fakeDeb(t, site, "slurm-smd-slurmd", "24.11.5-1", "slurm-smd (= 24.11.5-1), libhwloc15, libpmix2")
	if site2 := key("SLURM_DEBS=" + site); site2 == site1 || site2 == debian12 {
		t.Errorf("a rebuilt slurmd .deb keeps the key %s", site2)
	}

	// A directory without slurmd, or with a file that is not a .deb, is refused at once.
	noSlurmd := t.TempDir()
	fakeDeb(t, noSlurmd, "slurm-smd", "24.11.5-1", "")
	junk := t.TempDir()
	os.WriteFile(filepath.Join(junk, "slurmd_24.11.5-1_amd64.deb"), []byte("not a deb"), 0o644)
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(t.TempDir(), "missing"), "no slurmd_*.deb or slurm-smd-slurmd_*.deb"},
		{noSlurmd, "no slurmd_*.deb or slurm-smd-slurmd_*.deb"},
		{junk, "slurmd_24.11.5-1_amd64.deb is not a .deb"},
	} {
		if out, err := build(t, []string{"SLURM_DEBS=" + c.dir}, "--debs", debs, "--key", "compute-guest"); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("SLURM_DEBS=%s: %v %q, want an error saying %q", c.dir, err, out, c.want)
		}
	}
}

// TestBuildOvertimeDependencies: a recipe names the Overtime packages it wants; the ones
// they depend on come along (dpkg -i installs no dependencies), of either architecture
// (overtime-initramfs is Architecture: all), with their own Debian dependencies in the
// base. One that make deb did not build is named.
func TestBuildOvertimeDependencies(t *testing.T) {
	needs.Servers(t, "dpkg-deb")
	debs := t.TempDir()
	fakeDeb(t, debs, "overtime-agent", "0.0.1", "overtime-initramfs (= 0.0.1), crun, systemd")
	f := fakeDeb(t, debs, "overtime-initramfs", "0.0.1", "initramfs-tools, busybox | busybox-static, nfs-common")
	if err := os.Rename(f, filepath.Join(debs, "overtime-initramfs_0.0.1_all.deb")); err != nil {
		t.Fatal(err)
	}
	out, err := build(t, nil, "--debs", debs, "--list", "desktop-minimal")
	if err != nil {
		t.Fatalf("--list: %v\n%s", err, out)
	}
	for _, want := range []string{"deb " + filepath.Join(debs, "overtime-agent_0.0.1_amd64.deb"), "deb " + filepath.Join(debs, "overtime-initramfs_0.0.1_all.deb"),
		"debian initramfs-tools", "debian busybox", "debian nfs-common", "debian crun"} {
		if !strings.Contains("\n"+out+"\n", "\n"+want+"\n") {
			t.Errorf("--list desktop-minimal lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "busybox-static") || strings.Contains(out, "debian overtime") {
		t.Errorf("--list takes an alternative or an Overtime package from Debian:\n%s", out)
	}

	os.Remove(filepath.Join(debs, "overtime-initramfs_0.0.1_all.deb"))
	out, err = build(t, nil, "--debs", debs, "--list", "desktop-minimal")
	if err == nil || !strings.Contains(out, "no overtime-initramfs_*.deb in "+debs+": run make deb first") {
		t.Errorf("a missing dependency: %v\n%s", err, out)
	}
}
