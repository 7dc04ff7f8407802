// Command sitebench measures the site manager at university scale (issue: 10,000 hosts in
// 200 pools) against a real slapd and the real `overtime serve` binary, and writes
// docs/benchmarks/sitemgmt.{json,md}. Run through `make bench`.
//
// Each figure is measured several times in one run; the table quotes the median with the
// min-max spread, because these 2-core machines are noisy.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
)

type figure struct {
	Name    string    `json:"name"`
	Unit    string    `json:"unit"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples"`
	// P99 is the 99th percentile of the samples, for latencies with many samples.
	P99    float64 `json:"p99,omitempty"`
	Target string  `json:"target,omitempty"`
	// Reading says what limits the figure and what would move it.
	Reading string `json:"reading,omitempty"`
	Met     *bool  `json:"met,omitempty"`
}

type report struct {
	Date        string   `json:"date"`
	Machine     string   `json:"machine"`
	Hosts       int      `json:"hosts"`
	Pools       int      `json:"pools"`
	BootServers int      `json:"bootServers"`
	Figures     []figure `json:"figures"`
	Notes       []string `json:"notes"`
}

func stats(name, unit string, xs []float64) figure {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return figure{Name: name, Unit: unit, Median: med, Min: s[0], Max: s[len(s)-1], Samples: xs}
}

func withTarget(f figure, target string, met bool, reading string) figure {
	f.Target, f.Met, f.Reading = target, &met, reading
	return f
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func timeN(n int, fn func() error) ([]float64, error) {
	var out []float64
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		out = append(out, ms(time.Since(start)))
	}
	return out, nil
}

