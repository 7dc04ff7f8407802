package test

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// The packages `make deb` builds (packaging/debian/control), by architecture.
var debPackages = []string{"overtime", "overtime-agent", "overtime-slurm", "overtime-initramfs"}
var debArch = map[string]string{"overtime-initramfs": "all"}

// buildDebs runs `make deb` (once per test binary, shared with the image builds) and
// returns the .deb files of the current version, by package name.
func buildDebs(t *testing.T, root, debVersion string) map[string]string {
	t.Helper()
	imagetest.Debs(t)
	debs := map[string]string{}
	for _, p := range debPackages {
		f := filepath.Join(root, "bin", "deb", p+"_"+debVersion+"_"+cmp.Or(debArch[p], "amd64")+".deb")
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("make deb did not build %s: %v", p, err)
		}
		debs[p] = f
	}
	return debs
}

func output(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// bookwormRoot returns a tarball of a clean Debian 12 minbase root with pkgs installed,
// built once with mmdebstrap and cached outside the checkout ($OVERTIME_CACHE, else
// /var/cache/overtime) under a hash of the mmdebstrap command line: a change of the
// packages' dependencies makes a new root, the date does not (delete the cache directory
// to pick up newer bookworm packages).
func bookwormRoot(t *testing.T, pkgs []string) string {
	t.Helper()
	args := []string{"--variant=minbase", "--include=" + strings.Join(pkgs, ","), "bookworm"}
	sum := sha256.Sum256([]byte("mmdebstrap\x00" + strings.Join(args, "\x00")))
	cache := os.Getenv("OVERTIME_CACHE")
	if cache == "" {
		cache = "/var/cache/overtime"
	}
	tarball := filepath.Join(cache, "debroot", "bookworm-minbase-"+hex.EncodeToString(sum[:8])+".tar")
	if _, err := os.Stat(tarball); err == nil {
		return tarball
	}
	if err := os.MkdirAll(filepath.Dir(tarball), 0o755); err != nil {
		t.Fatal(err)
	}
	// mmdebstrap picks the output format by the name: a tarball for .tar.
	tmp := strings.TrimSuffix(tarball, ".tar") + ".tmp.tar"
	t.Logf("building the Debian 12 root (once): mmdebstrap %s %s", strings.Join(args, " "), tarball)
	cmd := exec.Command("mmdebstrap", append(append([]string{"--quiet"}, args...), tmp)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, tarball); err != nil {
		t.Fatal(err)
	}
	return tarball
}

// runtimeDepends lists the packages the .debs depend on (first alternative, without
// version), leaving out the packages themselves: what the cached root carries, so that
// `dpkg -i` installs offline.
func runtimeDepends(t *testing.T, debs map[string]string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range debPackages {
		seen[p] = true
	}
	var pkgs []string
	for _, p := range debPackages {
		for _, dep := range strings.Split(output(t, "", "dpkg-deb", "-f", debs[p], "Depends"), ",") {
			name := strings.Fields(strings.TrimSpace(strings.Split(dep, "|")[0]))
			if len(name) == 0 || seen[name[0]] {
				continue
			}
			seen[name[0]] = true
			pkgs = append(pkgs, name[0])
		}
	}
	sort.Strings(pkgs)
	return pkgs
}

// TestDebianPackages builds the packages with `make deb`, installs them into a clean
// Debian 12 root (mmdebstrap minbase, cached) with dpkg, and checks there that the
// binaries report the version and commit the build embedded, that the package version is
// that version made Debian-valid (scripts/deb-version.sh), and that `systemd-analyze
// verify` passes on every unit the packages install (systemd-analyze runs on the host
// with --root: it needs no systemd as PID 1).
func TestDebianPackages(t *testing.T) {
	needs.Servers(t, "root", "dpkg-buildpackage (debhelper)", "lintian", "mmdebstrap", "systemd-analyze")
	if os.Geteuid() != 0 {
		t.Fatal("needs root (chroot, dpkg in the test root)")
	}
	root := testenv.RepoRoot(t)
	describe := output(t, root, "git", "describe", "--tags", "--always", "--dirty")
	commit := output(t, root, "git", "rev-parse", "HEAD")
	date := output(t, root, "git", "log", "-1", "--format=%cd", "--date=format:%Y%m%d")
	debVersion := output(t, root, "scripts/deb-version.sh", describe, date)

	debs := buildDebs(t, root, debVersion)
	// lintian: no error or warning (the overrides in packaging/debian say why each is
	// there).
	changes := filepath.Join(root, "bin", "deb", "overtime_"+debVersion+"_amd64.changes")
	if out, err := exec.Command("lintian", "--fail-on", "error,warning", changes).CombinedOutput(); err != nil {
		t.Errorf("lintian %s: %v\n%s", changes, err, out)
	}
	for p, f := range debs {
		if v := output(t, "", "dpkg-deb", "-f", f, "Version"); v != debVersion {
			t.Errorf("%s: package version %q, want %q (from git describe %q)", p, v, debVersion, describe)
		}
	}

	tarball := bookwormRoot(t, runtimeDepends(t, debs))
	dir := t.TempDir()
	output(t, "", "tar", "-xf", tarball, "-C", dir)
	var inRoot []string
	for _, p := range debPackages {
		dst := filepath.Join(dir, "tmp", filepath.Base(debs[p]))
		output(t, "", "cp", debs[p], dst)
		inRoot = append(inRoot, "/tmp/"+filepath.Base(debs[p]))
	}
	output(t, "", "chroot", append([]string{dir, "dpkg", "-i"}, inRoot...)...)

	// The versions the binaries embed, and the package versions dpkg recorded.
	var bi struct{ Version, Commit string }
	if err := json.Unmarshal([]byte(output(t, "", "chroot", dir, "overtime", "version", "-o", "json")), &bi); err != nil {
		t.Fatal(err)
	}
	if bi.Version != describe || bi.Commit != commit {
		t.Errorf("overtime version in the package root: %+v, want version %q commit %q", bi, describe, commit)
	}
	if got, want := output(t, "", "chroot", dir, "overtime-agent", "--version"), "overtime-agent version "+describe; got != want {
		t.Errorf("overtime-agent --version: %q, want %q", got, want)
	}
	for _, p := range debPackages {
		if v := output(t, "", "chroot", dir, "dpkg-query", "-W", "-f=${Version}", p); v != debVersion {
			t.Errorf("installed %s: version %q, want %q", p, v, debVersion)
		}
	}

	// Every unit the packages install: services and slices, and the units the drop-ins
	// (machine.slice.d/, user.slice.d/) extend.
	var units []string
	unitDir := regexp.MustCompile(`^/lib/systemd/system/(?:([^/]+\.(?:service|slice|socket|timer|target|path))|([^/]+)\.d/[^/]+\.conf)$`)
	for _, p := range debPackages {
		for _, f := range strings.Split(output(t, "", "chroot", dir, "dpkg-query", "-L", p), "\n") {
			if m := unitDir.FindStringSubmatch(f); m != nil {
				units = append(units, "/lib/systemd/system/"+m[1]+m[2])
			}
		}
	}
	slices.Sort(units)
	units = slices.Compact(units)
	if len(units) < 6 {
		t.Fatalf("found only these units in the packages: %q", units)
	}
	for _, u := range units {
		cmd := exec.Command("systemd-analyze", "verify", "--root="+dir, u)
		// Documentation=man:… is checked with man(1): point it at the root's pages.
		cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(dir, "usr/share/man"))
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify --root=%s %s: %v\n%s", dir, u, err, out)
		}
		data, err := os.ReadFile(filepath.Join(dir, u))
		if err != nil {
			continue // a slice only extended by a drop-in lives in systemd's package
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "ExecStart=") && !strings.HasPrefix(line, "ExecStart=/usr/bin/") &&
				!strings.HasPrefix(line, "ExecStart=/usr/sbin/") && !strings.HasPrefix(line, "ExecStart=/usr/lib/overtime/") {
				t.Errorf("%s: %q does not run a program from /usr/bin (or /usr/sbin, for daemons, or the packages' own helpers in /usr/lib/overtime)", u, line)
			}
		}
	}
	t.Logf("verified %d units: %s", len(units), strings.Join(units, " "))

	// Enabled where installed: the node agent and the seat login (a desktop image runs them at boot) and the
	// exam lockdown's path unit (it watches /run/overtime/exam; its service is static);
	// not the headless course VM player, nor the site manager's or Slurm's daemons (they
	// need configuration first).
	wants := filepath.Join(dir, "etc/systemd/system/multi-user.target.wants")
	for unit, enabled := range map[string]bool{"overtime-agent.service": true, "overtime-seat.service": true, "overtime-course-vm.service": false,
		"overtime-serve.service": false, "overtime-slurm-sync.service": false, "overtime-exam.service": false} {
		if _, err := os.Lstat(filepath.Join(wants, unit)); (err == nil) != enabled {
			t.Errorf("%s: enabled %v after install, want %v", unit, err == nil, enabled)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "etc/systemd/system/paths.target.wants/overtime-exam.path")); err != nil {
		t.Errorf("overtime-exam.path is not enabled after install: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/lib/overtime/exam-lockdown")); err != nil {
		t.Errorf("exam lockdown helper: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "usr/lib/overtime/seat-home-notice")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("homes notice script (pam_exec runs it): %v", err)
	}
	// The agent reaches each session's bus (/run/user/UID/bus) for its notices, and no home.
	if unit, err := os.ReadFile(filepath.Join(dir, "lib/systemd/system/overtime-agent.service")); err != nil ||
		strings.Contains(string(unit), "\nProtectHome=") || !strings.Contains(string(unit), "\nInaccessiblePaths=-/home -/root\n") {
		t.Errorf("overtime-agent.service must hide the homes but not /run/user: %v\n%s", err, unit)
	}
	if fi, err := os.Stat(filepath.Join(dir, "usr/lib/overtime/course-vm-session")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("the course VM session's program (the greeter runs it): %v", err)
	}
}
