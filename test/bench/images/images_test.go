// Package images measures the images of images/recipes (issue 14): the size and build
// time of each recipe, cold and cached, and the boot of the desktop in QEMU from its
// squashfs over NFS against the same tree as a plain NFS directory, with a
// metadata-heavy workload on each. Run by `make bench`:
//
//	go test -run '^$' -bench Images -benchtime 1x ./test/bench/images -args -out docs/benchmarks
//
// It writes images.json and images.md into -out. Needs root (images/build.sh, network
// namespaces), mmdebstrap and the Debian mirror (the cold builds download the packages),
// QEMU. Under TCG (this machine's /dev/kvm does not run guests) the boot times are upper
// bounds for real PCs; the ratios between the two roots are what the benchmark is for.
package images

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

var (
	out    = flag.String("out", "", "directory for images.json and images.md (empty: only log)")
	boots  = flag.Int("boots", 3, "boots per root variant (squashfs, directory), interleaved")
	builds = flag.String("builds", "desktop-minimal,compute-guest",
		"recipes whose cold and cached builds are timed, comma-separated (empty: none; bench-desktop, the booted one, is always built)")
	rewrite  = flag.String("rewrite", "", "only rewrite images.md in -out from this images.json (after a change of the text)")
	cacheDir = flag.String("cache", "", "OVERTIME_CACHE for the builds (default: a new empty directory, so that cold builds are cold; "+
		"an existing one only to work on the boot part with -builds '')")
)

// The benchmark's own image: desktop-minimal with a root shell on ttyS0 (never published).
const bootRecipe = "bench-desktop"

// Generous deadlines: they bound a hang, they measure nothing.
const (
	bootWithin = 15 * time.Minute
	runWithin  = 10 * time.Minute
)

// ---- builds ----

// manifest is the part of a build's manifest.json read here.
type manifest struct {
	Recipe  string `json:"recipe"`
	Key     string `json:"key"`
	BaseKey string `json:"baseKey"`
	Kernel  string `json:"kernel"`
	Files   map[string]struct {
		Size int64 `json:"size"`
	} `json:"files"`
	Packages []struct {
		Name         string `json:"name"`
		InstalledKiB int64  `json:"installedKiB"`
	} `json:"packages"`
}

type buildRun struct {
	Recipe string `json:"recipe"`
	// Kind: "cold" (empty cache: mmdebstrap downloads and installs the base, then stage 2),
	// "base cached" (stage 2 only: a new SOURCE_DATE_EPOCH, the base tarball reused),
	// "up to date" (nothing to do: the output directory has the current key).
	Kind    string  `json:"kind"`
	Seconds float64 `json:"seconds"` // wall time of images/build.sh
	// build.sh's own split (absent for "up to date"): stage 1 (base) and stage 2 (image).
	BaseSeconds  *float64 `json:"baseSeconds,omitempty"`
	ImageSeconds *float64 `json:"imageSeconds,omitempty"`
	BaseBuilt    bool     `json:"baseBuilt"`
	// The host's 1-minute load average before and after: other work on the 2 cores (another
	// build, a test) shows here.
	LoadBefore float64 `json:"loadBefore"`
	LoadAfter  float64 `json:"loadAfter"`
}

type imageSize struct {
	Recipe        string `json:"recipe"`
	Kernel        string `json:"kernel"`
	RootSquashfs  int64  `json:"rootSquashfsBytes"`
	Initrd        int64  `json:"initrdBytes"`
	Vmlinuz       int64  `json:"vmlinuzBytes"`
	Packages      int    `json:"packages"`
	InstalledKiB  int64  `json:"installedKiB"` // sum of the packages' Installed-Size
	BaseKey       string `json:"baseKey"`
	TreeKiB       int64  `json:"treeKiB,omitempty"`    // du -sk of the unpacked root (booted recipe only)
	TreeFiles     int64  `json:"treeFiles,omitempty"`  // entries in the unpacked root
	UsrEntries    int64  `json:"usrEntries,omitempty"` // entries under /usr (what ls -lR /usr walks)
	TreeApparentB int64  `json:"treeApparentBytes,omitempty"`
}

var buildLine = regexp.MustCompile(`base (built|cached) in (\d+) s, image in (\d+) s`)

