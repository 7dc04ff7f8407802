package bootserver

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The boot server against the real site manager (slapd + API) and the real dnsmasq in a
// network namespace, with busybox's DHCP and TFTP clients in a second one.

type lab struct {
	t              *testing.T
	server, client *netns.NS
}

func newLab(t *testing.T) *lab {
	t.Helper()
	needs.Servers(t, "root (network namespaces)", "dnsmasq", "busybox (Debian package busybox-static)")
	server, err := netns.New("ot-bs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	client, err := netns.New("ot-bsc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	if err := server.AddBridge("br0", "10.20.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := server.AddVeth("vc0", "br0", client, "eth0", ""); err != nil {
		t.Fatal(err)
	}
	return &lab{t: t, server: server, client: client}
}

var (
	leaseRE   = regexp.MustCompile(`lease of (\d+\.\d+\.\d+\.\d+) obtained`)
	optionsRE = regexp.MustCompile(`(?m)^lease options: (.*)$`)
)

// dhcp asks for a lease as the PC with this MAC and returns the address offered.
func (l *lab) dhcp(mac string) (string, error) {
	ip, _, err := l.lease(mac)
	return ip, err
}

// leaseScript is udhcpc's script: on a lease it prints the options a PC configures its
// name service from (busybox passes them in the environment).
const leaseScript = `#!/bin/sh
[ "$1" = bound ] && echo "lease options: router=$router dns=$dns domain=$domain search=$search"
exit 0
`

// lease asks for a lease as the PC with this MAC and returns the address offered and
// the router and name service options of the lease, as "router=… dns=… domain=… search=…".
// Like systemd-networkd and NetworkManager it asks for the search list (option 119),
// which dnsmasq sends only when asked.
func (l *lab) lease(mac string) (string, string, error) {
	script := filepath.Join(l.t.TempDir(), "udhcpc.script")
	if err := os.WriteFile(script, []byte(leaseScript), 0o755); err != nil {
		return "", "", err
	}
	if err := l.client.IP("link", "set", "eth0", "address", mac); err != nil {
		return "", "", err
	}
	out, err := l.client.Command("busybox", "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "4", "-T", "1", "-O", "search", "-s", script).CombinedOutput()
	m, o := leaseRE.FindStringSubmatch(string(out)), optionsRE.FindStringSubmatch(string(out))
	if err != nil || m == nil || o == nil {
		return "", "", fmt.Errorf("udhcpc as %s: %v: %s", mac, err, out)
	}
	return m[1], o[1], nil
}

// syncLog collects the boot server's log for assertions.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func pidOf(t *testing.T, dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "dnsmasq.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func TestBootServer(t *testing.T) {
	l := newLab(t)
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	admin := env.Client("admin", testenv.AdminPassword)
	var bs model.BootServer
	if _, err := admin.Get("/api/v1/bootservers/bs1", nil, &bs); err != nil {
		t.Fatal(err)
	}
	bs.Interface = "br0"
	bs.DNSServers, bs.Domain = []string{"10.20.0.53"}, "lab.example.org"
	if err := admin.Send("PUT", "/api/v1/bootservers/bs1", nil, bs, nil); err != nil {
		t.Fatal(err)
	}

	// Production permissions: dnsmasq re-reads the hosts file after dropping root.
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	state, tftp := filepath.Join(dir, "state"), filepath.Join(dir, "tftp")
	exportsFile := filepath.Join(dir, "etc", "exports.d", "overtime.exports")
	exportfsCalls := filepath.Join(dir, "exportfs.calls")
	// The kernel NFS server cannot run here (no nfsd): exportfs is a recorder.
	exportfs := filepath.Join(dir, "exportfs")
	if err := os.WriteFile(exportfs, []byte("#!/bin/sh\necho \"$@\" >> "+exportfsCalls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	logs := &syncLog{}
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Config{
				Client: env.Client("dave", "dave-secret"), // a viewer is enough
				Name:   "bs1", StateDir: state, TFTPRoot: tftp, Refresh: 100 * time.Millisecond,
				NFS: NFSKernel, ExportRoot: "/srv/overtime/images", ExportsFile: exportsFile, Exportfs: exportfs,
				Clients: "10.20.0.0/24", Command: l.server.Command,
				Log: slog.New(slog.NewTextHandler(logs, nil)),
			})
		}()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	stop := start()
	running := func() bool {
		pid := pidOf(t, state)
		return pid > 0 && exec.Command("kill", "-0", strconv.Itoa(pid)).Run() == nil
	}
	bootlab.Eventually(t, "dnsmasq running", 20*time.Second, running)

	// Known PCs get their address, with the router and name service of the boot server;
	// the TFTP root holds the loaders.
	bootlab.Eventually(t, "pc-a01 leased", 20*time.Second, func() bool { ip, _ := l.dhcp("52:54:00:0a:00:01"); return ip == "10.20.0.11" })
	if _, opts, err := l.lease("52:54:00:0a:00:01"); err != nil || opts != "router=10.20.0.254 dns=10.20.0.53 domain=lab.example.org search=lab.example.org" {
		t.Fatalf("lease options %q, %v", opts, err)
	}
	if err := l.client.IP("addr", "add", "10.20.0.11/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(dir, "got")
	if err := l.client.Run("busybox", "tftp", "-g", "-r", "lpxelinux.0", "-l", got, "10.20.0.1"); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(DefaultLoaders["lpxelinux.0"])
	if b, _ := os.ReadFile(got); !bytes.Equal(b, want) {
		t.Fatalf("TFTP served %d bytes of lpxelinux.0, want %d", len(b), len(want))
	}
	// Exports installed and applied.
	if b, err := os.ReadFile(exportsFile); err != nil || !strings.Contains(string(b), "/srv/overtime/images/debian-desktop/2026.11.20-1 10.20.0.0/24(ro") {
		t.Fatalf("exports file: %v\n%s", err, b)
	}
	if b, _ := os.ReadFile(exportfsCalls); strings.TrimSpace(string(b)) != "-ra" {
		t.Fatalf("exportfs calls: %q", b)
	}

	// A new PC reaches dnsmasq by SIGHUP: same process, old lease kept.
	pid := pidOf(t, state)
	if err := admin.Send("PUT", "/api/v1/hosts/pc-a09", nil, model.Host{Name: "pc-a09", MAC: "52:54:00:0a:00:09", IP: "10.20.0.19", Pool: "lab-a"}, nil); err != nil {
		t.Fatal(err)
	}
	bootlab.Eventually(t, "pc-a09 leased", 20*time.Second, func() bool { ip, _ := l.dhcp("52:54:00:0a:00:09"); return ip == "10.20.0.19" })
	if p := pidOf(t, state); p != pid {
		t.Errorf("dnsmasq was restarted (pid %d -> %d) for a host change:\n%s", pid, p, logs.String())
	}
	if !strings.Contains(logs.String(), "SIGHUP") {
		t.Errorf("no SIGHUP logged:\n%s", logs.String())
	}
	leases := func() string { b, _ := os.ReadFile(filepath.Join(state, "dnsmasq.leases")); return string(b) }
	if !strings.Contains(leases(), "10.20.0.11") || !strings.Contains(leases(), "10.20.0.19") {
		t.Errorf("leases lost:\n%s", leases())
	}

	// A change of the main configuration restarts dnsmasq; the leases survive it.
	bs.RangeFrom, bs.RangeTo = "10.20.0.100", "10.20.0.150"
	bs.DNSServers, bs.Domain = []string{"192.0.2.53", "10.20.0.53"}, "cs.example.org"
	if err := admin.Send("PUT", "/api/v1/bootservers/bs1", nil, bs, nil); err != nil {
		t.Fatal(err)
	}
	bootlab.Eventually(t, "dnsmasq restarted", 20*time.Second, func() bool { p := pidOf(t, state); return p != pid && p != 0 && running() })
	bootlab.Eventually(t, "unknown PC leased from the new range", 20*time.Second, func() bool {
		ip, _ := l.dhcp("52:54:00:ff:00:01")
		return strings.HasPrefix(ip, "10.20.0.1") && len(ip) == len("10.20.0.100")
	})
	if !strings.Contains(leases(), "10.20.0.19") {
		t.Errorf("leases lost in the restart:\n%s", leases())
	}
	if _, opts, err := l.lease("52:54:00:0a:00:02"); err != nil || opts != "router=10.20.0.254 dns=192.0.2.53 10.20.0.53 domain=cs.example.org search=cs.example.org" {
		t.Errorf("lease options after the DNS change %q, %v", opts, err)
	}

	// The site manager goes away: the boot server says so once and keeps serving.
	env.HTTP.Close()
	bootlab.Eventually(t, "outage logged", 20*time.Second, func() bool { return strings.Contains(logs.String(), "site manager unreachable") })
	if ip, err := l.dhcp("52:54:00:0a:00:02"); err != nil || ip != "10.20.0.12" {
		t.Fatalf("no DHCP during the outage: %v %s", err, ip)
	}
	// ... also across its own restart.
	stop()
	if running() {
		t.Fatal("dnsmasq survived the boot server")
	}
	stop = start()
	defer stop()
	bootlab.Eventually(t, "dnsmasq running from the last good configuration", 20*time.Second, running)
	if ip, err := l.dhcp("52:54:00:0a:00:09"); err != nil || ip != "10.20.0.19" {
		t.Fatalf("no DHCP from the last good configuration: %v %s", err, ip)
	}
	if n := strings.Count(logs.String(), "site manager unreachable"); n != 2 {
		t.Errorf("outage logged %d times, want once per run:\n%s", n, logs.String())
	}
}

// Each boot server answers only the hosts assigned to it.
func TestBootServersSplitHosts(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	admin := env.Client("admin", testenv.AdminPassword)
	bs2 := model.BootServer{Name: "bs2", IP: "10.30.0.1", HTTPURL: "http://10.30.0.1:8080", DHCP: model.DHCPFull, Subnet: "10.30.0.0/24"}
	if err := admin.Send("PUT", "/api/v1/bootservers/bs2", nil, bs2, nil); err != nil {
		t.Fatal(err)
	}
	var pool model.Pool
	if _, err := admin.Get("/api/v1/pools/lab-b", nil, &pool); err != nil {
		t.Fatal(err)
	}
	pool.BootServer = "bs2"
	if err := admin.Send("PUT", "/api/v1/pools/lab-b", nil, pool, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{"bs1": {"pc-a01", "pc-b01"}, "bs2": {"pc-b01", "pc-a01"}} {
		c := Config{Client: env.Client("dave", "dave-secret"), Name: name, StateDir: "/x", TFTPRoot: "/y", NFS: NFSNone}
		if err := c.defaults(); err != nil {
			t.Fatal(err)
		}
		r, err := c.fetch()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.hosts), ","+want[0]+"\n") || strings.Contains(string(r.hosts), ","+want[1]+"\n") {
			t.Errorf("%s hosts file should hold %s and not %s:\n%s", name, want[0], want[1], r.hosts)
		}
	}
}

// A configuration dnsmasq rejects is never installed.
func TestCheckDnsmasqRejects(t *testing.T) {
	needs.Servers(t, "dnsmasq")
	c := Config{Client: nil, Name: "x", StateDir: t.TempDir(), TFTPRoot: "/y"}
	c.Client = nil
	var err error
	if c.Dnsmasq, err = findTool("", "dnsmasq", "dnsmasq-base"); err != nil {
		t.Fatal(err)
	}
	if err := c.checkDnsmasq([]byte("port=0\nno-such-option=1\n")); err == nil || !strings.Contains(err.Error(), "bad option at line 2") {
		t.Fatalf("bad configuration accepted: %v", err)
	}
	if err := c.checkDnsmasq([]byte("port=0\n")); err != nil {
		t.Fatalf("good configuration rejected: %v", err)
	}
}
