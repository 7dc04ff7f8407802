// Command uibench measures the site manager's web UI (sitemgmt/web) at university scale:
// 10,000 hosts in 200 pools in a real slapd, 80% of them with a fresh agent heartbeat,
// the API server (and so the UI) in this process on a loopback listener. It logs in as
// the site admin like a browser (form POST with an Origin header, session cookie) and
// requests each page repeatedly after a warm-up, one request at a time. Server time is
// taken by a handler wrapped around the API server (arrival to the handler's return, the
// whole body written); the client's time to the last byte is reported beside it. A page
// that answers anything but 200 is reported with its status and not measured. Writes
// docs/benchmarks/ui.{json,md}. Run through `make bench` (scripts/bench.sh).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Targets per page.
const (
	targetP99Ms = 100
	targetBytes = 200 << 10
)

type page struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	// Error is why the page was not measured (a status other than 200, or a failure).
	Error           string    `json:"error,omitempty"`
	Bytes           int       `json:"bytes"`
	ServerP50Ms     float64   `json:"serverP50Ms"`
	ServerP99Ms     float64   `json:"serverP99Ms"`
	ClientP50Ms     float64   `json:"clientP50Ms"`
	ClientP99Ms     float64   `json:"clientP99Ms"`
	MetLatency      bool      `json:"metLatency"`
	MetBytes        bool      `json:"metBytes"`
	ServerSamplesMs []float64 `json:"serverSamplesMs,omitempty"`
}

type report struct {
	Date       string   `json:"date"`
	Machine    string   `json:"machine"`
	Hosts      int      `json:"hosts"`
	Pools      int      `json:"pools"`
	Heartbeats int      `json:"heartbeats"`
	Runs       int      `json:"runs"`
	Warmup     int      `json:"warmup"`
	TargetP99  string   `json:"targetP99"`
	TargetSize string   `json:"targetSize"`
	Pages      []page   `json:"pages"`
	Notes      []string `json:"notes"`
}

