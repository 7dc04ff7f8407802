package render

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// Helpers for the checks that run the real programs (dnsmasq, slurmctld, ganesha.nfsd).
// A missing program fails the test with the Debian package to install: these checks are
// the only thing that proves the rendered syntax is accepted, so they are never skipped,
// except under -short (make check, the fast lane without the packages).

// lookTool finds a program in PATH or the sbin directories a non-login PATH may lack.
func lookTool(t *testing.T, name, pkg string) string {
	t.Helper()
	needs.Servers(t, name+" (Debian package "+pkg+")")
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("%s not found; this real-tool check needs it: apt-get install -y --no-install-recommends %s", name, pkg)
	return ""
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// daemon is a child process the test started; stop ends exactly that process.
type daemon struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

// startDaemon starts a program in the foreground with its output collected, and stops it
// (SIGTERM, then SIGKILL after 10 s) when the test ends.
func startDaemon(t *testing.T, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: filepath.Base(name), cmd: exec.Command(name, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) signal(sig syscall.Signal) {
	if !d.exited() {
		_ = d.cmd.Process.Signal(sig)
	}
}

func (d *daemon) stop() {
	if d.exited() {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// waitFor polls cond every 100 ms until it holds, the daemon exits or the timeout passes.
func waitFor(d *daemon, timeout time.Duration, cond func() bool) bool {
	poll.WaitEvery(timeout, 100*time.Millisecond, func() bool { return cond() || d != nil && d.exited() })
	return cond()
}
