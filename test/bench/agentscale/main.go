// Command agentscale measures the site manager under a whole site's node agents (issue
// 18): N hosts (default 10,000) posting heartbeats every 30 s, spread over the interval,
// into two real `overtime serve` replicas, each on its own provider of a multi-provider
// slapd pair (or both on one slapd), while K Slurm sync daemons per replica follow the
// long-poll feed (GET /api/v1/slurm/nodes?since=REV&wait=30, as overtime-slurm-sync does).
// Phases of K = 0, 1, 4, 16 (flag -ks) follow a warm-up. It reports per phase:
//
//   - heartbeat POST latency (client side) p50/p99;
//   - owner-state change to feed: from a state-changing heartbeat's POST to each feed
//     client's answer carrying the host's new feature, on the replica the agent posts to
//     and on the other one (through the directory's replication and the watch);
//   - per replica: CPU seconds per minute (/proc/PID/stat), RSS, goroutines, heartbeats
//     and state writes into the directory per second (overtime_state_writes_total);
//   - per slapd: CPU seconds per minute; and the load generator's own CPU.
//
// Every host gets a real credential (hostcred, stored by ldapstore.SetHostCredential),
// each agent its own HTTP connection (as real agents keep theirs), to the replica it is
// configured for (hosts alternate). Heartbeats carry what node-agent/agent sends; a
// fraction of the hosts (-change, per minute) flips between no-user and owner-active,
// posting an extra heartbeat at the change, as the agent does.
//
// With -tls it measures instead what TLS costs on the heartbeat path (tls.go): one plain
// HTTP replica and one HTTPS replica (--tls-cert from a throwaway CA), all agents posting
// to one of them at a time, plain and TLS alternating in rounds; -reconnect adds the arm
// where every heartbeat makes a new TLS connection. It writes agentscale-tls.{json,md}.
//
// Run from the repository root (it builds ./cmd/overtime unless -bin names a binary):
//
//	go run ./test/bench/agentscale -out docs/benchmarks
//	go run ./test/bench/agentscale -tls -reconnect -out docs/benchmarks
package main

import (
	"bufio"
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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/sitemgmt/hostcred"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

var (
	nHosts     = flag.Int("hosts", 10000, "hosts (agents)")
	nPools     = flag.Int("pools", 200, "pools")
	directory  = flag.String("directory", "pair", "pair: each replica on its own provider of a multi-provider pair; single: both on one slapd")
	bin        = flag.String("bin", "", "overtime binary (empty: go build ./cmd/overtime into a temporary directory)")
	out        = flag.String("out", "", "directory for agentscale.json and agentscale.md (empty: only print)")
	warmup     = flag.Duration("warmup", 40*time.Second, "heartbeats before the first measured phase (K = 0, not reported)")
	phase      = flag.Duration("phase", 60*time.Second, "length of each measured phase")
	ksFlag     = flag.String("ks", "0,1,4,16", "feed clients per replica, one phase each")
	changeRate = flag.Float64("change", 0.05, "fraction of hosts whose owner state changes per minute")
	window     = flag.Duration("window", 10*time.Second, "sampling window for CPU, memory and rates")
	feedWait   = flag.Int("wait", 30, "the feed clients' long-poll wait (seconds)")
	rerender   = flag.String("report", "", "only write the report again from this agentscale.json (no run)")
)

const adminPW = "admin-secret"

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *tlsWorker {
		runTLSWorker()
		return
	}
	if *rerender != "" {
		js, err := os.ReadFile(*rerender)
		check(err)
		var r result
		check(json.Unmarshal(js, &r))
		report(r)
		return
	}
	if *tlsReport != "" {
		js, err := os.ReadFile(*tlsReport)
		check(err)
		var r tlsResult
		check(json.Unmarshal(js, &r))
		reportTLS(r)
		return
	}
	ks, err := parseKs(*ksFlag)
	check(err)
	started := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tmp, err := os.MkdirTemp("", "agentscale-")
	check(err)
	defer os.RemoveAll(tmp)

	overtime := *bin
	if overtime == "" {
		overtime = filepath.Join(tmp, "overtime")
		log.Printf("building ./cmd/overtime")
		cmd := exec.Command("go", "build", "-o", overtime, "./cmd/overtime")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("go build: %v\n%s", err, o)
		}
	}

	env := setupSite(ctx, tmp)
	defer env.stop()
	if *tlsMode {
		runTLS(ctx, env, overtime, tmp, started)
		return
	}
	site, tokens, servers, sl := env.site, env.tokens, env.servers, env.servers[0]

	// Two replicas of the site manager, each preferring its own provider.
	var reps []*replica
	for i := range 2 {
		r, err := startReplica(ctx, overtime, tmp, i, env.urlsFor(i), sl, env.pwFile, "", "", nil)
		check(err)
		defer r.stop()
		reps = append(reps, r)
	}
	log.Printf("replicas ready: %s, %s", reps[0].base, reps[1].base)

	// Go.
	lg := newLoadGen(site, tokens, reps)
	lg.start(ctx)
	mon := &monitor{reps: reps, slapds: servers}
	go mon.run(ctx, *window)
	log.Printf("warm-up %s", *warmup)
	time.Sleep(*warmup)
	res := result{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Hosts: *nHosts, Pools: *nPools,
		FeedWait: *feedWait, LoadAvg: [2]float64{loadAvg(), 0},
		Directory: *directory, Phase: phase.Seconds(), Warmup: warmup.Seconds(), ChangePerMinute: *changeRate, Window: window.Seconds()}
	for _, k := range ks {
		log.Printf("phase K=%d (%s)", k, *phase)
		pctx, stop := context.WithCancel(ctx)
		var fcs []*feedClient
		var fwg sync.WaitGroup
		for _, r := range reps {
			for range k {
				fc := &feedClient{rep: r, lg: lg}
				fcs = append(fcs, fc)
				fwg.Add(1)
				go func() { defer fwg.Done(); fc.run(pctx) }()
			}
		}
		from := time.Now()
		lg.resetPhase()
		time.Sleep(*phase)
		to := time.Now()
		stop()
		fwg.Wait()
		res.Phases = append(res.Phases, summarisePhase(k, lg, fcs, mon.between(from, to), reps))
	}
	cancel()
	res.LoadAvg[1] = loadAvg()
	res.Runtime = time.Since(started).Seconds()
	report(res)
}

