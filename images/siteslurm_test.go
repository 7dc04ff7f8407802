package images

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// debianSlurmHeaders is where Debian 12's libslurm-dev (Slurm 22.05) puts slurm.h,
// spank.h & co.: the fake site packages below carry them, relabelled.
const debianSlurmHeaders = "/usr/include/slurm"

// debianLibslurm is Debian 12's libslurm38 (Slurm 22.05): the fake site packages carry a
// copy of it under the SONAME of their release (patchelf --set-soname).
const debianLibslurm = "/usr/lib/x86_64-linux-gnu/libslurm.so.38.0.0"

// sitePkg is one package of a fake site's Slurm: name and version; headers, when not
// zero, makes it carry Debian's Slurm headers in usr/include/slurm with that
// SLURM_VERSION_NUMBER in slurm_version.h (noSpank leaves spank.h out, spank replaces
// it; from 23.11 on slurm.h's hostlist_t is made the structure, as in 23.11's headers,
// unless oldHostlist); pluginDir, when set, puts a plugin there (as the base package has
// Slurm's own). libslurm, when not zero, makes it ship Debian's libslurm as
// libslurm.so.N.0.0 with its link libslurm.so.N in libDir (default the multiarch
// directory), its SONAME set to libslurm.so.N (or to soname when that is set); devLink
// N adds the link libslurm.so to libslurm.so.N.0.0 (as -dev packages have it).
type sitePkg struct {
	name, version string
	headers       uint32
	noSpank       bool
	spank         string
	oldHostlist   bool
	pluginDir     string
	libslurm      int
	libDir        string
	soname        string
	devLink       int
}

const multiarchLibDir = "/usr/lib/x86_64-linux-gnu"

// debWith builds dir/NAME_VERSION_amd64.deb with files (path in the package: content).
func debWith(t *testing.T, dir, name, version, depends string, files map[string][]byte) string {
	t.Helper()
	return debWithLinks(t, dir, name, version, depends, files, nil)
}

