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
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
)

type figure struct {
	Name    string    `json:"name"`
	Unit    string    `json:"unit"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples"`
	Target  string    `json:"target,omitempty"`
	Met     *bool     `json:"met,omitempty"`
}

type report struct {
	Date    string   `json:"date"`
	Machine string   `json:"machine"`
	Hosts   int      `json:"hosts"`
	Pools   int      `json:"pools"`
	Figures []figure `json:"figures"`
	Notes   []string `json:"notes"`
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

func withTarget(f figure, target string, met bool) figure {
	f.Target, f.Met = target, &met
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
		hosts   = flag.Int("hosts", 10000, "hosts")
		pools   = flag.Int("pools", 200, "pools")
		runs    = flag.Int("runs", 7, "repetitions of each in-process measurement")
		wrkRuns = flag.Int("wrk-runs", 3, "repetitions of the HTTP load test")
		wrkDur  = flag.Duration("wrk-duration", 10*time.Second, "duration of one HTTP load run")
		bin     = flag.String("bin", "bin/overtime", "overtime binary")
		out     = flag.String("out", "docs/benchmarks", "output directory")
	)
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sitebench-")
	check(err)
	defer os.RemoveAll(dir)

	rep := report{Date: time.Now().UTC().Format("2006-01-02"), Hosts: *hosts, Pools: *pools,
		Machine: fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))}

	site := synth.Site(*hosts, *pools, 1)
	log.Printf("starting slapd, writing %d hosts in %d pools to LDAP", *hosts, *pools)
	dirsrv, err := synth.StartDirectory(ctx, dir, "synthetic", "admin-secret", site, slapdenv.Options{RootPW: "bench-secret"})
	check(err)
	defer dirsrv.Close()
	sl, store := dirsrv.Slapd, dirsrv.Store
	applyTime := dirsrv.Written
	rep.Notes = append(rep.Notes, fmt.Sprintf("initial write of the whole site (%d entries, one LDAP add each): %.1f s", len(site.Hosts)+len(site.Pools), applyTime.Seconds()))

	log.Printf("load from LDAP")
	var loaded *model.Site
	xs, err := timeN(*runs, func() error { loaded, err = store.Load(ctx); return err })
	check(err)
	if len(loaded.Hosts) != *hosts {
		log.Fatalf("loaded %d hosts, want %d", len(loaded.Hosts), *hosts)
	}
	f := stats("load site from LDAP (paged search, parse)", "ms", xs)
	rep.Figures = append(rep.Figures, withTarget(f, "≤ 2000 ms", f.Median <= 2000))

	log.Printf("compile + evaluate")
	xs, err = timeN(*runs, func() error { _, err := schedule.Compile(loaded); return err })
	check(err)
	rep.Figures = append(rep.Figures, stats("compile schedule (parse, overlap checks, week arrays)", "ms", xs))
	eng, err := schedule.Compile(loaded)
	check(err)
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
	f = stats("evaluate every host's mode + next change at one instant", "ms", xs)
	rep.Figures = append(rep.Figures, withTarget(f, "≤ 50 ms", f.Median <= 50))

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
	port := freePort()
	pwFile := filepath.Join(dir, "bindpw")
	check(os.WriteFile(pwFile, []byte(sl.RootPW), 0o600))
	srv := exec.Command(*bin, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--ldap-url", sl.URL,
		"--base-dn", sl.BaseDN, "--bind-dn", sl.RootDN, "--bind-password-file", pwFile, "--reload", "0", "--now", at.Format(time.RFC3339))
	srv.Stdout, srv.Stderr = io.Discard, io.Discard
	check(srv.Start())
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(base + "/healthz")

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
	// Paced: every connection waits 10 ms before its next request, so 24 connections offer
	// about 2,400 req/s: the latency a boot storm of that rate sees. Saturated: no pause,
	// the most the server answers while wrk competes for the same 2 cores.
	paced := filepath.Join(dir, "paced.lua")
	check(os.WriteFile(paced, []byte(luaMacs+"delay = function() return 10 end\n"), 0o644))
	saturated := filepath.Join(dir, "saturated.lua")
	check(os.WriteFile(saturated, []byte(luaMacs), 0o644))
	for _, load := range []struct {
		name, script, conns string
		paced               bool
	}{{"paced, 24 connections x 100 req/s", paced, "24", true}, {"saturated, 32 connections", saturated, "32", false}} {
		var p50, p99, rps []float64
		for i := 0; i < *wrkRuns; i++ {
			log.Printf("wrk %s: run %d/%d", load.name, i+1, *wrkRuns)
			o, err := exec.Command("wrk", "-t2", "-c"+load.conns, "-d"+wrkDur.String(), "--latency", "-s", load.script, base).CombinedOutput()
			if err != nil {
				log.Fatalf("wrk: %v\n%s", err, o)
			}
			a, b, r, err := parseWrk(string(o))
			if err != nil {
				log.Fatalf("%v\n%s", err, o)
			}
			p50, p99, rps = append(p50, a), append(p99, b), append(rps, r)
		}
		fr := stats("GET /boot/ipxe/{mac} ("+load.name+"): throughput", "req/s", rps)
		f50 := stats("GET /boot/ipxe/{mac} ("+load.name+"): latency p50", "ms", p50)
		f99 := stats("GET /boot/ipxe/{mac} ("+load.name+"): latency p99", "ms", p99)
		if load.paced {
			fr = withTarget(fr, "≥ 2000 req/s", fr.Median >= 2000)
			f99 = withTarget(f99, "≤ 5 ms at ≥ 2000 req/s", f99.Median <= 5 && fr.Median >= 2000)
		}
		rep.Figures = append(rep.Figures, fr, f50, f99)
	}
	rep.Notes = append(rep.Notes,
		"wrk and the server share the same 2 cores, so the HTTP figures include the load generator's own CPU use; every request names a random one of 1,000 known MACs and is rendered from the schedule snapshot (no caching).",
		fmt.Sprintf("modes at the instant measured (Wed 10:30): %v", modes))

	check(os.MkdirAll(*out, 0o755))
	js, _ := json.MarshalIndent(rep, "", "  ")
	check(os.WriteFile(filepath.Join(*out, "sitemgmt.json"), append(js, '\n'), 0o644))
	check(os.WriteFile(filepath.Join(*out, "sitemgmt.md"), []byte(markdown(rep)), 0o644))
	fmt.Print(markdown(rep))
}

func markdown(r report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Site manager at scale\n\n%d hosts in %d pools, real slapd and `overtime serve`; %s; %s.\n", r.Hosts, r.Pools, r.Machine, r.Date)
	fmt.Fprintf(&b, "Generated by `make bench` (test/bench/sitebench); raw samples in sitemgmt.json.\n\n")
	fmt.Fprintf(&b, "| measurement | median | spread (min-max) | n | target | met |\n|---|---:|---:|---:|---|---|\n")
	for _, f := range r.Figures {
		met := ""
		if f.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*f.Met]
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s-%s | %d | %s | %s |\n", f.Name, num(f.Median), f.Unit, num(f.Min), num(f.Max), len(f.Samples), f.Target, met)
	}
	b.WriteString("\n")
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
	log.Fatalf("%s did not come up", url)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
