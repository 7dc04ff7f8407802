package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/boot/storm"
	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The network: a server namespace with the boot server's address on a bridge (dnsmasq's
// interface=), and a client namespace joined to the bridge by one veth pair. The client
// end has no address of its own: the load generator adds each leased address to it, and
// every simulated PC does its TFTP and HTTP from its own leased address.
//
//	[server ns] dnsmasq, HTTP server  -- br0 10.20.0.1/16 -- veth --  eth0 [client ns] load generator
const (
	bridgeName = "br0"
	serverIP   = "10.20.0.1"
	serverCIDR = "10.20.0.1/16"
	subnet     = "10.20.0.0/16"
	rangeFrom  = "10.20.64.1"
	rangeTo    = "10.20.127.254"
	clientIf   = "eth0"
)

type envOptions struct {
	N           int
	Addressing  string   // "dynamic": hosts without IP get range addresses; "static": the directory's IPs
	SrvDir      string   // TFTP root, also the HTTP root (images/...)
	HTTPCmd     string   // "" for the built-in server; else a command template (see -http-cmd)
	HTTPPort    int      //
	LogDHCP     bool     // keep the rendered log-dhcp line
	DnsmasqOpts []string // extra lines appended to the rendered main configuration
	LogDir      string   // dnsmasq's log of the run goes here ("" : discarded)
	RunName     string
	LDAPRelay   string // when set: relay 127.0.0.1:389 of the server namespace to this host address
	Defaults    bool   // leave the storm options (boot/storm) out of the rendered configuration
}

type env struct {
	opt      envOptions
	srv, cli *netns.NS
	site     *model.Site
	bs       *model.BootServer
	hosts    []model.Host
	work     string
	conf     []byte

	dnsmasq   *exec.Cmd
	dnsDone   chan struct{}
	logStats  *logCounter
	httpd     *exec.Cmd
	httpdDone chan struct{}
	httpdErr  bytes.Buffer
	relay     *relay
}

// benchSite is the synthetic site of n hosts, all on one boot server in full DHCP mode.
func benchSite(n int, addressing string, port int) (*model.Site, *model.BootServer, error) {
	pools := min((n+24)/25, 20) // synth puts 20 pools on one boot server
	s := synth.Site(n, max(pools, 1), 1)
	if len(s.BootServers) != 1 {
		return nil, nil, fmt.Errorf("synthetic site has %d boot servers", len(s.BootServers))
	}
	bs := &s.BootServers[0]
	bs.IP, bs.Subnet, bs.Interface = serverIP, subnet, bridgeName
	bs.HTTPURL = fmt.Sprintf("http://%s:%d", serverIP, port)
	bs.RangeFrom, bs.RangeTo = rangeFrom, rangeTo
	for i := range s.Hosts {
		switch addressing {
		case "dynamic":
			s.Hosts[i].IP = ""
		case "static":
			s.Hosts[i].IP = fmt.Sprintf("10.20.%d.%d", 1+i/250, 1+i%250)
		default:
			return nil, nil, fmt.Errorf("addressing %q: dynamic or static", addressing)
		}
	}
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	return s, bs, nil
}

// renderDnsmasq writes the main configuration and hosts file with the project's renderer.
func renderDnsmasq(s *model.Site, bs *model.BootServer, hostsFile, tftpRoot string) (conf, hosts []byte, err error) {
	d := render.Dnsmasq{Site: s, Server: bs, HostsFile: hostsFile, TFTPRoot: tftpRoot}
	var c, h bytes.Buffer
	if err := d.Config(&c); err != nil {
		return nil, nil, err
	}
	if err := d.Hosts(&h); err != nil {
		return nil, nil, err
	}
	return c.Bytes(), h.Bytes(), nil
}

