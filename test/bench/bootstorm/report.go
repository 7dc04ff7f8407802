package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/boot/storm"
)

type reportOptions struct {
	Addressing  string         `json:"addressing"`
	HTTPServer  string         `json:"httpServer"`
	LogDHCP     bool           `json:"logDhcp"`
	DnsmasqOpts []string       `json:"dnsmasqExtraOptions,omitempty"`
	BlkSize     int            `json:"tftpBlkSize"`
	Loader      string         `json:"loader"`
	LoaderBytes int64          `json:"loaderBytes"`
	TFTPTimeout string         `json:"tftpTimeout"`
	TFTPRetries int            `json:"tftpRetries"`
	Reps        int            `json:"reps"`
	StormN      []int          `json:"stormN"`
	CompareN    []int          `json:"compareN"`
	DynamicN    []int          `json:"dynamicN"`
	NopingN     []int          `json:"nopingN"`
	SpreadN     []int          `json:"spreadN"`
	NologN      []int          `json:"noLogDhcpN"`
	Spread      float64        `json:"spreadSeconds"`
	ExtraReps   int            `json:"extraReps"`
	Tuning      string         `json:"tuning,omitempty"` // both, boot-server or defaults (-tuning)
	Sysctls     []storm.Sysctl `json:"stormSysctls,omitempty"`
}

type machine struct {
	Cores   int     `json:"cores"`
	CPU     string  `json:"cpu"`
	MemGiB  float64 `json:"memGiB"`
	Kernel  string  `json:"kernel"`
	Go      string  `json:"go"`
	Dnsmasq string  `json:"dnsmasq"`
}

type report struct {
	Date        string        `json:"date"`
	Command     string        `json:"command"`
	WallSeconds float64       `json:"wallSeconds"`
	Machine     machine       `json:"machine"`
	Payload     payloadSource `json:"payload"`
	Options     reportOptions `json:"options"`
	Runs        []*runResult  `json:"runs"`
	Notes       []string      `json:"notes"`
}

func machineFacts() machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemGiB = math.Round(float64(si.Totalram)*float64(si.Unit)/(1<<30)*10) / 10
	}
	if out, err := exec.Command("dnsmasq", "--version").Output(); err == nil {
		m.Dnsmasq, _, _ = strings.Cut(string(out), "\n")
		m.Dnsmasq, _, _ = strings.Cut(m.Dnsmasq, "  Copyright")
	}
	return m
}

// spread is the median of the per-run values with their min and max.
type spread struct {
	Med, Min, Max float64
	N             int
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{Med: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Med: med, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

func (s spread) fmt(prec int) string {
	if math.IsNaN(s.Med) {
		return "–"
	}
	if s.Med == math.Trunc(s.Med) && s.Min == math.Trunc(s.Min) && s.Max == math.Trunc(s.Max) && (s.Max >= 1 || s.Max == 0) {
		prec = 0 // counts (and whole numbers): no decimals
	}
	if s.N <= 1 || s.Min == s.Max {
		return fmt.Sprintf("%.*f", prec, s.Med)
	}
	return fmt.Sprintf("%.*f [%.*f–%.*f]", prec, s.Med, prec, s.Min, prec, s.Max)
}

func (r *report) runs(kind, payload string, n int) []*runResult {
	var out []*runResult
	for _, x := range r.Runs {
		if x.Kind == kind && x.Payload == payload && x.N == n {
			out = append(out, x)
		}
	}
	return out
}

func collect(runs []*runResult, f func(*runResult) float64) spread {
	var xs []float64
	for _, r := range runs {
		xs = append(xs, f(r))
	}
	return spreadOf(xs)
}

func sumInt(runs []*runResult, f func(*runResult) int) int {
	t := 0
	for _, r := range runs {
		t += f(r)
	}
	return t
}

func secs(ms float64) float64 { return ms / 1000 }

// prec picks a number of decimals that shows a value of this size sensibly.
func prec(v float64) int {
	switch {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	case v >= 1:
		return 2
	default:
		return 3
	}
}

func sf(s spread) string { return s.fmt(prec(s.Med)) }

func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstorm.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstorm.md"), r.markdown(), 0o644); err != nil {
		return err
	}
	return r.writePlot(filepath.Join(dir, "bootstorm.png"))
}