// build runs images/build.sh RECIPE OUTDIR against the cache directory cache.
func build(b *testing.B, debs, cache, recipe, outdir, kind, epoch string) buildRun {
	b.Helper()
	script := filepath.Join(testenv.RepoRoot(b), "images", "build.sh")
	cmd := exec.Command(script, "--debs", debs, recipe, outdir)
	cmd.Env = append(os.Environ(), "OVERTIME_CACHE="+cache)
	if epoch != "" {
		cmd.Env = append(cmd.Env, "SOURCE_DATE_EPOCH="+epoch)
	}
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	load := load1()
	start := time.Now()
	err := cmd.Run()
	r := buildRun{Recipe: recipe, Kind: kind, Seconds: time.Since(start).Seconds(), LoadBefore: load, LoadAfter: load1()}
	if err != nil {
		b.Fatalf("images/build.sh %s (%s): %v\n%s", recipe, kind, err, tail(buf.String(), 6000))
	}
	if m := buildLine.FindStringSubmatch(buf.String()); m != nil {
		base, _ := strconv.ParseFloat(m[2], 64)
		img, _ := strconv.ParseFloat(m[3], 64)
		r.BaseSeconds, r.ImageSeconds, r.BaseBuilt = &base, &img, m[1] == "built"
		if kind == "" && r.BaseBuilt {
			r.Kind = "cold"
		} else if kind == "" {
			r.Kind = "base cached (the same base as desktop-minimal)"
		}
	} else if kind == "" && strings.Contains(buf.String(), "is up to date") {
		r.Kind = "up to date"
	} else if kind != "up to date" {
		b.Fatalf("images/build.sh %s (%s): no \"base ... image in\" line:\n%s", recipe, kind, tail(buf.String(), 2000))
	}
	if kind == "up to date" && !strings.Contains(buf.String(), "is up to date") {
		b.Fatalf("images/build.sh %s: expected a no-op, got:\n%s", recipe, tail(buf.String(), 2000))
	}
	b.Logf("build %s (%s): %.0f s", recipe, r.Kind, r.Seconds)
	return r
}

func readManifest(b *testing.B, dir string) manifest {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		b.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatalf("%s/manifest.json: %v", dir, err)
	}
	return m
}

func sizeOf(m manifest) imageSize {
	s := imageSize{Recipe: m.Recipe, Kernel: m.Kernel, Packages: len(m.Packages), BaseKey: m.BaseKey,
		RootSquashfs: m.Files["root.squashfs"].Size, Initrd: m.Files["initrd.img"].Size, Vmlinuz: m.Files["vmlinuz"].Size}
	for _, p := range m.Packages {
		s.InstalledKiB += p.InstalledKiB
	}
	return s
}

// ---- boots ----

// The two roots of one image, booted alternately.
const (
	variantSquashfs = "squashfs"
	variantDir      = "directory"
)

// Console stages; each is the time from QEMU's start to the first line matching. The
// autologin prompt comes before multi-user.target: the serial getty is started early
// (and systemd stops printing its status once it has a console). The wall time of
// multi-user.target is therefore computed: see bootRun.Seconds.
var stages = []struct{ name, re string }{
	{"kernel started", `Linux version`},
	{"root mounted", `overtime: root: overlay of tmpfs \([^)]*\) over (squashfs|dir) `},
	{"root shell", `root@[^\s:]+:[^\r\n]*# `},
}

type bootRun struct {
	Variant string `json:"variant"`
	Round   int    `json:"round"`
	Accel   string `json:"accel"`
	// Console stage -> seconds since QEMU started; plus "multi-user target reached":
	// "kernel started" + multi-user.target's ActiveEnterTimestampMonotonic in the guest
	// (the guest's clock starts with the kernel; the kernel's first line reaches the
	// console when the serial console registers, a second or so later under TCG, so this
	// overestimates by that much, alike for both roots).
	Seconds map[string]float64 `json:"seconds"`
	// systemd-analyze time inside the guest: kernel (including this project's initramfs:
	// DHCP, NFS mount, overlay) and userspace (systemd until multi-user.target).
	AnalyzeKernel    float64 `json:"analyzeKernelSeconds"`
	AnalyzeUserspace float64 `json:"analyzeUserspaceSeconds"`
	AnalyzeLine      string  `json:"analyzeLine"`
	Blame            string  `json:"blameTop5"`
	// Workloads inside the guest, seconds. Cold: after sync and drop_caches (the guest's
	// page, dentry and inode caches; the boot server's caches stay warm); warm: the same
	// command again at once.
	LsColdSeconds   float64 `json:"lsColdSeconds"`
	LsWarmSeconds   float64 `json:"lsWarmSeconds"`
	ExecColdSeconds float64 `json:"execColdSeconds"`
	ExecWarmSeconds float64 `json:"execWarmSeconds"`
	LsLines         int     `json:"lsLines"`    // lines of ls -lR /usr: the same tree on both roots
	LoadBefore      float64 `json:"loadBefore"` // the host's 1-minute load average before QEMU started
}

// The large program: QEMU (about 100 shared libraries) printing its version.
const largeProgram = "qemu-system-x86_64 --version"

