// Command bootstorm measures a room of PCs switched on at once against the real boot
// servers: N simulated BIOS PXE clients with distinct MACs each do DHCP
// (DISCOVER/OFFER/REQUEST/ACK with the PXE options), fetch the loader named in the ACK
// (lpxelinux.0) over TFTP from dnsmasq, then kernel and initrd over HTTP — the path the
// design chose ("HTTP for kernel and initrd, TFTP only for the first small loader") —
// and, side by side, the same kernel and initrd over TFTP as a pure-TFTP PXE setup does.
//
// dnsmasq runs with the configuration the project's renderer (sitemgmt/render) writes for
// a synthetic site, in a network namespace; the clients run in a second namespace joined
// to the first by a veth pair. Results go to OUT/bootstorm.{json,md,png}:
//
//	go run ./test/bench/bootstorm -overtime bin/overtime -out docs/benchmarks
//
// -tuning both (the default) runs every -n storm twice per repetition, alternating: with
// the boot server's storm tuning (boot/storm: the sysctls `overtime bootserver run` raises,
// set here host-wide for the run and put back at the end; the rendered tftp-max and
// dhcp-lease-max; dnsmasq's open-file limit, priority and log pipe) and with the kernel's
// and dnsmasq's defaults (kind storm-defaults):
//
//	go run ./test/bench/bootstorm -overtime bin/overtime -n 500,1000 -reps 3 -cmp-n "" -dynamic-n "" -noping-n "" -spread-n "" -nolog-n ""
//
// The HTTP server is pluggable: by default a built-in net/http server (http.ServeContent,
// as production does); -overtime BIN runs the production `BIN serve --images-dir` (with a
// throwaway slapd for its directory); -http-cmd runs any other command. -report-only
// rewrites the Markdown and the plot from an earlier bootstorm.json.
//
// -switch-n N runs, instead of all that, the mode-switch comparison of issue 15 (switch.go):
// N PCs rebooting at one schedule boundary at once vs spread over -switch-spread, each
// also fetching its boot script from `overtime serve`, to OUT/bootstorm-spread.*:
//
//	go run ./test/bench/bootstorm -overtime bin/overtime -switch-n 200 -switch-reps 5 -out docs/benchmarks
//
// The binary runs itself again in other roles, chosen by BOOTSTORM_ROLE: the load
// generator (inside the client namespace), the built-in HTTP server (inside the server
// namespace) and a reaper that removes namespaces and files if the benchmark is killed.
// Every child gets SIGKILL when the benchmark dies (Pdeathsig). BOOTSTORM_CPUPROFILE=FILE
// writes a CPU profile of the load generator.
//
// Needs root (namespaces), dnsmasq (dnsmasq-base), iproute2 and Debian's pxelinux
// (lpxelinux.0); -overtime also slapd.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/boot/storm"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/vocab/model"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	switch os.Getenv("BOOTSTORM_ROLE") {
	case "httpd":
		httpdMain()
		return
	case "loadgen":
		loadgenMain()
		return
	case "reaper":
		reaperMain()
		return
	}
	if err := benchMain(); err != nil {
		fatalf("bootstorm: %v", err)
	}
}

