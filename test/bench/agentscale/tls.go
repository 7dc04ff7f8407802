package main

// -tls: what TLS costs the site manager on the agents' heartbeat path.
//
// Two replicas serve the same site: replica 0 on plain HTTP, replica 1 on HTTPS with a
// certificate from a CA the benchmark makes (ECDSA P-256 CA and leaf, the chain ending
// with the CA as `overtime serve --tls-cert` wants it). Every simulated agent posts its
// heartbeat every 30 s, to one arm at a time:
//
//   - plain: HTTP/1.1 to replica 0 over the agent's persistent connection;
//   - keepalive: HTTPS to replica 1 with the node agent's own client (client.NewForAgent
//     with a credential pinning the CA: http.DefaultTransport cloned, capin.TLSConfig;
//     HTTP/2 over one persistent connection);
//   - reconnect (-reconnect): the same TLS configuration, a new connection for every
//     heartbeat: a full handshake each time (capin.TLSConfig keeps no session cache);
//   - resume (-resume): a new connection for every heartbeat that resumes the agent's
//     previous TLS session (a ClientSessionCache per agent: TLS 1.3 PSK with ECDHE);
//   - keepalive-h1 (-h1): keepalive forced to HTTP/1.1, to tell TLS from HTTP/2.
//
// The agents run in load-generator processes this one starts (itself with -tls-worker),
// at most -agents-per-process each: each agent holds a connection to each replica, and a
// process may not hold 20,000 of them here. All agents switch arms together; a round
// measures every arm once over one heartbeat interval (every agent posts once), after a
// gap that lets requests in flight and the previous arm's state writes finish; the order
// of the arms rotates by one each round, so that the machine's other load falls on every
// arm alike. Per window: the serving
// replica's CPU time (/proc/PID/stat) over the heartbeats it counted
// (overtime_agent_heartbeats_total), POST latency at the agents (connection set-up
// included), the load generator's CPU per heartbeat (the simulated agents' side), new
// connections and resumed handshakes. The first heartbeats of the agents are spread over
// two intervals, so that the state writes (every host once per minute, PersistRefresh)
// fall evenly on every window instead of on every other one.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/big"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/vocab/capin"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

var (
	tlsMode       = flag.Bool("tls", false, "measure TLS on the heartbeat path instead of the feed phases: a plain and an HTTPS replica, all agents posting to one arm at a time, arms alternating in rounds (writes agentscale-tls.json/.md)")
	reconnect     = flag.Bool("reconnect", false, "with -tls: also the arm where every heartbeat makes a new TLS connection with a full handshake (the agent's TLS configuration keeps no session cache)")
	resumeArm     = flag.Bool("resume", false, "with -tls: also the arm where every heartbeat makes a new TLS connection resuming the agent's previous session")
	h1Arm         = flag.Bool("h1", false, "with -tls: also the keep-alive arm forced to HTTP/1.1 (the agent's client speaks HTTP/2 over TLS)")
	rounds        = flag.Int("rounds", 5, "with -tls: rounds, each measuring every arm once (the order rotates by one per round)")
	tlsWindow     = flag.Duration("tls-window", wire.HeartbeatInterval, "with -tls: measured window per arm and round (one heartbeat interval: every agent posts once)")
	tlsGap        = flag.Duration("tls-gap", 3*time.Second, "with -tls: unmeasured time after each switch of arms (requests in flight, the previous arm's state writes)")
	tlsReport     = flag.String("tls-report", "", "only write the TLS report again from this agentscale-tls.json (no run)")
	agentsPerProc = flag.Int("agents-per-process", 6000, "with -tls: at most this many agents per load-generator process (fewer when the open-file limit says so)")
	tlsWorker     = flag.Bool("tls-worker", false, "internal: run as one of -tls's load-generator processes (configuration and commands on stdin)")
)

const (
	armPlain     = "plain"
	armKeep      = "keepalive"
	armKeepH1    = "keepalive-h1"
	armReconnect = "reconnect"
	armResume    = "resume"
)

// perWorker is how many agents one load-generator process simulates: each holds a
// persistent connection to both replicas, two descriptors, and a process may have only
// so many (RLIMIT_NOFILE's hard limit, 20,000 in the container this was written in,
// which a process without CAP_SYS_RESOURCE cannot raise).
func perWorker() int {
	n := *agentsPerProc
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Max < 1<<30 {
		n = min(n, max(100, (int(rl.Max)-2000)/3)) // plain + keep-alive (+ -h1), and the reconnects
	}
	return n
}

// makeCA writes a throwaway site CA and a server certificate for 127.0.0.1 that it
// signed, both ECDSA P-256: chain (leaf, then the CA) and key as --tls-cert and --tls-key
// take them. It returns the CA's pin, what a host credential carries.
func makeCA(dir string) (chain, key, pin string) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	check(err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentscale throwaway site CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(crand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	check(err)
	ca, err := x509.ParseCertificate(caDER)
	check(err)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	check(err)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "site manager"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(crand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	check(err)
	pk, err := x509.MarshalPKCS8PrivateKey(leafKey)
	check(err)
	chain, key = filepath.Join(dir, "server-chain.pem"), filepath.Join(dir, "server-key.pem")
	check(os.WriteFile(chain, append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...), 0o644))
	check(os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600))
	return chain, key, capin.Of(ca)
}