// debWithLinks is debWith with symbolic links too (path in the package: target).
func debWithLinks(t *testing.T, dir, name, version, depends string, files map[string][]byte, links map[string]string) string {
	t.Helper()
	tree := filepath.Join(t.TempDir(), name)
	for p, b := range files {
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(tree, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(tree, "DEBIAN"), 0o755); err != nil {
		t.Fatal(err)
	}
	control := "Package: " + name + "\nVersion: " + version + "\nArchitecture: amd64\nMaintainer: test <test@example.org>\nDescription: test\n"
	if depends != "" {
		control += "Depends: " + depends + "\n"
	}
	if err := os.WriteFile(filepath.Join(tree, "DEBIAN", "control"), []byte(control), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+"_"+version+"_amd64.deb")
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", tree, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
	return out
}

// fakeLibslurm is Debian's libslurm (22.05) with the SONAME soname, in a file of its own.
func fakeLibslurm(t *testing.T, soname string) string {
	t.Helper()
	b, err := os.ReadFile(debianLibslurm)
	if err != nil {
		t.Fatalf("no Debian libslurm (install libslurm-dev: scripts/deps.sh): %v", err)
	}
	f := filepath.Join(t.TempDir(), "libslurm.so")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if soname != "libslurm.so.38" {
		if out, err := exec.Command("patchelf", "--set-soname", soname, f).CombinedOutput(); err != nil {
			t.Fatalf("patchelf --set-soname %s (install patchelf: scripts/deps.sh): %v\n%s", soname, err, out)
		}
	}
	return f
}

// hostlistWord is slurm.h's hostlist_t, wherever it is used (not __hostlist_t_defined).
var hostlistWord = regexp.MustCompile(`\bhostlist_t\b`)

// hostlist2311 makes Debian's (22.05) slurm.h declare hostlist_t as 23.11's does: the
// structure, handled by pointer (typedef struct hostlist hostlist_t; hostlist_t *hl).
func hostlist2311(t *testing.T, h []byte) []byte {
	t.Helper()
	const typedef = "typedef struct hostlist * hostlist_t;"
	s := string(h)
	if !strings.Contains(s, typedef) {
		t.Fatalf("Debian's slurm.h has no %q: the fake 23.11 headers cannot be made", typedef)
	}
	s = strings.Replace(s, typedef, "typedef struct hostlist HOSTLIST_STRUCTURE;", 1)
	s = hostlistWord.ReplaceAllString(s, "hostlist_t *")
	return []byte(strings.Replace(s, "HOSTLIST_STRUCTURE", "hostlist_t", 1))
}

// siteDebs makes a directory of a site's Slurm .debs from Debian 12's on this machine.
func siteDebs(t *testing.T, pkgs ...sitePkg) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range pkgs {
		files := map[string][]byte{}
		links := map[string]string{}
		if p.headers != 0 {
			hs, err := filepath.Glob(filepath.Join(debianSlurmHeaders, "*.h"))
			if err != nil || len(hs) == 0 {
				t.Fatalf("no Slurm headers in %s (install libslurm-dev: scripts/deps.sh)", debianSlurmHeaders)
			}
			for _, h := range hs {
				b, err := os.ReadFile(h)
				if err != nil {
					t.Fatal(err)
				}
				switch filepath.Base(h) {
				case "slurm_version.h":
					var lines []string
					for _, l := range strings.Split(string(b), "\n") {
						if strings.HasPrefix(l, "#define SLURM_VERSION_NUMBER ") {
							l = fmt.Sprintf("#define SLURM_VERSION_NUMBER 0x%06x", p.headers)
						}
						lines = append(lines, l)
					}
					b = []byte(strings.Join(lines, "\n"))
				case "spank.h":
					if p.noSpank {
						continue
					}
					if p.spank != "" {
						b = []byte(p.spank)
					}
				case "slurm.h":
					if p.headers >= 0x170b00 && !p.oldHostlist {
						b = hostlist2311(t, b)
					}
				}
				files["usr/include/slurm/"+filepath.Base(h)] = b
			}
		}
		if p.pluginDir != "" {
			files[strings.TrimPrefix(p.pluginDir, "/")+"/select_cons_tres.so"] = []byte("a plugin of Slurm's\n")
		}
		if p.libslurm != 0 {
			libDir := p.libDir
			if libDir == "" {
				libDir = multiarchLibDir
			}
			soname := p.soname
			if soname == "" {
				soname = fmt.Sprintf("libslurm.so.%d", p.libslurm)
			}
			b, err := os.ReadFile(fakeLibslurm(t, soname))
			if err != nil {
				t.Fatal(err)
			}
			d := strings.TrimPrefix(libDir, "/")
			files[fmt.Sprintf("%s/libslurm.so.%d.0.0", d, p.libslurm)] = b
			links[fmt.Sprintf("%s/libslurm.so.%d", d, p.libslurm)] = fmt.Sprintf("libslurm.so.%d.0.0", p.libslurm)
		}
		if p.devLink != 0 {
			links[strings.TrimPrefix(multiarchLibDir, "/")+"/libslurm.so"] = fmt.Sprintf("libslurm.so.%d.0.0", p.devLink)
		}
		debWithLinks(t, dir, p.name, p.version, "", files, links)
	}
	return dir
}

const (
	smdPluginDir    = "/usr/lib/x86_64-linux-gnu/slurm"
	debianPluginDir = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
)

