package guestrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// termSignal asks a guest-load process to end (it stops its workers and writes a last
// progress line).
const termSignal = syscall.SIGTERM

// stopGrace is how long Stop waits for a guest to end on SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// Process runs the guest workload as a plain process of the agent binary in a fresh
// cgroup below Parent ("bench-WORKLOAD-XXXXXX"): no namespaces, no emulation, the
// baseline the other runners are compared with (and the fallback where they cannot run).
type Process struct {
	// Parent is where the guest's group is made (required; it must exist).
	Parent *cgroup.Group
	// Agent is the overtime-agent binary (default: the running binary).
	Agent string
	// Dir is the io workload's directory (default: guest-load's, os.TempDir()).
	Dir string
}

var _ interference.Runner = (*Process)(nil)

// Name is "process".
func (p *Process) Name() string { return "process" }

// Start starts `AGENT bench guest-load WORKLOAD --threads N` in a new group and returns
// once it reported progress.
func (p *Process) Start(ctx context.Context, name string, threads int) (interference.Guest, error) {
	if err := checkWorkload(name, threads); err != nil {
		return nil, err
	}
	if p.Parent == nil {
		return nil, errors.New("guestrun: Process without a Parent group")
	}
	agent, err := agentBinary(p.Agent)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withStartTimeout(ctx)
	defer cancel()
	g := &processGuest{group: p.Parent.Child("bench-" + name + "-" + randSuffix()), prog: newProgress()}
	if err := g.group.Create(); err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		g.prog.feed(pr)
		// Drain after a parse failure (a line over 1 MiB) so the guest never blocks on us.
		_, _ = io.Copy(io.Discard, pr)
	}()
	g.proc, err = startGated(append([]string{agent}, guestLoadArgs(name, threads, p.Dir)...), pw)
	if err != nil {
		pw.Close()
		_ = removeGroup(ctx, g.group)
		return nil, err
	}
	// The pipe's writer ends when the process has been waited for (exec.Cmd copies its
	// output until then), which ends the reader.
	go func() { <-g.proc.done; pw.Close() }()
	ok := false
	defer func() {
		if !ok {
			_ = g.Stop(context.Background())
		}
	}()
	if err := g.group.AddProc(g.proc.cmd.Process.Pid); err != nil {
		return nil, fmt.Errorf("guestrun: %w", err)
	}
	if err := g.proc.release(); err != nil {
		return nil, err
	}
	if err := g.prog.waitFirst(ctx, g.proc.done, "the guest process"); err != nil {
		return nil, err
	}
	ok = true
	return g, nil
}

type processGuest struct {
	group *cgroup.Group
	proc  *gated
	prog  *progress
}

func (g *processGuest) Progress() (float64, error) { return g.prog.value() }
func (g *processGuest) Group() *cgroup.Group       { return g.group }

// PIDs are the processes in the group (the guest-load process).
func (g *processGuest) PIDs() ([]int, error) { return g.group.AllProcs() }

// Stop ends the process (SIGTERM, then SIGKILL after stopGrace) and removes its group.
func (g *processGuest) Stop(ctx context.Context) error {
	// A frozen group would hold the process in SIGTERM's delivery until thawed.
	if frozen, err := g.group.Frozen(); err == nil && frozen {
		_ = g.group.Thaw(ctx)
	}
	g.proc.kill(stopGrace)
	return removeGroup(ctx, g.group)
}