func (r *report) markdown() []byte {
	var w bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&w, format+"\n", a...) }
	o := r.Options
	m := r.Machine
	allS := func(x *runResult) float64 { return secs(x.AllServedMs) }
	p("# Boot storm: a room of PXE clients switched on at once")
	p("")
	cmd := r.Command
	if cmd == "" {
		cmd = "go run ./test/bench/bootstorm"
	}
	p("Generated by `%s` (%s, %.1f min wall time); raw numbers per run and per client in [bootstorm.json](bootstorm.json).", cmd, r.Date, r.WallSeconds/60)
	p("Figures are the median of %d runs with the [min–max] spread (one run for the extra storms at the end); percentiles are per client, nearest rank, over the clients served in that run.", o.Reps)
	p("")
	p("**Machine:** %d cores (%s), %.0f GiB, Linux %s, %s, %s.", m.Cores, m.CPU, m.MemGiB, m.Kernel, m.Dnsmasq, m.Go)
	p("Servers **and** load generator share these cores. What the clients cost (TCP receive, TFTP lock-step, a CRC of every byte, and the kernel's veth/bridge work that the sender's context pays for) competes with the servers, which real PCs do not.")
	p("")
	p("![clients served over time; kernel+initrd per client, HTTP vs TFTP](bootstorm.png)")
	p("")
	p("## Setup")
	p("")
	p("- **dnsmasq** runs in a network namespace with the main configuration and hosts file rendered by `sitemgmt/render` (`render.Dnsmasq{…}.Config`/`.Hosts`) for a synthetic site (`internal/testenv/synth`) of N hosts on one boot server: full DHCP on %s, range %s–%s, `interface=%s`, boot server %s. The rendered configuration is used %s. dnsmasq logs to a pipe that the benchmark reads and counts (%s).", subnet, rangeFrom, rangeTo, bridgeName, serverIP, cfgNote(o), r.logNote())
	p("- **Addresses**: %s.", addrNote(o.Addressing))
	p("- **Clients**: one load generator process in a second namespace, joined to the server's bridge by one veth pair; all N clients share one DHCP socket (0.0.0.0:68, SO_BINDTODEVICE, SO_BROADCAST, broadcast flag set, demultiplexed by xid and chaddr). After its ACK a client adds the leased address to the veth (netlink) and does its TFTP and HTTP from that address, so the servers see N distinct peers (one MAC on the wire, though).")
	p("- **DHCP** as a BIOS PXE ROM sends it (`github.com/insomniacslk/dhcp` encodes): option 93 arch 0, option 60 `%s`, 94 (UNDI 2.1), 97 (GUID), 57 (1260), the ROM's option 55; DISCOVER and REQUEST retransmitted after 4, 8, 16, 32 s (PXE spec), a NAK restarts; phase deadline 64 s.", pxeVendorClass)
	p("- **TFTP** (own client, RFC 1350/2347/2348/2349): RRQ with `tsize 0` and `blksize %d`, lock-step; retransmission of the last packet after %s, doubling up to 8 s, give up after %d timeouts in a row; duplicate DATA is acknowledged again; packets from a wrong TID get ERROR 5. Loader `%s` (%d bytes).", o.BlkSize, strings.Replace(o.TFTPTimeout, "s", " s", 1), o.TFTPRetries, o.Loader, o.LoaderBytes)
	p("- **HTTP**: %s. Each client fetches kernel then initrd on one keep-alive connection (`/images/%s`) and checks length and CRC-32C of each file; failed requests are retried twice (counted).", o.HTTPServer, "{path}/vmlinuz, initrd.img")
	p("- **Payload**: %s.", payloadNote(r.Payload))
	p("- **CPU**: utime+stime from /proc/PID/stat of dnsmasq and of the HTTP server process, read after the load generator is ready and after the last client is done (startup excluded); the load generator's own CPU for comparison. 10 ms resolution.")
	p("")

	// Targets.
	p("## Targets")
	p("")
	p("| target | measured | met |")
	p("|---|---|---|")
	if runs := r.runs("storm", "http", 200); len(runs) > 0 {
		all := collect(runs, allS)
		fails := sumInt(runs, func(x *runResult) int { return x.Failures })
		p("| 200 clients served within 30 s (2 cores) | all 200 served after %s s; %d failures in %d runs | %s |", sf(all), fails, len(runs), yesNo(all.Max <= 30 && fails == 0))
	}
	if runs := r.runs("storm", "http", 1000); len(runs) > 0 {
		all := collect(runs, allS)
		fails := sumInt(runs, func(x *runResult) int { return x.Failures })
		p("| 1,000 clients switched on in the same instant, all served within 30 s, 0 failures (issue 18; boot server's tuning) | all 1000 served after %s s; %d failures in %d runs | %s |", sf(all), fails, len(runs), yesNo(all.Max <= 30 && fails == 0))
	}
	for _, n := range o.CompareN {
		h, t := r.runs("compare", "http", n), r.runs("compare", "tftp", n)
		if len(h) == 0 || len(t) == 0 {
			continue
		}
		win := ratios(h, t, payloadWindow, payloadWindow)
		per := ratios(h, t, payloadP50, payloadP50)
		p("| HTTP ≥ 3× faster than TFTP for kernel+initrd, N=%d | TFTP/HTTP: %s× for the whole room, %s× per client (p50) | %s |", n, sf(win), sf(per), yesNo(win.Min >= 3 && per.Min >= 3))
	}
	p("")

	// Storms.
	p("## Boot storm: lpxelinux.0 over TFTP, kernel + initrd over HTTP")
	p("")
	p("All N clients start in the same instant. Times in seconds. *all served*: until the last client has kernel and initrd. Failures and retries are summed over the runs (retries: DHCP retransmissions / TFTP retransmissions of the loader / HTTP request retries). CPU in seconds per run.")
	p("")
	if o.Tuning == "both" {
		var kinds []string
		var ns []int
		for _, n := range o.StormN {
			kinds, ns = append(kinds, "storm-defaults", "storm"), append(ns, n, n)
		}
		stormTableKinds(p, r, kinds, ns)
	} else {
		stormTable(p, r, map[string]string{"defaults": "storm-defaults"}[o.Tuning]+map[bool]string{true: "storm"}[o.Tuning != "defaults"], o.StormN)
	}
	r.tuningSection(p)

	if len(o.CompareN) > 0 {
		// Comparison.
		p("## Kernel + initrd: HTTP vs pure TFTP, side by side")
		p("")
		p("Each repetition runs the same storm twice back to back, identical up to and including the loader; then kernel and initrd come over HTTP (Overtime) or over TFTP from the same dnsmasq (a pure-TFTP PXE setup, same blksize %d, dnsmasq's default limit of 50 concurrent transfers). *room*: from the first client's kernel request until the last client has its initrd. Ratios are TFTP/HTTP per repetition. dnsmasq is single-threaded, so its CPU time in the TFTP runs is a floor for the TFTP room time on any number of cores.", o.BlkSize)
		p("")
		p("| N | per client p50, HTTP | per client p50, TFTP | ratio | room, HTTP | room, TFTP | ratio | CPU: HTTP server (HTTP runs) | CPU: dnsmasq (TFTP runs) | failures HTTP / TFTP | payload retries HTTP / TFTP |")
		p("|---:|---|---|---|---|---|---|---|---|---|---|")
		for _, n := range o.CompareN {
			h, t := r.runs("compare", "http", n), r.runs("compare", "tftp", n)
			if len(h) == 0 || len(t) == 0 {
				continue
			}
			p("| %d | %s | %s | %s× | %s | %s | %s× | %s | %s | %d / %d | %d / %d |", n,
				sf(collect(h, func(x *runResult) float64 { return secs(payloadP50(x)) })),
				sf(collect(t, func(x *runResult) float64 { return secs(payloadP50(x)) })),
				sf(ratios(h, t, payloadP50, payloadP50)),
				sf(collect(h, func(x *runResult) float64 { return secs(payloadWindow(x)) })),
				sf(collect(t, func(x *runResult) float64 { return secs(payloadWindow(x)) })),
				sf(ratios(h, t, payloadWindow, payloadWindow)),
				sf(collect(h, func(x *runResult) float64 { return x.CPU["http"] })),
				sf(collect(t, func(x *runResult) float64 { return x.CPU["dnsmasq"] })),
				sumInt(h, func(x *runResult) int { return x.Failures }), sumInt(t, func(x *runResult) int { return x.Failures }),
				sumInt(h, func(x *runResult) int { return x.PayloadRetries }), sumInt(t, func(x *runResult) int { return x.PayloadRetries }))
		}
		p("")

	}

	if len(o.SpreadN)+len(o.NopingN)+len(o.DynamicN)+len(o.NologN) > 0 {
		p("## Variations (%d run each)", o.ExtraReps)
		p("")
		p("- *spread*: the same storm, but the PCs power on evenly spread over %.0f s (POST times differ) instead of in one instant.", o.Spread)
		p("- *spread-tftp-max*: *spread* with `tftp-max=` twice the room size appended to the rendered configuration (dnsmasq's default is 50 concurrent transfers).")
		p("- *spread-tftp-4s*: *spread* with clients whose first TFTP retransmission comes after 4 s instead of %s (PXE ROMs differ in this).", strings.Replace(o.TFTPTimeout, "s", " s", 1))
		p("- *dynamic*: hosts without directory IPs, so dnsmasq allocates from the range; with the rendered configuration as is, dnsmasq pings every address before it offers it.")
		p("- *no-log-dhcp*: the storm with `log-dhcp` left out of the rendered configuration (what the per-exchange log costs).")
		p("- *dynamic-noping*: dynamic addresses with `no-ping` appended to the rendered configuration.")
		p("")
		var ns []int
		var kinds []string
		for _, k := range []struct {
			kind string
			ns   []int
		}{{"spread", o.SpreadN}, {"spread-tftp-max", o.SpreadN}, {"spread-tftp-4s", o.SpreadN}, {"no-log-dhcp", o.NologN}, {"dynamic-noping", o.NopingN}, {"dynamic", o.DynamicN}} {
			for _, n := range k.ns {
				ns, kinds = append(ns, n), append(kinds, k.kind)
			}
		}
		stormTableKinds(p, r, kinds, ns)
	}

	if len(r.Notes) > 0 {
		p("## Findings (written from the figures above)")
		p("")
		for _, n := range r.Notes {
			p("- %s", n)
		}
		p("")
	}

	p("## Every run")
	p("")
	p("| run | all served (s) | served | failures (phase) | retries DHCP / TFTP / payload | CPU s dnsmasq / HTTP / loadgen | dnsmasq log lines | UDP receive-buffer drops server / client | socket drops dnsmasq :67 / :69 / load generator :68 | neighbours server / client | ARP table full | TFTP errors logged |")
	p("|---|---:|---:|---|---|---|---:|---|---|---|---:|---:|")
	for _, x := range r.Runs {
		var fp []string
		for k, v := range x.FailuresByPhase {
			fp = append(fp, fmt.Sprintf("%s:%d", k, v))
		}
		sort.Strings(fp)
		p("| %s | %.2f | %d/%d | %d %s | %d / %d / %d | %.2f / %.2f / %.2f | %d | %d / %d | %d / %d / %d | %d / %d | %d | %d |", x.name(), secs(x.AllServedMs), x.Served, x.N, x.Failures, strings.Join(fp, " "),
			x.DHCPRetries, x.LoaderRetries, x.PayloadRetries, x.CPU["dnsmasq"], x.CPU["http"], x.CPU["loadgen"], x.DnsmasqLogLines,
			x.UDPServer["RcvbufErrors"], x.UDPClient["RcvbufErrors"], x.SocketDrops["dnsmasq:67"], x.SocketDrops["dnsmasq:69"], x.SocketDrops["loadgen:68"],
			x.Neighbours["server"], x.Neighbours["client"], x.KernelNet["arp_table_fulls"], x.DnsmasqLog["tftpError"])
	}
	return w.Bytes()
}

