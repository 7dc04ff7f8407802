package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/render"
)

// benchOptions is everything a run needs besides N and the payload transport.
type benchOptions struct {
	SrvDir       string
	Files        []fileSum
	LoaderFile   string
	HTTPCmd      string
	LDAPRelay    string
	HTTPPort     int
	LogDHCP      bool
	DnsmasqOpts  []string
	LogDir       string
	BlkSize      int
	DHCPTimeouts []time.Duration
	TFTPTimeout  time.Duration
	TFTPMaxTO    time.Duration
	TFTPRetries  int
	HTTPRetries  int
	DHCPDeadline time.Duration
	TFTPDeadline time.Duration
	PayDeadline  time.Duration
}

type runSpec struct {
	Kind        string   `json:"kind"` // storm, compare, dynamic or dynamic-noping
	N           int      `json:"n"`
	Payload     string   `json:"payload"`    // http or tftp
	Addressing  string   `json:"addressing"` // static or dynamic
	Extra       []string `json:"dnsmasqExtra,omitempty"`
	Spread      float64  `json:"startSpreadSeconds,omitempty"`
	NoLogDHCP   bool     `json:"noLogDhcp,omitempty"`          // log-dhcp left out of the rendered configuration
	TFTPTimeout float64  `json:"tftpTimeoutSeconds,omitempty"` // clients' first TFTP timeout, when not the default
	StartSeed   uint64   `json:"startSeed,omitempty"`          // power-on uniformly random over Spread (see lgConfig)
	BootScript  bool     `json:"bootScript,omitempty"`         // the boot script is fetched (see lgConfig)
	Rep         int      `json:"rep"`
}

func (s runSpec) name() string { return fmt.Sprintf("%s-n%d-%s-r%d", s.Kind, s.N, s.Payload, s.Rep) }

type pct struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// runResult is one storm: the figures, and the per-client phase times (ms, served
// clients only, in client order) for anyone who wants other percentiles.
type runResult struct {
	runSpec
	AllServedMs     float64            `json:"allServedMs"` // until the last client was served; with failures: until the last gave up
	Served          int                `json:"served"`
	Failures        int                `json:"failures"`
	FailuresByPhase map[string]int     `json:"failuresByPhase,omitempty"`
	FailureSamples  []string           `json:"failureSamples,omitempty"`
	DHCPRetries     int                `json:"dhcpRetries"`
	LoaderRetries   int                `json:"loaderRetries"`
	PayloadRetries  int                `json:"payloadRetries"`
	TFTPDuplicates  int                `json:"tftpDuplicates"`
	Total           pct                `json:"totalMs"`
	DHCP            pct                `json:"dhcpMs"`
	Loader          pct                `json:"loaderMs"`
	Script          pct                `json:"scriptMs"`
	ScriptRetries   int                `json:"scriptRetries,omitempty"`
	ScriptBytes     pct                `json:"scriptBytes"`
	ScriptSample    string             `json:"scriptSample,omitempty"` // the first client's boot script
	PayloadPhase    pct                `json:"payloadMs"`
	CPU             map[string]float64 `json:"cpuSeconds"` // dnsmasq, http, loadgen
	UDPServer       map[string]int64   `json:"udpServerDelta"`
	UDPClient       map[string]int64   `json:"udpClientDelta"`
	DnsmasqLog      map[string]int     `json:"dnsmasqLog"`
	DnsmasqLogLines int                `json:"dnsmasqLogLines"`
	DnsmasqRunDelay float64            `json:"dnsmasqRunDelaySeconds"` // dnsmasq runnable but waiting for a CPU (schedstat)
	Sysctls         map[string]int64   `json:"sysctls"`                // the storm sysctls (boot/storm) during the run
	SocketDrops     map[string]int64   `json:"socketDrops"`            // drops column of /proc/net/udp: dnsmasq :67 and :69, load generator :68
	KernelNet       map[string]int64   `json:"kernelNetDelta"`         // host-wide ARP table and input backlog counters (all namespaces)
	Neighbours      map[string]int     `json:"neighbours"`             // IPv4 neighbour entries at the end: server and client namespace
	DHCPStray       int64              `json:"dhcpStray"`
	DHCPDropped     int64              `json:"dhcpDropped"`
	PayloadWindowMs float64            `json:"payloadWindowMs"` // first client's kernel request to the last client's initrd end
	PerClient       struct {
		EndMs     []float64 `json:"endMs"` // served, counted from the room's power-on
		TotalMs   []float64 `json:"totalMs"`
		DHCPMs    []float64 `json:"dhcpMs"`
		LoaderMs  []float64 `json:"loaderMs"`
		ScriptMs  []float64 `json:"scriptMs,omitempty"`
		StartMs   []float64 `json:"startMs,omitempty"` // power-on after the boundary
		PayloadMs []float64 `json:"payloadMs"`
	} `json:"perClient"`
	Clients []clientResult `json:"-"` // for the correctness test
	Hosts   []string       `json:"-"` // the directory's IP of each client (static addressing)
	Config  string         `json:"-"`
}