// ---- the agents, in worker processes ----

// workerConfig is what a load-generator process (-tls-worker) reads from its first line
// on stdin; commands follow, one a line: start, arm NAME, open ID ARM, close, report.
type workerConfig struct {
	Agents   []workerAgent `json:"agents"`
	N        int           `json:"n"` // all agents, over every worker (first heartbeats' spread)
	PlainURL string        `json:"plainURL"`
	TLSURL   string        `json:"tlsURL"`
	Pin      string        `json:"pin"`
	H1       bool          `json:"h1"`
	Resume   bool          `json:"resume"`
	Change   float64       `json:"change"` // owner-state changes per host per minute
	Seed     int64         `json:"seed"`
}

type workerAgent struct {
	I        int     `json:"i"`
	Host     string  `json:"host"`
	Token    string  `json:"token"`
	Instance string  `json:"instance"`
	Active   bool    `json:"active"`
	CPUSecs  float64 `json:"cpuSecs"`
}

// workerWindow is what a worker's agents saw in one measured window.
type workerWindow struct {
	ID       int            `json:"id"`
	Arm      string         `json:"arm"`
	Lat      []float64      `json:"lat"` // ms
	Posts    int            `json:"posts"`
	Errs     int            `json:"errs"`
	NewConns int            `json:"newConns"`
	Resumed  int            `json:"resumed"`
	Protos   map[string]int `json:"protos"`
}

type tlsAgent struct {
	*agent
	i      int
	plain  *http.Client // HTTP/1.1, persistent
	keep   *http.Client // client.NewForAgent's: HTTP/2 over TLS, persistent
	keepH1 *http.Client
	cache  tls.ClientSessionCache // -resume: this agent's last session
}

type winRec struct {
	from time.Time
	mu   sync.Mutex
	workerWindow
}

type tlsLoad struct {
	cfg    workerConfig
	agents []*tlsAgent
	tmpl   *http.Transport // the agent's TLS transport, never used itself: cloned per reconnect
	arm    atomic.Value    // string
	win    atomic.Pointer[winRec]
}

func newTLSLoad(cfg workerConfig) *tlsLoad {
	tl := &tlsLoad{cfg: cfg}
	tl.arm.Store(armPlain)
	base := strings.TrimSuffix(cfg.TLSURL, "/api/v1/agent/heartbeat")
	// The node agent's client for a credential that pins the CA (vocab/client: NewForAgent).
	c, err := client.NewForAgent(base, client.Credential{Token: "x", CAPin: cfg.Pin})
	check(err)
	tl.tmpl = c.HTTP.Transport.(*http.Transport).Clone()
	for _, wa := range cfg.Agents {
		a := &tlsAgent{agent: &agent{host: wa.Host, token: wa.Token, instance: wa.Instance, active: wa.Active, cpuSecs: wa.CPUSecs}, i: wa.I}
		// Plain: what the agent does with an http:// URL (http.DefaultTransport, one per
		// PC). No idle timeout here or below: the agents keep their connections through
		// the windows of the other arms (the agent's 90 s never strikes at 30 s beats).
		pt := http.DefaultTransport.(*http.Transport).Clone()
		pt.IdleConnTimeout = 0
		a.plain = &http.Client{Transport: pt, Timeout: 60 * time.Second}
		c, err := client.NewForAgent(base, client.Credential{Token: a.token, CAPin: cfg.Pin})
		check(err)
		c.HTTP.Transport.(*http.Transport).IdleConnTimeout = 0
		a.keep = c.HTTP
		if cfg.H1 {
			t := tl.tmpl.Clone()
			// No HTTP/2: not offered in ALPN (the template's configuration holds "h2"
			// once cloned), nor handled.
			t.IdleConnTimeout, t.ForceAttemptHTTP2 = 0, false
			t.TLSClientConfig.NextProtos = []string{"http/1.1"}
			t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			a.keepH1 = &http.Client{Transport: t, Timeout: 60 * time.Second}
		}
		if cfg.Resume {
			a.cache = tls.NewLRUClientSessionCache(1)
		}
		tl.agents = append(tl.agents, a)
	}
	return tl
}

