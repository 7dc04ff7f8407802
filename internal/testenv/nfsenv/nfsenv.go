// Package nfsenv runs a throwaway NFS server for tests: rpcbind and nfs-ganesha (VFS FSAL)
// inside a network namespace, exporting one directory read-only with root squash over
// NFSv3 and NFSv4, the way the site manager renders production exports
// (sitemgmt/render.Ganesha).
//
// Why ganesha and not the kernel server: the test machines have no nfsd. Why a private
// mount namespace: rpcbind's Unix socket and lock file have fixed paths in /run
// (/run/rpcbind.sock, /run/rpcbind.lock) that are shared by every network namespace;
// two tests (or a host rpcbind) would collide there. Each Start therefore runs rpcbind in
// a new mount namespace with its own tmpfs on /run, and ganesha joins that namespace
// (nsenter) so that it registers its NFSv3 and MOUNT programs with that rpcbind.
//
// A Server can be stopped and started again (Stop, Start) with the same configuration
// and address, which is what a test needs that boots a client while the server is down.
package nfsenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/syncbuf"
)

// Ports ganesha serves on. Fixed rather than picked: a namespace is private to one test,
// and a fixed MOUNT port keeps the v3 path independent of rpcbind's answer timing.
const (
	NFSPort   = 2049
	MountPort = 20048
)

// StartTimeout bounds how long Start waits until the server answers.
var StartTimeout = 60 * time.Second

// Paths of the Debian packages (nfs-ganesha, nfs-ganesha-vfs, rpcbind, nfs-common).
var (
	GaneshaPath  = "/usr/bin/ganesha.nfsd"
	RpcbindPath  = "/usr/sbin/rpcbind"
	RpcinfoPath  = "/usr/sbin/rpcinfo"
	ShowmountExe = "/usr/sbin/showmount"
)

// Config describes one server.
type Config struct {
	NS     *netns.NS // namespace to serve in (required)
	Addr   string    // IPv4 address inside NS to bind to (required; must already be configured)
	Export string    // directory to export read-only with root squash (required)
	// Pseudo is the NFSv4 pseudo path; default Export, as the site manager renders it, so
	// that SERVER:/EXPORT mounts over v3 and v4 alike.
	Pseudo string
	// ReadWrite exports the directory read-write (still with root squash): a home
	// server's export, where users write as their own uids.
	ReadWrite bool
	Dir       string // working directory for configuration, logs, pid file, recovery data (required)
}

// Server is an rpcbind + ganesha pair; see Start and Stop.
type Server struct {
	cfg Config

	mu      sync.Mutex
	rpcbind *proc
	ganesha *proc
	starts  int
}

// proc is a started daemon and the goroutine that reaps it.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(cmd *exec.Cmd) (*proc, *syncbuf.Buffer, error) {
	var out syncbuf.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// SIGKILL when the test binary dies (e.g. killed by -timeout): no daemon may outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, &out, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs, and always reaps the process.
func (p *proc) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// New checks the configuration and writes ganesha's configuration file; it starts nothing.
func New(cfg Config) (*Server, error) {
	if cfg.NS == nil || cfg.Addr == "" || cfg.Export == "" || cfg.Dir == "" {
		return nil, errors.New("nfsenv: NS, Addr, Export and Dir are required")
	}
	if net.ParseIP(cfg.Addr).To4() == nil {
		return nil, fmt.Errorf("nfsenv: Addr %q is not an IPv4 address", cfg.Addr)
	}
	if cfg.Pseudo == "" {
		cfg.Pseudo = cfg.Export
	}
	st, err := os.Stat(cfg.Export)
	if err != nil {
		return nil, fmt.Errorf("nfsenv: export: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("nfsenv: export %s is not a directory", cfg.Export)
	}
	// Root squash maps the client's root to nobody, who must be able to enter the export;
	// t.TempDir() directories are 0700.
	if st.Mode().Perm()&0o005 != 0o005 {
		return nil, fmt.Errorf("nfsenv: export %s has mode %v: root-squashed clients (nobody) cannot read it; chmod o+rx", cfg.Export, st.Mode().Perm())
	}
	// The caller's mistakes first, then the machine's: a bad Config is named the same on a
	// machine without the packages.
	for _, p := range []string{GaneshaPath, RpcbindPath, RpcinfoPath, ShowmountExe, "/usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so"} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("nfsenv: %v (install the Debian packages nfs-ganesha nfs-ganesha-vfs rpcbind nfs-common)", err)
		}
	}
	s := &Server{cfg: cfg}
	if err := os.MkdirAll(s.path("recovery"), 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(s.path("ganesha.conf"), []byte(s.config()), 0o644); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) path(name string) string { return filepath.Join(s.cfg.Dir, name) }

