// Package guestrun starts the interference benchmark's guest workloads (`overtime-agent
// bench guest-load NAME --threads N`, node-agent/interference/workload) in real guests and
// reads their progress: Process (a plain process in a cgroup of its own: the baseline and
// the fallback), Container (the container backend, node-agent/guest/container) and QEMU
// (a VM booting a kernel with an initramfs whose init is the agent binary). Each is an
// interference.Runner; the Guest a Start returns exposes the cgroup every host process of
// the guest is in (where isolation policies act) and their PIDs.
//
// Every runner places the guest in its group before it does any work, so that a policy
// set on the group right after Start covers all of the guest's CPU time, and Stop leaves
// nothing behind: no process, no cgroup, no file.
package guestrun

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference/workload"
)

// StartTimeout bounds Start when its context has no deadline: a guest under QEMU's TCG
// boots a kernel first.
const StartTimeout = 2 * time.Minute

// agentBinary is path, or the running binary (the agent itself) when path is "".
func agentBinary(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("guestrun: the agent binary: %w", err)
	}
	return p, nil
}

// guestLoadArgs is the guest-load command line after the binary.
func guestLoadArgs(name string, threads int, dir string) []string {
	args := []string{"bench", "guest-load", name, "--threads", strconv.Itoa(threads)}
	if dir != "" {
		args = append(args, "--dir", dir)
	}
	return args
}

func checkWorkload(name string, threads int) error {
	if workload.GuestUnit(name) == "" {
		return fmt.Errorf("guestrun: unknown guest workload %q (have %v)", name, workload.GuestNames())
	}
	if threads < 1 {
		return fmt.Errorf("guestrun: %d threads: want at least 1", threads)
	}
	return nil
}

func randSuffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// progress is the last progress line a guest reported.
type progress struct {
	mu    sync.Mutex
	work  float64
	seen  bool
	first chan struct{} // closed at the first progress line
	tail  []string      // the last lines that were not progress (boot messages, errors)
}

func newProgress() *progress { return &progress{first: make(chan struct{})} }

// feed reads lines from r until it ends.
func (p *progress) feed(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p.line(sc.Text())
	}
}

func (p *progress) line(l string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, _, ok := workload.ParseProgress(l)
	if !ok {
		if l = strings.TrimSpace(l); l != "" {
			p.tail = append(p.tail, l)
			if len(p.tail) > 20 {
				p.tail = p.tail[1:]
			}
		}
		return
	}
	p.work = w
	if !p.seen {
		p.seen = true
		close(p.first)
	}
}

func (p *progress) value() (float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.seen {
		return 0, errors.New("guestrun: the guest has not reported progress yet")
	}
	return p.work, nil
}

func (p *progress) hasReported() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// output is the guest's last non-progress lines, for error messages.
func (p *progress) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.tail) == 0 {
		return ""
	}
	return "; its last output:\n" + strings.Join(p.tail, "\n")
}

// waitFirst waits for the first progress line, the guest's end (exited closes) or ctx.
func (p *progress) waitFirst(ctx context.Context, exited <-chan struct{}, what string) error {
	select {
	case <-p.first:
		return nil
	case <-exited:
		return fmt.Errorf("guestrun: %s ended before it reported progress%s", what, p.output())
	case <-ctx.Done():
		return fmt.Errorf("guestrun: waiting for %s to report progress: %w%s", what, ctx.Err(), p.output())
	}
}

// gated is a command started blocked: a shell that waits for a line on fd 3, then execs
// the command (same PID). The caller moves the PID into a cgroup and then releases it, so
// that the command's first instruction already runs, and every thread and child it makes
// is born, in the group (CLONE_INTO_CGROUP would do it without a shell, but only on
// cgroup v2).
type gated struct {
	cmd  *exec.Cmd
	gate *os.File
	done chan struct{} // closed when the process has been waited for
	err  error         // its exit status, once done
}

func startGated(argv []string, stdout io.Writer) (*gated, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read -r _ <&3 || exit 97; exec "$0" "$@" 3<&-`}, argv...)...)
	cmd.Stdout, cmd.Stderr = stdout, stdout
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("guestrun: starting %s: %w", argv[0], err)
	}
	g := &gated{cmd: cmd, gate: w, done: make(chan struct{})}
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

// release lets the command run.
func (g *gated) release() error {
	_, err := g.gate.Write([]byte("go\n"))
	g.gate.Close()
	if err != nil {
		return fmt.Errorf("guestrun: releasing the guest: %w", err)
	}
	return nil
}

// kill ends the process: SIGTERM first (the io workload removes its file), SIGKILL after
// grace, and waits for it.
func (g *gated) kill(grace time.Duration) {
	g.gate.Close() // a process still at the gate exits
	_ = g.cmd.Process.Signal(termSignal)
	select {
	case <-g.done:
		return
	case <-time.After(grace):
	}
	_ = g.cmd.Process.Kill()
	<-g.done
}

// removeGroup kills whatever is left in g and removes it.
func removeGroup(ctx context.Context, g *cgroup.Group) error {
	if !g.Exists() {
		return nil
	}
	if err := g.Kill(ctx); err != nil {
		return fmt.Errorf("guestrun: %w", err)
	}
	if err := g.Remove(); err != nil {
		return fmt.Errorf("guestrun: %w", err)
	}
	return nil
}

// withStartTimeout gives ctx StartTimeout when it has no deadline.
func withStartTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, StartTimeout)
}