func bootSite(l *bootlab.Lab, sum string, size int64, dirRoot string) string {
	return fmt.Sprintf(`name: lab
timezone: Europe/Berlin
defaultMode: squashfs
bootServers:
  - {name: bs1, ip: %[1]s, httpURL: "%[2]s", nfsRoot: %[3]s, dhcp: full, interface: %[4]s, subnet: 10.20.0.0/24, rangeFrom: 10.20.0.200, rangeTo: 10.20.0.250}
images:
  - {name: bench, kind: desktop, versions: [{version: v1, sha256: %[5]s, size: %[6]d, path: bench/v1, created: "2026-11-20T09:00:00Z"}]}
modes:
  - {name: squashfs, kind: desktop, image: bench, kernelArgs: "console=ttyS0"}
  # The same image version, its tree unpacked next to root.squashfs: the later
  # overtime.root= wins (the initramfs reads the arguments in order).
  - {name: directory, kind: desktop, image: bench, kernelArgs: "console=ttyS0 overtime.root=nfs:%[1]s:%[7]s overtime.verify=none"}
pools:
  - {name: lab, bootServer: bs1}
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
  - {name: sq1, mac: "52:54:00:0b:00:01", ip: 10.20.0.11, pool: lab}
  - {name: dir1, mac: "52:54:00:0b:00:02", ip: 10.20.0.12, pool: lab, weekly: ["daily 00:00-24:00 directory"]}
`, bootlab.ServerIP, bootlab.HTTPURL, l.Images, bootlab.Bridge, sum, size, dirRoot)
}

// bootOnce boots one VM with variant's root, waits for the root shell, and runs the
// workloads.
func bootOnce(b *testing.B, l *bootlab.Lab, variant string, round int, idDisks map[string]string) bootRun {
	b.Helper()
	host, mac := "sq1", "52:54:00:0b:00:01"
	if variant == variantDir {
		host, mac = "dir1", "52:54:00:0b:00:02"
	}
	dir := b.TempDir()
	load := load1()
	start := time.Now()
	vm := vmtest.StartT(b, vmtest.Config{Name: host, Dir: dir, NS: l.NS, Tap: "tap1", MAC: mac,
		Firmware: vmtest.BIOS, MemoryMB: 2048, CPUs: 2, Disks: []string{idDisks[host]}})
	defer vm.Stop()
	fail := func(format string, args ...any) {
		b.Helper()
		b.Fatalf("%s boot %d (%s): %s\n--- console (end):\n%s", variant, round, host, fmt.Sprintf(format, args...), vm.Console.Tail(6000))
	}
	r := bootRun{Variant: variant, Round: round, Accel: vm.Accel, Seconds: map[string]float64{}, LoadBefore: load}
	for _, s := range stages {
		m, err := vm.Console.Expect(regexp.MustCompile(s.re), bootWithin)
		if err != nil {
			fail("%v", err)
		}
		r.Seconds[s.name] = time.Since(start).Seconds()
		// The mode really booted the root it names.
		if s.name == "root mounted" {
			want := "squashfs"
			if variant == variantDir {
				want = "dir"
			}
			if m[1] != want {
				fail("root is %s, want %s", m[1], want)
			}
		}
	}
	run := func(cmd string) string {
		b.Helper()
		o, err := vm.Console.Run(cmd, runWithin)
		if err != nil {
			fail("%v", err)
		}
		return strings.TrimSpace(o)
	}
	// Quiet the console: kernel messages would land inside the command output (and may
	// garble this first command's markers: then it is sent again).
	for i := 0; ; i++ {
		// No colours, no pager in systemctl's and systemd-analyze's output.
		if _, err := vm.Console.Run("dmesg -n 1; export SYSTEMD_COLORS=0 SYSTEMD_PAGER= SYSTEMD_URLIFY=0", time.Minute); err == nil {
			break
		} else if i == 4 {
			fail("%v", err)
		}
	}
	// Startup finished (waits for the jobs after multi-user.target too); then systemd's
	// own split. degraded (a failed unit) is finished too: exit status ignored.
	run("systemctl is-system-running --wait >/dev/null; true")
	o := run("systemctl show -p ActiveEnterTimestampMonotonic multi-user.target")
	m := regexp.MustCompile(`ActiveEnterTimestampMonotonic=(\d+)`).FindStringSubmatch(o)
	if m == nil || m[1] == "0" {
		fail("multi-user.target's activation time: %q", o)
	}
	mono, _ := strconv.ParseInt(m[1], 10, 64)
	r.Seconds["multi-user target reached"] = r.Seconds["kernel started"] + float64(mono)/1e6
	r.AnalyzeLine = analyzeLine.FindString(run("systemd-analyze time"))
	r.AnalyzeKernel, r.AnalyzeUserspace = parseAnalyze(r.AnalyzeLine)
	r.Blame = run("systemd-analyze blame --no-pager | head -n 5")
	// Seconds of a command, as the guest's clock sees them (nanoseconds from date).
	timed := func(cmd string, cold bool) float64 {
		b.Helper()
		prep := ""
		if cold {
			prep = "sync; echo 3 >/proc/sys/vm/drop_caches; "
		}
		o := run(prep + "s=$(date +%s%N); " + cmd + "; e=$(date +%s%N); echo $((e - s))")
		ns, err := strconv.ParseInt(lastLine(o), 10, 64)
		if err != nil {
			fail("timing %q: %q", cmd, o)
		}
		return float64(ns) / 1e9
	}
	// The listing goes to the tmpfs (counted afterwards: a third walk of /usr on the
	// directory root would cost another minute under TCG).
	r.LsColdSeconds = timed("ls -lR /usr >/tmp/ls.out 2>&1", true)
	r.LsWarmSeconds = timed("ls -lR /usr >/tmp/ls.out 2>&1", false)
	r.ExecColdSeconds = timed(largeProgram+" >/dev/null 2>&1", true)
	r.ExecWarmSeconds = timed(largeProgram+" >/dev/null 2>&1", false)
	r.LsLines, _ = strconv.Atoi(lastLine(run("wc -l </tmp/ls.out")))
	b.Logf("%s boot %d: stages %v; %s; ls -lR /usr cold %.2f s warm %.2f s; %s cold %.2f s warm %.2f s",
		variant, round, r.Seconds, r.AnalyzeLine, r.LsColdSeconds, r.LsWarmSeconds, largeProgram, r.ExecColdSeconds, r.ExecWarmSeconds)
	return r
}