// start runs the agents: agent i's first heartbeat at 2·interval·i/N, then every
// interval; owner-state changes as the feed benchmark makes them.
func (tl *tlsLoad) start(ctx context.Context) {
	for _, a := range tl.agents {
		offset := time.Duration(2 * float64(wire.HeartbeatInterval) * float64(a.i) / float64(tl.cfg.N))
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(offset):
			}
			t := time.NewTicker(wire.HeartbeatInterval)
			defer t.Stop()
			for {
				tl.post(ctx, a, false)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	go func() {
		rng := rand.New(rand.NewSource(tl.cfg.Seed))
		n := len(tl.agents)
		rate := tl.cfg.Change * float64(n) / 60
		if rate <= 0 || n == 0 {
			return
		}
		for {
			d := time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			go tl.post(ctx, tl.agents[rng.Intn(n)], true)
		}
	}()
}

func (tl *tlsLoad) post(ctx context.Context, a *tlsAgent, flip bool) {
	arm := tl.arm.Load().(string)
	w := tl.win.Load()
	if w != nil && w.Arm != arm {
		w = nil
	}
	body, _ := a.heartbeat(flip)
	url := tl.cfg.TLSURL
	var hc *http.Client
	var fresh *http.Transport
	switch arm {
	case armPlain:
		hc, url = a.plain, tl.cfg.PlainURL
	case armKeep:
		hc = a.keep
	case armKeepH1:
		hc = a.keepH1
	case armReconnect, armResume:
		fresh = tl.tmpl.Clone()
		if arm == armResume {
			fresh.TLSClientConfig.ClientSessionCache = a.cache
		}
		hc = &http.Client{Transport: fresh, Timeout: 60 * time.Second}
	default:
		return
	}
	var reused atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused.Store(i.Reused) }}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := hc.Do(req)
	ok := err == nil
	var proto string
	var resumed bool
	if ok {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ok = resp.StatusCode == 200
		proto = resp.Proto
		if cs := resp.TLS; cs != nil {
			proto += " " + tls.VersionName(cs.Version) + " " + cs.CurveID.String() + " " + tls.CipherSuiteName(cs.CipherSuite)
			resumed = cs.DidResume
		}
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	if fresh != nil {
		fresh.CloseIdleConnections()
	}
	if w == nil || start.Before(w.from) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Posts++
	if !ok {
		w.Errs++
		return
	}
	w.Lat = append(w.Lat, ms)
	if !reused.Load() {
		w.NewConns++
	}
	if resumed {
		w.Resumed++
	}
	w.Protos[proto]++
}

// runTLSWorker is a load-generator process: its agents, driven by commands on stdin.
func runTLSWorker() {
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	check(err)
	var cfg workerConfig
	check(json.Unmarshal(line, &cfg))
	tl := newTLSLoad(cfg)
	fmt.Println("ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wins []*winRec
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return // the benchmark went away
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "start":
			tl.start(ctx)
		case len(f) == 2 && f[0] == "arm":
			tl.arm.Store(f[1])
		case len(f) == 3 && f[0] == "open":
			id, err := strconv.Atoi(f[1])
			check(err)
			w := &winRec{from: time.Now(), workerWindow: workerWindow{ID: id, Arm: f[2], Protos: map[string]int{}}}
			wins = append(wins, w)
			tl.win.Store(w)
		case len(f) == 1 && f[0] == "close":
			tl.win.Store(nil)
		case len(f) == 1 && f[0] == "report":
			var out []workerWindow
			for _, w := range wins {
				w.mu.Lock()
				out = append(out, w.workerWindow)
				w.mu.Unlock()
			}
			js, err := json.Marshal(out)
			check(err)
			_, err = os.Stdout.Write(append(js, '\n'))
			check(err)
			return
		default:
			log.Fatalf("worker: unknown command %q", line)
		}
	}
}

type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	pid int
}

func startWorker(cfg workerConfig) *worker {
	exe, err := os.Executable()
	check(err)
	cmd := exec.Command(exe, "-tls-worker")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	w := &worker{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), pid: cmd.Process.Pid}
	js, err := json.Marshal(cfg)
	check(err)
	w.send("%s", js)
	if l, err := w.out.ReadString('\n'); err != nil || strings.TrimSpace(l) != "ready" {
		log.Fatalf("load-generator process: %q %v", l, err)
	}
	return w
}

func (w *worker) send(format string, a ...any) {
	_, err := fmt.Fprintf(w.in, format+"\n", a...)
	check(err)
}

func (w *worker) report() []workerWindow {
	w.send("report")
	l, err := w.out.ReadBytes('\n')
	check(err)
	var ws []workerWindow
	check(json.Unmarshal(l, &ws))
	_ = w.cmd.Wait()
	return ws
}

// ---- the run ----

type edge struct {
	at     time.Time
	reps   []procSample // CPU, RSS and the heartbeat counter of each replica
	slapds []procSample
	self   procSample // this process and the load-generator processes
	load   float64
}

func sampleEdge(reps []*replica, env *siteEnv, ws []*worker) edge {
	e := edge{at: time.Now(), self: proc(os.Getpid()), load: loadAvg()}
	for _, w := range ws {
		p := proc(w.pid)
		e.self.cpu, e.self.rss = e.self.cpu+p.cpu, e.self.rss+p.rss
	}
	for _, r := range reps {
		p := proc(r.pid)
		scrape(r, &p)
		e.reps = append(e.reps, p)
	}
	for _, s := range env.servers {
		e.slapds = append(e.slapds, proc(s.PID))
	}
	return e
}