func stormTable(p func(string, ...any), r *report, kind string, ns []int) {
	kinds := make([]string, len(ns))
	for i := range kinds {
		kinds[i] = kind
	}
	stormTableKinds(p, r, kinds, ns)
}

func stormTableKinds(p func(string, ...any), r *report, kinds []string, ns []int) {
	p("| storm | N | all served | total p50 | total p99 | DHCP p50 / p99 | TFTP loader p50 / p99 | HTTP kernel+initrd p50 / p99 | failures | retries DHCP / TFTP / HTTP | UDP drops at dnsmasq | CPU dnsmasq | CPU HTTP server | CPU load generator |")
	p("|---|---:|---|---|---|---|---|---|---:|---|---:|---|---|---|")
	for i, n := range ns {
		runs := r.runs(kinds[i], "http", n)
		if len(runs) == 0 {
			continue
		}
		p("| %s | %d | %s | %s | %s | %s | %s | %s | %d | %d / %d / %d | %d | %s | %s | %s |", kinds[i], n,
			sf(collect(runs, func(x *runResult) float64 { return secs(x.AllServedMs) })),
			sf(collect(runs, func(x *runResult) float64 { return secs(x.Total.P50) })),
			sf(collect(runs, func(x *runResult) float64 { return secs(x.Total.P99) })),
			pair(runs, func(x *runResult) pct { return x.DHCP }),
			pair(runs, func(x *runResult) pct { return x.Loader }),
			pair(runs, func(x *runResult) pct { return x.PayloadPhase }),
			sumInt(runs, func(x *runResult) int { return x.Failures }),
			sumInt(runs, func(x *runResult) int { return x.DHCPRetries }),
			sumInt(runs, func(x *runResult) int { return x.LoaderRetries }),
			sumInt(runs, func(x *runResult) int { return x.PayloadRetries }),
			sumInt(runs, func(x *runResult) int { return int(x.UDPServer["RcvbufErrors"]) }),
			sf(collect(runs, func(x *runResult) float64 { return x.CPU["dnsmasq"] })),
			sf(collect(runs, func(x *runResult) float64 { return x.CPU["http"] })),
			sf(collect(runs, func(x *runResult) float64 { return x.CPU["loadgen"] })))
	}
	p("")
}

