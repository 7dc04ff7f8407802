package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// The load generator runs as a child process inside the client namespace (the parent
// measures the servers' CPU around it). Protocol on stdin/stdout: the parent writes one
// JSON lgConfig line; the child prepares its sockets and prints "ready"; the parent
// writes "go" (the instant the room is switched on) and the child prints one JSON
// lgResult line when every client is served or has given up.

type fileSum struct {
	Path   string `json:"path"` // URL path below the HTTP base / TFTP file name
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

type lgConfig struct {
	Iface        string          `json:"iface"`
	MACs         []string        `json:"macs"`
	XIDBase      uint32          `json:"xidBase"`
	Payload      string          `json:"payload"` // "http" or "tftp": how kernel and initrd are fetched
	HTTPBase     string          `json:"httpBase"`
	Files        []fileSum       `json:"files"`      // kernel, initrd
	LoaderFile   string          `json:"loaderFile"` // local copy of the loader, to compare the bytes
	BlkSize      int             `json:"blkSize"`
	DHCPTimeouts []time.Duration `json:"dhcpTimeouts"`
	TFTPTimeout  time.Duration   `json:"tftpTimeout"`
	TFTPMaxTO    time.Duration   `json:"tftpMaxTimeout"`
	TFTPRetries  int             `json:"tftpRetries"`
	HTTPRetries  int             `json:"httpRetries"`
	DHCPDeadline time.Duration   `json:"dhcpDeadline"`
	TFTPDeadline time.Duration   `json:"tftpDeadline"` // the loader
	PayDeadline  time.Duration   `json:"payloadDeadline"`
	StartSpread  time.Duration   `json:"startSpread"` // 0: every client starts at once
	// StartSeed, when not 0, draws each client's power-on uniformly at random in
	// [0, StartSpread) from this seed (the agent's SwitchSpread: a random instant in the
	// window) instead of spacing them evenly.
	StartSeed uint64 `json:"startSeed,omitempty"`
	// BootScript: after the loader, fetch the per-host boot script as lpxelinux does,
	// GET {option 210}pxelinux.cfg/01-{mac with dashes}, rendered per request by the site
	// manager (measured as its own phase).
	BootScript bool `json:"bootScript,omitempty"`
}

type fileGot struct {
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

type clientResult struct {
	MAC        string `json:"mac"`
	IP         string `json:"ip,omitempty"`
	Bits       int    `json:"bits,omitempty"`
	ServerID   string `json:"serverId,omitempty"`
	NextServer string `json:"nextServer,omitempty"`
	BootFile   string `json:"bootFile,omitempty"`
	PathPrefix string `json:"pathPrefix,omitempty"`

	OK     bool   `json:"ok"`
	Failed string `json:"failed,omitempty"` // phase that failed: dhcp, addr, loader, script, payload
	Err    string `json:"err,omitempty"`

	// Phase durations and the client's total from its power-on, in ms; StartMs and EndMs
	// are counted from the instant of "go" (the room is switched on).
	StartMs   float64 `json:"startMs"`
	DHCPms    float64 `json:"dhcpMs"`
	LoaderMs  float64 `json:"loaderMs"`
	ScriptMs  float64 `json:"scriptMs,omitempty"`
	PayloadMs float64 `json:"payloadMs"`
	TotalMs   float64 `json:"totalMs"`
	EndMs     float64 `json:"endMs"`

	DHCPRetries    int    `json:"dhcpRetries"`
	LoaderRetries  int    `json:"loaderRetries"`
	PayloadRetries int    `json:"payloadRetries"`
	ScriptRetries  int    `json:"scriptRetries,omitempty"`
	TFTPDuplicates int    `json:"tftpDuplicates,omitempty"`
	ScriptBytes    int    `json:"scriptBytes,omitempty"`
	Script         string `json:"script,omitempty"` // the boot script itself, kept for the first client only

	LoaderSHA256 string    `json:"loaderSha256,omitempty"`
	LoaderBlk    int       `json:"loaderBlkSize,omitempty"`
	LoaderTSize  int64     `json:"loaderTSize,omitempty"`
	Got          []fileGot `json:"got,omitempty"`
}

type lgResult struct {
	Clients     []clientResult `json:"clients"`
	AllMs       float64        `json:"allMs"` // until the last client finished (served or failed)
	CPUSeconds  float64        `json:"cpuSeconds"`
	DHCPStray   int64          `json:"dhcpStray"`
	DHCPDropped int64          `json:"dhcpDropped"`
	// The client namespace, read by the generator itself before it closes its sockets:
	// UDP counters from "go" to the end, the drops at its DHCP socket (port 68) and its
	// IPv4 neighbour entries at the end.
	UDPDelta        map[string]int64 `json:"udpDelta"`
	DHCPSocketDrops int64            `json:"dhcpSocketDrops"`
	Neighbours      int              `json:"neighbours"`
	Err             string           `json:"err,omitempty"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func loadgenMain() {
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		fatalf("loadgen: read config: %v", err)
	}
	var cfg lgConfig
	if err := json.Unmarshal(line, &cfg); err != nil {
		fatalf("loadgen: config: %v", err)
	}
	if p := os.Getenv("BOOTSTORM_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			fatalf("loadgen: %v", err)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	res, err := runLoad(cfg, func() error {
		fmt.Println("ready")
		l, err := in.ReadString('\n')
		if err != nil || strings.TrimSpace(l) != "go" {
			return fmt.Errorf("no go: %q %v", l, err)
		}
		return nil
	})
	if err != nil {
		res.Err = err.Error()
	}
	if cpu, err := procCPU(os.Getpid()); err == nil {
		res.CPUSeconds = cpu.Seconds()
	}
	b, _ := json.Marshal(res)
	fmt.Printf("%s\n", b)
}

func runLoad(cfg lgConfig, ready func() error) (lgResult, error) {
	var res lgResult
	ifc, err := net.InterfaceByName(cfg.Iface)
	if err != nil {
		return res, err
	}
	adder, err := newAddrAdder(ifc.Index)
	if err != nil {
		return res, err
	}
	defer adder.Close()
	conn, err := listenDHCP(cfg.Iface)
	if err != nil {
		return res, fmt.Errorf("dhcp socket: %w", err)
	}
	macs := make([]net.HardwareAddr, len(cfg.MACs))
	for i, s := range cfg.MACs {
		if macs[i], err = net.ParseMAC(s); err != nil {
			return res, err
		}
	}
	loader, err := os.ReadFile(cfg.LoaderFile)
	if err != nil {
		return res, err
	}
	mux := newDHCPMux(conn, macs, cfg.XIDBase)
	go mux.run()
	defer conn.Close()

	if err := ready(); err != nil {
		return res, err
	}
	udp0, _ := udpCounters(os.Getpid())
	t0 := time.Now()
	res.Clients = make([]clientResult, len(macs))
	var wg sync.WaitGroup
	delays := startDelays(cfg.StartSpread, cfg.StartSeed, len(mux.list))
	for i, c := range mux.list {
		delay := delays[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.Clients[i] = bootOne(cfg, mux, c, adder, loader, t0, delay)
			if i > 0 {
				res.Clients[i].Script = ""
			}
		}()
	}
	wg.Wait()
	res.AllMs = ms(time.Since(t0))
	res.DHCPStray, res.DHCPDropped = mux.stray.Load(), mux.dropped.Load()
	udp1, _ := udpCounters(os.Getpid())
	res.UDPDelta = delta(udp0, udp1)
	res.DHCPSocketDrops = socketDrops(os.Getpid())[68]
	res.Neighbours = neighbours(os.Getpid())
	return res, nil
}

// startDelays are the clients' power-on times after the room's "go": all 0 without a
// spread; with a spread and seed 0, evenly spaced in a fixed shuffled order (the same
// every run); with a seed, uniformly random in [0, spread) (the agent's SwitchSpread).
func startDelays(spread time.Duration, seed uint64, n int) []time.Duration {
	d := make([]time.Duration, n)
	if spread <= 0 || n < 2 {
		return d
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := range d {
		if seed != 0 {
			d[i] = time.Duration(rng.Int64N(int64(spread)))
		} else {
			d[i] = spread * time.Duration((i*7919)%n) / time.Duration(n-1)
		}
	}
	return d
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// bootOne is one PC from power-on to "kernel and initrd in memory".
func bootOne(cfg lgConfig, mux *dhcpMux, c *dhcpClient, adder *addrAdder, loader []byte, t0 time.Time, delay time.Duration) (r clientResult) {
	r.MAC = c.mac.String()
	if delay > 0 {
		time.Sleep(delay) // this PC's power-on: a simulated start time, not synchronisation
	}
	start := time.Now()
	r.StartMs = ms(start.Sub(t0))
	defer func() { r.TotalMs, r.EndMs = ms(time.Since(start)), ms(time.Since(t0)) }()
	fail := func(phase string, err error) clientResult {
		r.Failed, r.Err = phase, err.Error()
		return r
	}

	// DHCP.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DHCPDeadline)
	l, err := mux.lease(ctx, c, cfg.DHCPTimeouts, &r.DHCPRetries)
	cancel()
	r.DHCPms = ms(time.Since(start))
	if err != nil {
		return fail("dhcp", err)
	}
	r.IP, r.Bits, r.ServerID, r.NextServer = l.IP.String(), l.Bits, l.ServerID.String(), l.NextServer.String()
	r.BootFile, r.PathPrefix = l.BootFile, l.PathPrefix
	if err := adder.Add(l.IP, l.Bits); err != nil {
		return fail("addr", err)
	}

	// The loader over TFTP, as the PXE ROM fetches it.
	t1 := time.Now()
	topt := tftpOptions{BlkSize: cfg.BlkSize, Timeout: cfg.TFTPTimeout, MaxTimeout: cfg.TFTPMaxTO, MaxRetries: cfg.TFTPRetries}
	ctx, cancel = context.WithTimeout(context.Background(), cfg.TFTPDeadline)
	var got bytes.Buffer
	st, err := tftpGet(ctx, l.IP, l.NextServer, l.BootFile, topt, &got)
	cancel()
	r.LoaderMs = ms(time.Since(t1))
	r.LoaderRetries, r.TFTPDuplicates, r.LoaderBlk, r.LoaderTSize = st.Retries, st.Duplicates, st.BlkSize, st.TSize
	if err != nil {
		return fail("loader", err)
	}
	sum := sha256.Sum256(got.Bytes())
	r.LoaderSHA256 = hex.EncodeToString(sum[:])
	if !bytes.Equal(got.Bytes(), loader) {
		return fail("loader", fmt.Errorf("loader %s: got %d bytes that differ from %s (%d bytes)", l.BootFile, got.Len(), cfg.LoaderFile, len(loader)))
	}

	// The boot script, as lpxelinux fetches it from the path prefix (option 210).
	if cfg.BootScript {
		t := time.Now()
		b, err := fetchScript(cfg, l.IP, l.PathPrefix, c.mac, &r.ScriptRetries)
		r.ScriptMs, r.ScriptBytes, r.Script = ms(time.Since(t)), len(b), string(b)
		if err != nil {
			return fail("script", err)
		}
	}

	// Kernel and initrd: over HTTP as Overtime does, or over TFTP as a pure-TFTP setup.
	t2 := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), cfg.PayDeadline)
	defer cancel()
	switch cfg.Payload {
	case "http":
		err = fetchHTTP(ctx, cfg, l.IP, &r)
	case "tftp":
		for _, f := range cfg.Files {
			h := crc32.New(crcTable)
			st, err = tftpGet(ctx, l.IP, l.NextServer, f.Path, topt, h)
			r.PayloadRetries += st.Retries
			r.TFTPDuplicates += st.Duplicates
			r.Got = append(r.Got, fileGot{Size: st.Bytes, CRC32C: h.Sum32()})
			if err != nil {
				break
			}
		}
	default:
		err = fmt.Errorf("payload transport %q", cfg.Payload)
	}
	r.PayloadMs = ms(time.Since(t2))
	if err != nil {
		return fail("payload", err)
	}
	for i, f := range cfg.Files {
		if r.Got[i].Size != f.Size || r.Got[i].CRC32C != f.CRC32C {
			return fail("payload", fmt.Errorf("%s: got %d bytes crc32c %08x, want %d bytes %08x", f.Path, r.Got[i].Size, r.Got[i].CRC32C, f.Size, f.CRC32C))
		}
	}
	r.OK = true
	return r
}

// fetchHTTP gets kernel then initrd on one keep-alive connection from the leased
// address, as lpxelinux and iPXE do; a failed request is retried (counted) until the
// deadline.
func fetchHTTP(ctx context.Context, cfg lgConfig, local netip.Addr, r *clientResult) error {
	d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0)), Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, DisableCompression: true, MaxIdleConnsPerHost: 1, Proxy: nil}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	buf := make([]byte, 256<<10)
	r.Got = r.Got[:0]
	for _, f := range cfg.Files {
		var got fileGot
		var err error
		for attempt := 0; attempt <= cfg.HTTPRetries; attempt++ {
			if attempt > 0 {
				r.PayloadRetries++
			}
			got, err = httpGet(ctx, cl, strings.TrimSuffix(cfg.HTTPBase, "/")+"/"+f.Path, buf)
			if err == nil || ctx.Err() != nil {
				break
			}
		}
		r.Got = append(r.Got, got)
		if err != nil {
			return err
		}
	}
	return nil
}

// fetchScript gets pxelinux.cfg/01-MAC below the path prefix from the leased address on a
// connection of its own, retrying a failed request (counted) as fetchHTTP does. It
// returns the script; it must be this host's PXELINUX configuration.
func fetchScript(cfg lgConfig, local netip.Addr, prefix string, mac net.HardwareAddr, retries *int) ([]byte, error) {
	if !strings.HasPrefix(prefix, "http://") {
		return nil, fmt.Errorf("path prefix (option 210) %q is not an http:// URL", prefix)
	}
	url := prefix + "pxelinux.cfg/01-" + strings.ReplaceAll(mac.String(), ":", "-")
	ctx, cancel := context.WithTimeout(context.Background(), cfg.PayDeadline)
	defer cancel()
	d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0)), Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, DisableCompression: true, Proxy: nil}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	var err error
	for attempt := 0; attempt <= cfg.HTTPRetries; attempt++ {
		if attempt > 0 {
			*retries++
		}
		var b []byte
		b, err = func() ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return nil, err
			}
			resp, err := cl.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, b)
			}
			return b, nil
		}()
		if err == nil {
			// The script names the host it was rendered for ("... for host NAME (MAC)"):
			// a known PC got its own menu, not the unknown-MAC one.
			if !bytes.Contains(b, []byte("\nLABEL ")) || !bytes.Contains(b, []byte("("+mac.String()+")")) {
				return b, fmt.Errorf("GET %s: not this host's PXELINUX configuration: %.300q", url, b)
			}
			return b, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func httpGet(ctx context.Context, cl *http.Client, url string, buf []byte) (fileGot, error) {
	var got fileGot
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return got, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return got, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return got, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	h := crc32.New(crcTable)
	n, err := io.CopyBuffer(h, resp.Body, buf)
	got.Size, got.CRC32C = n, h.Sum32()
	if err != nil {
		return got, fmt.Errorf("GET %s: %w after %d bytes", url, err, n)
	}
	return got, nil
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