func tlsArms() []string {
	arms := []string{armPlain, armKeep}
	if *h1Arm {
		arms = append(arms, armKeepH1)
	}
	if *reconnect {
		arms = append(arms, armReconnect)
	}
	if *resumeArm {
		arms = append(arms, armResume)
	}
	return arms
}

func runTLS(ctx context.Context, env *siteEnv, overtime, tmp string, started time.Time) {
	arms := tlsArms()
	chain, key, pin := makeCA(tmp)
	sl := env.servers[0]
	plain, err := startReplica(ctx, overtime, tmp, 0, env.urlsFor(0), sl, env.pwFile, "", "", nil)
	check(err)
	defer plain.stop()
	admin, err := client.NewForAgent("https://127.0.0.1", client.Credential{Token: "x", CAPin: pin})
	check(err)
	secure, err := startReplica(ctx, overtime, tmp, 1, env.urlsFor(1), sl, env.pwFile, chain, key, admin.HTTP)
	check(err)
	defer secure.stop()
	reps := []*replica{plain, secure}
	log.Printf("replicas ready: %s (plain), %s (TLS, CA %s)", plain.base, secure.base, pin)

	// The agents, dealt round-robin to load-generator processes.
	n := len(env.site.Hosts)
	nw := (n + perWorker() - 1) / perWorker()
	cfgs := make([]workerConfig, nw)
	rng := rand.New(rand.NewSource(2))
	for i := range cfgs {
		cfgs[i] = workerConfig{N: n, PlainURL: plain.base + "/api/v1/agent/heartbeat", TLSURL: secure.base + "/api/v1/agent/heartbeat",
			Pin: pin, H1: *h1Arm, Resume: *resumeArm, Change: *changeRate, Seed: int64(3 + i)}
	}
	for i, h := range env.site.Hosts {
		cfgs[i%nw].Agents = append(cfgs[i%nw].Agents, workerAgent{I: i, Host: h.Name, Token: env.tokens[i],
			Instance: fmt.Sprintf("%016x", rng.Uint64()), Active: rng.Intn(4) == 0, CPUSecs: float64(rng.Intn(100000))})
	}
	var ws []*worker
	for _, c := range cfgs {
		ws = append(ws, startWorker(c))
	}
	all := func(format string, a ...any) {
		for _, w := range ws {
			w.send(format, a...)
		}
	}
	log.Printf("%d agents in %d load-generator processes", n, nw)
	all("start")
	// Warm-up: plain until every agent has posted (the first heartbeats are spread over
	// two intervals), then one interval of each persistent TLS arm (every agent's
	// handshake) and of -resume (every agent's first session).
	log.Printf("warm-up: plain %s", 2*wire.HeartbeatInterval+*tlsGap)
	time.Sleep(2*wire.HeartbeatInterval + *tlsGap)
	for _, arm := range arms {
		if arm == armKeep || arm == armKeepH1 || arm == armResume {
			log.Printf("warm-up: %s %s", arm, wire.HeartbeatInterval+*tlsGap)
			all("arm %s", arm)
			time.Sleep(wire.HeartbeatInterval + *tlsGap)
		}
	}

	res := tlsResult{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Hosts: *nHosts, Pools: *nPools,
		Directory: *directory, Arms: arms, Rounds: *rounds, Window: tlsWindow.Seconds(), Gap: tlsGap.Seconds(),
		ChangePerMinute: *changeRate, Go: runtime.Version(), CAPin: pin, LoadAvg: [2]float64{loadAvg(), 0}, LoadProcesses: nw}
	type win struct {
		round int
		arm   string
		e     [2]edge
	}
	var wins []win
	for r := range *rounds {
		order := append(slices.Clone(arms[r%len(arms):]), arms[:r%len(arms)]...)
		for _, arm := range order {
			all("arm %s", arm)
			time.Sleep(*tlsGap)
			e0 := sampleEdge(reps, env, ws)
			all("open %d %s", len(wins), arm)
			time.Sleep(*tlsWindow)
			all("close")
			e1 := sampleEdge(reps, env, ws)
			wins = append(wins, win{r + 1, arm, [2]edge{e0, e1}})
			i := serving(arm)
			beats, cpu := e1.reps[i].beats-e0.reps[i].beats, e1.reps[i].cpu-e0.reps[i].cpu
			log.Printf("round %d %-12s %5.0f heartbeats, %6.1f µs CPU each, load %.1f", r+1, arm, beats, 1e6*cpu/math.Max(beats, 1), e1.load)
		}
	}
	all("arm none") // the agents stop posting
	time.Sleep(*tlsGap)
	byID := map[int][]workerWindow{}
	for _, w := range ws {
		for _, ww := range w.report() {
			byID[ww.ID] = append(byID[ww.ID], ww)
		}
	}
	for id, w := range wins {
		res.Windows = append(res.Windows, windowResult(w.round, w.arm, byID[id], w.e[0], w.e[1], started))
	}
	res.summarise()
	res.LoadAvg[1] = loadAvg()
	res.Runtime = time.Since(started).Seconds()
	reportTLS(res)
}