// siteEnv is the directory with the synthetic site and every host's credential.
type siteEnv struct {
	site    *model.Site
	tokens  []string
	servers []*slapdenv.Server
	store   *ldapstore.Store
	pwFile  string // the service account's bind password, for the replicas
}

// setupSite starts the directory (a multi-provider pair, or one slapd), writes the
// synthetic site and a credential for every host, and waits for the second provider to
// hold everything.
func setupSite(ctx context.Context, tmp string) *siteEnv {
	site := synth.Site(*nHosts, *nPools, 1)
	var servers []*slapdenv.Server
	var err error
	opts := slapdenv.Options{Attached: true}
	if *directory == "pair" {
		servers, err = slapdenv.StartReplicated([]string{filepath.Join(tmp, "slapd1"), filepath.Join(tmp, "slapd2")}, opts)
	} else {
		var s *slapdenv.Server
		s, err = slapdenv.Start(filepath.Join(tmp, "slapd1"), opts)
		servers = []*slapdenv.Server{s}
	}
	check(err)
	env := &siteEnv{site: site, servers: servers}
	sl := servers[0]
	store, err := ldapstore.Open(ldapstore.Config{URL: sl.URL, BaseDN: sl.BaseDN, BindDN: sl.RootDN, BindPassword: sl.RootPW})
	check(err)
	env.store = store
	check(store.Init(ctx, ldapstore.InitOptions{SiteName: "synthetic", Timezone: "Europe/Berlin", AdminUID: "admin", AdminPassword: adminPW}))
	cur, err := store.Load(ctx)
	check(err)
	t0 := time.Now()
	_, err = store.Apply(ctx, cur, site)
	check(err)
	log.Printf("site of %d hosts written in %.1f s", len(site.Hosts), time.Since(t0).Seconds())
	// A credential for every host, straight into the directory (what `overtime host
	// credential` does through the API, one host at a time).
	t0 = time.Now()
	tokens := make([]string, len(site.Hosts))
	env.tokens = tokens
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				tok, err := hostcred.New(site.Hosts[i].Name)
				check(err)
				check(store.SetHostCredential(ctx, site.Hosts[i].Name, hostcred.Hash(tok)))
				tokens[i] = tok
			}
		}()
	}
	for i := range site.Hosts {
		next <- i
	}
	close(next)
	wg.Wait()
	log.Printf("%d host credentials issued in %.1f s", len(tokens), time.Since(t0).Seconds())
	if len(servers) > 1 { // the other provider must have everything before its replica starts
		last := site.Hosts[len(site.Hosts)-1].Name
		other, err := ldapstore.Open(ldapstore.Config{URL: servers[1].URL, BaseDN: sl.BaseDN, BindDN: sl.RootDN, BindPassword: sl.RootPW})
		check(err)
		for deadline := time.Now().Add(2 * time.Minute); ; {
			h, err := other.HostCredential(ctx, last)
			if err == nil && h == hostcred.Hash(tokens[len(tokens)-1]) {
				break
			}
			if time.Now().After(deadline) {
				log.Fatalf("the second provider has not replicated the site: %v", err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		other.Close()
	}
	env.pwFile = filepath.Join(tmp, "bindpw")
	check(os.WriteFile(env.pwFile, []byte(sl.ServicePW), 0o600))
	return env
}

// urlsFor is replica i's --ldap-url: its own provider first, the others as failover.
func (e *siteEnv) urlsFor(i int) string {
	urls := []string{e.servers[i%len(e.servers)].URL}
	for j := range e.servers {
		if j != i%len(e.servers) {
			urls = append(urls, e.servers[j].URL)
		}
	}
	return strings.Join(urls, " ")
}

func (e *siteEnv) stop() {
	e.store.Close()
	for _, s := range e.servers {
		_ = s.Stop()
	}
}

// ---- site manager replicas ----

type replica struct {
	i    int
	base string
	cmd  *exec.Cmd
	pid  int
	hc   *http.Client // for /readyz and /metrics
}

// startReplica starts `overtime serve`; with tlsCert and tlsKey it serves HTTPS, and hc
// (which must trust its certificate) reads its /readyz and /metrics.
func startReplica(ctx context.Context, bin, tmp string, i int, urls string, sl *slapdenv.Server, pwFile, tlsCert, tlsKey string, hc *http.Client) (*replica, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(tmp, fmt.Sprintf("serve%d.log", i)))
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--listen", addr, "--ldap-url", urls, "--base-dn", sl.BaseDN,
		"--bind-dn", sl.ServiceDN, "--bind-password-file", pwFile}
	scheme := "http://"
	if tlsCert != "" {
		args, scheme = append(args, "--tls-cert", tlsCert, "--tls-key", tlsKey), "https://"
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{i: i, base: scheme + addr, cmd: cmd, pid: cmd.Process.Pid, hc: hc}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		resp, err := hc.Get(r.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return r, nil
			}
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("replica %d not ready; see %s", i, logf.Name())
		}
	}
}