// siteSlurmDeb runs scripts/site-slurm-deb.sh; stdout and stderr apart.
func siteSlurmDeb(t *testing.T, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(filepath.Join("..", "scripts", "site-slurm-deb.sh"), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// pluginVersion is the value of the plugin's plugin_version, the Slurm release its
// headers said (SPANK_PLUGIN: SLURM_VERSION_NUMBER), which Slurm checks when it loads it.
func pluginVersion(t *testing.T, so string) (uint32, []string) {
	t.Helper()
	f, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != "plugin_version" || s.Section == elf.SHN_UNDEF {
			continue
		}
		sec := f.Sections[s.Section]
		b, err := sec.Data()
		if err != nil {
			t.Fatal(err)
		}
		off := s.Value - sec.Addr
		return binary.LittleEndian.Uint32(b[off : off+4]), libs
	}
	t.Fatalf("%s: no plugin_version", so)
	return 0, nil
}

// TestSiteSlurmDeb: overtime-slurm as make deb built it (for Debian's Slurm 22.05), rebuilt
// for a site's Slurm of each packaging: the version gets +slurmX.Y, the plugin goes into
// that packaging's PluginDir and nowhere else, built against the site's headers (its
// plugin_version is their release) with the symbols Slurm looks up; the sync daemon is
// rebuilt against the same headers and linked against the site's libslurm (Debian's, given
// the SONAME of the site's release): it NEEDs that SONAME and no other libslurm, has no
// RPATH or RUNPATH, and loads with it; its man page, unit and maintainer scripts stay;
// Depends names the site's base package of that release and the package of its libslurm,
// no Debian Slurm; and the same inputs give the same bytes. The fake sites' headers are
// Debian's 22.05 relabelled, with 23.11's hostlist_t: the daemon is compiled and linked
// here, never run against a real 23.11+ slurmctld.
func TestSiteSlurmDeb(t *testing.T) {
	needs.Servers(t, "dpkg-deb", "gcc", "binutils", "patchelf", "libslurm-dev", "libcurl4-openssl-dev", "libjson-c-dev", "lintian")
	debs := imagetest.Debs(t)
	ours, _ := filepath.Glob(filepath.Join(debs, "overtime-slurm_*_amd64.deb"))
	if len(ours) != 1 {
		t.Fatalf("make deb: overtime-slurm .debs in %s: %v, want one", debs, ours)
	}
	ourVersion := field(t, ours[0], "Version")
	if !strings.Contains(field(t, ours[0], "Depends"), "libslurm38") {
		t.Fatalf("make deb's overtime-slurm does not depend on Debian's libslurm38 (%s): this test's premise is gone", field(t, ours[0], "Depends"))
	}
	ourControl := filepath.Join(t.TempDir(), "control")
	if b, err := exec.Command("dpkg-deb", "-e", ours[0], ourControl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v\n%s", err, b)
	}

	for _, c := range []struct {
		name      string
		site      []sitePkg
		release   string
		pluginDir string
		depends   string
		header    uint32
		soname    string
		libPkg    string
	}{
		{
			name: "SchedMD",
			site: []sitePkg{
				// SchedMD's slurm-smd ships libslurm, and the libslurm.so link too.
				{name: "slurm-smd", version: "24.11.5-1", pluginDir: smdPluginDir, libslurm: 42, devLink: 42},
				{name: "slurm-smd-slurmd", version: "24.11.5-1"},
				{name: "slurm-smd-client", version: "24.11.5-1"},
				{name: "slurm-smd-dev", version: "24.11.5-1", headers: 0x180b05},
				// Not Slurm's: its version does not count.
				{name: "libpmix2", version: "5.0.1-4"},
			},
			release: "24.11", pluginDir: smdPluginDir, header: 0x180b05,
			depends: "slurm-smd (>= 24.11), slurm-smd (<< 24.12~)",
			soname:  "libslurm.so.42", libPkg: "slurm-smd",
		},
		{
			name: "Debian-style",
			site: []sitePkg{
				{name: "slurmd", version: "23.11.4-1~bpo12+1"},
				{name: "slurm-wlm-basic-plugins", version: "23.11.4-1~bpo12+1", pluginDir: debianPluginDir},
				{name: "libslurm40", version: "23.11.4-1~bpo12+1", libslurm: 40},
				{name: "libslurm-dev", version: "23.11.4-1~bpo12+1", headers: 0x170b04, devLink: 40},
			},
			release: "23.11", pluginDir: debianPluginDir, header: 0x170b04,
			depends: "slurm-wlm-basic-plugins (>= 23.11), slurm-wlm-basic-plugins (<< 23.12~), libslurm40 (>= 23.11)",
			soname:  "libslurm.so.40", libPkg: "libslurm40",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			site := siteDebs(t, c.site...)
			outdir := filepath.Join(t.TempDir(), "out")
			env := []string{"SOURCE_DATE_EPOCH=1700000000"}
			stdout, stderr, err := siteSlurmDeb(t, env, site, ours[0], outdir)
			if err != nil {
				t.Fatalf("site-slurm-deb.sh: %v\n%s", err, stderr)
			}
			deb := strings.TrimSpace(stdout)
			wantVersion := ourVersion + "+slurm" + c.release
			if deb != filepath.Join(outdir, "overtime-slurm_"+wantVersion+"_amd64.deb") {
				t.Fatalf("site-slurm-deb.sh printed %q, want the .deb of version %s in %s", stdout, wantVersion, outdir)
			}
			if v := field(t, deb, "Version"); v != wantVersion {
				t.Errorf("Version: %s, want %s", v, wantVersion)
			}
			dep := field(t, deb, "Depends")
			if !strings.Contains(dep, c.depends) || strings.Contains(dep, "libslurm38") || !strings.Contains(dep, "libcurl4") || !strings.Contains(dep, "libjson-c5") {
				t.Errorf("Depends: %s, want the daemon's and the plugin's libraries and %s, no libslurm38", dep, c.depends)
			}
			if rec := field(t, deb, "Recommends"); strings.Contains(rec, "slurm-wlm") {
				t.Errorf("Recommends: %s: still Debian's Slurm", rec)
			}
			if d := field(t, deb, "Description"); !strings.Contains(d, "Slurm "+c.release) || !strings.Contains(d, "overtime-slurm-sync is linked against its "+c.soname+" ("+c.libPkg+")") {
				t.Errorf("Description does not say what the build is:\n%s", d)
			}
			if !strings.Contains(stderr, "building overtime-slurm-sync against Slurm") || strings.Contains(stderr, "leaving out") {
				t.Errorf("stderr does not say the sync daemon is rebuilt:\n%s", stderr)
			}

			tree := filepath.Join(t.TempDir(), "tree")
			if b, err := exec.Command("dpkg-deb", "-R", deb, tree).CombinedOutput(); err != nil {
				t.Fatalf("dpkg-deb -R: %v\n%s", err, b)
			}
			var plugins, sync []string
			filepath.Walk(tree, func(p string, fi os.FileInfo, err error) error {
				rel := strings.TrimPrefix(p, tree)
				switch {
				case err != nil:
					return err
				case fi.Name() == "spank_overtime.so":
					plugins = append(plugins, rel)
				case strings.HasPrefix(fi.Name(), "overtime-slurm-sync"):
					sync = append(sync, rel)
				}
				return nil
			})
			if want := c.pluginDir + "/spank_overtime.so"; len(plugins) != 1 || plugins[0] != want {
				t.Errorf("plugins in the package: %v, want %s only", plugins, want)
			}
			wantSync := []string{"/lib/systemd/system/overtime-slurm-sync.service", "/usr/sbin/overtime-slurm-sync", "/usr/share/man/man8/overtime-slurm-sync.8.gz"}
			if strings.Join(sync, " ") != strings.Join(wantSync, " ") {
				t.Errorf("the sync daemon's files in the package: %v, want %v", sync, wantSync)
			}
			// The maintainer scripts (debhelper's for the daemon's unit) as make deb made them.
			for _, s := range []string{"preinst", "postinst", "postrm"} {
				want, err := os.ReadFile(filepath.Join(ourControl, s))
				if err != nil {
					t.Fatalf("make deb's overtime-slurm: %v", err)
				}
				if got, err := os.ReadFile(filepath.Join(tree, "DEBIAN", s)); err != nil || !bytes.Equal(got, want) || !bytes.Contains(got, []byte("overtime-slurm-sync.service")) {
					t.Errorf("DEBIAN/%s is not make deb's for the daemon's unit (%v):\n%s", s, err, got)
				}
			}
			if _, err := os.Stat(filepath.Join(tree, "usr/lib/overtime/guest-init")); err != nil {
				t.Errorf("the guest's init is not in the package: %v", err)
			}

			// The daemon: the site's libslurm.so.N by the system's library path.
			daemon := filepath.Join(tree, "usr/sbin/overtime-slurm-sync")
			if fi, err := os.Stat(daemon); err != nil || fi.Mode().Perm() != 0o755 {
				t.Fatalf("the daemon: %v %v, want mode 0755", fi, err)
			}
			ef, err := elf.Open(daemon)
			if err != nil {
				t.Fatal(err)
			}
			libs, err := ef.ImportedLibraries()
			if err != nil {
				t.Fatal(err)
			}
			var slurmLibs []string
			for _, l := range libs {
				if strings.HasPrefix(l, "libslurm") {
					slurmLibs = append(slurmLibs, l)
				}
			}
			if len(slurmLibs) != 1 || slurmLibs[0] != c.soname {
				t.Errorf("the daemon NEEDs %v (all: %v), want the site's %s only", slurmLibs, libs, c.soname)
			}
			for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
				if v, err := ef.DynString(tag); err != nil || len(v) > 0 {
					t.Errorf("the daemon's %v: %v %v, want none", tag, v, err)
				}
			}
			ef.Close()
			// It loads with the site's library found by its SONAME (here by
			// LD_LIBRARY_PATH, on the site's machines in the multiarch directory).
			libdir := t.TempDir()
			if err := os.Symlink(fakeLibslurm(t, c.soname), filepath.Join(libdir, c.soname)); err != nil {
				t.Fatal(err)
			}
			help := exec.Command(daemon, "--help")
			help.Env = append(os.Environ(), "LD_LIBRARY_PATH="+libdir)
			if out, err := help.CombinedOutput(); err != nil {
				t.Errorf("%s --help with the site's %s: %v\n%s", daemon, c.soname, err, out)
			}

			so := filepath.Join(tree, c.pluginDir, "spank_overtime.so")
			nm, err := exec.Command("nm", "-D", "--defined-only", so).Output()
			if err != nil {
				t.Fatalf("nm -D: %v", err)
			}
			exported := map[string]bool{}
			for _, l := range strings.Split(string(nm), "\n") {
				if f := strings.Fields(l); len(f) == 3 {
					exported[f[2]] = true
				}
			}
			for _, s := range []string{"slurm_spank_init", "slurm_spank_task_init", "slurm_spank_job_prolog", "slurm_spank_job_epilog", "slurm_spank_exit", "plugin_name", "plugin_type", "plugin_version", "spank_plugin_version"} {
				if !exported[s] {
					t.Errorf("%s not exported by the plugin (nm -D: %s)", s, nm)
				}
			}
			v, libs := pluginVersion(t, so)
			if v != c.header {
				t.Errorf("plugin_version 0x%06x, want 0x%06x: not built against the site's headers", v, c.header)
			}
			for _, l := range libs {
				if strings.Contains(l, "libslurm") {
					t.Errorf("the plugin links %s", l)
				}
			}

			if out, err := exec.Command("lintian", "--no-tag-display-limit", deb).CombinedOutput(); err != nil || bytes.Contains(out, []byte("\nE: ")) || bytes.HasPrefix(out, []byte("E: ")) {
				t.Errorf("lintian: %v\n%s", err, out)
			}

			// Reproducible: the image's cache key takes the package by its sha256.
			again, stderr2, err := siteSlurmDeb(t, env, site, ours[0], filepath.Join(t.TempDir(), "again"))
			if err != nil {
				t.Fatalf("second run: %v\n%s", err, stderr2)
			}
			if a, b := fileSum(t, deb), fileSum(t, strings.TrimSpace(again)); a != b {
				t.Errorf("two runs of the same inputs made different packages (%s, %s)", a, b)
			}
		})
	}
}