func payloadP50(x *runResult) float64    { return x.PayloadPhase.P50 }
func payloadWindow(x *runResult) float64 { return x.PayloadWindowMs }

func cfgNote(o reportOptions) string {
	n := "unmodified"
	if !o.LogDHCP {
		n = "with `log-dhcp` left out"
	}
	if len(o.DnsmasqOpts) > 0 {
		n += ", plus `" + strings.Join(o.DnsmasqOpts, "`, `") + "` appended"
	}
	return n + " (the variations at the end append the options they are named after)"
}

// ratios pairs the i-th HTTP run with the i-th TFTP run (same repetition) and returns
// the spread of tftp/http.
func ratios(h, t []*runResult, fh, ft func(*runResult) float64) spread {
	var xs []float64
	for i := 0; i < len(h) && i < len(t); i++ {
		if d := fh(h[i]); d > 0 {
			xs = append(xs, ft(t[i])/d)
		}
	}
	return spreadOf(xs)
}

func pair(runs []*runResult, f func(*runResult) pct) string {
	a := spreadOf(valuesOf(runs, func(x *runResult) float64 { return secs(f(x).P50) }))
	b := spreadOf(valuesOf(runs, func(x *runResult) float64 { return secs(f(x).P99) }))
	return fmt.Sprintf("%.*f / %.*f", prec(a.Med), a.Med, prec(b.Med), b.Med)
}