func (r *replica) stop() {
	_ = r.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}

// ---- load generator: the agents ----

type agent struct {
	mu       sync.Mutex
	host     string
	token    string
	rep      *replica
	client   *http.Client
	instance string
	seq      uint64
	active   bool // owner-active, else no-user
	cpuSecs  float64
}

type change struct {
	host    string
	feature string // the feature the feed shows once the change arrived
	at      time.Time
	rep     int // the replica the agent posted to
}

type loadGen struct {
	agents []*agent
	reps   []*replica

	mu      sync.Mutex
	lat     []float64 // heartbeat POST latency, ms, this phase
	errs    int
	posts   int
	changes []change // every change, in order (feed clients follow it)
}

func newLoadGen(site *model.Site, tokens []string, reps []*replica) *loadGen {
	lg := &loadGen{reps: reps}
	rng := rand.New(rand.NewSource(2))
	for i, h := range site.Hosts {
		tr := &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second}
		lg.agents = append(lg.agents, &agent{host: h.Name, token: tokens[i], rep: reps[i%len(reps)],
			client:   &http.Client{Transport: tr, Timeout: 10 * time.Second},
			instance: fmt.Sprintf("%016x", rng.Uint64()), active: rng.Intn(4) == 0, cpuSecs: float64(rng.Intn(100000))})
	}
	return lg
}

func (lg *loadGen) resetPhase() {
	lg.mu.Lock()
	lg.lat, lg.errs, lg.posts = nil, 0, 0
	lg.mu.Unlock()
}