func benchMain() error {
	var (
		out        = flag.String("out", "docs/benchmarks", "directory for bootstorm.json and bootstorm.md")
		ns         = flag.String("n", "50,200,500", "room sizes of the boot storms (clients switched on at once)")
		reps       = flag.Int("reps", 5, "repetitions of each storm and of each comparison pair")
		cmpN       = flag.String("cmp-n", "1,50", "room sizes of the HTTP vs pure-TFTP kernel+initrd comparison")
		addressing = flag.String("addressing", "static", "addressing of the storms and comparisons: static (every host's directory IP in the hosts file) or dynamic (no IPs: leases from the range)")
		dynN       = flag.String("dynamic-n", "10", "room sizes of storms with dynamic addresses and the rendered configuration as is (dnsmasq pings every new address first); \"\" for none")
		nopingN    = flag.String("noping-n", "200", "room sizes of storms with dynamic addresses and no-ping added; \"\" for none")
		spreadN    = flag.String("spread-n", "500", "room sizes of storms whose clients power on spread over -spread instead of at once; \"\" for none")
		spread     = flag.Duration("spread", 3*time.Second, "power-on spread of the -spread-n storms")
		nologN     = flag.String("nolog-n", "200", "room sizes of storms with log-dhcp left out of the rendered configuration; \"\" for none")
		tuning     = flag.String("tuning", "both", "the -n storms with the boot server's storm tuning (boot/storm: its sysctls, the rendered tftp-max and dhcp-lease-max), "+
			"with the kernel's and dnsmasq's defaults instead (storm-defaults: sysctls at their defaults, those lines left out), or both, alternating: boot-server, defaults or both. "+
			"The sysctls are host-wide; the host's values are put back at the end")
		extraReps  = flag.Int("extra-reps", 1, "repetitions of the dynamic, no-ping and spread storms")
		payloadSrc = flag.String("payload", "auto", "kernel and initrd: auto (-kernel/-initrd if given, else the built test image if present, else generated), testimage, generated")
		kernel     = flag.String("kernel", "", "kernel file")
		initrd     = flag.String("initrd", "", "initrd file (default: as -kernel)")
		kernelMiB  = flag.Float64("kernel-mib", 8, "size of the generated kernel, MiB")
		initrdMiB  = flag.Float64("initrd-mib", 30, "size of the generated initrd, MiB")
		loader     = flag.String("loader", "/usr/lib/PXELINUX/lpxelinux.0", "first-stage loader served over TFTP (Debian pxelinux)")
		httpCmd    = flag.String("http-cmd", "", "HTTP server command run in the server namespace instead of the built-in one; "+
			"{listen} {ip} {port} {root} {images} are replaced; it must serve {images}/PATH at /images/PATH and exec in place (its PID is measured)")
		otBin    = flag.String("overtime", "", "the overtime binary: its `overtime serve --images-dir` is the HTTP server (with a throwaway slapd); overrides -http-cmd")
		httpPort = flag.Int("http-port", 8080, "HTTP port of the boot server")
		logDHCP  = flag.Bool("log-dhcp", true, "keep the rendered log-dhcp line (dnsmasq logs every DHCP exchange)")
		logDir   = flag.String("log-dir", "", "keep dnsmasq's log of every run here (default: counted, not kept)")
		blksize  = flag.Int("blksize", 1456, "TFTP blksize option the clients request (PXE ROMs: 1456)")
		tftpTO   = flag.Duration("tftp-timeout", time.Second, "TFTP retransmission timeout (doubles per consecutive timeout, up to 8 s)")
		tftpRet  = flag.Int("tftp-retries", 6, "consecutive TFTP timeouts before a client gives up")
		payDL    = flag.Duration("payload-deadline", 300*time.Second, "deadline of the kernel+initrd phase")
		dnsOpts  listFlag
		switchN  = flag.Int("switch-n", 0, "run only the mode-switch comparison instead (issue 15): a room of this many PCs rebooting at one boundary, "+
			"at once vs power-ons spread uniformly at random over -switch-spread, each also fetching its boot script from `overtime serve` (needs -overtime); writes bootstorm-spread.{json,md,png}")
		switchSpread = flag.Duration("switch-spread", 2*time.Minute, "reboot spread of the -switch-n comparison (the pool policy's switchSpread, default 2 min)")
		switchReps   = flag.Int("switch-reps", 5, "repetitions of each variant of the -switch-n comparison")
	)
	switchReportOnly := flag.String("switch-report-only", "", "run nothing: rewrite -out's bootstorm-spread Markdown and PNG (and JSON) from this bootstorm-spread.json")
	reportOnly := flag.String("report-only", "", "run nothing: rewrite -out's Markdown and PNG (and JSON) from this bootstorm.json")
	flag.Var(&dnsOpts, "dnsmasq-opt", "extra dnsmasq configuration line appended to the rendered one (repeatable; e.g. tftp-max=500)")
	flag.Parse()
	if *switchReportOnly != "" {
		b, err := os.ReadFile(*switchReportOnly)
		if err != nil {
			return err
		}
		var rep switchReport
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", *switchReportOnly, err)
		}
		return rep.write(*out)
	}
	if *reportOnly != "" {
		b, err := os.ReadFile(*reportOnly)
		if err != nil {
			return err
		}
		var rep report
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", *reportOnly, err)
		}
		rep.Notes = rep.findings()
		return rep.write(*out)
	}
	var lists [6][]int
	for i, s := range []string{*ns, *cmpN, *dynN, *nopingN, *spreadN, *nologN} {
		l, err := intList(s)
		if err != nil {
			return err
		}
		lists[i] = l
	}
	storms, cmps, dyns, nopings, spreads, nologs := lists[0], lists[1], lists[2], lists[3], lists[4], lists[5]
	var stormKinds []string
	switch *tuning {
	case "both":
		stormKinds = []string{"storm-defaults", "storm"}
	case "boot-server":
		stormKinds = []string{"storm"}
	case "defaults":
		stormKinds = []string{"storm-defaults"}
	default:
		return fmt.Errorf("-tuning %q: boot-server, defaults or both", *tuning)
	}

	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces)")
	}
	for _, tool := range []string{"dnsmasq", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (Debian: dnsmasq-base, iproute2)", tool)
		}
	}
	if _, err := os.Stat(*loader); err != nil {
		return fmt.Errorf("%v (Debian package pxelinux)", err)
	}
	sweepStale()
	startReaper()
	defer restoreSysctls()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	dir, err := os.MkdirTemp("", "bootstorm-")
	if err != nil {
		return err
	}
	reaperTell("add", "dir", dir)
	defer os.RemoveAll(dir)
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigc
		fmt.Fprintf(os.Stderr, "bootstorm: %v: cleaning up\n", s)
		stop()
		restoreSysctls()
		current.Lock()
		if current.e != nil {
			current.e.close()
		}
		os.RemoveAll(dir)
		os.Exit(1)
	}()

	if err := os.Chmod(dir, 0o755); err != nil { // readable as for a dnsmasq running as its own user
		return err
	}
	payload := payloadSource{}
	switch *payloadSrc {
	case "auto", "testimage":
		if *kernel == "" && *initrd == "" {
			*kernel, *initrd, payload.What = findTestImage()
			if *kernel == "" && *payloadSrc == "testimage" {
				return errors.New("no built test image (images/testimage/build.sh) under $OVERTIME_CACHE or .cache")
			}
		}
	case "generated":
		*kernel, *initrd = "", ""
	default:
		return fmt.Errorf("-payload %q: auto, testimage or generated", *payloadSrc)
	}
	if *kernel != "" || *initrd != "" {
		if *kernel == "" || *initrd == "" {
			return errors.New("give both -kernel and -initrd")
		}
		payload.Kind = "files"
	} else {
		payload.Kind = "generated"
		*kernel, *initrd = filepath.Join(dir, "vmlinuz.gen"), filepath.Join(dir, "initrd.gen")
		if err := writeRandom(*kernel, int64(*kernelMiB*(1<<20)), 1); err != nil {
			return err
		}
		if err := writeRandom(*initrd, int64(*initrdMiB*(1<<20)), 2); err != nil {
			return err
		}
	}
	payload.Kernel, payload.Initrd = *kernel, *initrd
	srvDir := filepath.Join(dir, "srv")
	if err := os.Mkdir(srvDir, 0o755); err != nil {
		return err
	}
	imagePath := synth.Site(1, 1, 1).Image("debian-desktop").Version("").Path
	files, err := prepareServerDir(srvDir, *loader, imagePath, *kernel, *initrd)
	if err != nil {
		return err
	}
	payload.KernelBytes, payload.InitrdBytes = files[0].Size, files[1].Size
	if *logDir != "" {
		if err := os.MkdirAll(*logDir, 0o755); err != nil {
			return err
		}
	}
	var httpName, relayTo string

	if *switchN > 0 && *otBin == "" {
		return errors.New("-switch-n needs -overtime: the boot scripts come from `overtime serve`")
	}
	if *otBin != "" {
		var site *model.Site
		if *switchN > 0 {
			if site, _, err = benchSite(*switchN, "static", *httpPort); err != nil {
				return err
			}
			// The newest desktop version complete on the boot server, as the resolver
			// checks it: kernel and initrd are the payload; the root image is a sparse
			// file of the catalogue's size (nothing reads it here).
			v := site.Image("debian-desktop").Version("")
			root := filepath.Join(srvDir, "images", filepath.FromSlash(v.Path), "root.squashfs")
			f, err := os.Create(root)
			if err != nil {
				return err
			}
			err = f.Truncate(v.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		ot, err := startOvertime(*otBin, dir, site)
		if err != nil {
			return fmt.Errorf("overtime serve: %w", err)
		}
		defer ot.stop()
		*httpCmd = ot.command()
		httpName = "`overtime serve --images-dir` (the production server, " + *otBin + "), with its directory on a throwaway slapd reached through 127.0.0.1:389 of the server namespace; a child process in the server namespace"
		relayTo = ot.slapd.URL[len("ldap://"):]
	}
	if httpName == "" {
		httpName = httpServerName(*httpCmd)
	}
	o := defaultOptions(srvDir, *loader, files)
	o.LDAPRelay = relayTo
	o.HTTPCmd, o.HTTPPort, o.LogDHCP, o.DnsmasqOpts, o.LogDir = *httpCmd, *httpPort, *logDHCP, dnsOpts, *logDir
	o.BlkSize, o.TFTPTimeout, o.TFTPRetries, o.PayDeadline = *blksize, *tftpTO, *tftpRet, *payDL

	if *switchN > 0 {
		return switchMain(ctx, o, *out, switchReport{Date: time.Now().UTC().Format(time.RFC3339), Command: commandLine(), Machine: machineFacts(),
			Payload: payload, HTTPServer: httpName, N: *switchN, Spread: switchSpread.Seconds(), Reps: *switchReps, ScriptPath: "pxelinux.cfg/01-{mac}"})
	}

	rep := &report{Date: time.Now().UTC().Format(time.RFC3339), Command: commandLine(), Machine: machineFacts(), Payload: payload,
		Options: reportOptions{Addressing: *addressing, Tuning: *tuning, Sysctls: storm.Sysctls, HTTPServer: httpName, LogDHCP: *logDHCP,
			DnsmasqOpts: dnsOpts, BlkSize: *blksize, Loader: *loader, LoaderBytes: fileSize(*loader),
			TFTPTimeout: tftpTO.String(), TFTPRetries: *tftpRet, Reps: *reps, StormN: storms, CompareN: cmps,
			DynamicN: dyns, NopingN: nopings, SpreadN: spreads, NologN: nologs, Spread: spread.Seconds(), ExtraReps: *extraReps}}
	start := time.Now()
	// Interleaved: every repetition runs each storm and each comparison pair once, so
	// that drift of the shared machine spreads over all figures alike.
	for r := 1; r <= max(*reps, *extraReps); r++ {
		var specs []runSpec
		if r <= *reps {
			for _, n := range storms {
				// Tuned and untuned alternate, and which goes first alternates too.
				for i := range stormKinds {
					k := stormKinds[(i+r+1)%len(stormKinds)]
					specs = append(specs, runSpec{Kind: k, N: n, Payload: "http", Addressing: *addressing, Rep: r})
				}
			}
			for _, n := range cmps {
				specs = append(specs, runSpec{Kind: "compare", N: n, Payload: "http", Addressing: *addressing, Rep: r},
					runSpec{Kind: "compare", N: n, Payload: "tftp", Addressing: *addressing, Rep: r})
			}
		}
		if r <= *extraReps {
			for _, n := range spreads {
				sp := spread.Seconds()
				specs = append(specs, runSpec{Kind: "spread", N: n, Payload: "http", Addressing: *addressing, Spread: sp, Rep: r},
					runSpec{Kind: "spread-tftp-max", N: n, Payload: "http", Addressing: *addressing, Spread: sp, Extra: []string{fmt.Sprintf("tftp-max=%d", 2*n)}, Rep: r},
					runSpec{Kind: "spread-tftp-4s", N: n, Payload: "http", Addressing: *addressing, Spread: sp, TFTPTimeout: 4, Rep: r})
			}
			for _, n := range nologs {
				specs = append(specs, runSpec{Kind: "no-log-dhcp", N: n, Payload: "http", Addressing: *addressing, NoLogDHCP: true, Rep: r})
			}
			for _, n := range nopings {
				specs = append(specs, runSpec{Kind: "dynamic-noping", N: n, Payload: "http", Addressing: "dynamic", Extra: []string{"no-ping"}, Rep: r})
			}
			for _, n := range dyns {
				specs = append(specs, runSpec{Kind: "dynamic", N: n, Payload: "http", Addressing: "dynamic", Rep: r})
			}
		}
		for _, s := range specs {
			t := time.Now()
			res, err := runOnce(ctx, o, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name(), err)
			}
			fmt.Fprintf(os.Stderr, "%-30s all served %7.2f s  served %d/%d  p50 %6.0f ms  p99 %6.0f ms  retries %d/%d/%d  cpu dnsmasq %.2f s http %.2f s  (%.0f s)\n",
				s.name(), res.AllServedMs/1000, res.Served, res.N, res.Total.P50, res.Total.P99,
				res.DHCPRetries, res.LoaderRetries, res.PayloadRetries, res.CPU["dnsmasq"], res.CPU["http"], time.Since(t).Seconds())
			rep.Runs = append(rep.Runs, res)
		}
	}
	rep.WallSeconds = time.Since(start).Seconds()
	rep.Notes = rep.findings()
	if err := rep.write(*out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bootstorm: wrote %s and %s (%.0f s)\n", filepath.Join(*out, "bootstorm.json"), filepath.Join(*out, "bootstorm.md"), rep.WallSeconds)
	return nil
}

// switchMain runs the mode-switch comparison (switch.go), both variants in every
// repetition, and writes its report.
func switchMain(ctx context.Context, o benchOptions, out string, rep switchReport) error {
	start := time.Now()
	for r := 1; r <= rep.Reps; r++ {
		for _, s := range switchSpecs(rep.N, r, rep.Spread) {
			t := time.Now()
			res, err := runOnce(ctx, o, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name(), err)
			}
			fmt.Fprintf(os.Stderr, "%-30s all served %7.2f s  served %d/%d  p50 %6.0f ms  p99 %6.0f ms  script p50 %5.1f p99 %6.1f ms  retries %d/%d/%d  cpu dnsmasq %.2f s http %.2f s  (%.0f s)\n",
				s.name(), res.AllServedMs/1000, res.Served, res.N, res.Total.P50, res.Total.P99, res.Script.P50, res.Script.P99,
				res.DHCPRetries, res.LoaderRetries, res.PayloadRetries+res.ScriptRetries, res.CPU["dnsmasq"], res.CPU["http"], time.Since(t).Seconds())
			rep.Runs = append(rep.Runs, res)
		}
	}
	rep.WallSeconds = time.Since(start).Seconds()
	if err := rep.write(out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bootstorm: wrote %s (%.0f s)\n", filepath.Join(out, "bootstorm-spread.{json,md,png}"), rep.WallSeconds)
	return nil
}

// defaultOptions are the client behaviour of a BIOS PXE ROM: DHCP retransmission after
// 4, 8, 16, 32 s (PXE spec), TFTP blksize 1456 with a 1 s timeout doubling to 8 s.
func defaultOptions(srvDir, loader string, files []fileSum) benchOptions {
	return benchOptions{SrvDir: srvDir, Files: files, LoaderFile: loader, HTTPPort: 8080, LogDHCP: true,
		BlkSize: 1456, DHCPTimeouts: []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second},
		TFTPTimeout: time.Second, TFTPMaxTO: 8 * time.Second, TFTPRetries: 6, HTTPRetries: 2,
		DHCPDeadline: 64 * time.Second, TFTPDeadline: 60 * time.Second, PayDeadline: 300 * time.Second}
}