// startEnv builds the namespaces and starts dnsmasq and the HTTP server. On error,
// everything already started is torn down.
func startEnv(opt envOptions) (e *env, err error) {
	e = &env{opt: opt}
	defer func() {
		if err != nil {
			e.close()
			e = nil
		}
	}()
	e.site, e.bs, err = benchSite(opt.N, opt.Addressing, opt.HTTPPort)
	if err != nil {
		return e, err
	}
	for i := range e.site.Hosts {
		if e.site.HostBootServer(&e.site.Hosts[i]) == e.bs.Name {
			e.hosts = append(e.hosts, e.site.Hosts[i])
		}
	}
	if len(e.hosts) != opt.N {
		return e, fmt.Errorf("%d of %d hosts on boot server %s", len(e.hosts), opt.N, e.bs.Name)
	}
	if e.work, err = os.MkdirTemp("", "bootstorm-run-"); err != nil {
		return e, err
	}
	reaperTell("add", "dir", e.work)
	// Readable as for a dnsmasq running as its own user (here it runs as root, below).
	if err := os.Chmod(e.work, 0o755); err != nil {
		return e, err
	}
	hostsFile, confFile := filepath.Join(e.work, "dnsmasq.hosts"), filepath.Join(e.work, "dnsmasq.conf")
	conf, hosts, err := renderDnsmasq(e.site, e.bs, hostsFile, opt.SrvDir)
	if err != nil {
		return e, fmt.Errorf("render: %w", err)
	}
	if !opt.LogDHCP {
		conf = bytes.Replace(conf, []byte("\nlog-dhcp\n"), []byte("\n# log-dhcp: left out by bootstorm -log-dhcp=false\n"), 1)
	}
	if opt.Defaults {
		conf = revertStormOptions(conf)
	}
	if len(opt.DnsmasqOpts) > 0 {
		conf = append(conf, "\n# Added by bootstorm -dnsmasq-opt:\n"...)
		for _, o := range opt.DnsmasqOpts {
			conf = append(conf, o+"\n"...)
		}
	}
	e.conf = conf
	if err := os.WriteFile(confFile, conf, 0o644); err != nil {
		return e, err
	}
	if err := os.WriteFile(hostsFile, hosts, 0o644); err != nil {
		return e, err
	}

	pfx := fmt.Sprintf("bst%d", os.Getpid())
	if e.srv, err = netns.New(pfx + "s"); err != nil {
		return e, err
	}
	reaperTell("add", "ns", e.srv.Name)
	if e.cli, err = netns.New(pfx + "c"); err != nil {
		return e, err
	}
	reaperTell("add", "ns", e.cli.Name)
	if err := e.srv.AddBridge(bridgeName, serverCIDR); err != nil {
		return e, err
	}
	if err := e.srv.AddVeth("vc0", bridgeName, e.cli, clientIf, ""); err != nil {
		return e, err
	}
	if err := e.startDnsmasq(confFile); err != nil {
		return e, err
	}
	if opt.LDAPRelay != "" {
		if e.relay, err = startRelay(e.srv, "127.0.0.1:389", opt.LDAPRelay); err != nil {
			return e, fmt.Errorf("ldap relay: %w", err)
		}
	}
	if err := e.startHTTP(); err != nil {
		return e, err
	}
	return e, nil
}

// logCounter copies dnsmasq's log to a file and counts the lines that matter.
type logCounter struct {
	mu     sync.Mutex
	counts map[string]int
	lines  int
	ready  chan struct{}
	once   sync.Once
	tail   []string // the last lines, for error messages
}

var logPatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{"DHCPDISCOVER", regexp.MustCompile(`DHCPDISCOVER\(`)},
	{"DHCPOFFER", regexp.MustCompile(`DHCPOFFER\(`)},
	{"DHCPREQUEST", regexp.MustCompile(`DHCPREQUEST\(`)},
	{"DHCPACK", regexp.MustCompile(`DHCPACK\(`)},
	{"DHCPNAK", regexp.MustCompile(`DHCPNAK\(`)},
	{"tftpSent", regexp.MustCompile(`dnsmasq-tftp.*: sent `)},
	{"tftpError", regexp.MustCompile(`dnsmasq-tftp.*(failed|error|cannot|too many|not found)`)},
	{"tftpMax", regexp.MustCompile(`(?i)max.*tftp|tftp.*max|too many`)},
	{"warning", regexp.MustCompile(`(?i)warning|no address range|lease-max|no free`)},
}

func (l *logCounter) scan(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if w != nil {
			fmt.Fprintln(w, line)
		}
		l.mu.Lock()
		l.lines++
		for _, p := range logPatterns {
			if p.re.MatchString(line) {
				l.counts[p.name]++
			}
		}
		l.tail = append(l.tail, line)
		if len(l.tail) > 20 {
			l.tail = l.tail[1:]
		}
		l.mu.Unlock()
		if strings.Contains(line, "TFTP root is") {
			l.once.Do(func() { close(l.ready) })
		}
	}
}

