// Package bootlab starts a complete Overtime boot server inside a network namespace for
// end-to-end tests, benchmarks and the demo: slapd, `overtime serve`, `overtime
// bootserver` (dnsmasq + nfs-ganesha + rpcbind), all as the real binaries, on a bridge
// with the boot server's address, to which QEMU VMs attach through tap devices.
//
// Each daemon runs under `ip netns exec`; `overtime bootserver` additionally gets a
// private mount namespace with its own /run, because rpcbind's socket is
// /run/rpcbind.sock and libtirpc registers services there first: two labs (or a lab and
// the host) sharing /run would register ganesha with each other's rpcbind.
package bootlab

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
)

// Addresses of the lab network: the boot server bs1 of the lab's site.
const (
	ServerIP = "10.20.0.1"
	Bridge   = "br0"
	HTTPPort = "8080"
	HTTPURL  = "http://" + ServerIP + ":" + HTTPPort
	// APIURL is the site manager's HTTPS API of a lab started with Options.TLS (HTTPURL
	// then serves the boot files only).
	APIURL = "https://" + ServerIP + ":8443"
)

// AdminPassword is the lab's first site admin's password (uid admin).
const AdminPassword = "admin-secret"

// Options configure Start.
type Options struct {
	Now         string        // RFC 3339 instant for `overtime serve --now` ("" = real time)
	MenuTimeout time.Duration // default 1 s: nobody is at the test VMs' menus
	ServeArgs   []string      // more arguments for `overtime serve` (e.g. --munge-key)
	// TLS serves the API over HTTPS at APIURL with a certificate from a CA made for the
	// lab (Lab.CAFile), the boot files on plain HTTP at HTTPURL (--boot-listen), and no
	// --insecure-http: host credentials pin the CA, and the PCs' agents talk TLS only
	// (the site's boot server needs apiURL: APIURL). The CLI trusts the CA.
	TLS bool
}

// Lab is a running boot server.
type Lab struct {
	t      testing.TB
	NS     *netns.NS
	Dir    string // everything lives here
	Bin    string // the overtime binary
	Images string // the published image tree (export root, --images-dir)
	// CAFile is the lab's site CA (Options.TLS; "" else).
	CAFile string
	env    []string

	mu         sync.Mutex
	bootserver *exec.Cmd
	bsDone     chan struct{}
	serveArgs  []string
	serve      *exec.Cmd
	serveDone  chan struct{}
}

// built are the commands built by this process, by package: each is built once (the
// CLI, PXE, agent and Slurm tests share them).
var built sync.Map // package path -> *build

type build struct {
	once sync.Once
	bin  string
	err  error
}

// Binary builds the overtime command once per process.
func Binary(t testing.TB) string {
	t.Helper()
	return buildCmd(t, "overtime")
}

// DevBinary builds the development tools, overtime-dev (its throwaway slapd), once per
// process.
func DevBinary(t testing.TB) string {
	t.Helper()
	return buildCmd(t, "overtime-dev")
}

// AgentBinary builds the node agent, overtime-agent, once per process.
func AgentBinary(t testing.TB) string {
	t.Helper()
	return buildCmd(t, "overtime-agent")
}