// serving is the replica an arm's heartbeats go to: 0 plain, 1 TLS.
func serving(arm string) int {
	if arm == armPlain {
		return 0
	}
	return 1
}

// ---- results ----

type latStats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type tlsWindowResult struct {
	Round int     `json:"round"`
	Arm   string  `json:"arm"`
	Start float64 `json:"startSeconds"` // since the run began
	// The agents' side: every POST that started in the window.
	Posts     int            `json:"posts"`
	Errors    int            `json:"errors"`
	NewConns  int            `json:"newConnections"`
	Resumed   int            `json:"resumedHandshakes"`
	Protocols map[string]int `json:"protocols"`
	LatencyMs latStats       `json:"postLatencyMs"`
	// The serving replica (0 plain, 1 TLS) and the other one, which follows the same
	// state writes through the directory.
	Replica          int     `json:"servingReplica"`
	ServerBeats      float64 `json:"serverHeartbeats"` // its overtime_agent_heartbeats_total over the window
	ServerCPU        float64 `json:"serverCPUSeconds"`
	ServerCPUPerBeat float64 `json:"serverCPUMicrosPerHeartbeat"`
	ServerRSSMiB     float64 `json:"serverRSSMiB"`
	OtherCPU         float64 `json:"otherReplicaCPUSeconds"`
	OtherRSSMiB      float64 `json:"otherReplicaRSSMiB"`
	SlapdCPU         float64 `json:"slapdCPUSeconds"` // all providers together
	LoadGenCPU       float64 `json:"loadGeneratorCPUSeconds"`
	LoadGenPerBeat   float64 `json:"loadGeneratorCPUMicrosPerHeartbeat"`
	Seconds          float64 `json:"seconds"`
	LoadAvg          float64 `json:"loadAverage"` // at the window's end
}

// spread is a value over the rounds.
type spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

type armSummary struct {
	Arm              string  `json:"arm"`
	ServerCPUPerBeat spread  `json:"serverCPUMicrosPerHeartbeat"`
	CPUPerBeatRatio  spread  `json:"serverCPUPerHeartbeatRatioToPlain"` // this arm / plain, same round
	ServerCores      spread  `json:"serverCores"`
	P50              spread  `json:"postP50Ms"`
	P90              spread  `json:"postP90Ms"`
	P99              spread  `json:"postP99Ms"`
	P50Ratio         spread  `json:"postP50RatioToPlain"`
	P99Ratio         spread  `json:"postP99RatioToPlain"`
	LoadGenPerBeat   spread  `json:"loadGeneratorCPUMicrosPerHeartbeat"`
	ServerRSSMiB     spread  `json:"serverRSSMiB"`
	SlapdCores       spread  `json:"slapdCores"`
	NewConnsPerPost  float64 `json:"newConnectionsPerPost"`
	ResumedPerPost   float64 `json:"resumedPerPost"`
	Errors           int     `json:"errors"`
	Protocol         string  `json:"protocol"` // the most frequent
}

type tlsResult struct {
	Date            string            `json:"date"`
	CPUs            int               `json:"cpus"`
	Hosts           int               `json:"hosts"`
	Pools           int               `json:"pools"`
	Directory       string            `json:"directory"`
	Arms            []string          `json:"arms"`
	Rounds          int               `json:"rounds"`
	Window          float64           `json:"windowSeconds"`
	Gap             float64           `json:"gapSeconds"`
	ChangePerMinute float64           `json:"ownerChangesPerHostPerMinute"`
	Go              string            `json:"go"`
	CAPin           string            `json:"caPin"`
	LoadAvg         [2]float64        `json:"loadAverage"`
	Runtime         float64           `json:"runtimeSeconds"`
	LoadProcesses   int               `json:"loadGeneratorProcesses"`
	Windows         []tlsWindowResult `json:"windows"`
	Summary         []armSummary      `json:"summary"`
}

func sorted(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}

func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return s[int(math.Round(q*float64(len(s)-1)))]
}

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	s := sorted(v)
	// Medians and quartiles by linear interpolation (5 rounds: the 2nd and 4th values).
	at := func(q float64) float64 {
		x := q * float64(len(s)-1)
		i := int(math.Floor(x))
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (x-float64(i))*(s[i+1]-s[i])
	}
	return spread{N: len(s), Median: at(0.5), Q1: at(0.25), Q3: at(0.75), Min: s[0], Max: s[len(s)-1]}
}