var analyzeLine = regexp.MustCompile(`Startup finished in (.*?) \(kernel\)(?: \+ (.*?) \(initrd\))? \+ (.*?) \(userspace\)[^\r\n\x1b]*`)

// parseAnalyze reads systemd-analyze's "Startup finished in 8.1s (kernel) + 1min 2.3s
// (userspace) = ..." (an initrd part, if any, is counted with the kernel).
func parseAnalyze(line string) (kernel, userspace float64) {
	m := analyzeLine.FindStringSubmatch(line)
	if m == nil {
		return -1, -1
	}
	return parseSpan(m[1]) + parseSpan(m[2]), parseSpan(m[3])
}

var spanPart = regexp.MustCompile(`([0-9.]+)(min|ms|us|s|h)`)

// parseSpan reads a systemd time span such as "1min 2.345s" or "823ms".
func parseSpan(s string) float64 {
	var t float64
	for _, m := range spanPart.FindAllStringSubmatch(s, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		switch m[2] {
		case "h":
			t += v * 3600
		case "min":
			t += v * 60
		case "s":
			t += v
		case "ms":
			t += v / 1e3
		case "us":
			t += v / 1e6
		}
	}
	return t
}

// unpack makes the directory root: the squashfs unpacked by root (owners, modes, links
// as in the image), then made world-readable, since the boot server squashes the
// client's root to nobody (the squashfs file is read as a whole; a directory tree is
// read file by file, /etc/shadow and /root included).
func unpack(b *testing.B, squashfs, dst string) {
	b.Helper()
	if o, err := exec.Command("unsquashfs", "-no-progress", "-quiet", "-d", dst, squashfs).CombinedOutput(); err != nil {
		b.Fatalf("unsquashfs: %v\n%s", err, tail(string(o), 2000))
	}
	if o, err := exec.Command("chmod", "-R", "a+rX", dst).CombinedOutput(); err != nil {
		b.Fatalf("chmod: %v\n%s", err, o)
	}
}

// idDisk makes host's OVERTIME-ID disk (ext4) with its credential from the site manager.
func idDisk(b *testing.B, l *bootlab.Lab, host string) string {
	b.Helper()
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o700); err != nil {
		b.Fatal(err)
	}
	l.MustRun("host", "credential", host, "--out", filepath.Join(src, "agent.token"))
	if err := os.Chmod(filepath.Join(src, "agent.token"), 0o600); err != nil {
		b.Fatal(err)
	}
	img := filepath.Join(dir, "id.img")
	if o, err := exec.Command("mkfs.ext4", "-q", "-L", "OVERTIME-ID", "-E", "root_owner=0:0", "-d", src, img, "8M").CombinedOutput(); err != nil {
		b.Fatalf("mkfs.ext4: %v\n%s", err, o)
	}
	return img
}

// duSum is the first field of du -s ARGS (KiB with -k, bytes with -b).
func duSum(b *testing.B, args ...string) int64 {
	b.Helper()
	o, err := exec.Command("du", append([]string{"-s"}, args...)...).Output()
	if err != nil {
		b.Fatalf("du %v: %v", args, err)
	}
	n, _ := strconv.ParseInt(strings.Fields(string(o))[0], 10, 64)
	return n
}

func countEntries(b *testing.B, dir string) int64 {
	b.Helper()
	var n int64
	if err := filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil }); err != nil {
		b.Fatal(err)
	}
	return n
}

// ---- the benchmark ----