// buildCmd builds ./cmd/name into a temporary directory, once per process.
func buildCmd(t testing.TB, name string) string {
	t.Helper()
	root := testenv.RepoRoot(t)
	v, _ := built.LoadOrStore(name, &build{})
	b := v.(*build)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", name+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.bin, "./cmd/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// Start brings up the lab: namespace and bridge, slapd, the directory, `overtime serve`.
// Apply a site with Apply, then StartBootServer.
func Start(t testing.TB, opt Options) *Lab {
	t.Helper()
	needs.Servers(t, "root (network namespaces)", "slapd", "dnsmasq", "nfs-ganesha")
	if opt.MenuTimeout == 0 {
		opt.MenuTimeout = time.Second
	}
	bin := Binary(t)
	ns, err := netns.New("ot-lab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	if err := ns.AddBridge(Bridge, ServerIP+"/24"); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "overtime-lab-")
	if err != nil {
		t.Fatal(err)
	}
	// dnsmasq re-reads its hosts file as nobody, and ganesha serves the images to a
	// root-squashed client: the tree must be world-readable, as on a real boot server.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &Lab{t: t, NS: ns, Dir: dir, Bin: bin, Images: filepath.Join(dir, "images")}
	t.Cleanup(func() {
		l.StopBootServer()
		if t.Failed() {
			for _, f := range []string{"serve.log", "bootserver.log", "bootserver/ganesha.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
					t.Logf("%s (end):\n%s", f, tail(string(b), 60))
				}
			}
		}
		_ = ns.Close() // kills slapd and serve with everything else in the namespace
		_ = os.RemoveAll(dir)
	})
	if err := os.MkdirAll(l.Images, 0o755); err != nil {
		t.Fatal(err)
	}

	// slapd, detached (overtime-dev slapd), inside the namespace.
	out, err := ns.Command(DevBinary(t), "slapd", "--dir", filepath.Join(dir, "slapd"), "--port", "389", "--root-password", "lab-root-secret").Output()
	if err != nil {
		t.Fatalf("overtime-dev slapd: %v\n%s", err, out)
	}
	l.env = append(l.env, "OVERTIME_LDAP_PASSWORD=lab-root-secret", "OVERTIME_ADMIN_PASSWORD="+AdminPassword)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "OVERTIME_LDAP_") {
			l.env = append(l.env, sc.Text())
		}
	}
	if _, err := l.Run("ldap", "init", "--site", "lab", "--timezone", "Europe/Berlin", "--admin", "admin"); err != nil {
		t.Fatal(err)
	}
	// --insecure-http: the lab's PCs boot and talk to the site manager over plain HTTP,
	// so the munge key and the desktops' login secrets go that way too (a lab's choice,
	// on its own bridge; a site serves TLS: docs/node-agent.md "The channel").
	args := []string{"serve", "--listen", ServerIP + ":" + HTTPPort, "--boot-server", "bs1", "--reload", "1s",
		"--menu-timeout", opt.MenuTimeout.String(), "--images-dir", l.Images, "--syslinux-dir", "/usr/lib/syslinux/modules/bios",
		"--insecure-http"}
	server := HTTPURL
	if opt.TLS {
		// The API on HTTPS with the site's CA at the end of the chain (what credentials
		// pin), the boot files alone on plain HTTP.
		tlsDir := filepath.Join(dir, "tls")
		if err := os.MkdirAll(tlsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		ca := unidir.NewCA(t, tlsDir, "lab-site-ca")
		certFile, keyFile := ca.Issue(t, tlsDir, "site-manager", net.ParseIP(ServerIP))
		leaf, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		chain := filepath.Join(tlsDir, "chain.pem")
		if err := os.WriteFile(chain, append(leaf, []byte(ca.PEM(t))...), 0o644); err != nil {
			t.Fatal(err)
		}
		l.CAFile = filepath.Join(tlsDir, "ca.pem")
		if err := os.WriteFile(l.CAFile, []byte(ca.PEM(t)), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args[:len(args)-1], "--boot-listen", ServerIP+":"+HTTPPort, "--tls-cert", chain, "--tls-key", keyFile)
		args[2] = strings.TrimPrefix(APIURL, "https://")
		server = APIURL
		l.env = append(l.env, "OVERTIME_CA_FILE="+l.CAFile)
	}
	l.serveArgs = append(args, opt.ServeArgs...)
	l.startServe(opt.Now)
	l.env = append(l.env, "OVERTIME_SERVER="+server, "OVERTIME_USER=admin", "OVERTIME_PASSWORD="+AdminPassword)
	return l
}

