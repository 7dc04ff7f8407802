package vmtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// DNSMasq is the dnsmasq binary (Debian package dnsmasq-base).
var DNSMasq = "/usr/sbin/dnsmasq"

// NetConfig describes a VM network.
type NetConfig struct {
	// Subnet is the first three octets of a /24, e.g. "10.77.0". The bridge (the server
	// side: DHCP, DNS, and whatever servers the test starts) gets Subnet.1; DHCP leases
	// come from Subnet.100-199.
	Subnet string
	// DHCP runs dnsmasq as DHCP server on the bridge (for VMs booting with ip=dhcp).
	DHCP bool
	// Hosts are DNS names dnsmasq answers (name -> IPv4), with Domain as search domain.
	Hosts  map[string]string
	Domain string
}

// Net is a network namespace with a bridge for VMs and, optionally, dnsmasq serving DHCP
// and DNS on it. AddTap makes a tap device per VM.
type Net struct {
	NS       *netns.NS
	Bridge   string
	ServerIP string // Subnet.1, the bridge's address

	mu   sync.Mutex
	taps int
	dir  string
}

// NewNet creates the namespace, the bridge and (cfg.DHCP) dnsmasq; everything is removed
// when the test ends.
func NewNet(t testing.TB, cfg NetConfig) *Net {
	t.Helper()
	needs.Servers(t, "root (network namespaces)", "QEMU")
	if cfg.Subnet == "" {
		t.Fatal("vmtest: NetConfig.Subnet is required")
	}
	ns, err := netns.New("ot-vm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("vmtest: %v", err)
		}
	})
	n := &Net{NS: ns, Bridge: "br0", ServerIP: cfg.Subnet + ".1", dir: t.TempDir()}
	if err := ns.AddBridge(n.Bridge, n.ServerIP+"/24"); err != nil {
		t.Fatal(err)
	}
	if cfg.DHCP {
		if err := n.startDNSMasq(t, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// AddTap creates a new tap device on the bridge and returns its name.
func (n *Net) AddTap(t testing.TB) string {
	t.Helper()
	n.mu.Lock()
	name := fmt.Sprintf("tap%d", n.taps)
	n.taps++
	n.mu.Unlock()
	if err := n.NS.AddTap(name, n.Bridge); err != nil {
		t.Fatal(err)
	}
	return name
}

// VMConfig is a Config with this network's namespace, a new tap and a random MAC.
func (n *Net) VMConfig(t testing.TB, name string) Config {
	t.Helper()
	return Config{Name: name, NS: n.NS, Tap: n.AddTap(t), MAC: RandomMAC()}
}

// startDNSMasq runs dnsmasq in the foreground in the namespace and waits (polling its
// log, with a deadline) until it has set up DHCP.
func (n *Net) startDNSMasq(t testing.TB, cfg NetConfig) error {
	logPath := filepath.Join(n.dir, "dnsmasq.log")
	args := []string{
		"--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--interface=" + n.Bridge, "--bind-interfaces",
		"--dhcp-range=" + cfg.Subnet + ".100," + cfg.Subnet + ".199,255.255.255.0,1h",
		"--dhcp-authoritative",
		// No ping of an address before offering it: the check waits up to 3 s per new
		// lease, longer than a guest's first DHCP timeout, and the subnet is private.
		"--no-ping",
		"--dhcp-leasefile=" + filepath.Join(n.dir, "leases"),
		"--pid-file=" + filepath.Join(n.dir, "dnsmasq.pid"),
		"--log-facility=" + logPath, "--log-dhcp",
		// root: the test directory is not readable for the user dnsmasq switches to.
		"--user=root",
	}
	if cfg.Domain != "" {
		args = append(args, "--domain="+cfg.Domain)
	}
	for name, ip := range cfg.Hosts {
		args = append(args, "--host-record="+name+","+ip)
	}
	cmd := n.NS.Command(DNSMasq, args...)
	var out bytes.Buffer
	var outMu sync.Mutex
	cmd.Stdout = lockedWriter{&outMu, &out}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("vmtest: dnsmasq: %w (Debian package dnsmasq-base)", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	readLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	var exited bool
	var waitErr error
	ok := poll.WaitEvery(10*time.Second, 50*time.Millisecond, func() bool {
		select {
		case waitErr = <-done:
			exited = true
			done <- waitErr // for the cleanup
			return true
		default:
		}
		return strings.Contains(readLog(), "DHCP, IP range")
	})
	if exited || !ok {
		outMu.Lock()
		defer outMu.Unlock()
		return fmt.Errorf("vmtest: dnsmasq did not start DHCP (exited: %v %v): %s%s", exited, waitErr, out.String(), readLog())
	}
	return nil
}

// DHCPLog is dnsmasq's log (with --log-dhcp: every request, its vendor class, the answer).
func (n *Net) DHCPLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "dnsmasq.log"))
	return string(b)
}

// Leases is dnsmasq's lease file (one line per lease: expiry MAC IP name client-id).
func (n *Net) Leases() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "leases"))
	return string(b)
}