func (lg *loadGen) start(ctx context.Context) {
	n := len(lg.agents)
	for i, a := range lg.agents {
		offset := time.Duration(float64(wire.HeartbeatInterval) * float64(i) / float64(n))
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(offset):
			}
			t := time.NewTicker(wire.HeartbeatInterval)
			defer t.Stop()
			for {
				lg.post(a, false)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	// Owner-state changes: a Poisson process over all hosts.
	go func() {
		rng := rand.New(rand.NewSource(3))
		rate := *changeRate * float64(n) / 60
		if rate <= 0 {
			return
		}
		for {
			d := time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			a := lg.agents[rng.Intn(n)]
			go lg.post(a, true)
		}
	}()
}

// post sends a's heartbeat; flip changes its owner state first (the agent's extra
// heartbeat at a change).
func (lg *loadGen) post(a *agent, flip bool) {
	body, feature := a.heartbeat(flip)
	req, _ := http.NewRequest(http.MethodPost, a.rep.base+"/api/v1/agent/heartbeat", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	if flip {
		lg.mu.Lock()
		lg.changes = append(lg.changes, change{host: a.host, feature: feature, at: start, rep: a.rep.i})
		lg.mu.Unlock()
	}
	resp, err := a.client.Do(req)
	ok := err == nil
	if ok {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ok = resp.StatusCode == 200
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	lg.mu.Lock()
	lg.posts++
	if ok {
		lg.lat = append(lg.lat, ms)
	} else {
		lg.errs++
	}
	lg.mu.Unlock()
}

// heartbeat is a's next heartbeat document (what node-agent/agent sends) and the owner
// feature the feed shows for it; flip changes the owner state first.
func (a *agent) heartbeat(flip bool) ([]byte, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if flip {
		a.active = !a.active
	}
	a.seq++
	a.cpuSecs += 30 * 7.5
	hb := wire.Heartbeat{Host: a.host, Time: time.Now(), Instance: a.instance, Seq: a.seq, Mode: "desktop", ConfigFrom: "api",
		OwnerState: model.StateNoUser, Action: model.ActionRun, GuestState: "running", Backend: "container",
		Pressure: 0.4, GuestCPUSeconds: a.cpuSecs, Version: "1.4.0", CPUs: 8, MemoryMB: 12288, BootSeconds: 41.5}
	feature := wire.FeatureDeskEmpty
	if a.active {
		hb.OwnerState, hb.Action, hb.Sessions, hb.Pressure, hb.Slowdown, hb.Cap = model.StateOwnerActive, model.ActionThrottle, 1, 6.5, 0.008, 0.35
		feature = wire.FeatureOwnerActive
	}
	body, _ := json.Marshal(hb)
	return body, feature
}

// ---- feed clients: the Slurm sync daemons ----

type feedClient struct {
	rep *replica
	lg  *loadGen

	next    int // index into lg.changes of the first change not yet taken
	pending []change
	same    []float64 // change latency, ms, when the change was posted to this replica
	other   []float64 // ... to the other replica
	missed  int       // not seen within a minute, or superseded by the host's next change
	answers int
	bytes   int64
	errs    int
}

func (fc *feedClient) run(ctx context.Context) {
	client := &http.Client{Transport: &http.Transport{}}
	var since uint64
	first := true
	for ctx.Err() == nil {
		// Changes posted before this request are what the answer may carry.
		fc.lg.mu.Lock()
		if first {
			fc.next = len(fc.lg.changes) // only changes made while following
			first = false
		}
		fc.pending = append(fc.pending, fc.lg.changes[fc.next:]...)
		fc.next = len(fc.lg.changes)
		fc.lg.mu.Unlock()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/slurm/nodes?since=%d&wait=%d", fc.rep.base, since, *feedWait), nil)
		req.SetBasicAuth("admin", adminPW)
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				fc.errs++
				time.Sleep(time.Second)
			}
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		at := time.Now()
		if err != nil || resp.StatusCode != 200 {
			if ctx.Err() == nil {
				fc.errs++
				time.Sleep(time.Second)
			}
			continue
		}
		fc.answers++
		fc.bytes += int64(len(body))
		since = revisionOf(body)
		fc.check(body, at)
	}
}

// check settles the pending changes the answer carries.
func (fc *feedClient) check(body []byte, at time.Time) {
	latest := map[string]time.Time{}
	for _, c := range fc.pending {
		latest[c.host] = c.at
	}
	keep := fc.pending[:0]
	for _, c := range fc.pending {
		switch {
		case latest[c.host] != c.at || at.Sub(c.at) > time.Minute:
			fc.missed++
		case featureOf(body, c.host) == c.feature:
			ms := float64(at.Sub(c.at).Microseconds()) / 1000
			if c.rep == fc.rep.i {
				fc.same = append(fc.same, ms)
			} else {
				fc.other = append(fc.other, ms)
			}
		default:
			keep = append(keep, c)
		}
	}
	fc.pending = keep
}

// revisionOf reads the answer's revision without decoding the whole feed.
func revisionOf(body []byte) uint64 {
	i := bytes.Index(body, []byte(`"revision":`))
	if i < 0 {
		return 0
	}
	s := bytes.TrimLeft(body[i+len(`"revision":`):], " ")
	j := bytes.IndexAny(s, ",\n}")
	n, _ := strconv.ParseUint(string(bytes.TrimSpace(s[:j])), 10, 64)
	return n
}

// featureOf is the owner feature (desk-empty or owner-active) of host's node in the feed.
func featureOf(body []byte, host string) string {
	i := bytes.Index(body, []byte(`"name": "`+host+`"`))
	if i < 0 {
		i = bytes.Index(body, []byte(`"name":"`+host+`"`))
	}
	if i < 0 {
		return ""
	}
	node := body[i:]
	if j := bytes.IndexByte(node, '}'); j >= 0 {
		node = node[:j]
	}
	switch {
	case bytes.Contains(node, []byte(wire.FeatureOwnerActive)):
		return wire.FeatureOwnerActive
	case bytes.Contains(node, []byte(wire.FeatureDeskEmpty)):
		return wire.FeatureDeskEmpty
	}
	return ""
}

// ---- monitor: CPU, memory, writes ----

type procSample struct {
	cpu       float64 // seconds, user + system
	rss, hwm  float64 // MiB
	gor       float64
	beats     float64 // overtime_agent_heartbeats_total
	writes    float64 // overtime_state_writes_total{result="ok"}, all kinds
	beatWrite float64 // ... kind heartbeats
}

type sample struct {
	at    time.Time
	reps  []procSample
	slapd []procSample
	self  procSample
}

type monitor struct {
	reps   []*replica
	slapds []*slapdenv.Server
	mu     sync.Mutex
	s      []sample
}

func (m *monitor) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s := sample{at: time.Now(), self: proc(os.Getpid())}
		for _, r := range m.reps {
			p := proc(r.pid)
			scrape(r, &p)
			s.reps = append(s.reps, p)
		}
		for _, sl := range m.slapds {
			s.slapd = append(s.slapd, proc(sl.PID))
		}
		m.mu.Lock()
		m.s = append(m.s, s)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// between are the samples taken in [from, to] plus the one before (rates need pairs).
func (m *monitor) between(from, to time.Time) []sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sample
	for i, s := range m.s {
		if !s.at.Before(from) && !s.at.After(to) {
			if len(out) == 0 && i > 0 {
				out = append(out, m.s[i-1])
			}
			out = append(out, s)
		}
	}
	return out
}

var clockTick = 100.0 // USER_HZ on Linux

func proc(pid int) procSample {
	var p procSample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			f := strings.Fields(string(b[i+2:]))
			if len(f) > 12 {
				u, _ := strconv.ParseFloat(f[11], 64)
				s, _ := strconv.ParseFloat(f[12], 64)
				p.cpu = (u + s) / clockTick
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
				kb, _ := strconv.ParseFloat(f[1], 64)
				if f[0] == "VmRSS:" {
					p.rss = kb / 1024
				} else {
					p.hwm = kb / 1024
				}
			}
		}
	}
	return p
}