func (l *logCounter) snapshot() (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.counts {
		out[k] = v
	}
	return out, l.lines
}

func (l *logCounter) lastLines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.tail, "\n")
}

func (e *env) startDnsmasq(confFile string) error {
	args := []string{"--keep-in-foreground", "--conf-file=" + confFile,
		"--dhcp-leasefile=" + filepath.Join(e.work, "dnsmasq.leases"),
		"--pid-file=" + filepath.Join(e.work, "dnsmasq.pid"),
		"--log-facility=-",
		// As root: dnsmasq would otherwise switch to its own user and group, and a change of
		// credentials clears the parent-death signal, so a killed benchmark would leave
		// it running. Nothing measured depends on the user.
		"--user=root", "--group=root"}
	// The open-file (soft) limit dnsmasq gets: the boot server's (storm.NoFile, or the
	// hard limit where that is lower), or systemd's default soft limit for a service (1024)
	// in a -defaults run. prlimit execs in place.
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	soft := min(uint64(storm.NoFile), rl.Max)
	if e.opt.Defaults {
		soft = 1024
	}
	nofile := fmt.Sprintf("--nofile=%d:", soft)
	cmd := e.srv.Command("prlimit", append([]string{nofile, "--", "dnsmasq"}, args...)...)
	cmd.SysProcAttr = childAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if f, ok := stderr.(*os.File); ok && !e.opt.Defaults {
		// The boot server's log pipe (storm.LogPipe); Go's default is 64 KiB.
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, storm.LogPipe); err != nil {
			return fmt.Errorf("log pipe: %w", err)
		}
	}
	var logw io.Writer
	var logf *os.File
	if e.opt.LogDir != "" {
		if logf, err = os.Create(filepath.Join(e.opt.LogDir, e.opt.RunName+".dnsmasq.log")); err != nil {
			return err
		}
		logw = bufio.NewWriterSize(logf, 256<<10)
	}
	e.logStats = &logCounter{counts: map[string]int{}, ready: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dnsmasq: %w", err)
	}
	e.dnsmasq, e.dnsDone = cmd, make(chan struct{})
	if !e.opt.Defaults {
		// As the boot server runs it (storm.DnsmasqNice).
		if err := unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, storm.DnsmasqNice); err != nil {
			return fmt.Errorf("dnsmasq priority: %w", err)
		}
	}
	go func() {
		e.logStats.scan(stderr, logw)
		if logf != nil {
			if bw, ok := logw.(*bufio.Writer); ok {
				_ = bw.Flush()
			}
			_ = logf.Close()
		}
		_ = cmd.Wait()
		close(e.dnsDone)
	}()
	select {
	case <-e.logStats.ready:
		return nil
	case <-e.dnsDone:
		return fmt.Errorf("dnsmasq exited at start: %s", e.logStats.lastLines())
	case <-time.After(20 * time.Second):
		return fmt.Errorf("dnsmasq not ready after 20 s: %s", e.logStats.lastLines())
	}
}

// startHTTP starts the built-in server or the -http-cmd command in the server namespace.
func (e *env) startHTTP() error {
	listen := fmt.Sprintf("%s:%d", serverIP, e.opt.HTTPPort)
	var cmd *exec.Cmd
	builtin := e.opt.HTTPCmd == ""
	if builtin {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd = e.srv.Command(self)
		cmd.Env = append(os.Environ(), "BOOTSTORM_ROLE=httpd", "BOOTSTORM_ROOT="+e.opt.SrvDir, "BOOTSTORM_LISTEN="+listen)
	} else {
		r := strings.NewReplacer("{listen}", listen, "{ip}", serverIP, "{port}", strconv.Itoa(e.opt.HTTPPort),
			"{root}", e.opt.SrvDir, "{images}", filepath.Join(e.opt.SrvDir, "images"))
		args := strings.Fields(r.Replace(e.opt.HTTPCmd))
		cmd = e.srv.Command(args[0], args[1:]...)
	}
	cmd.SysProcAttr = childAttr()
	cmd.Stderr = &e.httpdErr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	e.httpd, e.httpdDone = cmd, make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			if builtin && sc.Text() == "ready" {
				once.Do(func() { close(ready) })
			}
		}
		_ = cmd.Wait()
		close(e.httpdDone)
	}()
	if builtin {
		select {
		case <-ready:
			return nil
		case <-e.httpdDone:
			return fmt.Errorf("http server exited at start: %s", e.httpdErr.String())
		case <-time.After(20 * time.Second):
			return fmt.Errorf("http server not ready after 20 s")
		}
	}
	// Any other server: ready when it answers HTTP at all, asked from inside the server
	// namespace (the client side has no address before its first lease).
	return e.waitHTTP(60 * time.Second)
}