func main() {
	var (
		hosts       = flag.Int("hosts", 100000, "hosts")
		pools       = flag.Int("pools", 2000, "pools")
		servers     = flag.Int("boot-servers", 50, "boot servers")
		runs        = flag.Int("runs", 7, "repetitions of each in-process measurement")
		wrkRuns     = flag.Int("wrk-runs", 3, "repetitions of the HTTP load test")
		wrkDur      = flag.Duration("wrk-duration", 10*time.Second, "duration of one HTTP load run")
		pacedConns  = flag.Int("paced-conns", 64, "connections of the paced load, each at most 100 req/s (64: about 5,800 req/s at 1 ms latency; more offers more than the target rate)")
		feedSamples = flag.Int("feed-samples", 30, "writes timed from one replica to the others")
		bin         = flag.String("bin", "bin/overtime", "overtime binary")
		out         = flag.String("out", "docs/benchmarks", "output directory")
		serveLogs   = flag.String("serve-logs", "", "write each replica's log to DIR/serve-NAME.log (default: discard)")
	)
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sitebench-")
	check(err)
	atExit(func() { os.RemoveAll(dir) })

	rep := report{Date: time.Now().UTC().Format("2006-01-02"), Hosts: *hosts, Pools: *pools, BootServers: *servers,
		Machine: fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))}

	site := synth.SiteOn(*hosts, *pools, *servers, 1)
	// Two providers in multi-provider replication: replica A and C of the site manager on
	// the first, replica B on the second.
	log.Printf("starting a multi-provider slapd pair, writing %d hosts in %d pools (%d boot servers) to LDAP", *hosts, *pools, len(site.BootServers))
	pair, err := slapdenv.StartReplicated([]string{filepath.Join(dir, "slapd1"), filepath.Join(dir, "slapd2")}, slapdenv.Options{RootPW: "bench-secret"})
	check(err)
	atExit(func() { pair[1].Stop() })
	dirsrv, err := synth.Fill(ctx, pair[0], "synthetic", "admin-secret", site)
	check(err)
	atExit(dirsrv.Close)
	sl, store := dirsrv.Slapd, dirsrv.Store
	applyTime := dirsrv.Written
	rep.Notes = append(rep.Notes, fmt.Sprintf("initial write of the whole site (%d entries, one LDAP add each, into a multi-provider pair): %.1f s", len(site.Hosts)+len(site.Pools), applyTime.Seconds()))
	store2, err := ldapstore.Open(ldapstore.Config{URL: pair[1].URL, BaseDN: pair[1].BaseDN, BindDN: pair[1].RootDN, BindPassword: pair[1].RootPW})
	check(err)
	atExit(func() { store2.Close() })
	start := time.Now()
	for {
		s2, err := store2.Load(ctx)
		if err == nil && len(s2.Hosts) == len(site.Hosts) {
			break
		}
		if time.Since(start) > 10*time.Minute {
			fatalf("the second provider did not catch up: %v", err)
		}
		time.Sleep(time.Second)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("the second provider held every host %.1f s after the write ended", time.Since(start).Seconds()))

	log.Printf("load from LDAP")
	var loaded *model.Site
	xs, err := timeN(*runs, func() error { loaded, err = store.Load(ctx); return err })
	check(err)
	if len(loaded.Hosts) != *hosts {
		fatalf("loaded %d hosts, want %d", len(loaded.Hosts), *hosts)
	}
	f := stats("load site from LDAP (paged search, parse)", "ms", xs)
	rep.Figures = append(rep.Figures, withTarget(f, "≤ 5000 ms", f.Median <= 5000,
		"The limit is slapd sending and the client parsing ~100 bytes of BER per attribute (one paged search of 1,000 entries per round trip); a replica pays it at start and when its watch reconnects, no longer on every change."))

	log.Printf("validate + compile + evaluate")
	xs, err = timeN(*runs, func() error { return loaded.Validate() })
	check(err)
	f = stats("validate the whole site (fields, references, uniqueness)", "ms", xs)
	validateMed := f.Median
	rep.Figures = append(rep.Figures, f)
	xs, err = timeN(*runs, func() error { _, err := schedule.Compile(loaded); return err })
	check(err)
	f = stats("compile schedule (parse, overlap checks, week arrays)", "ms", xs)
	compileMed := f.Median
	rep.Figures = append(rep.Figures, f)
	eng, err := schedule.Compile(loaded)
	check(err)
	xs, err = timeN(*runs, func() error { resolve.New(loaded, eng); return nil })
	check(err)
	rep.Figures = append(rep.Figures, stats("build the resolver (MAC index)", "ms", xs))
	// A full reload as `overtime serve` does it: load, validate, compile, resolver; wall
	// and CPU time of this process (the LDAP server's share is not in it).
	var cpu []float64
	xs, err = timeN(*runs, func() error {
		c0 := cpuTime()
		s, err := store.Load(ctx)
		if err != nil {
			return err
		}
		if err := s.Validate(); err != nil {
			return err
		}
		e, err := schedule.Compile(s)
		if err != nil {
			return err
		}
		resolve.New(s, e)
		cpu = append(cpu, ms(cpuTime()-c0))
		return nil
	})
	check(err)
	fullReload := stats("full reload (load + validate + compile + resolver): wall time", "ms", xs)
	fullCPU := stats("full reload: CPU time of the site manager process", "ms", cpu)
	rep.Figures = append(rep.Figures, fullReload, fullCPU)

	at := time.Date(2026, 12, 2, 10, 30, 0, 0, eng.Location())
	modes := map[string]int{}
	for i := range loaded.Hosts {
		modes[eng.AtHost(&loaded.Hosts[i], at).Mode]++
	}
	var sinkMode string
	xs, err = timeN(*runs*3, func() error {
		for i := range loaded.Hosts {
			sinkMode = eng.AtHost(&loaded.Hosts[i], at).Mode
		}
		return nil
	})
	_ = sinkMode
	check(err)
	rep.Figures = append(rep.Figures, stats("evaluate every host's mode + next change at one instant, each looked up by name (Engine.AtHost)", "ms", xs))
	xs, err = timeN(*runs*3, func() error {
		eng.AtEach(at, func(_ int, d schedule.Decision) { sinkMode = d.Mode })
		return nil
	})
	check(err)
	f = stats("evaluate every host's mode + next change at one instant (Engine.AtEach)", "ms", xs)
	rep.Figures = append(rep.Figures, withTarget(f, "≤ 50 ms", f.Median <= 50,
		"Every host is a lookup in its pool's precompiled week array plus the exceptions that name it, linear in hosts; AtEach walks the compiled hosts in order, without the by-name map look-up that was half of AtHost's time at this size."))

	modeOf := func(h *model.Host) *model.Mode { return loaded.Mode(eng.AtHost(h, at).Mode) }
	var sink bytes.Buffer
	xs, err = timeN(*runs, func() error {
		for i := range loaded.BootServers {
			sink.Reset()
			d := render.Dnsmasq{Site: loaded, Server: &loaded.BootServers[i], HostsFile: "/var/lib/overtime/hosts", TFTPRoot: "/srv/tftp"}
			if err := d.Hosts(&sink); err != nil {
				return err
			}
			if err := d.Config(&sink); err != nil {
				return err
			}
		}
		return nil
	})
	check(err)
	rep.Figures = append(rep.Figures, stats(fmt.Sprintf("render dnsmasq config + hosts file for all %d boot servers (all hosts)", len(loaded.BootServers)), "ms", xs))
	xs, err = timeN(*runs, func() error { sink.Reset(); return render.SlurmNodes(&sink, loaded, modeOf) })
	check(err)
	rep.Figures = append(rep.Figures, stats("render slurm.conf node + partition lines (all hosts)", "ms", xs))

	// The boot script endpoint under load: the real binary, a real load generator.
	pwFile := filepath.Join(dir, "bindpw")
	check(os.WriteFile(pwFile, []byte(sl.RootPW), 0o600))
	serve := func(name string, srv *slapdenv.Server) (string, *exec.Cmd) {
		port := freePort()
		cmd := exec.Command(*bin, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--ldap-url", srv.URL,
			"--base-dn", srv.BaseDN, "--bind-dn", srv.RootDN, "--bind-password-file", pwFile, "--reload", "0", "--now", at.Format(time.RFC3339))
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if *serveLogs != "" {
			f, err := os.Create(filepath.Join(*serveLogs, "serve-"+name+".log"))
			check(err)
			cmd.Stdout, cmd.Stderr = f, f
		}
		start := time.Now()
		check(cmd.Start())
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		waitHTTP(base + "/healthz")
		log.Printf("replica %s up in %.1f s", name, time.Since(start).Seconds())
		return base, cmd
	}
	base, srvA := serve("A", sl)
	atExit(func() { _ = srvA.Process.Kill(); _ = srvA.Wait() })
	// What the feed's first refresh costs has settled once it has installed its site.
	time.Sleep(2 * time.Second)
	rss0, hwm0 := memOf(srvA.Process.Pid)

	// wrk picks a random known MAC per request, so every request renders a different host.
	var macs strings.Builder
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&macs, "%q,", loaded.Hosts[rng.Intn(len(loaded.Hosts))].MAC)
	}
	luaMacs := fmt.Sprintf(`macs = {%s}
math.randomseed(1)
request = function()
  return wrk.format("GET", "/boot/ipxe/" .. macs[math.random(#macs)])
end
`, macs.String())
	// Paced: every connection waits 10 ms before its next request, so N connections offer
	// at most N x 100 req/s: the latency a boot storm of that rate sees. Saturated: no
	// pause, the most the server answers while wrk competes for the same 2 cores.
	paced := filepath.Join(dir, "paced.lua")
	check(os.WriteFile(paced, []byte(luaMacs+"delay = function() return 10 end\n"), 0o644))
	saturated := filepath.Join(dir, "saturated.lua")
	check(os.WriteFile(saturated, []byte(luaMacs), 0o644))
	for _, load := range []struct {
		name, script, conns string
		paced               bool
	}{{fmt.Sprintf("paced, %d connections x 100 req/s", *pacedConns), paced, strconv.Itoa(*pacedConns), true}, {"saturated, 32 connections", saturated, "32", false}} {
		var p50, p99, rps []float64
		for i := 0; i < *wrkRuns; i++ {
			log.Printf("wrk %s: run %d/%d", load.name, i+1, *wrkRuns)
			o, err := exec.Command("wrk", "-t2", "-c"+load.conns, "-d"+wrkDur.String(), "--latency", "-s", load.script, base).CombinedOutput()
			if err != nil {
				fatalf("wrk: %v\n%s", err, o)
			}
			a, b, r, err := parseWrk(string(o))
			if err != nil {
				fatalf("%v\n%s", err, o)
			}
			p50, p99, rps = append(p50, a), append(p99, b), append(rps, r)
		}
		fr := stats("GET /boot/ipxe/{mac} ("+load.name+"): throughput", "req/s", rps)
		f50 := stats("GET /boot/ipxe/{mac} ("+load.name+"): latency p50", "ms", p50)
		f99 := stats("GET /boot/ipxe/{mac} ("+load.name+"): latency p99", "ms", p99)
		if load.paced {
			fr = withTarget(fr, "≥ 5000 req/s", fr.Median >= 5000,
				"The paced load offers at most 100 req/s per connection; the rate reached is what the connections achieve with the server's latency added to their 10 ms pause.")
			f99 = withTarget(f99, "≤ 5 ms at ≥ 5000 req/s", f99.Median <= 5 && fr.Median >= 5000,
				"Each request is a MAC lookup, a schedule evaluation and a template render from the snapshot; the tail is CPU contention with wrk on the same 2 cores.")
		}
		rep.Figures = append(rep.Figures, fr, f50, f99)
	}
	rss1, hwm1 := memOf(srvA.Process.Pid)
	rep.Figures = append(rep.Figures,
		stats("memory of one `overtime serve` replica after the load (VmRSS)", "MiB", []float64{rss0}),
		stats("memory of one `overtime serve` replica after the HTTP load (VmRSS)", "MiB", []float64{rss1}),
		stats("memory of one `overtime serve` replica: peak (VmHWM) after the HTTP load", "MiB", []float64{max(hwm0, hwm1)}))
	rep.Notes = append(rep.Notes,
		"wrk and the server share the same 2 cores, so the HTTP figures include the load generator's own CPU use; every request names a random one of 1,000 known MACs and is rendered from the schedule snapshot (no caching).",
		"memory is read from /proc/PID/status of replica A (`overtime serve --watch`, the default): after start (the initial load and the watch's refresh phase, which holds the whole site a second time until it is installed) and after the wrk runs.",
		fmt.Sprintf("modes at the instant measured (Wed 10:30): %v", modes))

	// The change feed: a schedule change written through replica A's API until replica B
	// (another `overtime serve` on the other provider) and replica C (on A's slapd) serve it.
	urlB, srvB := serve("B", pair[1])
	atExit(func() { _ = srvB.Process.Kill(); _ = srvB.Wait() })
	urlC, srvC := serve("C", sl)
	atExit(func() { _ = srvC.Process.Kill(); _ = srvC.Wait() })
	time.Sleep(2 * time.Second)
	var candidates []model.Host
	for _, h := range loaded.Hosts {
		// Desktop by its pool's weekly rule: an exception (an exam) would override the
		// host rule written below, and the change would never show.
		if d := eng.AtHost(&h, at); len(h.Weekly) == 0 && d.Mode == "desktop" && d.ExceptionKind == "" {
			candidates = append(candidates, h)
		}
	}
	var put, toB, toC []float64
	cpuB0 := procCPU(srvB.Process.Pid)
	for i := 0; i < *feedSamples; i++ {
		h := candidates[(i*7919)%len(candidates)]
		h.Weekly = []string{"daily 00:00-24:00 cluster"}
		body, _ := json.Marshal(h)
		req, _ := http.NewRequest("PUT", base+"/api/v1/hosts/"+h.Name, bytes.NewReader(body))
		req.SetBasicAuth("admin", "admin-secret")
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		type seen struct {
			who string
			d   time.Duration
		}
		got := make(chan seen, 2)
		for who, u := range map[string]string{"B": urlB, "C": urlC} {
			go func() { got <- seen{who, waitBody(u+"/boot/ipxe/"+h.MAC, "overtime-cluster.target", t0)} }()
		}
		resp, err := http.DefaultClient.Do(req)
		check(err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			fatalf("PUT host %s: %s", h.Name, resp.Status)
		}
		put = append(put, ms(time.Since(t0)))
		for range 2 {
			s := <-got
			if s.who == "B" {
				toB = append(toB, ms(s.d))
			} else {
				toC = append(toC, ms(s.d))
			}
		}
		time.Sleep(200 * time.Millisecond) // not one coalesced batch
	}
	cpuB := (procCPU(srvB.Process.Pid) - cpuB0) / float64(*feedSamples)
	rep.Figures = append(rep.Figures,
		stats("schedule change: PUT /api/v1/hosts/{name} on replica A answered (A serves it)", "ms", put),
		withP99(stats("schedule change on A until replica B (other provider) serves it", "ms", toB)),
		withP99(stats("schedule change on A until replica C (same slapd as A) serves it", "ms", toC)),
		stats("replica B's CPU time per change applied from the feed (incl. the polling it answered)", "ms", []float64{cpuB}))
	fb := rep.Figures[len(rep.Figures)-3]
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("write to every replica serving it: %s ms median, %s ms p99 to the replica on the other provider (n = %d). What bounds it is not LDAP: the writer validates and compiles the whole site before it writes (%s ms median until A answered), then each replica applies the feed's batch after a 50 ms coalescing pause to a copy of its site and validates and compiles that (validate %s ms + compile %s ms at this size, measured above). Incremental validation and compilation (only what the changed entities touch) would move it; LDAP replication and the persistent search add milliseconds.",
			num(fb.Median), num(fb.P99), len(fb.Samples), num(rep.Figures[len(rep.Figures)-4].Median), num(validateMed), num(compileMed)),
		fmt.Sprintf("memory per replica: %s MiB resident after start, %s MiB after the HTTP load, %s MiB peak (VmHWM; the start, when the first load and the feed's refresh phase each decode the whole site). Size a replica for the peak plus the Go runtime's headroom.", num(rss0), num(rss1), num(max(hwm0, hwm1))),
		fmt.Sprintf("the write-to-serve samples put a rule \"daily 00:00-24:00 cluster\" on a different desktop host each time through A's API and poll B's and C's /boot/ipxe/{mac} every millisecond until the script boots the cluster mode; a full reload at this size costs %s ms (median) of wall time and %s ms of CPU in the replica (slapd's share not counted), which is what every replica paid per period with periodic full reloads (--reload, formerly 30 s, so up to 30 s before a write was served), against about %s ms of CPU per change applied from the feed.", num(fullReload.Median), num(fullCPU.Median), num(cpuB)))

	check(os.MkdirAll(*out, 0o755))
	js, _ := json.MarshalIndent(rep, "", "  ")
	check(os.WriteFile(filepath.Join(*out, "sitemgmt.json"), append(js, '\n'), 0o644))
	check(os.WriteFile(filepath.Join(*out, "sitemgmt.md"), []byte(markdown(rep)), 0o644))
	fmt.Print(markdown(rep))
	runExit()
}