func windowResult(round int, arm string, parts []workerWindow, e0, e1 edge, started time.Time) tlsWindowResult {
	i := serving(arm)
	r := tlsWindowResult{Round: round, Arm: arm, Start: e0.at.Sub(started).Seconds(), Protocols: map[string]int{}, Replica: i,
		ServerBeats: e1.reps[i].beats - e0.reps[i].beats, ServerCPU: e1.reps[i].cpu - e0.reps[i].cpu, ServerRSSMiB: e1.reps[i].rss,
		OtherCPU: e1.reps[1-i].cpu - e0.reps[1-i].cpu, OtherRSSMiB: e1.reps[1-i].rss,
		LoadGenCPU: e1.self.cpu - e0.self.cpu, Seconds: e1.at.Sub(e0.at).Seconds(), LoadAvg: e1.load}
	var lat []float64
	for _, w := range parts {
		lat = append(lat, w.Lat...)
		r.Posts += w.Posts
		r.Errors += w.Errs
		r.NewConns += w.NewConns
		r.Resumed += w.Resumed
		for k, v := range w.Protos {
			r.Protocols[k] += v
		}
	}
	s := sorted(lat)
	r.LatencyMs = latStats{N: len(s), P50: quantile(s, 0.5), P90: quantile(s, 0.9), P99: quantile(s, 0.99)}
	if len(s) > 0 {
		r.LatencyMs.Max = s[len(s)-1]
	}
	for j := range e0.slapds {
		r.SlapdCPU += e1.slapds[j].cpu - e0.slapds[j].cpu
	}
	if r.ServerBeats > 0 {
		r.ServerCPUPerBeat = 1e6 * r.ServerCPU / r.ServerBeats
		r.LoadGenPerBeat = 1e6 * r.LoadGenCPU / r.ServerBeats
	}
	return r
}

func (r *tlsResult) summarise() {
	plain := map[int]tlsWindowResult{}
	for _, w := range r.Windows {
		if w.Arm == armPlain {
			plain[w.Round] = w
		}
	}
	r.Summary = nil
	for _, arm := range r.Arms {
		var cpu, ratio, cores, p50, p90, p99, r50, r99, lg, rss, slapd []float64
		var posts, newc, resumed int
		s := armSummary{Arm: arm}
		protos := map[string]int{}
		for _, w := range r.Windows {
			if w.Arm != arm {
				continue
			}
			cpu = append(cpu, w.ServerCPUPerBeat)
			cores = append(cores, w.ServerCPU/w.Seconds)
			p50, p90, p99 = append(p50, w.LatencyMs.P50), append(p90, w.LatencyMs.P90), append(p99, w.LatencyMs.P99)
			lg, rss, slapd = append(lg, w.LoadGenPerBeat), append(rss, w.ServerRSSMiB), append(slapd, w.SlapdCPU/w.Seconds)
			if p, ok := plain[w.Round]; ok && p.ServerCPUPerBeat > 0 {
				ratio = append(ratio, w.ServerCPUPerBeat/p.ServerCPUPerBeat)
				r50, r99 = append(r50, w.LatencyMs.P50/p.LatencyMs.P50), append(r99, w.LatencyMs.P99/p.LatencyMs.P99)
			}
			posts += w.Posts
			newc += w.NewConns
			resumed += w.Resumed
			s.Errors += w.Errors
			for k, v := range w.Protocols {
				protos[k] += v
			}
		}
		s.ServerCPUPerBeat, s.CPUPerBeatRatio, s.ServerCores = spreadOf(cpu), spreadOf(ratio), spreadOf(cores)
		s.P50, s.P90, s.P99, s.P50Ratio, s.P99Ratio = spreadOf(p50), spreadOf(p90), spreadOf(p99), spreadOf(r50), spreadOf(r99)
		s.LoadGenPerBeat, s.ServerRSSMiB, s.SlapdCores = spreadOf(lg), spreadOf(rss), spreadOf(slapd)
		if posts > 0 {
			s.NewConnsPerPost, s.ResumedPerPost = float64(newc)/float64(posts), float64(resumed)/float64(posts)
		}
		keys := make([]string, 0, len(protos))
		for k := range protos {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return protos[keys[i]] > protos[keys[j]] })
		if len(keys) > 0 {
			s.Protocol = keys[0]
		}
		r.Summary = append(r.Summary, s)
	}
}

var armDesc = map[string]string{
	armPlain:     "plain HTTP/1.1, persistent connection",
	armKeep:      "TLS, the agent's client (HTTP/2, persistent connection)",
	armKeepH1:    "TLS, persistent connection, forced to HTTP/1.1",
	armReconnect: "TLS, new connection per heartbeat, full handshake",
	armResume:    "TLS, new connection per heartbeat, resumed session",
}