func valuesOf(runs []*runResult, f func(*runResult) float64) []float64 {
	var xs []float64
	for _, r := range runs {
		xs = append(xs, f(r))
	}
	return xs
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

func (r *report) logNote() string {
	if !r.Options.LogDHCP {
		return "without `log-dhcp`"
	}
	lines, clients := 0, 0
	for _, x := range r.Runs {
		if x.Kind == "storm" {
			lines, clients = lines+x.DnsmasqLogLines, clients+x.N
		}
	}
	if clients == 0 {
		return "with `log-dhcp`"
	}
	return fmt.Sprintf("with `log-dhcp`: %.0f lines per client, formatted and written by dnsmasq into a pipe; its cost is part of dnsmasq's CPU and of its DHCP latency", float64(lines)/float64(clients))
}

func addrNote(a string) string {
	if a == "static" {
		return "static — every host has its directory IP in the hosts file, so dnsmasq hands out fixed addresses"
	}
	return "dynamic — the hosts file names every MAC (and host name) but no IP, so dnsmasq allocates from the range"
}

func payloadNote(p payloadSource) string {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	if p.Kind == "generated" {
		return fmt.Sprintf("generated incompressible files, kernel %s (%d bytes, a Debian cloud vmlinuz is 7–8 MiB), initrd %s (%d bytes)", mib(p.KernelBytes), p.KernelBytes, mib(p.InitrdBytes), p.InitrdBytes)
	}
	what := ""
	if p.What != "" {
		what = p.What + ": "
	}
	return fmt.Sprintf("%skernel `%s` %s (%d bytes), initrd `%s` %s (%d bytes)", what, filepath.Base(p.Kernel), mib(p.KernelBytes), p.KernelBytes, filepath.Base(p.Initrd), mib(p.InitrdBytes), p.InitrdBytes)
}

// findings states what the figures of this run show, in numbers from this run, so that
// the text stays true when the benchmark is run again.
func (r *report) findings() []string {
	var out []string
	o := r.Options
	med := func(kind string, n int, f func(*runResult) float64) (spread, bool) {
		runs := r.runs(kind, "http", n)
		return collect(runs, f), len(runs) > 0
	}
	drops := func(x *runResult) float64 { return float64(x.UDPServer["RcvbufErrors"]) }
	dhcpRetries := func(x *runResult) float64 { return float64(x.DHCPRetries) }
	var parts []string
	sk := "storm"
	if o.Tuning == "both" || o.Tuning == "defaults" {
		sk = "storm-defaults"
	}
	for _, n := range o.StormN {
		d, ok := med(sk, n, drops)
		if !ok || d.Max == 0 {
			continue
		}
		rt, _ := med(sk, n, dhcpRetries)
		all, _ := med(sk, n, func(x *runResult) float64 { return secs(x.AllServedMs) })
		cpu, _ := med(sk, n, func(x *runResult) float64 { return x.CPU["dnsmasq"] })
		parts = append(parts, fmt.Sprintf("N=%d: %s packets dropped and %s DHCP retransmissions per run, all served after %s s with %s s of dnsmasq CPU", n, sf(d), sf(rt), sf(all), sf(cpu)))
	}
	if len(parts) > 0 {
		txt := "**DHCP bursts overflow dnsmasq's socket.** When every client sends its DISCOVER in the same instant, the kernel drops DHCP packets at dnsmasq's socket (UDP receive-buffer errors in the server namespace), and the clients' PXE retransmission timeouts of 4, 8, 16 s — not server work — set the all-served time. " +
			strings.Join(parts, "; ") + "."
		for _, n := range o.SpreadN {
			for _, k := range []string{"spread-tftp-max", "spread-tftp-4s"} {
				if sd, ok := med(k, n, drops); ok {
					sa, _ := med(k, n, func(x *runResult) float64 { return secs(x.AllServedMs) })
					txt += fmt.Sprintf(" The same %d power-ons spread over %.0f s (%s): %s drops, all served after %s s.", n, o.Spread, k, sf(sd), sf(sa))
					break
				}
			}
		}
		if sk == "storm-defaults" {
			txt += " (These are the storm-defaults runs: the kernel's and dnsmasq's defaults.) dnsmasq 2.90 has no option for its sockets' receive buffer, so they get net.core.rmem_default (212992 bytes by default); the boot server raises it (next finding)."
		} else {
			txt += fmt.Sprintf(" dnsmasq 2.90 leaves its port 67 and 69 sockets at the kernel default (net.core.rmem_default, %s here).", rmemDefault())
		}
		out = append(out, txt)
	}
	out = append(out, r.tuningFindings()...)
	for _, n := range o.DynamicN {
		all, ok := med("dynamic", n, func(x *runResult) float64 { return secs(x.AllServedMs) })
		if !ok {
			continue
		}
		txt := fmt.Sprintf("**Dynamic addresses: dnsmasq's ping check serialises DHCP.** %d clients without directory IPs, rendered configuration as is: all served after %s s, %.1f s per client — dnsmasq pings each new address and waits for the echo before it answers anyone else.", n, sf(all), all.Med/float64(n))
		for _, m := range o.NopingN {
			if np, ok := med("dynamic-noping", m, func(x *runResult) float64 { return secs(x.AllServedMs) }); ok {
				txt += fmt.Sprintf(" With `no-ping` added, %d clients: %s s.", m, sf(np))
			}
		}
		room := 200
		if len(o.StormN) > 0 {
			room = o.StormN[len(o.StormN)/2]
		}
		txt += fmt.Sprintf(" Pool PCs with directory IPs (static, the main tables) are not pinged; a room of %d PCs without them would need about %.0f min at this rate. The renderer could emit `no-ping` in full-DHCP mode, where dnsmasq is authoritative for the range.", room, all.Med/float64(n)*float64(room)/60)
		out = append(out, txt)
		break
	}
	for _, n := range o.SpreadN {
		runs := r.runs("spread", "http", n)
		if len(runs) == 0 {
			continue
		}
		fails := sumInt(runs, func(x *runResult) int { return x.Failures })
		lr := sumInt(runs, func(x *runResult) int { return x.LoaderRetries })
		all := collect(runs, func(x *runResult) float64 { return secs(x.AllServedMs) })
		txt := fmt.Sprintf("**TFTP: dnsmasq's limit of 50 transfers.** %d PCs switched on within %.0f s, rendered configuration: %d of %d clients failed to get the loader (%d TFTP retransmissions; last client done after %s s). ",
			n, o.Spread, fails, n*len(runs), lr, sf(all))
		if fails > 0 {
			to, err := time.ParseDuration(o.TFTPTimeout)
			if err == nil {
				total, t := time.Duration(0), to
				for i := 0; i <= o.TFTPRetries; i++ {
					total, t = total+t, min(2*t, 8*time.Second)
				}
				txt += fmt.Sprintf("Failed clients sent %d read requests over %.0f s without an answer: on a real PC, \"PXE-E32: TFTP open timeout\". ", o.TFTPRetries+1, total.Seconds())
			}
		}
		dup := sumInt(runs, func(x *runResult) int { return x.DnsmasqLog["tftpSent"] - x.Served })
		txt += fmt.Sprintf("dnsmasq serves at most 50 TFTP transfers at once (`tftp-max`, which the renderer does not set) and does not read port 69 at all while at the limit (its source: \"not listening on the server socket when too many transfers are in progress\"); read requests queue and overflow the socket buffer (UDP drops in the table), the clients retransmit, and requests that dnsmasq reads only after their client already has the file start transfers of their own (dnsmasq logged %d more completed loader transfers than clients served), which take slots too.", dup)
		if t, ok := med("spread-tftp-max", n, func(x *runResult) float64 { return secs(x.AllServedMs) }); ok {
			f := sumInt(r.runs("spread-tftp-max", "http", n), func(x *runResult) int { return x.Failures })
			txt += fmt.Sprintf(" With `tftp-max=%d`: %d failures, all served after %s s.", 2*n, f, sf(t))
		}
		if t, ok := med("spread-tftp-4s", n, func(x *runResult) float64 { return secs(x.AllServedMs) }); ok {
			f := sumInt(r.runs("spread-tftp-4s", "http", n), func(x *runResult) int { return x.Failures })
			txt += fmt.Sprintf(" With clients that wait 4 s before retransmitting: %d failures, all served after %s s.", f, sf(t))
		}
		out = append(out, txt)
	}
	for _, n := range o.CompareN {
		t := r.runs("compare", "tftp", n)
		h := r.runs("compare", "http", n)
		if len(t) == 0 || len(h) == 0 || n < 2 {
			continue
		}
		cpu := collect(t, func(x *runResult) float64 { return x.CPU["dnsmasq"] })
		win := collect(t, func(x *runResult) float64 { return secs(payloadWindow(x)) })
		hw := collect(h, func(x *runResult) float64 { return secs(payloadWindow(x)) })
		out = append(out, fmt.Sprintf("**Why TFTP loses.** Kernel and initrd for %d clients over TFTP: %s s, of which dnsmasq (single-threaded, one block in flight per client) spent %s s on a CPU — so even with the load generator on other machines TFTP could not beat %.1f s, %.0f× the HTTP room time of %s s. HTTP uses sendfile and both cores.", n, sf(win), sf(cpu), cpu.Med, cpu.Med/hw.Med, sf(hw)))
	}
	for _, n := range o.NologN {
		f := func(kind string) (dhcp, cpu, all spread, ok bool) {
			runs := r.runs(kind, "http", n)
			if len(runs) == 0 {
				return
			}
			return collect(runs, func(x *runResult) float64 { return x.DHCP.P50 }), collect(runs, func(x *runResult) float64 { return x.CPU["dnsmasq"] }),
				collect(runs, func(x *runResult) float64 { return secs(x.AllServedMs) }), true
		}
		d0, c0, a0, ok0 := f("storm")
		d1, c1, a1, ok1 := f("no-log-dhcp")
		if !ok0 || !ok1 {
			continue
		}
		out = append(out, fmt.Sprintf("**log-dhcp** (%.0f log lines per client). N=%d with it: DHCP p50 %s ms, dnsmasq CPU %s s, all served after %s s; without it (%d run): %s ms, %s s, %s s.",
			float64(sumInt(r.runs("storm", "http", n), func(x *runResult) int { return x.DnsmasqLogLines }))/float64(n*len(r.runs("storm", "http", n))),
			n, sf(d0), sf(c0), sf(a0), len(r.runs("no-log-dhcp", "http", n)), sf(d1), sf(c1), sf(a1)))
	}
	return out
}

func rmemDefault() string {
	b, err := os.ReadFile("/proc/sys/net/core/rmem_default")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b)) + " bytes"
}