// TestSiteSlurmDebRefuses: what the plugin or the sync daemon cannot be built from, or not
// rightly, is refused with an error naming the problem, and nothing is written.
func TestSiteSlurmDebRefuses(t *testing.T) {
	needs.Servers(t, "dpkg-deb", "gcc", "binutils", "patchelf", "libslurm-dev", "libcurl4-openssl-dev", "libjson-c-dev")
	debs := t.TempDir()
	const ourDepends = "libc6 (>= 2.34), libcurl4 (>= 7.16.2), libjson-c5 (>= 0.15), libslurm38 (>= 22.05.8)"
	ours := fakeDeb(t, debs, "overtime-slurm", "0.0.1", ourDepends)
	// With the sync daemon (what it is does not matter: it is rebuilt), as make deb's.
	withSync := debWith(t, t.TempDir(), "overtime-slurm", "0.0.1", ourDepends,
		map[string][]byte{"usr/sbin/overtime-slurm-sync": []byte("#!/bin/sh\n")})
	agent := fakeDeb(t, debs, "overtime-agent", "0.0.1", "")
	rebuilt := fakeDeb(t, t.TempDir(), "overtime-slurm", "0.0.1+slurm24.11", "slurm-smd (>= 24.11)")

	smd := sitePkg{name: "slurm-smd", version: "24.11.5-1", pluginDir: smdPluginDir}
	slurmd := sitePkg{name: "slurm-smd-slurmd", version: "24.11.5-1"}
	dev := sitePkg{name: "slurm-smd-dev", version: "24.11.5-1", headers: 0x180b05}
	smdLib := sitePkg{name: "slurm-smd", version: "24.11.5-1", pluginDir: smdPluginDir, libslurm: 42, devLink: 42}
	junk := t.TempDir()
	os.WriteFile(filepath.Join(junk, "slurm-smd_24.11.5-1_amd64.deb"), []byte("not a deb"), 0o644)

	for _, c := range []struct {
		name string
		dir  string
		deb  string
		want string
	}{
		{"no -dev package", siteDebs(t, smd, slurmd), ours, "no Slurm -dev package (slurm-smd-dev or libslurm-dev)"},
		{"no spank.h", siteDebs(t, smd, slurmd, sitePkg{name: "slurm-smd-dev", version: "24.11.5-1", headers: 0x180b05, noSpank: true}), ours, "no usr/include/slurm/spank.h in slurm-smd-dev_24.11.5-1_amd64.deb"},
		{"two versions", siteDebs(t, smd, sitePkg{name: "slurm-smd-slurmd", version: "24.11.4-1"}, dev), ours, "two Slurm versions"},
		{"unreadable version", siteDebs(t, sitePkg{name: "slurm-smd", version: "2026-1", pluginDir: smdPluginDir}, dev), ours, "cannot read a Slurm version from slurm-smd_2026-1_amd64.deb"},
		{"headers of another release", siteDebs(t, smd, slurmd, sitePkg{name: "slurm-smd-dev", version: "24.11.5-1", headers: 0x160508}), ours, "its headers are Slurm 22.05's (slurm_version.h), the packages are 24.11.5-1"},
		{"packagings mixed", siteDebs(t, smd, slurmd, sitePkg{name: "libslurm-dev", version: "24.11.5-1", headers: 0x180b05}), ours, "SchedMD's packages (slurm-smd"},
		{"no base package", siteDebs(t, slurmd, dev), ours, "no slurm-smd_*.deb (SchedMD's packages)"},
		{"base package's plugins elsewhere", siteDebs(t, sitePkg{name: "slurm-smd", version: "24.11.5-1", pluginDir: debianPluginDir}, slurmd, dev), ours, "has no plugins in /usr/lib/x86_64-linux-gnu/slurm"},
		{"Debian-style without slurm-wlm-basic-plugins", siteDebs(t, sitePkg{name: "slurmd", version: "23.11.4-1"}, sitePkg{name: "libslurm-dev", version: "23.11.4-1", headers: 0x170b04}), ours, "no slurm-wlm-basic-plugins_*.deb"},
		{"headers that do not build", siteDebs(t, smd, slurmd, sitePkg{name: "slurm-smd-dev", version: "24.11.5-1", headers: 0x180b05, spank: "#error not the spank.h the plugin knows\n"}), ours, "spank_overtime.so does not build against Slurm 24.11.5-1's headers"},
		{"not a .deb", junk, ours, "slurm-smd_24.11.5-1_amd64.deb is not a .deb"},
		{"no .debs", t.TempDir(), ours, "no .deb files"},
		{"no directory", filepath.Join(t.TempDir(), "missing"), ours, "no such directory"},
		{"not overtime-slurm", siteDebs(t, smd, slurmd, dev), agent, "is overtime-agent, not overtime-slurm"},
		{"overtime-slurm built for a site already", siteDebs(t, smd, slurmd, dev), rebuilt, "already built for a site's Slurm"},
		// The sync daemon links against the site's libslurm.
		{"no libslurm", siteDebs(t, smd, slurmd, dev), withSync, "no libslurm.so.N in the Slurm packages (SchedMD's slurm-smd or Debian-style libslurmNN ship it)"},
		{"two libslurms", siteDebs(t, smdLib, sitePkg{name: "slurm-smd-slurmd", version: "24.11.5-1", libslurm: 41}, dev), withSync, "both ship libslurm.so.N"},
		{"libslurm off the library path", siteDebs(t, sitePkg{name: "slurm-smd", version: "24.11.5-1", pluginDir: smdPluginDir, libslurm: 42, libDir: "/opt/slurm/lib"}, slurmd, dev), withSync, "ships libslurm.so.N in opt/slurm/lib: not a directory of the system's library path"},
		{"libslurm's SONAME another", siteDebs(t, sitePkg{name: "slurm-smd", version: "24.11.5-1", pluginDir: smdPluginDir, libslurm: 42, soname: "libslurm.so.38"}, slurmd, dev), withSync, "has the SONAME 'libslurm.so.38', not the libslurm.so.N its name says"},
		{"daemon that does not build", siteDebs(t, smdLib, slurmd, sitePkg{name: "slurm-smd-dev", version: "24.11.5-1", headers: 0x180b05, oldHostlist: true}), withSync, "overtime-slurm-sync does not build against Slurm 24.11.5-1's headers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			outdir := filepath.Join(t.TempDir(), "out")
			stdout, stderr, err := siteSlurmDeb(t, nil, c.dir, c.deb, outdir)
			if err == nil || !strings.Contains(stderr, c.want) {
				t.Errorf("%v %q, want an error saying %q", err, stderr, c.want)
			}
			if written, _ := filepath.Glob(filepath.Join(outdir, "*.deb")); len(written) > 0 || stdout != "" {
				t.Errorf("a refused build wrote %v (stdout %q)", written, stdout)
			}
		})
	}
}

// field is a control field of a .deb.
func field(t *testing.T, deb, name string) string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", "-f", deb, name).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -f %s %s: %v", deb, name, err)
	}
	return strings.TrimSpace(string(out))
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}