// current is the environment of the run in progress, for the signal handler.
var current struct {
	sync.Mutex
	e *env
}

func runOnce(ctx context.Context, o benchOptions, spec runSpec) (*runResult, error) {
	sysctls, err := setStormSysctls(isDefaults(spec.Kind))
	if err != nil {
		return nil, err
	}
	e, err := startEnv(envOptions{Defaults: isDefaults(spec.Kind), N: spec.N, Addressing: spec.Addressing, SrvDir: o.SrvDir, HTTPCmd: o.HTTPCmd,
		HTTPPort: o.HTTPPort, LogDHCP: o.LogDHCP && !spec.NoLogDHCP, DnsmasqOpts: append(append([]string(nil), o.DnsmasqOpts...), spec.Extra...),
		LogDir: o.LogDir, RunName: spec.name(), LDAPRelay: o.LDAPRelay})
	if err != nil {
		return nil, err
	}
	current.Lock()
	current.e = e
	current.Unlock()
	defer func() {
		current.Lock()
		current.e = nil
		current.Unlock()
		e.close()
	}()
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", e.dnsmasq.Process.Pid)); err != nil || strings.TrimSpace(string(b)) != "dnsmasq" {
		return nil, fmt.Errorf("process %d is %q, not dnsmasq: `ip netns exec` did not exec in place", e.dnsmasq.Process.Pid, b)
	}

	files := make([]fileSum, len(o.Files))
	copy(files, o.Files)
	cfg := lgConfig{Iface: clientIf, XIDBase: uint32(os.Getpid())<<12 ^ uint32(spec.Rep)<<28, Payload: spec.Payload,
		HTTPBase: e.bs.HTTPURL, Files: files, LoaderFile: o.LoaderFile, BlkSize: o.BlkSize,
		DHCPTimeouts: o.DHCPTimeouts, TFTPTimeout: o.TFTPTimeout, TFTPMaxTO: o.TFTPMaxTO, TFTPRetries: o.TFTPRetries,
		HTTPRetries: o.HTTPRetries, DHCPDeadline: o.DHCPDeadline, TFTPDeadline: o.TFTPDeadline, PayDeadline: o.PayDeadline,
		StartSpread: time.Duration(spec.Spread * float64(time.Second)), StartSeed: spec.StartSeed, BootScript: spec.BootScript}
	if spec.TFTPTimeout > 0 {
		cfg.TFTPTimeout = time.Duration(spec.TFTPTimeout * float64(time.Second))
	}
	for _, h := range e.hosts {
		cfg.MACs = append(cfg.MACs, h.MAC)
	}
	lg, err := e.startLoadgen(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer lg.kill()
	dnsPid, httpPid := e.dnsmasq.Process.Pid, e.httpd.Process.Pid
	cpu0 := map[string]time.Duration{}
	cpu0["dnsmasq"], _ = procCPU(dnsPid)
	cpu0["http"], _ = procCPU(httpPid)
	wait0, _ := procRunDelay(dnsPid)
	udpS0, _ := udpCounters(dnsPid)
	knet0 := kernelNetStats()

	if _, err := io.WriteString(lg.stdin, "go\n"); err != nil {
		return nil, err
	}
	line, err := lg.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("load generator: %v: %s", err, lg.stderr.String())
	}
	cpu1 := map[string]time.Duration{}
	cpu1["dnsmasq"], _ = procCPU(dnsPid)
	cpu1["http"], _ = procCPU(httpPid)
	wait1, _ := procRunDelay(dnsPid)
	udpS1, _ := udpCounters(dnsPid)
	knet1 := kernelNetStats()
	// Per socket, while they are open: dnsmasq's are as old as this run, the load
	// generator's DHCP socket too.
	sd := socketDrops(dnsPid)
	neigh := map[string]int{"server": neighbours(dnsPid)}
	var lr lgResult
	if err := json.Unmarshal(line, &lr); err != nil {
		return nil, fmt.Errorf("load generator result: %v", err)
	}
	if lr.Err != "" {
		return nil, fmt.Errorf("load generator: %s", lr.Err)
	}
	// Stop the servers so that dnsmasq's log is complete before it is counted.
	stopCmd(e.httpd, e.httpdDone)
	stopCmd(e.dnsmasq, e.dnsDone)

	r := &runResult{runSpec: spec, Clients: lr.Clients, Config: string(e.conf)}
	for _, h := range e.hosts {
		r.Hosts = append(r.Hosts, h.IP)
	}
	r.DnsmasqRunDelay = (wait1 - wait0).Seconds()
	r.CPU = map[string]float64{"dnsmasq": (cpu1["dnsmasq"] - cpu0["dnsmasq"]).Seconds(), "http": (cpu1["http"] - cpu0["http"]).Seconds(), "loadgen": lr.CPUSeconds}
	r.UDPServer = delta(udpS0, udpS1)
	// The load generator has exited by now: its namespace's figures come from itself.
	r.UDPClient = lr.UDPDelta
	neigh["client"] = lr.Neighbours
	r.Sysctls, r.KernelNet, r.Neighbours = sysctls, delta(knet0, knet1), neigh
	r.SocketDrops = map[string]int64{"dnsmasq:67": sd[67], "dnsmasq:69": sd[69], "loadgen:68": lr.DHCPSocketDrops}
	r.DnsmasqLog, r.DnsmasqLogLines = e.logStats.snapshot()
	r.DHCPStray, r.DHCPDropped = lr.DHCPStray, lr.DHCPDropped
	r.FailuresByPhase = map[string]int{}
	var tot, dh, ld, sc, scb, starts, pl, ends []float64
	last, firstPay, lastPay := 0.0, math.Inf(1), 0.0
	for _, c := range lr.Clients {
		r.DHCPRetries += c.DHCPRetries
		r.LoaderRetries += c.LoaderRetries
		r.PayloadRetries += c.PayloadRetries
		r.ScriptRetries += c.ScriptRetries
		r.TFTPDuplicates += c.TFTPDuplicates
		last = math.Max(last, c.EndMs)
		if !c.OK {
			r.Failures++
			r.FailuresByPhase[c.Failed]++
			if len(r.FailureSamples) < 5 {
				r.FailureSamples = append(r.FailureSamples, c.MAC+": "+c.Failed+": "+c.Err)
			}
			continue
		}
		r.Served++
		tot, dh, ld, pl = append(tot, c.TotalMs), append(dh, c.DHCPms), append(ld, c.LoaderMs), append(pl, c.PayloadMs)
		ends = append(ends, c.EndMs)
		if spec.BootScript && r.ScriptSample == "" {
			r.ScriptSample = c.Script
		}
		if spec.BootScript {
			sc, scb, starts = append(sc, c.ScriptMs), append(scb, float64(c.ScriptBytes)), append(starts, c.StartMs)
		}
		firstPay, lastPay = math.Min(firstPay, c.EndMs-c.PayloadMs), math.Max(lastPay, c.EndMs)
	}
	r.AllServedMs = last
	if r.Served > 0 {
		r.PayloadWindowMs = lastPay - firstPay
	}
	r.PerClient.EndMs = round1(ends)
	r.Total, r.DHCP, r.Loader, r.PayloadPhase = percentiles(tot), percentiles(dh), percentiles(ld), percentiles(pl)
	r.PerClient.TotalMs, r.PerClient.DHCPMs, r.PerClient.LoaderMs, r.PerClient.PayloadMs = round1(tot), round1(dh), round1(ld), round1(pl)
	if spec.BootScript {
		r.Script, r.ScriptBytes = percentiles(sc), percentiles(scb)
		r.PerClient.ScriptMs, r.PerClient.StartMs = round1(sc), round1(starts)
	}
	return r, nil
}