// tuningSection is the side-by-side of the boot server's storm tuning and the defaults.
func (r *report) tuningSection(p func(string, ...any)) {
	o := r.Options
	if o.Tuning != "both" {
		return
	}
	p("## The boot server's storm tuning vs the defaults, side by side")
	p("")
	p("*storm*: the boot server's tuning (`boot/storm`) — the sysctls as `overtime bootserver run` sets them at start (%s) and the configuration as rendered (`tftp-max=` twice the hosts, at least 1000, `dhcp-lease-max=` hosts plus range; dnsmasq with an open-file limit of %d, nice %d, logging into a %d KiB pipe). *storm-defaults*: the same storm with the kernel's defaults (%s) and those two lines left out (dnsmasq's defaults: 50 TFTP transfers, 1000 leases), dnsmasq with systemd's default open-file limit for a service (1024), the nice value it inherits and a 64 KiB log pipe. The two alternate within every repetition, and which goes first alternates too. The sysctls are host-wide (Linux 6.x shows net.core.rmem_* read-only inside a network namespace, and the ARP table's limits exist only in the host's), so each run sets them on the host; the host's values are put back at the end.",
		sysctlList(o.Sysctls, false), storm.NoFile, storm.DnsmasqNice, storm.LogPipe>>10, sysctlList(o.Sysctls, true))
	p("")
	p("Per run: median [min–max]. *drops* are the drops column of /proc/net/udp for the socket (packets the kernel discarded because the socket's receive buffer was full): dnsmasq's DHCP (:67) and TFTP (:69) sockets, and the load generator's one DHCP socket (:68, SO_RCVBUFFORCE 8 MiB, so that the benchmark's own receive side is not what drops). *ARP table full*: the kernel's count of refused neighbour entries (host-wide, so other work on the machine counts too).")
	p("")
	p("| N | tuning | all served (s) | failures | DHCP retransmissions | TFTP retransmissions | drops dnsmasq :67 | drops dnsmasq :69 | drops load generator :68 | ARP table full | neighbours (server ns) | CPU dnsmasq (s) | dnsmasq waiting for a CPU (s) | CPU HTTP server (s) | CPU load generator (s) |")
	p("|---:|---|---|---:|---|---|---|---|---|---|---|---|---|---|---|")
	for _, n := range o.StormN {
		for _, k := range []string{"storm-defaults", "storm"} {
			runs := r.runs(k, "http", n)
			if len(runs) == 0 {
				continue
			}
			name := "boot server"
			if isDefaults(k) {
				name = "defaults"
			}
			f := func(g func(*runResult) float64) string { return sf(collect(runs, g)) }
			p("| %d | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n, name,
				f(func(x *runResult) float64 { return secs(x.AllServedMs) }),
				sumInt(runs, func(x *runResult) int { return x.Failures }),
				f(func(x *runResult) float64 { return float64(x.DHCPRetries) }),
				f(func(x *runResult) float64 { return float64(x.LoaderRetries) }),
				f(func(x *runResult) float64 { return float64(x.SocketDrops["dnsmasq:67"]) }),
				f(func(x *runResult) float64 { return float64(x.SocketDrops["dnsmasq:69"]) }),
				f(func(x *runResult) float64 { return float64(x.SocketDrops["loadgen:68"]) }),
				f(func(x *runResult) float64 { return float64(x.KernelNet["arp_table_fulls"]) }),
				f(func(x *runResult) float64 { return float64(x.Neighbours["server"]) }),
				f(func(x *runResult) float64 { return x.CPU["dnsmasq"] }),
				f(func(x *runResult) float64 { return x.DnsmasqRunDelay }),
				f(func(x *runResult) float64 { return x.CPU["http"] }),
				f(func(x *runResult) float64 { return x.CPU["loadgen"] }))
		}
	}
	p("")
}