func main() {
	var (
		hosts  = flag.Int("hosts", 10000, "hosts")
		pools  = flag.Int("pools", 200, "pools")
		runs   = flag.Int("runs", 200, "measured requests per page")
		warmup = flag.Int("warmup", 20, "unmeasured requests per page first")
		out    = flag.String("out", "docs/benchmarks", "output directory")
	)
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "uibench-")
	check(err)
	defer os.RemoveAll(dir)

	rep := report{Date: time.Now().UTC().Format("2006-01-02"), Hosts: *hosts, Pools: *pools, Runs: *runs, Warmup: *warmup,
		Machine:   fmt.Sprintf("%s/%s, %d CPUs (GOMAXPROCS %d)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0)),
		TargetP99: fmt.Sprintf("server p99 ≤ %d ms", targetP99Ms), TargetSize: fmt.Sprintf("≤ %d KB", targetBytes>>10)}

	site := synth.Site(*hosts, *pools, 1)
	log.Printf("starting slapd, writing %d hosts in %d pools to LDAP", *hosts, *pools)
	dirsrv, err := synth.StartDirectory(ctx, dir, "synthetic", "admin-secret", site, slapdenv.Options{RootPW: "bench-secret"})
	check(err)
	defer dirsrv.Close()
	store := dirsrv.Store
	rep.Notes = append(rep.Notes, fmt.Sprintf("site written to slapd in %.1f s (not measured here; see sitemgmt.md)", dirsrv.Written.Seconds()))

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := service.New(ctx, store, logger)
	check(err)
	loc, _ := time.LoadLocation("Europe/Berlin")
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, loc) // a Wednesday lecture, as sitebench
	rep.Heartbeats = heartbeats(svc, now)

	srv := api.New(svc, api.Options{Now: func() time.Time { return now }, Log: logger})
	// The server-side timer: arrival to the handler's return, for the measured requests.
	took := make(chan time.Duration, 1)
	timed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		srv.ServeHTTP(w, r)
		if r.Header.Get("X-Uibench") != "" {
			took <- time.Since(t0)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	hs := &http.Server{Handler: timed, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	base := "http://" + ln.Addr().String()

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	login(c, base, "admin", "admin-secret")
	// Measured requests follow no redirect: a redirect (to the login form) is a non-200.
	c = &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	loadBefore := loadavg()
	prefix := site.Hosts[len(site.Hosts)/2].Name
	prefix = prefix[:len(prefix)-1] // ten hosts
	pool := site.Pools[len(site.Pools)/3].Name
	for _, pg := range []struct{ name, path string }{
		{"overview (first page of all hosts)", "/ui/"},
		{"overview, page 50", "/ui/?page=50"},
		{"overview, search " + prefix, "/ui/?q=" + url.QueryEscape(prefix)},
		{"pool page " + pool, "/ui/pools/" + url.PathEscape(pool)},
		{"schedule editor of " + pool, "/ui/schedule/pools/" + url.PathEscape(pool)},
		{"Prometheus scrape (not a UI page; same targets)", "/metrics"},
	} {
		log.Printf("%s: %s", pg.name, pg.path)
		rep.Pages = append(rep.Pages, measure(c, base, pg.name, pg.path, *warmup, *runs, took))
	}
	rep.Notes = append(rep.Notes,
		"one request at a time on loopback, client and server in one process on the same cores; server time: from the request's arrival at the handler to its return (template rendered, whole body written to the connection's buffer); client time: request sent to last body byte read",
		fmt.Sprintf("agents: %d of %d hosts with a fresh heartbeat (a mix of harvesting, throttled, frozen and owner-active), so every row shows an agent state", rep.Heartbeats, *hosts),
		"bytes: the uncompressed HTML body (the server does not compress)",
		fmt.Sprintf("load average (1 min) before the measurements %s, after %s: the cores are shared with whatever else runs (CI, other benchmarks), which shows in the p99s first", loadBefore, loadavg()))

	check(os.MkdirAll(*out, 0o755))
	js, _ := json.MarshalIndent(rep, "", "  ")
	check(os.WriteFile(filepath.Join(*out, "ui.json"), append(js, '\n'), 0o644))
	check(os.WriteFile(filepath.Join(*out, "ui.md"), []byte(markdown(rep)), 0o644))
	fmt.Print(markdown(rep))
}

// heartbeats gives 80% of the hosts a fresh heartbeat in a realistic mix, straight into
// the service (as POST /api/v1/agent/heartbeat would, without 8,000 requests).
func heartbeats(svc *service.Service, now time.Time) int {
	site := svc.Snapshot().Site
	n := 0
	for i, h := range site.Hosts {
		if i%5 == 4 {
			continue
		}
		hb := wire.Heartbeat{Host: h.Name, Time: now, Mode: "desktop", ConfigFrom: wire.ConfigFromAPI,
			OwnerState: model.StateNoUser, Action: model.ActionRun, GuestState: "running", CPUs: 8, MemoryMB: 16384}
		switch i % 10 {
		case 1:
			hb.OwnerState, hb.Action, hb.Cap = model.StateOwnerActive, model.ActionThrottle, 0.25
		case 3:
			hb.OwnerState, hb.Action, hb.GuestState = model.StateOwnerActive, model.ActionFreeze, "paused"
		}
		_, err := svc.Agents.PutHeartbeat(hb, now, "127.0.0.1")
		check(err)
		n++
	}
	return n
}

// login logs in through the form as a browser does; the jar keeps the session cookie.
func login(c *http.Client, base, uid, pw string) {
	req, err := http.NewRequest("POST", base+"/ui/login", strings.NewReader(url.Values{"uid": {uid}, "password": {pw}, "next": {"/ui/"}}.Encode()))
	check(err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	check(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	u, _ := url.Parse(base + "/ui/")
	if resp.StatusCode != http.StatusOK || len(c.Jar.Cookies(u)) == 0 || strings.Contains(string(body), `action="/ui/login"`) {
		log.Fatalf("login as %s: %d, %d cookies\n%.500s", uid, resp.StatusCode, len(c.Jar.Cookies(u)), body)
	}
}

// measure requests path warmup+runs times; a status other than 200 ends it and is
// reported as such.
func measure(c *http.Client, base, name, path string, warmup, runs int, took chan time.Duration) page {
	p := page{Name: name, Path: path}
	var server, client []float64
	for i := 0; i < warmup+runs; i++ {
		req, err := http.NewRequest("GET", base+path, nil)
		check(err)
		req.Header.Set("X-Uibench", "1")
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			p.Error = err.Error()
			return p
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		dc := time.Since(t0)
		ds := <-took
		p.Status, p.Bytes = resp.StatusCode, len(body)
		if err != nil {
			p.Error = err.Error()
			return p
		}
		if resp.StatusCode != http.StatusOK {
			p.Error = fmt.Sprintf("answered %d %s, not measured", resp.StatusCode, http.StatusText(resp.StatusCode))
			return p
		}
		if strings.HasPrefix(path, "/ui/") && strings.Contains(string(body), `action="/ui/login"`) {
			p.Error = "answered the login form (session lost), not measured"
			return p
		}
		if i >= warmup {
			server, client = append(server, ms(ds)), append(client, ms(dc))
		}
	}
	p.ServerSamplesMs = server
	p.ServerP50Ms, p.ServerP99Ms = pct(server, 50), pct(server, 99)
	p.ClientP50Ms, p.ClientP99Ms = pct(client, 50), pct(client, 99)
	p.MetLatency, p.MetBytes = p.ServerP99Ms <= targetP99Ms, p.Bytes <= targetBytes
	return p
}

// loadavg is the 1-minute load average ("?" where /proc/loadavg is missing).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the nearest-rank percentile.
func pct(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func markdown(r report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Web UI at scale\n\n%d hosts in %d pools (%d with a fresh agent heartbeat), real slapd, API server and UI in process on loopback; %s; %s.\n",
		r.Hosts, r.Pools, r.Heartbeats, r.Machine, r.Date)
	fmt.Fprintf(&b, "Generated by `make bench` (test/bench/uibench); %d requests per page after %d warm-up, raw server samples in ui.json.\n", r.Runs, r.Warmup)
	fmt.Fprintf(&b, "Targets: %s, page %s.\n\n", r.TargetP99, r.TargetSize)
	b.WriteString("| page | path | status | server p50 | server p99 | client p50 | client p99 | bytes | p99 ≤ 100 ms | ≤ 200 KB |\n|---|---|---:|---:|---:|---:|---:|---:|---|---|\n")
	yes := func(ok bool) string { return map[bool]string{true: "met", false: "**missed**"}[ok] }
	for _, p := range r.Pages {
		if p.Error != "" {
			st := "-"
			if p.Status != 0 {
				st = fmt.Sprintf("**%d**", p.Status)
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s | - | - | - | - | - | **not measured**: %s | - |\n", p.Name, p.Path, st, p.Error)
			continue
		}
		fmt.Fprintf(&b, "| %s | `%s` | %d | %s ms | %s ms | %s ms | %s ms | %s | %s | %s |\n", p.Name, p.Path, p.Status,
			num(p.ServerP50Ms), num(p.ServerP99Ms), num(p.ClientP50Ms), num(p.ClientP99Ms), kb(p.Bytes), yes(p.MetLatency), yes(p.MetBytes))
	}
	b.WriteString("\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func kb(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1024) }

func num(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