// startServe starts `overtime serve` (now: its --now, "" = real time) and waits until it
// answers.
func (l *Lab) startServe(now string) {
	t := l.t
	args := append([]string(nil), l.serveArgs...)
	if now != "" {
		args = append(args, "--now", now)
	}
	serveLog, err := os.OpenFile(filepath.Join(l.Dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	serve := l.NS.Command(l.Bin, args...)
	serve.Env = append(os.Environ(), l.env...)
	serve.Stdout, serve.Stderr = serveLog, serveLog
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = serve.Wait(); serveLog.Close(); close(done) }()
	l.mu.Lock()
	l.serve, l.serveDone = serve, done
	l.mu.Unlock()
	hc := l.NS.HTTPClient()
	hc.Timeout = 2 * time.Second
	Eventually(t, "overtime serve answering", 30*time.Second, func() bool {
		resp, err := hc.Get(HTTPURL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// RestartServe stops `overtime serve` and starts it again with --now now: the site's
// clock jumps (a test puts a boundary a minute ahead). The directory keeps everything.
func (l *Lab) RestartServe(now string) {
	l.mu.Lock()
	serve, done := l.serve, l.serveDone
	l.mu.Unlock()
	if serve != nil {
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = serve.Process.Kill()
			<-done
		}
	}
	l.startServe(now)
}

// Run runs the overtime CLI inside the namespace as the site admin.
func (l *Lab) Run(args ...string) (string, error) {
	cmd := l.NS.Command(l.Bin, args...)
	cmd.Env = append(os.Environ(), l.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("overtime %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// MustRun is Run that fails the test.
func (l *Lab) MustRun(args ...string) string {
	l.t.Helper()
	out, err := l.Run(args...)
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

// Apply applies a site file (YAML text).
func (l *Lab) Apply(site string) {
	l.t.Helper()
	f := filepath.Join(l.Dir, "site.yaml")
	if err := os.WriteFile(f, []byte(site), 0o644); err != nil {
		l.t.Fatal(err)
	}
	l.MustRun("site", "apply", "-f", f)
}

// HTTPGet fetches a URL from inside the namespace.
func (l *Lab) HTTPGet(url string) (int, string, error) {
	resp, err := l.NS.HTTPClient().Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// CopyImage puts an image version's files (vmlinuz, initrd.img, root.squashfs from src)
// into the image tree at path, world-readable.
func (l *Lab) CopyImage(src, path string) {
	l.t.Helper()
	dst := filepath.Join(l.Images, path)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		l.t.Fatal(err)
	}
	for _, f := range []string{"vmlinuz", "initrd.img", "root.squashfs"} {
		if err := linkOrCopy(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			l.t.Fatal(err)
		}
	}
	// MkdirAll honours the umask; NFS clients are squashed to nobody.
	for p := dst; p != l.Images; p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
}

// StartBootServer starts `overtime bootserver --nfs ganesha` and waits until dnsmasq
// runs and ganesha serves.
func (l *Lab) StartBootServer() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bootserver != nil {
		l.t.Fatal("boot server already running")
	}
	state := filepath.Join(l.Dir, "bootserver")
	_ = os.Remove(filepath.Join(state, "dnsmasq.pid"))
	_ = os.Remove(filepath.Join(state, "ganesha.log"))
	logf, err := os.OpenFile(filepath.Join(l.Dir, "bootserver.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		l.t.Fatal(err)
	}
	script := `mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/rpcbind && exec "$0" "$@"`
	cmd := l.NS.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script,
		l.Bin, "bootserver", "run", "--name", "bs1", "--nfs", "ganesha", "--state-dir", state,
		"--tftp-root", filepath.Join(l.Dir, "tftp"), "--export-root", l.Images, "--refresh", "1s")
	cmd.Env = append(os.Environ(), l.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	l.bootserver, l.bsDone = cmd, done
	Eventually(l.t, "dnsmasq and ganesha serving", 60*time.Second, func() bool {
		select {
		case <-done:
			l.t.Fatalf("overtime bootserver exited; log:\n%s", tail(readFile(filepath.Join(l.Dir, "bootserver.log")), 40))
		default:
		}
		return fileExists(filepath.Join(state, "dnsmasq.pid")) &&
			strings.Contains(readFile(filepath.Join(state, "ganesha.log")), "NFS SERVER INITIALIZED")
	})
}

// StopBootServer stops the boot server (SIGTERM: it stops dnsmasq, ganesha and rpcbind).
func (l *Lab) StopBootServer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bootserver == nil {
		return
	}
	_ = l.bootserver.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.bsDone:
	case <-time.After(20 * time.Second):
		_ = l.bootserver.Process.Kill()
		<-l.bsDone
	}
	l.bootserver = nil
}

// Eventually is poll.Until (kept for its many callers).
func Eventually(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	poll.Until(t, what, d, cond)
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// linkOrCopy makes dst a hard link of src (images are immutable: a link costs nothing,
// whatever their size) or, across file systems, a world-readable copy.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return os.Chmod(dst, 0o644)
	}
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
