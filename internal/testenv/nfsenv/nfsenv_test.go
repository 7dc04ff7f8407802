package nfsenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// newNS makes a namespace with a bridge carrying addr, as the boot tests do.
func newNS(t *testing.T, addr string) *netns.NS {
	t.Helper()
	needs.Servers(t, "root (network namespaces)")
	ns, err := netns.New("ot-nfsenv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	if err := ns.AddBridge("br0", addr+"/24"); err != nil {
		t.Fatal(err)
	}
	return ns
}

func exportDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "export")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "hello"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// registered lists "program version" pairs rpcbind knows on the server's address.
func registered(t *testing.T, s *Server) string {
	t.Helper()
	out, err := s.cfg.NS.Command(RpcinfoPath, "-p", s.Addr()).CombinedOutput()
	if err != nil {
		t.Fatalf("rpcinfo -p %s: %v: %s", s.Addr(), err, out)
	}
	return string(out)
}

// TestServeStopStart: the export is served over v3 (MOUNT and NFS v3 registered, showmount
// lists it) and v4 (NFS v4 registered, port 2049 open); after Stop nothing answers; a second
// Start on the same address serves again.
func TestServeStopStart(t *testing.T) {
	ns := newNS(t, "10.231.0.1")
	export := exportDir(t)
	s := StartT(t, Config{NS: ns, Addr: "10.231.0.1", Export: export})
	if !s.Running() {
		t.Fatal("not running after Start")
	}
	reg := registered(t, s)
	for _, want := range []string{
		`100003\s+3\s+tcp\s+2049\s+nfs`,
		`100003\s+4\s+tcp\s+2049\s+nfs`,
		`100005\s+3\s+tcp\s+20048\s+mountd`,
	} {
		if !regexp.MustCompile(want).MatchString(reg) {
			t.Errorf("rpcbind does not list %q:\n%s", want, reg)
		}
	}
	if !strings.Contains(s.Log(), "NFS SERVER INITIALIZED") {
		t.Errorf("ganesha log lacks its start message:\n%s", s.Log())
	}

	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if out, err := ns.Command(ShowmountExe, "-e", s.Addr()).CombinedOutput(); err == nil {
		t.Fatalf("showmount answered after Stop: %s", out)
	}
	s.Stop() // idempotent

	if err := s.Start(); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if err := s.Start(); err == nil {
		t.Error("Start of a running server did not fail")
	}
	out, err := ns.Command(ShowmountExe, "-e", s.Addr()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), export) {
		t.Fatalf("after restart showmount: %v: %s", err, out)
	}
}

// TestTwoServers: two servers in two namespaces at once do not share rpcbind state (each
// has a private /run), which parallel boot tests rely on.
func TestTwoServers(t *testing.T) {
	_, errBefore := os.Stat("/run/rpcbind.sock")
	a := StartT(t, Config{NS: newNS(t, "10.232.0.1"), Addr: "10.232.0.1", Export: exportDir(t)})
	b := StartT(t, Config{NS: newNS(t, "10.232.0.1"), Addr: "10.232.0.1", Export: exportDir(t)})
	for _, s := range []*Server{a, b} {
		out, err := s.cfg.NS.Command(ShowmountExe, "-e", s.Addr()).CombinedOutput()
		if err != nil || !strings.Contains(string(out), s.Export()) {
			t.Errorf("server for %s: showmount: %v: %s", s.Export(), err, out)
		}
		if other := map[*Server]*Server{a: b, b: a}[s]; strings.Contains(string(out), other.Export()) {
			t.Errorf("server for %s also lists the other server's export: %s", s.Export(), out)
		}
	}
	// rpcbind's socket went to the private /run, not the host's.
	if _, err := os.Stat("/run/rpcbind.sock"); errBefore != nil && err == nil {
		t.Error("/run/rpcbind.sock appeared in the host's /run")
	}
}

// TestConfigErrors: unusable configurations fail with a message naming the problem.
func TestConfigErrors(t *testing.T) {
	ns := &netns.NS{Name: "unused"}
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(private, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Addr: "10.0.0.1", Export: private, Dir: private}, "required"},
		{Config{NS: ns, Addr: "nfs.example.org", Export: private, Dir: private}, "not an IPv4 address"},
		{Config{NS: ns, Addr: "10.0.0.1", Export: filepath.Join(private, "nope"), Dir: private}, "no such file"},
		{Config{NS: ns, Addr: "10.0.0.1", Export: file, Dir: private}, "not a directory"},
		{Config{NS: ns, Addr: "10.0.0.1", Export: private, Dir: private}, "chmod o+rx"},
	} {
		_, err := New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}