func scrape(r *replica, p *procSample) {
	resp, err := r.hc.Get(r.base + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch {
		case name == "go_goroutines":
			p.gor = v
		case name == "overtime_agent_heartbeats_total":
			p.beats = v
		case strings.HasPrefix(name, "overtime_state_writes_total{") && strings.Contains(name, `result="ok"`):
			p.writes += v
			if strings.Contains(name, `kind="heartbeats"`) {
				p.beatWrite += v
			}
		}
	}
}

// ---- results ----

type stats struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P99    float64 `json:"p99,omitempty"`
}

func summarise(v []float64, p99 bool) stats {
	if len(v) == 0 {
		return stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	st := stats{N: len(s), Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
	if p99 {
		st.P99 = s[int(math.Round(0.99*float64(len(s)-1)))]
	}
	return st
}

type procStats struct {
	CPUSecondsPerMin stats   `json:"cpuSecondsPerMinute"` // over sampling windows
	RSSMiB           stats   `json:"rssMiB"`
	HWMMiB           float64 `json:"hwmMiB"`
	Goroutines       stats   `json:"goroutines,omitzero"`
	HeartbeatsPerS   stats   `json:"heartbeatsPerSecond,omitzero"`
	StateWritesPerS  stats   `json:"stateWritesPerSecond,omitzero"`
	// Over the whole phase (the windows' rates swing: with agents started together a
	// heartbeat is written every other interval, so windows alternate).
	PhaseWritesPerS     float64 `json:"phaseStateWritesPerSecond,omitempty"`
	PhaseBeatWritesPerS float64 `json:"phaseHeartbeatWritesPerSecond,omitempty"`
	BeatWritesPerS      stats   `json:"heartbeatWritesPerSecond,omitzero"`
}

type phaseResult struct {
	K               int         `json:"feedClientsPerReplica"`
	Posts           int         `json:"heartbeatPosts"`
	PostErrors      int         `json:"heartbeatErrors"`
	PostMs          stats       `json:"heartbeatPostMs"`
	ChangeSameMs    stats       `json:"changeToFeedSameReplicaMs,omitzero"`
	ChangeOtherMs   stats       `json:"changeToFeedOtherReplicaMs,omitzero"`
	ChangesMissed   int         `json:"changesMissed"`
	FeedAnswersPerS float64     `json:"feedAnswersPerSecondPerClient,omitempty"`
	FeedBytes       float64     `json:"feedBytesPerAnswer,omitempty"`
	FeedErrors      int         `json:"feedErrors"`
	Replicas        []procStats `json:"replicas"`
	Slapds          []procStats `json:"slapds"`
	LoadGen         procStats   `json:"loadGenerator"`
}

type result struct {
	Date            string        `json:"date"`
	CPUs            int           `json:"cpus"`
	Hosts           int           `json:"hosts"`
	Pools           int           `json:"pools"`
	Directory       string        `json:"directory"`
	Warmup          float64       `json:"warmupSeconds"`
	Phase           float64       `json:"phaseSeconds"`
	Window          float64       `json:"windowSeconds"`
	ChangePerMinute float64       `json:"ownerChangesPerHostPerMinute"`
	Phases          []phaseResult `json:"phases"`
	Runtime         float64       `json:"runtimeSeconds"`
	FeedWait        int           `json:"feedWaitSeconds"`
	// LoadAvg is /proc/loadavg's 1-minute figure when the phases started and ended: other
	// work on the machine competes for the same cores.
	LoadAvg [2]float64 `json:"loadAverage"`
}

func procStatsOf(ss []sample, get func(sample) procSample) procStats {
	var cpu, rss, gor, beats, writes, bw []float64
	var hwm float64
	for i := 1; i < len(ss); i++ {
		a, b := get(ss[i-1]), get(ss[i])
		dt := ss[i].at.Sub(ss[i-1].at).Seconds()
		cpu = append(cpu, (b.cpu-a.cpu)/dt*60)
		rss = append(rss, b.rss)
		gor = append(gor, b.gor)
		beats = append(beats, (b.beats-a.beats)/dt)
		writes = append(writes, (b.writes-a.writes)/dt)
		bw = append(bw, (b.beatWrite-a.beatWrite)/dt)
		hwm = max(hwm, b.hwm)
	}
	p := procStats{CPUSecondsPerMin: summarise(cpu, false), RSSMiB: summarise(rss, false), HWMMiB: hwm}
	if len(ss) >= 2 {
		a, b := get(ss[0]), get(ss[len(ss)-1])
		dt := ss[len(ss)-1].at.Sub(ss[0].at).Seconds()
		p.PhaseWritesPerS, p.PhaseBeatWritesPerS = (b.writes-a.writes)/dt, (b.beatWrite-a.beatWrite)/dt
	}
	if slices.Max(append(gor, 0)) > 0 {
		p.Goroutines, p.HeartbeatsPerS, p.StateWritesPerS, p.BeatWritesPerS = summarise(gor, false), summarise(beats, false), summarise(writes, false), summarise(bw, false)
	}
	return p
}

func summarisePhase(k int, lg *loadGen, fcs []*feedClient, ss []sample, reps []*replica) phaseResult {
	lg.mu.Lock()
	pr := phaseResult{K: k, Posts: lg.posts, PostErrors: lg.errs, PostMs: summarise(lg.lat, true)}
	lg.mu.Unlock()
	var same, other []float64
	var answers int
	var bytes int64
	for _, fc := range fcs {
		same = append(same, fc.same...)
		other = append(other, fc.other...)
		pr.ChangesMissed += fc.missed
		pr.FeedErrors += fc.errs
		answers += fc.answers
		bytes += fc.bytes
	}
	pr.ChangeSameMs, pr.ChangeOtherMs = summarise(same, true), summarise(other, true)
	if len(fcs) > 0 && answers > 0 {
		pr.FeedAnswersPerS = float64(answers) / float64(len(fcs)) / (*phase).Seconds()
		pr.FeedBytes = float64(bytes) / float64(answers)
	}
	if len(ss) >= 2 {
		for i := range ss[0].reps {
			pr.Replicas = append(pr.Replicas, procStatsOf(ss, func(s sample) procSample { return s.reps[i] }))
		}
		for i := range ss[0].slapd {
			pr.Slapds = append(pr.Slapds, procStatsOf(ss, func(s sample) procSample { return s.slapd[i] }))
		}
		pr.LoadGen = procStatsOf(ss, func(s sample) procSample { return s.self })
	}
	return pr
}

func report(r result) {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	dirDesc := "a multi-provider slapd pair, each replica on its own provider (the other as failover)"
	if r.Directory != "pair" {
		dirDesc = "one slapd for both replicas"
	}
	p("# 10,000 agents: the site manager under a whole site's heartbeats\n\n")
	p("%s, %d CPUs shared by everything below. %d hosts in %d pools; two `overtime serve` replicas on %s;\n", r.Date, r.CPUs, r.Hosts, r.Pools, dirDesc)
	p("every host's agent posts a heartbeat every 30 s (spread evenly over the interval) to its replica (hosts alternate),\n")
	p("over its own connection, with its own credential; %.0f%% of the hosts change owner state per minute (an extra heartbeat\n", 100*r.ChangePerMinute)
	p("each). K Slurm feed clients per replica long-poll `GET /api/v1/slurm/nodes?since=REV&wait=%d` as overtime-slurm-sync does.\n", r.FeedWait)
	p("Warm-up %.0f s, then one phase of %.0f s per K; CPU, memory and rates over %.0f s windows (median, min-max).\n", r.Warmup, r.Phase, r.Window)
	p("The load generator and the feed clients run in one process on the same cores; the machine's load average was %.1f when\n", r.LoadAvg[0])
	p("the phases began and %.1f when they ended (other work competes: compare within one run).\n", r.LoadAvg[1])
	p("Runtime %.0f s. Regenerate: `go run ./test/bench/agentscale -out docs/benchmarks`.\n\n", r.Runtime)

	p("## Heartbeats and the feed\n\n")
	p("| K per replica | heartbeat posts | errors | POST p50 (ms) | p99 | change → feed, same replica p50 (ms) | p99 | other replica p50 | p99 | changes not seen | feed answers/s per client | MB per answer |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, ph := range r.Phases {
		p("| %d | %d | %d | %.1f | %.1f | %s | %s | %s | %s | %d | %.1f | %.2f |\n", ph.K, ph.Posts, ph.PostErrors, ph.PostMs.Median, ph.PostMs.P99,
			opt(ph.ChangeSameMs.N, ph.ChangeSameMs.Median), opt(ph.ChangeSameMs.N, ph.ChangeSameMs.P99),
			opt(ph.ChangeOtherMs.N, ph.ChangeOtherMs.Median), opt(ph.ChangeOtherMs.N, ph.ChangeOtherMs.P99),
			ph.ChangesMissed, ph.FeedAnswersPerS, ph.FeedBytes/1e6)
	}
	p("\n## Per replica\n\n")
	p("| K | replica | CPU s/min median (min-max) | RSS MiB median (max) | peak RSS (VmHWM) | goroutines | heartbeats/s | state writes/s into the directory, phase (windows min-max) | of which heartbeats |\n")
	p("|---|---|---|---|---|---|---|---|---|\n")
	for _, ph := range r.Phases {
		for i, x := range ph.Replicas {
			p("| %d | %d | %.1f (%.1f-%.1f) | %.0f (%.0f) | %.0f | %.0f | %.0f | %.0f (%.0f-%.0f) | %.0f |\n", ph.K, i,
				x.CPUSecondsPerMin.Median, x.CPUSecondsPerMin.Min, x.CPUSecondsPerMin.Max, x.RSSMiB.Median, x.RSSMiB.Max, x.HWMMiB,
				x.Goroutines.Median, x.HeartbeatsPerS.Median, x.PhaseWritesPerS, x.StateWritesPerS.Min, x.StateWritesPerS.Max, x.PhaseBeatWritesPerS)
		}
	}
	p("\n## The directory and the load generator\n\n")
	p("| K | slapd | CPU s/min median (min-max) | RSS MiB |\n|---|---|---|---|\n")
	for _, ph := range r.Phases {
		for i, x := range ph.Slapds {
			p("| %d | %d | %.1f (%.1f-%.1f) | %.0f |\n", ph.K, i, x.CPUSecondsPerMin.Median, x.CPUSecondsPerMin.Min, x.CPUSecondsPerMin.Max, x.RSSMiB.Median)
		}
		x := ph.LoadGen
		p("| %d | load generator + feed clients | %.1f (%.1f-%.1f) | %.0f |\n", ph.K, x.CPUSecondsPerMin.Median, x.CPUSecondsPerMin.Min, x.CPUSecondsPerMin.Max, x.RSSMiB.Median)
	}
	p("\n60 CPU s/min is one core busy; the machine has %d.\n", r.CPUs)
	p("%s", reading(r))
	writeResult("agentscale", r, b.String())
}

// writeResult prints the Markdown and, with -out, writes NAME.json and NAME.md there.
func writeResult(name string, r any, md string) {
	fmt.Print(md)
	if *out != "" {
		js, _ := json.MarshalIndent(r, "", "  ")
		check(os.WriteFile(filepath.Join(*out, name+".json"), append(js, '\n'), 0o644))
		check(os.WriteFile(filepath.Join(*out, name+".md"), []byte(md), 0o644))
	}
}

// reading turns the phases into what they say about the load and its limits. The
// projections are linear extrapolations of this run's medians, labelled as such.
func reading(r result) string {
	var base, top *phaseResult
	for i := range r.Phases {
		ph := &r.Phases[i]
		if ph.K == 0 && len(ph.Replicas) > 0 {
			base = ph
		}
		if len(ph.Replicas) > 0 && (top == nil || ph.K > top.K) {
			top = ph
		}
	}
	if base == nil || len(base.Replicas) == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	var cpu, beats, writes, slapd float64
	for _, x := range base.Replicas {
		cpu += x.CPUSecondsPerMin.Median / 60
		beats += x.HeartbeatsPerS.Median
		writes += x.PhaseWritesPerS
	}
	for _, x := range base.Slapds {
		slapd += x.CPUSecondsPerMin.Median / 60
	}
	p("\n## Reading\n\n")
	p("Without feed clients the two replicas together accept %.0f heartbeats/s (%d hosts / 30 s) with %.2f cores, %.1f ms of CPU per heartbeat\n", beats, r.Hosts, cpu, 1000*cpu/beats)
	p("(token check from the cache, decode, order, answer, the queued write and its echo from the watch; the site itself comes from its change feed, no periodic reload);\n")
	p("at that rate one core takes about %.0f heartbeats/s, %.0f hosts (linear projection).\n", beats/cpu, 30*beats/cpu)
	p("They write %.0f state documents/s into the directory (%.0f per 1,000 hosts: every host about once a minute, PersistRefresh,\n", writes, 1000*writes/float64(r.Hosts))
	p("plus owner-state changes). The slapd pair spends %.2f cores on them, their replication, the watch that sends every\n", slapd)
	p("write to both replicas, token checks after the cache's TTL and the replicas' persistent searches\n")
	p("(slapd logs every operation, -d stats, as the tests' slapd does).\n")
	var rss, gor float64
	for _, x := range base.Replicas {
		rss = max(rss, x.HWMMiB)
		gor += x.Goroutines.Median
	}
	p("Memory: each replica peaks at %.0f MiB RSS, with %.0f goroutines on both together: one per agent connection, which\n", rss, gor)
	p("agents keep open between heartbeats; the heartbeats themselves are a few hundred bytes per host.\n")
	if js, err := os.ReadFile(filepath.Join(*out, "statebench.json")); err == nil {
		var sb struct {
			Write map[string]struct{ Median float64 } `json:"writeStats"`
		}
		if json.Unmarshal(js, &sb) == nil && sb.Write["replicated"].Median > 0 {
			w := sb.Write["replicated"].Median
			p("statebench measured the pair taking %.0f documents/s when writing is all it does: these writes are %.0f%% of that,\n", w, 100*writes/w)
			p("so by write rate alone the pair would take about %.0f hosts (linear projection).\n", float64(r.Hosts)*w/writes)
		}
	}
	p("CPU is the limit before that: the replicas and the slapd pair together use %.2f cores per 10,000 hosts (%.0f%% the\n", (cpu+slapd)*10000/float64(r.Hosts), 100*cpu/(cpu+slapd))
	p("replicas', %.0f%% slapd's), so a site manager with its directory on a machine of %d cores would be full near %.0f hosts\n", 100*slapd/(cpu+slapd), r.CPUs, float64(r.CPUs)/(cpu+slapd)*float64(r.Hosts))
	p("(linear projection, feed clients aside); replicas and providers on machines of their own divide that between them.\n")
	if top != nil && top.K > 0 {
		var topCPU float64
		for _, x := range top.Replicas {
			topCPU += x.CPUSecondsPerMin.Median / 60
		}
		p("\nFeed fan-out: with %d clients per replica the replicas use %.2f cores (%.2f without); each client gets %.1f answers/s of %.1f MB,\n", top.K, topCPU, cpu, top.FeedAnswersPerS, top.FeedBytes/1e6)
		p("and a state change reaches it in %s ms (p50; p99 %s) on the replica the agent posted to and %s ms (p99 %s) on the other.\n",
			opt(top.ChangeSameMs.N, top.ChangeSameMs.Median), opt(top.ChangeSameMs.N, top.ChangeSameMs.P99), opt(top.ChangeOtherMs.N, top.ChangeOtherMs.Median), opt(top.ChangeOtherMs.N, top.ChangeOtherMs.P99))
		p("A long poll is answered by a change of what the feed shows (here the owner changes; a heartbeat that repeats the\n")
		p("last one does not wake it), from one shared build at most every 50 ms (service.FeedCoalesce) per replica, encoded\n")
		p("once. What grows with the site is the answer: every node, %.1f MB at %d hosts, at each of these answers (%.0f Mbit/s\n", top.FeedBytes/1e6, r.Hosts, 8*top.FeedAnswersPerS*top.FeedBytes/1e6)
		p("per daemon at the rate measured, and the daemon parses each): the next limit is the feed's size, for a delta feed\n")
		p("(nodes changed since the caller's revision) or a compressed answer. Where clients get fewer answers than\n")
		p("that and changes arrive late while the replicas are far from a core each, the clients' own process (and the machine's\n")
		p("other load) is what is short of CPU.\n")
	}
	return b.String()
}

func opt(n int, v float64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

func parseKs(s string) ([]int, error) {
	var ks []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 0 {
			return nil, fmt.Errorf("-ks: %q", s)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