func reportTLS(r tlsResult) {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	rng := func(s spread, f string) string {
		return fmt.Sprintf(f+" ("+f+"–"+f+")", s.Median, s.Min, s.Max)
	}
	dirDesc := "a multi-provider slapd pair, each replica on its own provider"
	if r.Directory != "pair" {
		dirDesc = "one slapd for both replicas"
	}
	p("# TLS on the heartbeat path: %d agents, plain HTTP vs HTTPS side by side\n\n", r.Hosts)
	p("%s, on a machine of **%d cores shared with other people's work (noisy)**: the 1-minute load average was %.1f when\n", r.Date, r.CPUs, r.LoadAvg[0])
	p("the rounds began and %.1f when they ended; slapd, both replicas and the load generator (all %d simulated agents, in\n", r.LoadAvg[1], r.Hosts)
	p("%d processes) run on the same cores. %s, runtime %.0f s. Regenerate: `go run ./test/bench/agentscale %s -out docs/benchmarks`.\n\n",
		max(r.LoadProcesses, 1), r.Go, r.Runtime, tlsFlags(r))
	p("Two `overtime serve` replicas of one site (%d hosts in %d pools) on %s:\n", r.Hosts, r.Pools, dirDesc)
	p("replica 0 serves plain HTTP, replica 1 HTTPS (`--tls-cert`: a leaf for 127.0.0.1 signed by a throwaway site CA the\n")
	p("benchmark makes, both ECDSA P-256, the chain ending with the CA). The simulated agents trust that CA alone: their TLS\n")
	p("client is the node agent's own, `client.NewForAgent` with a credential pinning the CA (`capin.TLSConfig`;\n")
	p("`http.DefaultTransport` cloned, so HTTP/2). Every agent posts its heartbeat every 30 s, with its own credential;\n")
	p("%.0f%% of the hosts change owner state per minute (an extra heartbeat each). All agents post to one arm at a time:\n\n", 100*r.ChangePerMinute)
	for _, a := range r.Arms {
		p("- **%s**: %s\n", a, armDesc[a])
	}
	every := ""
	if r.Window == wire.HeartbeatInterval.Seconds() {
		every = " (one heartbeat interval: every agent posts once)"
	}
	p("\nA round measures every arm once, over a window of %.0f s%s after a\n", r.Window, every)
	p("gap of %.0f s after the switch (requests in flight, the previous arm's state writes); the order of the arms rotates by\n", r.Gap)
	p("one each round, so the machine's other load falls on all of them alike; rounds: %d. The persistent connections are\n", r.Rounds)
	p("opened in a warm-up and kept through the other arms' windows, so keep-alive windows hold no handshakes. The\n")
	p("agent's TLS configuration keeps no session cache, so an agent that reconnected would make a full handshake each time\n")
	p("(reconnect: ECDSA P-256 signature by the server, its verification and the CA pin check by the agent, key exchange as\n")
	p("the protocol column says); resume gives the agents a session cache and measures resumed handshakes instead.\n\n")
	p("Measured per window: **server CPU per heartbeat** = the serving replica's CPU time (user + system, /proc/PID/stat)\n")
	p("over the heartbeats it counted (`overtime_agent_heartbeats_total`); it includes everything that replica did meanwhile\n")
	p("(token check, decode, the state writes and their echo from the directory, TLS, HTTP/2, GC). POST latency is the\n")
	p("agent's, connection set-up included. The load generator's CPU per heartbeat is the simulated agents' side (its\n")
	p("processes together, the measurement's own sampling included). Values are the median over the rounds with the\n")
	p("min–max; ratios are taken within each round (this arm / plain, same round) and then summarised.\n\n")

	p("## Result\n\n")
	p("| arm | server CPU µs per heartbeat | ratio to plain | POST p50 ms | p90 ms | p99 ms | p99 ratio to plain | agents' CPU µs per heartbeat | serving replica RSS MiB | new connections per POST | protocol |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Summary {
		ratio, r99 := "1", "1"
		if s.Arm != armPlain {
			ratio, r99 = rng(s.CPUPerBeatRatio, "%.2f"), rng(s.P99Ratio, "%.2f")
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.2f | %s |\n", s.Arm, rng(s.ServerCPUPerBeat, "%.0f"), ratio,
			rng(s.P50, "%.2f"), rng(s.P90, "%.2f"), rng(s.P99, "%.1f"), r99, rng(s.LoadGenPerBeat, "%.0f"),
			s.ServerRSSMiB.Median, s.NewConnsPerPost, s.Protocol)
	}
	p("\nInterquartile ranges over the rounds (server CPU µs per heartbeat; ratio to plain):")
	for _, s := range r.Summary {
		p(" %s %.0f–%.0f", s.Arm, s.ServerCPUPerBeat.Q1, s.ServerCPUPerBeat.Q3)
		if s.Arm != armPlain {
			p(" (%.2f–%.2f)", s.CPUPerBeatRatio.Q1, s.CPUPerBeatRatio.Q3)
		}
		p(";")
	}
	p("\n")
	for _, s := range r.Summary {
		if s.ResumedPerPost > 0 || s.Arm == armResume || s.Arm == armReconnect {
			p("%s: %.2f of the POSTs resumed a session.\n", s.Arm, s.ResumedPerPost)
		}
		if s.Errors > 0 {
			p("%s: %d failed POSTs.\n", s.Arm, s.Errors)
		}
	}

	p("\n## Every window\n\n")
	p("| round | arm | start s | posts | server heartbeats | server CPU s | µs per heartbeat | other replica CPU s | slapd CPU s | p50 ms | p90 | p99 | new conns | load avg |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range r.Windows {
		p("| %d | %s | %.0f | %d | %.0f | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f | %d | %.1f |\n", w.Round, w.Arm, w.Start, w.Posts,
			w.ServerBeats, w.ServerCPU, w.ServerCPUPerBeat, w.OtherCPU, w.SlapdCPU, w.LatencyMs.P50, w.LatencyMs.P90, w.LatencyMs.P99, w.NewConns, w.LoadAvg)
	}
	p("%s", readingTLS(r))
	writeResult("agentscale-tls", r, b.String())
}