func delta(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// percentile by nearest rank: the smallest value with at least q of the samples at or below it.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func percentiles(xs []float64) pct {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return pct{}
	}
	return pct{P50: percentile(s, 0.50), P99: percentile(s, 0.99), Max: s[len(s)-1]}
}

func round1(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*10) / 10
	}
	return out
}

// prepareServerDir fills the TFTP/HTTP root: the loader at the top (what dhcp-boot
// names), kernel and initrd under images/{path}/ for HTTP and, for the pure-TFTP
// comparison, the same files reachable over TFTP at the same relative path.
func prepareServerDir(dir, loader, imagePath, kernel, initrd string) ([]fileSum, error) {
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if err := copyFile(loader, filepath.Join(dir, render.TFTPBIOSPXELinux)); err != nil {
		return nil, err
	}
	idir := filepath.Join(dir, "images", filepath.FromSlash(imagePath))
	if err := os.MkdirAll(idir, 0o755); err != nil {
		return nil, err
	}
	var out []fileSum
	for _, f := range []struct{ src, name string }{{kernel, "vmlinuz"}, {initrd, "initrd.img"}} {
		dst := filepath.Join(idir, f.name)
		if err := os.Link(f.src, dst); err != nil {
			if err := copyFile(f.src, dst); err != nil {
				return nil, err
			}
		}
		sum, err := sumFile(dst)
		if err != nil {
			return nil, err
		}
		sum.Path = "images/" + imagePath + "/" + f.name
		out = append(out, sum)
	}
	return out, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func sumFile(path string) (fileSum, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileSum{}, err
	}
	defer f.Close()
	h := crc32.New(crcTable)
	n, err := io.Copy(h, f)
	return fileSum{Size: n, CRC32C: h.Sum32()}, err
}

// inRange reports whether ip is in the dynamic range the site gives the boot server.
func inRange(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return a.Compare(netip.MustParseAddr(rangeFrom)) >= 0 && a.Compare(netip.MustParseAddr(rangeTo)) <= 0
}