type payloadSource struct {
	Kind        string `json:"kind"` // generated or files
	What        string `json:"what,omitempty"`
	Kernel      string `json:"kernel"`
	Initrd      string `json:"initrd"`
	KernelBytes int64  `json:"kernelBytes"`
	InitrdBytes int64  `json:"initrdBytes"`
}

func httpServerName(cmd string) string {
	if cmd == "" {
		return "built-in (net/http, http.ServeContent, a child process in the server namespace)"
	}
	return "-http-cmd: " + cmd
}

// findTestImage finds the newest built test image (images/testimage/build.sh writes it
// to ${OVERTIME_CACHE:-<repo>/.cache}/testimage/KEY/ with a manifest), relative to the
// working directory (the repository root under `make`). It returns its kernel, initrd
// and the manifest's KERNEL_PACKAGE line, or empty strings.
func findTestImage() (kernel, initrd, what string) {
	cache := os.Getenv("OVERTIME_CACHE")
	if cache == "" {
		cache = ".cache"
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "testimage", "*", "manifest"))
	var newest time.Time
	for _, m := range dirs {
		d := filepath.Dir(m)
		fi, err := os.Stat(m)
		if err != nil || fi.ModTime().Before(newest) {
			continue
		}
		if fileSize(filepath.Join(d, "vmlinuz")) == 0 || fileSize(filepath.Join(d, "initrd.img")) == 0 {
			continue
		}
		newest = fi.ModTime()
		kernel, initrd = filepath.Join(d, "vmlinuz"), filepath.Join(d, "initrd.img")
		what = "test image " + d
		if b, err := os.ReadFile(m); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "KERNEL_PACKAGE="); ok {
					what += " (" + v + ")"
				}
			}
		}
	}
	return kernel, initrd, what
}

// writeRandom writes n incompressible bytes (like a compressed kernel or initrd),
// the same for the same seed.
func writeRandom(path string, n int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed)}))
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(int64(len(buf)), n)
		for i := 0; i < int(k); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8 && i+j < int(k); j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:k]); err != nil {
			f.Close()
			return err
		}
		n -= k
	}
	return f.Close()
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// commandLine is how this run was started, for the report.
func commandLine() string {
	args := []string{"go run ./test/bench/bootstorm"}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