func BenchmarkImages(b *testing.B) {
	if *rewrite != "" {
		raw, err := os.ReadFile(*rewrite)
		if err != nil {
			b.Fatal(err)
		}
		var j struct {
			Date   time.Time   `json:"date"`
			CPUs   int         `json:"cpus"`
			Accel  string      `json:"accel"`
			Builds []buildRun  `json:"builds"`
			Sizes  []imageSize `json:"sizes"`
			Boots  []bootRun   `json:"boots"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			b.Fatal(err)
		}
		md := markdown(j.Date, j.CPUs, j.Accel, j.Builds, j.Sizes, j.Boots, compare(j.Boots))
		if err := os.WriteFile(filepath.Join(*out, "images.md"), []byte(md), 0o644); err != nil {
			b.Fatal(err)
		}
		return
	}
	if *boots < 1 {
		b.Fatal("-boots must be at least 1")
	}
	debs := imagetest.Debs(b)
	// A cache of this run's own: the first build of each base is cold for certain.
	work := b.TempDir()
	cache := filepath.Join(work, "cache")
	if *cacheDir != "" {
		// Outputs kept too: an unchanged bench-desktop is not rebuilt.
		cache, work = *cacheDir, filepath.Join(*cacheDir, "bench-images")
	}
	var runs []buildRun
	var sizes []imageSize
	epoch := strconv.FormatInt(time.Now().Unix(), 10)
	for i := 0; i < b.N; i++ {
		for _, recipe := range strings.Split(*builds, ",") {
			recipe = strings.TrimSpace(recipe)
			if recipe == "" {
				continue
			}
			dst := filepath.Join(work, "out", recipe)
			runs = append(runs, build(b, debs, cache, recipe, dst, "cold", ""))
			// The same inputs again: build.sh sees the current key in dst and does nothing.
			runs = append(runs, build(b, debs, cache, recipe, dst, "up to date", ""))
			// A new SOURCE_DATE_EPOCH: the key of stage 2 changes, the base's does not.
			runs = append(runs, build(b, debs, cache, recipe, dst+"-2", "base cached", epoch))
			sizes = append(sizes, sizeOf(readManifest(b, dst)))
			_ = os.RemoveAll(dst + "-2")
		}
	}
	// The booted image: desktop-minimal's base (shared, when desktop-minimal was built
	// above) plus its own customize script.
	img := filepath.Join(work, "out", bootRecipe)
	runs = append(runs, build(b, debs, cache, bootRecipe, img, "", ""))
	bm := readManifest(b, img)
	bsize := sizeOf(bm)

	l := bootlab.Start(b, bootlab.Options{Now: "2026-12-02T10:30:00+01:00"})
	l.CopyImage(img, "bench/v1")
	tree := filepath.Join(l.Images, "bench", "v1", "tree")
	unpack(b, filepath.Join(img, "root.squashfs"), tree)
	bsize.TreeKiB = duSum(b, "-k", tree)
	bsize.TreeApparentB = duSum(b, "-b", tree)
	bsize.TreeFiles = countEntries(b, tree)
	bsize.UsrEntries = countEntries(b, filepath.Join(tree, "usr"))
	sizes = append(sizes, bsize)
	sum, err := sha256File(filepath.Join(img, "root.squashfs"))
	if err != nil {
		b.Fatal(err)
	}
	l.Apply(bootSite(l, sum, bm.Files["root.squashfs"].Size, tree))
	l.StartBootServer()
	if err := l.NS.AddTap("tap1", bootlab.Bridge); err != nil {
		b.Fatal(err)
	}
	// Each PC's credential on its OVERTIME-ID disk, as in test/desktop_test.go: the node
	// agent starts and reports as on a real PC (without one it would restart every 2 s).
	idDisks := map[string]string{}
	for _, host := range []string{"sq1", "dir1"} {
		idDisks[host] = idDisk(b, l, host)
	}
	// Interleaved, the order alternating per round (AB BA AB ...): drift in the host's
	// load hits both roots alike.
	var bootRuns []bootRun
	for round := 0; round < *boots; round++ {
		order := []string{variantSquashfs, variantDir}
		if round%2 == 1 {
			order = []string{variantDir, variantSquashfs}
		}
		for _, v := range order {
			bootRuns = append(bootRuns, bootOnce(b, l, v, round, idDisks))
		}
	}
	if *out != "" {
		if err := write(*out, runs, sizes, bootRuns); err != nil {
			b.Fatal(err)
		}
	}
}

func sha256File(p string) (string, error) {
	o, err := exec.Command("sha256sum", p).Output()
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(o))
	if len(f) == 0 {
		return "", fmt.Errorf("sha256sum %s: no output", p)
	}
	if _, err := hex.DecodeString(f[0]); err != nil {
		return "", err
	}
	return f[0], nil
}

// ---- results ----

type stat struct {
	Median, Min, Max float64
	N                int
}

func summarize(xs []float64) stat {
	if len(xs) == 0 {
		return stat{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return stat{med, s[0], s[n-1], n}
}

// metrics of a boot, in table order.
var metrics = []struct {
	name string
	get  func(bootRun) float64
}{
	{"QEMU start → kernel started", func(r bootRun) float64 { return r.Seconds["kernel started"] }},
	{"QEMU start → root mounted (initramfs)", func(r bootRun) float64 { return r.Seconds["root mounted"] }},
	{"QEMU start → root shell (autologin)", func(r bootRun) float64 { return r.Seconds["root shell"] }},
	{"QEMU start → multi-user target reached (†)", func(r bootRun) float64 { return r.Seconds["multi-user target reached"] }},
	{"systemd-analyze: kernel + initramfs", func(r bootRun) float64 { return r.AnalyzeKernel }},
	{"systemd-analyze: userspace", func(r bootRun) float64 { return r.AnalyzeUserspace }},
	{"`ls -lR /usr`, cold caches", func(r bootRun) float64 { return r.LsColdSeconds }},
	{"`ls -lR /usr`, warm", func(r bootRun) float64 { return r.LsWarmSeconds }},
	{"`" + largeProgram + "`, cold caches", func(r bootRun) float64 { return r.ExecColdSeconds }},
	{"`" + largeProgram + "`, warm", func(r bootRun) float64 { return r.ExecWarmSeconds }},
}

type comparison struct {
	Metric    string  `json:"metric"`
	Squashfs  stat    `json:"squashfs"`
	Directory stat    `json:"directory"`
	Ratio     float64 `json:"ratioDirectoryToSquashfs"` // of the medians
	// Per round (the two boots of a round are neighbours in time): directory / squashfs.
	PairRatios stat `json:"pairRatios"`
}

func compare(runs []bootRun) []comparison {
	var cs []comparison
	for _, m := range metrics {
		var sq, dir []float64
		bySq, byDir := map[int]float64{}, map[int]float64{}
		for _, r := range runs {
			v := m.get(r)
			if r.Variant == variantSquashfs {
				sq = append(sq, v)
				bySq[r.Round] = v
			} else {
				dir = append(dir, v)
				byDir[r.Round] = v
			}
		}
		var pairs []float64
		for round, s := range bySq {
			if d, ok := byDir[round]; ok && s > 0 {
				pairs = append(pairs, d/s)
			}
		}
		c := comparison{Metric: m.name, Squashfs: summarize(sq), Directory: summarize(dir), PairRatios: summarize(pairs)}
		if c.Squashfs.Median > 0 {
			c.Ratio = c.Directory.Median / c.Squashfs.Median
		}
		cs = append(cs, c)
	}
	return cs
}

func write(dir string, builds []buildRun, sizes []imageSize, boots []bootRun) error {
	cs := compare(boots)
	accel := ""
	if len(boots) > 0 {
		accel = boots[0].Accel
	}
	host, _ := os.Hostname()
	date := time.Now().UTC()
	j, err := json.MarshalIndent(map[string]any{
		"date": date.Format(time.RFC3339), "host": host, "cpus": runtime.NumCPU(), "accel": accel,
		"bootRecipe": bootRecipe, "largeProgram": largeProgram, "vm": map[string]any{"memoryMB": 2048, "cpus": 2, "firmware": "bios"},
		"builds": builds, "sizes": sizes, "boots": boots, "comparison": cs,
		"anchor": map[string]any{"source": "OpenSLX, as quoted in issue 14", "workload": "ls -lR",
			"squashfsOverNFSSeconds": 0.04, "plainNFSSeconds": 11.6},
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "images.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "images.md"), []byte(markdown(date, runtime.NumCPU(), accel, builds, sizes, boots, cs)), 0o644)
}

func markdown(date time.Time, cpus int, accel string, builds []buildRun, sizes []imageSize, boots []bootRun, cs []comparison) string {
	var md strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&md, format, args...) }
	mib := func(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }
	p("# Images: size, build time, squashfs-on-NFS against a plain NFS root\n\n")
	p("`make bench` (test/bench/images), %s, %d CPUs, QEMU accelerator **%s**. Issue 14.\n\n", date.Format("2006-01-02"), cpus, accel)

	p("## Size per recipe\n\n")
	p("From each build's manifest.json; installed = the sum of the packages' Installed-Size (dpkg's estimate of the unpacked tree).\n\n")
	p("| recipe | root.squashfs MiB | initrd.img MiB | vmlinuz MiB | packages | installed MiB | squashfs / installed |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sizes {
		ratio := 0.0
		if s.InstalledKiB > 0 {
			ratio = float64(s.RootSquashfs) / float64(s.InstalledKiB*1024)
		}
		p("| %s | %s | %s | %s | %d | %.0f | %.2f |\n", s.Recipe, mib(s.RootSquashfs), mib(s.Initrd), mib(s.Vmlinuz), s.Packages, float64(s.InstalledKiB)/1024, ratio)
	}
	for _, s := range sizes {
		if s.TreeKiB > 0 {
			p("\nThe booted image (%s), unpacked for the directory root: %.0f MiB on disk (du -sk), %.0f MiB apparent, %d entries, %d of them under /usr (zstd level 15 squashfs: %.0f%% of the apparent size).\n",
				s.Recipe, float64(s.TreeKiB)/1024, float64(s.TreeApparentB)/(1<<20), s.TreeFiles, s.UsrEntries, 100*float64(s.RootSquashfs)/float64(s.TreeApparentB))
		}
	}

	p("\n## Build time per recipe\n\n")
	p("images/build.sh with a cache directory of this run's own (`OVERTIME_CACHE`), the .debs of `make deb`. **cold**: empty cache, stage 1 (mmdebstrap downloads\n")
	p("the packages from the Debian mirror and installs them) and stage 2 (Overtime's .debs, customize scripts, mkinitramfs, mksquashfs);\n")
	p("**base cached**: stage 2 only (a new `SOURCE_DATE_EPOCH`, the base tarball reused); **up to date**: the output directory already has the\n")
	p("current key (a no-op: key computation and a sha256sum -c of the artefacts). One build each (n = 1): a cold build is minutes of\n")
	p("downloads and dpkg, and its time depends mostly on the mirror and the host's disk, so repeating it would measure them.\n")
	p("Stage times are build.sh's own (whole seconds).\n\n")
	p("| recipe | build | wall s | stage 1 (base) s | stage 2 (image) s |\n|---|---|---:|---:|---:|\n")
	for _, r := range builds {
		s1, s2 := "–", "–"
		if r.BaseSeconds != nil {
			s1 = fmt.Sprintf("%.0f", *r.BaseSeconds)
			if !r.BaseBuilt {
				s1 += " (cached)"
			}
			s2 = fmt.Sprintf("%.0f", *r.ImageSeconds)
		}
		p("| %s | %s | %.1f | %s | %s |\n", r.Recipe, r.Kind, r.Seconds, s1, s2)
	}

	n := 0
	for _, r := range boots {
		if r.Variant == variantSquashfs {
			n++
		}
	}
	p("\n## Boot and metadata workload: squashfs on NFS against the same tree as an NFS directory\n\n")
	p("The image `%s` (desktop-minimal plus a root autologin on ttyS0, for benchmarks only), PXE-booted in QEMU (BIOS, 2 vCPUs,\n", bootRecipe)
	p("2 GiB) through the whole chain against the real boot server in a network namespace (dnsmasq, `overtime serve`, nfs-ganesha, NFSv3),\n")
	p("with one of two roots, both under the initramfs's tmpfs overlay:\n\n")
	p("- **squashfs**: the published root.squashfs on the NFS export, loop-mounted (what Overtime does);\n")
	p("- **directory**: the same squashfs unpacked next to it on the boot server (`unsquashfs`, then `chmod -R a+rX`: the export squashes\n")
	p("  root to nobody), given to the initramfs as `overtime.root=nfs:SERVER:/…/tree`; every lookup and stat is an NFS call.\n\n")
	p("%d boots per root, interleaved (one VM at a time; rounds alternate the order: squashfs, directory, then directory, squashfs, …),\n", n)
	p("so that the host's drift hits both alike; median (min–max) of n. n = %d because a TCG boot of a systemd desktop takes minutes and the\n", n)
	p("whole benchmark must stay under ~40 minutes. Boot stages: seconds since QEMU started, read on the serial console; (†) is the\n")
	p("kernel's first line on the console plus systemd's monotonic time of multi-user.target in the guest (systemd stops printing its\n")
	p("status on the serial console once the serial getty runs there, so the line itself never shows). systemd-analyze:\n")
	p("`systemd-analyze time` in the guest (its \"kernel\" includes this project's initramfs: DHCP, NFS mount, overlay). Workloads: run in\n")
	p("the autologin shell, timed by the guest's `date +%%s%%N`; **cold** after `sync; echo 3 > /proc/sys/vm/drop_caches` (the guest's page,\n")
	p("dentry and inode caches, so the squashfs file's pages and the NFS attributes go), **warm** the same command right after. The boot\n")
	p("server's caches (host page cache, ganesha's metadata cache) are warm for both roots: as on a boot server that 200 PCs read from.\n\n")
	if accel == "tcg" {
		p("TCG emulates the CPU (this machine's /dev/kvm does not run guests: vmtest falls back to TCG), so everything CPU-bound in the guest\n")
		p("(decompression of squashfs blocks, the kernel's NFS client, systemd) runs many times slower than on a real PC, while the boot\n")
		p("server answers at native speed over a virtual bridge with no wire latency. Absolute times are upper bounds; the ratios are the\n")
		p("result, and they are biased *against* squashfs (its cost is guest CPU, which TCG inflates; NFS round trips here cost far less than\n")
		p("on a real network).\n\n")
	}
	p("| metric | squashfs median s | min–max | directory median s | min–max | n | directory / squashfs (medians) | per-round ratios min–max |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cs {
		p("| %s | %s | %s–%s | %s | %s–%s | %d | %.2f× | %.2f–%.2f× |\n", c.Metric,
			secs(c.Squashfs.Median), secs(c.Squashfs.Min), secs(c.Squashfs.Max),
			secs(c.Directory.Median), secs(c.Directory.Min), secs(c.Directory.Max),
			c.Squashfs.N, c.Ratio, c.PairRatios.Min, c.PairRatios.Max)
	}
	p("\nIn short (directory against squashfs, medians; \"within the spread\" where the two min–max ranges overlap):\n\n")
	for _, c := range cs {
		verdict := fmt.Sprintf("%.2f×", c.Ratio)
		if c.Squashfs.Min <= c.Directory.Max && c.Directory.Min <= c.Squashfs.Max {
			verdict += ", within the spread"
		} else if c.Ratio > 1 {
			verdict += ", the directory root slower in every boot"
		} else {
			verdict += ", the directory root faster in every boot"
		}
		p("- %s: %s\n", c.Metric, verdict)
	}
	p("\nsystemd-analyze's split between \"kernel\" (here: until PID 1 of the real root starts, after the initramfs) and userspace is\n")
	p("what it is; where the two roots shift time between them, the sum (the multi-user row) is the comparison to use.\n")
	for _, c := range cs {
		if !strings.HasPrefix(c.Metric, "`ls -lR /usr`, cold") {
			continue
		}
		var warm comparison
		for _, w := range cs {
			if strings.HasPrefix(w.Metric, "`ls -lR /usr`, warm") {
				warm = w
			}
		}
		p("\n### Against the anchor: OpenSLX's 0.04 s against 11.6 s\n\n")
		p("Issue 14 quotes OpenSLX's measurement of `ls -lR` on squashfs over NFS against the same tree on plain NFS: **0.04 s against\n")
		p("11.6 s, 290×**. Here, cold: %s s against %s s, **%.1f×**; warm: %s s against %s s, %.1f×.\n\n",
			secs(c.Squashfs.Median), secs(c.Directory.Median), c.Ratio, secs(warm.Squashfs.Median), secs(warm.Directory.Median), warm.Ratio)
		p("The setups differ, and the differences push our ratio down: OpenSLX measured real PCs over a real network, where every\n")
		p("NFS call a directory root needs costs a network round trip and squashfs's decompression runs at native speed. Here the client\n")
		p("is emulated (TCG: the guest's CPU work, squashfs decompression and the NFS client's own code alike, is many times slower) and\n")
		p("the server is nfs-ganesha on the same host behind a virtual bridge (round trips of tens of microseconds, no wire), with its\n")
		p("caches warm. The tree also differs (this image's /usr, %d lines of listing). We quote the anchor as issue 14 gives it; its\n", boots[0].LsLines)
		p("primary source was not at hand, so its client cache state, NFS version and mount options are not known to us. A time of 0.04 s\n")
		p("for a recursive long listing of a system tree is the order of a listing from the client's caches; a cold walk here, even of\n")
		p("squashfs, reads the inode and directory tables through the NFS file first.\n")
	}
	if len(boots) > 0 {
		var lsq, ldir, lb []float64
		for _, r := range boots {
			if r.Variant == variantSquashfs {
				lsq = append(lsq, r.LoadBefore)
			} else {
				ldir = append(ldir, r.LoadBefore)
			}
		}
		for _, r := range builds {
			lb = append(lb, r.LoadBefore, r.LoadAfter)
		}
		sq, dr, bl := summarize(lsq), summarize(ldir), summarize(lb)
		p("\nOther work on this 2-core machine (the host's 1-minute load average, before each boot): squashfs boots %.1f–%.1f, directory\n", sq.Min, sq.Max)
		p("boots %.1f–%.1f; around the builds %.1f–%.1f. A load above 2 means other processes (other engineers' builds and tests) shared the\n", dr.Min, dr.Max, bl.Min, bl.Max)
		p("cores with the VM or the build: the spreads above include it.\n")
	}
	if len(boots) > 0 {
		p("\n`ls -lR /usr` printed %d lines (%d on the other root); first boot's systemd-analyze line: `%s`.\n", boots[0].LsLines, boots[len(boots)-1].LsLines, boots[0].AnalyzeLine)
	}
	return md.String()
}

func secs(x float64) string {
	switch {
	case x < 1:
		return fmt.Sprintf("%.3f", x)
	case x < 10:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.1f", x)
	}
}

// load1 is the host's 1-minute load average (0 if unknown).
func load1() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