func sysctlList(l []storm.Sysctl, defaults bool) string {
	var out []string
	for _, s := range l {
		v := s.Value
		if defaults {
			v = s.Default
		}
		out = append(out, fmt.Sprintf("%s=%d", s.Key, v))
	}
	return strings.Join(out, ", ")
}

// tuningFindings compares the two, per room size, in this run's numbers.
func (r *report) tuningFindings() []string {
	if r.Options.Tuning != "both" {
		return nil
	}
	var parts []string
	for _, n := range r.Options.StormN {
		d, t := r.runs("storm-defaults", "http", n), r.runs("storm", "http", n)
		if len(d) == 0 || len(t) == 0 {
			continue
		}
		one := func(runs []*runResult) string {
			return fmt.Sprintf("all served after %s s, %d failures in %d runs, %s DHCP retransmissions and %s drops at dnsmasq's DHCP socket per run",
				sf(collect(runs, func(x *runResult) float64 { return secs(x.AllServedMs) })), sumInt(runs, func(x *runResult) int { return x.Failures }), len(runs),
				sf(collect(runs, func(x *runResult) float64 { return float64(x.DHCPRetries) })),
				sf(collect(runs, func(x *runResult) float64 { return float64(x.SocketDrops["dnsmasq:67"]) })))
		}
		parts = append(parts, fmt.Sprintf("N=%d: defaults %s; boot server's tuning %s", n, one(d), one(t)))
	}
	if len(parts) == 0 {
		return nil
	}
	return []string{"**The boot server's storm tuning (boot/storm).** " + strings.Join(parts, ". ") + ". " +
		"With failures, *all served* is when the last failing client gave up (its DHCP or TFTP deadline), not a time to serve the room. " +
		"Where a room's DISCOVERs and REQUESTs fit into dnsmasq's socket and dnsmasq gets a CPU when a packet arrives, no client waits for a PXE retransmission, and the all-served time is what the servers need for kernel and initrd over HTTP " +
		"(CPU of the HTTP server plus the load generator per run, on the same cores, in the table)."}
}
