package guestrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/guest/container"
	"github.com/overtime-hpc/overtime/node-agent/interference"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Container runs the guest workload in a container of the real container backend
// (node-agent/guest/container: crun, user namespace, overlay root, seccomp), i.e. with
// everything a production guest pays for isolation. Its base image is a directory the
// runner writes per guest: the static agent binary as /overtime-agent and the empty
// directories crun mounts onto; the init is `/overtime-agent bench guest-load ...`.
//
// The backend sends its init's stdout and stderr to StateDir/console.log (crun's stdio
// are the monitor's, which the backend opens on that file); the runner tails that file for
// progress lines, so the backend needed no change.
type Container struct {
	// Parent is the backend's Options.Parent: the guest's group is Parent/guest-NAME
	// (required; direct placement, never a systemd scope, so that the group is where the
	// benchmark puts it on any host).
	Parent *cgroup.Group
	// Agent is the static overtime-agent binary (default: the running binary). It is
	// copied into the base image and also runs as the backend's monitor, so it must be the
	// agent (whose main calls container.MaybeInit), not a test binary.
	Agent string
	// WorkDir holds the per-guest base, state and run directories (default
	// os.TempDir()); it must be a local file system (overlayfs lower and upper).
	WorkDir string
	// MemoryMB is the guest's memory limit (default 1024: room for the memory workload's
	// 192 MiB plus the overlay's tmpfs).
	MemoryMB int
}

var _ interference.Runner = (*Container)(nil)

// Name is "container".
func (c *Container) Name() string { return "container" }

// Start writes the base, starts the container and returns once guest-load reported
// progress. The backend places init in the guest's group before crun releases it.
func (c *Container) Start(ctx context.Context, name string, threads int) (interference.Guest, error) {
	if err := checkWorkload(name, threads); err != nil {
		return nil, err
	}
	if c.Parent == nil {
		return nil, errors.New("guestrun: Container without a Parent group")
	}
	agent, err := agentBinary(c.Agent)
	if err != nil {
		return nil, err
	}
	mem := c.MemoryMB
	if mem == 0 {
		mem = 1024
	}
	ctx, cancel := withStartTimeout(ctx)
	defer cancel()
	dir, err := os.MkdirTemp(c.WorkDir, "overtime-bench-ct-")
	if err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	g := &containerGuest{dir: dir, name: "bench-" + randSuffix(), prog: newProgress(), stop: make(chan struct{}), tailDone: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			_ = g.Stop(context.Background())
		}
	}()
	base := filepath.Join(dir, "base")
	if err := writeBase(base, agent); err != nil {
		return nil, err
	}
	h := c.Parent.Hierarchy()
	g.backend = container.New(container.Options{Hierarchy: h, Parent: c.Parent, RunDir: filepath.Join(dir, "run"),
		Systemd: container.SystemdOff, Exe: agent})
	if err := g.backend.Available(ctx); err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	spec := guest.Spec{
		Name:       g.name,
		VCPUs:      threads,
		MemoryMB:   mem,
		BaseImage:  base,
		BaseFormat: "dir",
		StateDir:   filepath.Join(dir, "state"),
		Network:    model.NetNone,
		Cmdline:    "/overtime-agent " + strings.Join(guestLoadArgs(name, threads, "/tmp"), " "),
	}
	g.started = true
	if err := g.backend.Start(ctx, spec); err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	st, err := g.backend.Status(ctx, g.name)
	if err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	if st.State != guest.StateRunning {
		return nil, fmt.Errorf("guestrun: container %s is %s (%s) right after Start", g.name, st.State, st.Reason)
	}
	// The group as the kernel has it for init: on cgroup v1 its path can differ between
	// controllers (Parent below the caller's own groups), which only FindByPID keeps apart.
	if g.group, err = h.FindByPID(st.PID); err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	exited := make(chan struct{})
	g.tailing = true
	go g.tail(filepath.Join(spec.StateDir, "console.log"), exited)
	if err := g.prog.waitFirst(ctx, exited, "the container"); err != nil {
		return nil, err
	}
	ok = true
	return g, nil
}

// writeBase makes the base image directory: the agent binary and the mount points.
func writeBase(base, agent string) error {
	for _, d := range []string{"proc", "sys", "dev", "tmp", "etc", "root", "run"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			return fmt.Errorf("guestrun: %w", err)
		}
	}
	if err := os.Chmod(filepath.Join(base, "tmp"), 0o1777); err != nil {
		return fmt.Errorf("guestrun: %w", err)
	}
	if err := copyFile(agent, filepath.Join(base, "overtime-agent"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(base, "etc", "passwd"), []byte("root:x:0:0:root:/root:/overtime-agent\n"), 0o644)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("guestrun: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("guestrun: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("guestrun: copying %s: %w", src, err)
	}
	return out.Close()
}

type containerGuest struct {
	dir      string
	name     string
	backend  *container.Backend
	started  bool
	group    *cgroup.Group
	prog     *progress
	stop     chan struct{} // closed by Stop: the tail ends
	tailDone chan struct{}
	tailing  bool
}

// tail follows the console log (which the backend creates before init runs) and feeds
// its lines to the progress; exited closes when the guest is no longer running.
func (g *containerGuest) tail(path string, exited chan<- struct{}) {
	defer close(g.tailDone)
	var f *os.File
	var partial []byte
	buf := make([]byte, 64<<10)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	closed := false
	for {
		if f == nil {
			f, _ = os.Open(path)
		}
		if f != nil {
			for {
				n, err := f.Read(buf)
				partial = append(partial, buf[:n]...)
				for {
					i := bytes.IndexByte(partial, '\n')
					if i < 0 {
						break
					}
					g.prog.line(string(partial[:i]))
					partial = partial[i+1:]
				}
				if err != nil || n == 0 {
					break
				}
			}
		}
		// Whether init still runs matters only until it is warm (Start waits for either);
		// afterwards the poll would cost CPU for nothing.
		if !closed && !g.prog.hasReported() {
			if st, err := g.backend.Status(context.Background(), g.name); err != nil || st.State != guest.StateRunning {
				close(exited)
				closed = true
			}
		}
		select {
		case <-g.stop:
			if f != nil {
				f.Close()
			}
			return
		case <-t.C:
		}
	}
}

func (g *containerGuest) Progress() (float64, error) { return g.prog.value() }
func (g *containerGuest) Group() *cgroup.Group       { return g.group }

// PIDs are the processes in the guest's group: init (guest-load) and, while it waits
// for init, the backend's monitor (crun's parent, which waits in the group).
func (g *containerGuest) PIDs() ([]int, error) { return g.group.AllProcs() }

// Stop stops the container through the backend (which kills the group's processes and
// removes the group, crun's state and the state directory) and removes the base.
func (g *containerGuest) Stop(ctx context.Context) error {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	if g.tailing {
		<-g.tailDone
	}
	var errs []error
	if g.started {
		if err := g.backend.Stop(ctx, g.name); err != nil {
			errs = append(errs, fmt.Errorf("guestrun: %w", err))
		}
	}
	if err := os.RemoveAll(g.dir); err != nil {
		errs = append(errs, fmt.Errorf("guestrun: %w", err))
	}
	return errors.Join(errs...)
}