// exits are what must be undone however the run ends (slapd, the replicas, the temp
// directory): a failure exits without running defers.
var exits []func()

func atExit(f func()) { exits = append(exits, f) }

func runExit() {
	for i := len(exits) - 1; i >= 0; i-- {
		exits[i]()
	}
	exits = nil
}

func fatalf(format string, args ...any) {
	log.Printf(format, args...)
	runExit()
	os.Exit(1)
}

// waitBody polls url every millisecond until its body contains want and returns the time
// since t0.
func waitBody(url, want string, t0 time.Time) time.Duration {
	for time.Since(t0) < 5*time.Minute {
		if r, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if strings.Contains(string(b), want) {
				return time.Since(t0)
			}
		}
		time.Sleep(time.Millisecond)
	}
	fatalf("%s never served %q", url, want)
	return 0
}

// withP99 adds the 99th percentile (nearest rank) to the name of a latency figure.
func withP99(f figure) figure {
	s := append([]float64(nil), f.Samples...)
	sort.Float64s(s)
	f.P99 = s[min(len(s)-1, int(math.Ceil(0.99*float64(len(s))))-1)]
	return f
}

// memOf is VmRSS and VmHWM of a process in MiB.
func memOf(pid int) (rss, hwm float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// procCPU is a process's user + system CPU time in ms (from /proc/PID/stat).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) * 1000 / 100 // USER_HZ
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func markdown(r report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Site manager at scale\n\n%d hosts in %d pools on %d boot servers, real slapd (a multi-provider pair) and `overtime serve`; %s; %s.\n", r.Hosts, r.Pools, r.BootServers, r.Machine, r.Date)
	fmt.Fprintf(&b, "Generated by `make bench` (test/bench/sitebench); raw samples in sitemgmt.json.\n\n")
	fmt.Fprintf(&b, "| measurement | median | p99 | spread (min-max) | n | target | met |\n|---|---:|---:|---:|---:|---|---|\n")
	for _, f := range r.Figures {
		met, p99 := "", ""
		if f.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*f.Met]
		}
		if f.P99 != 0 {
			p99 = num(f.P99) + " " + f.Unit
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s-%s | %d | %s | %s |\n", f.Name, num(f.Median), f.Unit, p99, num(f.Min), num(f.Max), len(f.Samples), f.Target, met)
	}
	b.WriteString("\n## Reading\n\n")
	for _, f := range r.Figures {
		if f.Met == nil {
			continue
		}
		verdict := "met"
		if !*f.Met {
			verdict = "**missed**"
		}
		fmt.Fprintf(&b, "- %s: %s %s against %s, %s. %s\n", f.Name, num(f.Median), f.Unit, f.Target, verdict, f.Reading)
	}
	b.WriteString("\n## Notes\n\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func num(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

var (
	reLat = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$`)
	reRPS = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reErr = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// parseWrk reads wrk --latency output: p50, p99 in ms and requests/s.
func parseWrk(o string) (p50, p99, rps float64, err error) {
	if m := reErr.FindStringSubmatch(o); m != nil {
		return 0, 0, 0, fmt.Errorf("wrk saw %s error responses", m[1])
	}
	for _, m := range reLat.FindAllStringSubmatch(o, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		switch m[3] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		if m[1] == "50" {
			p50 = v
		} else {
			p99 = v
		}
	}
	m := reRPS.FindStringSubmatch(o)
	if m == nil || p50 == 0 || p99 == 0 {
		return 0, 0, 0, fmt.Errorf("cannot parse wrk output")
	}
	rps, _ = strconv.ParseFloat(m[1], 64)
	return p50, p99, rps, nil
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitHTTP(url string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fatalf("%s did not come up", url)
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}