func (e *env) waitHTTP(limit time.Duration) error {
	cl := e.srv.HTTPClient()
	cl.Timeout = 2 * time.Second
	end := time.Now().Add(limit)
	delay := 20 * time.Millisecond
	url := fmt.Sprintf("http://%s:%d/", serverIP, e.opt.HTTPPort)
	for {
		resp, err := cl.Head(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-e.httpdDone:
			return fmt.Errorf("http server exited at start: %s", e.httpdErr.String())
		default:
		}
		if time.Now().After(end) {
			return fmt.Errorf("http server not answering after %s: %v", limit, err)
		}
		time.Sleep(delay) // polling a server we do not control; no readiness signal
		delay = min(2*delay, 500*time.Millisecond)
	}
}

func stopCmd(cmd *exec.Cmd, done chan struct{}) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// close stops the servers and deletes the namespaces and the run's files. Idempotent.
func (e *env) close() {
	stopCmd(e.httpd, e.httpdDone)
	stopCmd(e.dnsmasq, e.dnsDone)
	e.httpd, e.dnsmasq = nil, nil
	var errs []error
	if e.relay != nil {
		errs = append(errs, e.relay.Close())
		e.relay = nil
	}
	for _, n := range []*netns.NS{e.cli, e.srv} {
		if n != nil {
			err := n.Close()
			if err == nil {
				reaperTell("done", "ns", n.Name)
			}
			errs = append(errs, err)
		}
	}
	e.cli, e.srv = nil, nil
	if e.work != "" {
		err := os.RemoveAll(e.work)
		if err == nil {
			reaperTell("done", "dir", e.work)
		}
		errs = append(errs, err)
		e.work = ""
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "bootstorm: cleanup: %v\n", err)
	}
}

// sweepStale deletes namespaces left by an earlier run that was killed before it could
// clean up (its children died with it through Pdeathsig; the namespace mounts did not).
func sweepStale() {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	re := regexp.MustCompile(`^bst(\d+)[sc]-[0-9a-f]+$`)
	for _, ent := range ents {
		m := re.FindStringSubmatch(ent.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		n := &netns.NS{Name: ent.Name()}
		if err := n.Close(); err == nil {
			fmt.Fprintf(os.Stderr, "bootstorm: removed namespace %s of dead run %d\n", ent.Name(), pid)
		}
	}
}

// startLoadgen starts the load generator in the client namespace and hands it cfg; it
// returns once the generator is ready to go.
type loadgen struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

func (e *env) startLoadgen(ctx context.Context, cfg lgConfig) (*loadgen, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	lg := &loadgen{}
	lg.cmd = e.cli.CommandContext(ctx, self)
	lg.cmd.Env = append(os.Environ(), "BOOTSTORM_ROLE=loadgen")
	lg.cmd.SysProcAttr = childAttr()
	lg.cmd.Stderr = &lg.stderr
	if lg.stdin, err = lg.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := lg.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	lg.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := lg.cmd.Start(); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(cfg)
	if _, err := lg.stdin.Write(append(b, '\n')); err != nil {
		lg.kill()
		return nil, err
	}
	l, err := lg.out.ReadString('\n')
	if err != nil || strings.TrimSpace(l) != "ready" {
		lg.kill()
		return nil, fmt.Errorf("load generator not ready: %q %v: %s", l, err, lg.stderr.String())
	}
	return lg, nil
}

func (lg *loadgen) kill() {
	_ = lg.cmd.Process.Kill()
	_ = lg.cmd.Wait()
}