// curveOf is the key exchange in a protocol string ("HTTP/2.0 TLS 1.3 X25519MLKEM768 …").
func curveOf(proto string) string {
	f := strings.Fields(proto)
	if len(f) >= 4 {
		return f[3]
	}
	return "ECDHE"
}

// tlsFlags are the flags of the run that made r.
func tlsFlags(r tlsResult) string {
	f := []string{"-tls"}
	for _, a := range r.Arms {
		switch a {
		case armKeepH1:
			f = append(f, "-h1")
		case armReconnect:
			f = append(f, "-reconnect")
		case armResume:
			f = append(f, "-resume")
		}
	}
	if r.Hosts != 10000 {
		f = append(f, fmt.Sprintf("-hosts %d -pools %d", r.Hosts, r.Pools))
	}
	if r.Directory != "pair" {
		f = append(f, "-directory "+r.Directory)
	}
	if r.Rounds != 5 {
		f = append(f, fmt.Sprintf("-rounds %d", r.Rounds))
	}
	return strings.Join(f, " ")
}

func readingTLS(r tlsResult) string {
	by := map[string]armSummary{}
	for _, s := range r.Summary {
		by[s.Arm] = s
	}
	pl, ok := by[armPlain]
	if !ok || pl.ServerCPUPerBeat.Median == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	rate := float64(r.Hosts) / wire.HeartbeatInterval.Seconds()
	p("\n## Reading\n\n")
	p("At %d hosts (%.0f heartbeats/s into one replica) plain HTTP costs the replica %.0f µs of CPU per heartbeat, %.2f cores.\n",
		r.Hosts, rate, pl.ServerCPUPerBeat.Median, pl.ServerCPUPerBeat.Median*rate/1e6)
	for _, arm := range []string{armKeep, armKeepH1, armResume, armReconnect} {
		s, ok := by[arm]
		if !ok {
			continue
		}
		d := s.ServerCPUPerBeat.Median - pl.ServerCPUPerBeat.Median
		p("%s: %.0f µs (×%.2f, within-round ratio %.2f, min–max %.2f–%.2f), %+.0f µs per heartbeat, %+.2f cores at this rate;\n",
			armDesc[arm], s.ServerCPUPerBeat.Median, s.ServerCPUPerBeat.Median/pl.ServerCPUPerBeat.Median,
			s.CPUPerBeatRatio.Median, s.CPUPerBeatRatio.Min, s.CPUPerBeatRatio.Max, d, d*rate/1e6)
		p("  POST p50 %.2f ms vs %.2f plain, p99 %.1f vs %.1f.\n", s.P50.Median, pl.P50.Median, s.P99.Median, pl.P99.Median)
	}
	if rc, ok := by[armReconnect]; ok {
		if rs, ok := by[armResume]; ok {
			p("\nResumption (every resume POST resumed) saves %.0f µs of the full handshake's %.0f: the server's certificate signature\n",
				rc.ServerCPUPerBeat.Median-rs.ServerCPUPerBeat.Median, rc.ServerCPUPerBeat.Median-pl.ServerCPUPerBeat.Median)
			p("and the agent's chain check go, but TLS 1.3 resumes with a fresh key exchange (%s), and the new TCP and HTTP/2\n", curveOf(rs.Protocol))
			p("connection set-up stays.\n")
		}
	}
	for _, arm := range []string{armReconnect, armResume} {
		lo, hi, llo, lhi := math.Inf(1), 0.0, math.Inf(1), 0.0
		for _, w := range r.Windows {
			if w.Arm == arm {
				lo, hi = math.Min(lo, w.LatencyMs.P50), math.Max(hi, w.LatencyMs.P50)
				llo, lhi = math.Min(llo, w.LoadAvg), math.Max(lhi, w.LoadAvg)
			}
		}
		if hi > 0 {
			p("%s: POST p50 per window %.1f–%.1f ms at load averages %.1f–%.1f: with a handshake per heartbeat on both sides of\n", arm, lo, hi, llo, lhi)
			p("these shared cores, latency follows the machine's load far more than the CPU per heartbeat does (every window's row above).\n")
		}
	}
	if k, ok := by[armKeep]; ok {
		p("\nMemory: the TLS replica's RSS was %.0f MiB at the end of its keep-alive windows against the plain one's %.0f at the end of\n", k.ServerRSSMiB.Median, pl.ServerRSSMiB.Median)
		p("its own, each holding a connection per agent (%d): TLS and HTTP/2 state per connection, and the heap the reconnect\n", r.Hosts)
		p("arms leave behind (RSS does not shrink at once), so an upper bound on the keep-alive connections' cost.\n")
	}
	p("\nThe figures are for this machine's 2 shared cores and one run; compare the arms within it, not with other runs.\n")
	return b.String()
}