// config is ganesha's configuration: NFSv3 and v4 over TCP on Addr, no NLM (clients mount
// read-only images with nolock) and no RQUOTA; Graceless, because a grace period would make
// every restart in a test wait 90 s before NFSv4 clients may open files again.
func (s *Server) config() string {
	return fmt.Sprintf(`# Written by internal/testenv/nfsenv for a test; not a production configuration.
NFS_CORE_PARAM {
	Protocols = 3, 4;
	NFS_Port = %d;
	MNT_Port = %d;
	Bind_addr = %s;
	Enable_NLM = false;
	Enable_RQUOTA = false;
}
NFS_KRB5 {
	Active_krb5 = false;
}
NFSv4 {
	RecoveryBackend = fs;
	RecoveryRoot = "%s";
	Graceless = true;
}
LOG {
	COMPONENTS {
		CONFIG = INFO;
		EXPORT = INFO;
	}
}
EXPORT {
	Export_Id = 1;
	Path = "%s";
	Pseudo = "%s";
	Access_Type = %s;
	Squash = Root_Squash;
	Protocols = 3, 4;
	Transports = TCP;
	SecType = sys;
	FSAL {
		Name = VFS;
	}
}
`, NFSPort, MountPort, s.cfg.Addr, s.path("recovery"), s.cfg.Export, s.cfg.Pseudo, s.access())
}

func (s *Server) access() string {
	if s.cfg.ReadWrite {
		return "RW"
	}
	return "RO"
}

// Start starts rpcbind and ganesha and returns when the export is served over NFSv3
// (showmount lists it through rpcbind and mountd) and the NFS port accepts connections.
// Starting a running server is an error.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ganesha != nil || s.rpcbind != nil {
		return errors.New("nfsenv: server already running")
	}
	s.starts++
	deadline := time.Now().Add(StartTimeout)

	// rpcbind in a new mount namespace with a private /run (see the package comment).
	// unshare and sh exec, so the process is rpcbind itself.
	rb, rbOut, err := startProc(s.cfg.NS.Command("unshare", "--mount", "--propagation", "private",
		"/bin/sh", "-c", "set -eu; mount -t tmpfs -o mode=0755 overtime-nfsenv /run; mkdir -p /run/rpcbind; exec "+RpcbindPath+" -f"))
	if err != nil {
		return fmt.Errorf("nfsenv: start rpcbind: %w", err)
	}
	s.rpcbind = rb
	if err := s.poll(deadline, rb, rbOut, "rpcbind", func() error {
		return s.cfg.NS.Run(RpcinfoPath, "-T", "tcp", "127.0.0.1", "100000", "2")
	}); err != nil {
		s.stopLocked()
		return err
	}

	logPath := s.path(fmt.Sprintf("ganesha-%d.log", s.starts))
	pid := strconv.Itoa(rb.cmd.Process.Pid)
	gn, gnOut, err := startProc(exec.Command("nsenter", "--target", pid, "--mount", "--net", "--",
		GaneshaPath, "-F", "-f", s.path("ganesha.conf"), "-L", logPath, "-p", s.path("ganesha.pid"), "-N", "NIV_EVENT"))
	if err != nil {
		s.stopLocked()
		return fmt.Errorf("nfsenv: start ganesha: %w", err)
	}
	s.ganesha = gn
	err = s.poll(deadline, gn, gnOut, "ganesha", func() error {
		out, err := s.cfg.NS.Command(ShowmountExe, "-e", s.cfg.Addr).CombinedOutput()
		if err != nil {
			return fmt.Errorf("showmount -e %s: %v: %s", s.cfg.Addr, err, strings.TrimSpace(string(out)))
		}
		if !strings.Contains(string(out), s.cfg.Export) {
			return fmt.Errorf("showmount -e %s does not list %s yet: %s", s.cfg.Addr, s.cfg.Export, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := s.cfg.NS.DialContext(ctx, "tcp", net.JoinHostPort(s.cfg.Addr, strconv.Itoa(NFSPort)))
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		log, _ := os.ReadFile(logPath)
		s.stopLocked()
		return fmt.Errorf("%w\nganesha log %s:\n%s", err, logPath, tail(string(log), 4000))
	}
	return nil
}

// poll calls ready until it succeeds, the daemon exits, or the deadline passes.
func (s *Server) poll(deadline time.Time, p *proc, out *syncbuf.Buffer, name string, ready func() error) error {
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("nfsenv: %s exited: %v: %s", name, p.err, strings.TrimSpace(out.String()))
		}
		if last = ready(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nfsenv: %s did not serve within %v: %v", name, StartTimeout, last)
		}
		// Polling interval of a readiness check, not a synchronisation sleep: the daemons
		// offer no readiness notification.
		select {
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops ganesha and rpcbind and reaps them. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	s.ganesha.stop(10 * time.Second)
	s.rpcbind.stop(5 * time.Second)
	s.ganesha, s.rpcbind = nil, nil
}

// Running reports whether both daemons are running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ganesha != nil && !s.ganesha.exited() && s.rpcbind != nil && !s.rpcbind.exited()
}

// Log returns ganesha's log of the latest start (for test failure messages).
func (s *Server) Log() string {
	s.mu.Lock()
	n := s.starts
	s.mu.Unlock()
	b, _ := os.ReadFile(s.path(fmt.Sprintf("ganesha-%d.log", n)))
	return string(b)
}

// Addr is the server's address.
func (s *Server) Addr() string { return s.cfg.Addr }

// Export is the exported directory.
func (s *Server) Export() string { return s.cfg.Export }

// StartT creates and starts a server for a test and stops it when the test ends. The
// working directory is a new temporary directory when cfg.Dir is empty.
func StartT(t testing.TB, cfg Config) *Server {
	t.Helper()
	needs.Servers(t, "root (network namespaces)", "nfs-ganesha")
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
