package matrix

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference"
	"github.com/overtime-hpc/overtime/node-agent/interference/controller"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/node-agent/interference/guestrun"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/node-agent/interference/workload"
)

// RealOptions configure the real parts (RealDeps).
type RealOptions struct {
	// Agent is the overtime-agent binary: desktop workloads run as `AGENT bench
	// desktop-load` processes (so that the signal sampler, which leaves out its own
	// process, sees them as the desktop) and guests start it (default: the running binary).
	Agent string
	// InProcess runs the desktop workloads in this process (tests: a test binary has no
	// `bench desktop-load`); the signals then do not see the desktop's CPU.
	InProcess bool
	// Parent is the cgroup the guests' groups go below (default: "overtime-bench" at the
	// hierarchy's root, made and removed here).
	Parent *cgroup.Group
	// WorkDir for the io workload and the container's directories (default os.TempDir()).
	WorkDir string
	// Target is the adaptive controller's slowdown target (default 0.01), StartCap where
	// it starts when the owner becomes active (default: the controller's, 0.25; the agent
	// takes it from the host's profile, controller.StartCapFor).
	Target, StartCap float64
	// SignalTick is the sampler's period (default 100 ms); NoCanary leaves the memory
	// canary out.
	SignalTick time.Duration
	NoCanary   bool
	// Backends to make runners for (default process, container, qemu).
	Backends []string
	// Kernel the QEMU guests boot (default guestrun.FindKernel).
	Kernel string
}

// Real is the wired parts and what they need to end.
type Real struct {
	Deps    Deps
	Monitor *signals.Monitor
	parent  *cgroup.Group
	made    bool
	cancel  context.CancelFunc
	started time.Time
	guest   atomic.Pointer[cgroup.Group]
}

// NewReal wires the real workloads, runners, signals, estimator and controller; Close ends
// the sampler and removes the parent group it made.
func NewReal(ctx context.Context, o RealOptions) (*Real, error) {
	if o.Target <= 0 {
		o.Target = 0.01
	}
	if o.SignalTick <= 0 {
		o.SignalTick = 100 * time.Millisecond
	}
	if o.WorkDir == "" {
		o.WorkDir = os.TempDir()
	}
	r := &Real{parent: o.Parent}
	if r.parent == nil {
		h, err := cgroup.Detect()
		if err != nil {
			return nil, fmt.Errorf("matrix: cgroups: %w", err)
		}
		r.parent = h.Group("overtime-bench")
		if !r.parent.Exists() {
			if err := r.parent.Create(); err != nil {
				return nil, fmt.Errorf("matrix: %w", err)
			}
			r.made = true
		}
	}
	runners := map[string]interference.Runner{}
	backends := o.Backends
	if len(backends) == 0 {
		backends = []string{"process", "container", "qemu"}
	}
	for _, b := range backends {
		switch b {
		case "process":
			runners[b] = &guestrun.Process{Parent: r.parent, Agent: o.Agent, Dir: o.WorkDir}
		case "container":
			runners[b] = &guestrun.Container{Parent: r.parent, Agent: o.Agent, WorkDir: o.WorkDir}
		case "qemu":
			runners[b] = &guestrun.QEMU{Parent: r.parent, Agent: o.Agent, WorkDir: o.WorkDir, Kernel: o.Kernel}
		default:
			return nil, fmt.Errorf("matrix: unknown backend %q (process, container, qemu)", b)
		}
	}
	var canary *signals.Canary
	if !o.NoCanary {
		canary = signals.NewCanary(0)
	}
	r.Monitor = signals.NewMonitor(signals.MonitorConfig{Tick: o.SignalTick, Canary: canary,
		Guest: func() *cgroup.Group { return r.guest.Load() }, DesktopGroup: signals.DesktopGroupV2()})
	r.Monitor.SetOwnerActive(true)
	mctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.started = time.Now()
	go r.Monitor.Run(mctx)
	run := workload.RunDesktop
	var stream func(ctx context.Context, name string, d time.Duration) (DesktopStream, error)
	if !o.InProcess {
		run = subprocessDesktop(o.Agent)
		stream = func(ctx context.Context, name string, d time.Duration) (DesktopStream, error) {
			return startDesktopStream(ctx, o.Agent, name, d)
		}
	}
	target, startCap := o.Target, o.StartCap
	r.Deps = Deps{
		Runners:      runners,
		RunDesktop:   run,
		StartDesktop: stream,
		StartProbe:   func(context.Context) (Probe, error) { return workload.StartProbe(0), nil },
		Signals:      r.signals,
		Estimate: func(w interference.Window) Estimate {
			e := estimate.Desktop(w)
			return Estimate{Slowdown: e.Slowdown, Low: e.Low, High: e.High, Method: e.Method}
		},
		NewController: func() Controller {
			return ctlAdapter{controller.New(controller.Config{Target: target, StartCap: startCap})}
		},
	}
	return r, nil
}

type ctlAdapter struct{ c *controller.Controller }

func (a ctlAdapter) Step(now time.Time, est Estimate, owner bool) float64 {
	return a.c.Step(now, estimate.Estimate{Slowdown: est.Slowdown, Low: est.Low, High: est.High, Method: est.Method}, owner)
}

type monitorSignals struct {
	r *Real
	g *cgroup.Group
}

// signals points the shared sampler at guest g (nil: none) until Close.
func (r *Real) signals(g interference.Guest) (Signals, error) {
	var grp *cgroup.Group
	if g != nil {
		grp = g.Group()
	}
	r.guest.Store(grp)
	return monitorSignals{r, grp}, nil
}

// Begin snapshots the sampler's totals (as of its last sample: windows are aligned to
// its ticks, SignalTick).
func (s monitorSignals) Begin() func() interference.Window {
	from := s.r.Monitor.Snapshot()
	return func() interference.Window {
		return s.r.Monitor.Window(from, s.r.Monitor.Snapshot())
	}
}

func (s monitorSignals) Close() { s.r.guest.CompareAndSwap(s.g, nil) }

// Parent is the cgroup the guests' groups are made in.
func (r *Real) Parent() *cgroup.Group { return r.parent }

// Cost is the sampler's CPU per second since it started (CPUs).
func (r *Real) Cost() float64 {
	t := r.Monitor.Snapshot()
	if el := time.Since(r.started).Seconds(); el > 0 {
		return t.Cost.Seconds() / el
	}
	return 0
}

// Close ends the sampler and removes the parent group if NewReal made it.
func (r *Real) Close() error {
	r.cancel()
	if r.made {
		return r.parent.Remove()
	}
	return nil
}

// subprocessDesktop runs `AGENT bench desktop-load NAME --seconds S --json`.
func subprocessDesktop(agent string) func(ctx context.Context, name string, d time.Duration) (interference.Result, error) {
	return func(ctx context.Context, name string, d time.Duration) (interference.Result, error) {
		bin := agent
		if bin == "" {
			var err error
			if bin, err = os.Executable(); err != nil {
				return interference.Result{}, err
			}
		}
		cmd := exec.CommandContext(ctx, bin, "bench", "desktop-load", name, "--json",
			"--seconds", strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return interference.Result{}, fmt.Errorf("%s: %w: %s", cmd, err, bytes.TrimSpace(errb.Bytes()))
		}
		var res interference.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			return interference.Result{}, fmt.Errorf("desktop-load %s output: %w", name, err)
		}
		return res, nil
	}
}

// desktopStream is a `bench desktop-load NAME --progress --json` process: progress lines
// as they arrive, then the JSON result.
type desktopStream struct {
	cmd  *exec.Cmd
	errb bytes.Buffer
	mu   sync.Mutex
	work float64
	at   time.Time
	rest bytes.Buffer // the result's JSON
	done chan error
}

func startDesktopStream(ctx context.Context, agent, name string, d time.Duration) (*desktopStream, error) {
	bin := agent
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	s := &desktopStream{done: make(chan error, 1)}
	s.cmd = exec.CommandContext(ctx, bin, "bench", "desktop-load", name, "--json", "--progress",
		"--seconds", strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
	s.cmd.Stderr = &s.errb
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if w, _, ok := workload.ParseProgress(line); ok {
				now := time.Now()
				s.mu.Lock()
				s.work, s.at = w, now
				s.mu.Unlock()
				continue
			}
			s.mu.Lock()
			s.rest.WriteString(line)
			s.rest.WriteByte('\n')
			s.mu.Unlock()
		}
		s.done <- s.cmd.Wait()
	}()
	return s, nil
}

func (s *desktopStream) Progress() (float64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.work, s.at
}

func (s *desktopStream) Stop() { _ = s.cmd.Process.Signal(syscall.SIGTERM) }

func (s *desktopStream) Wait() (interference.Result, error) {
	if err := <-s.done; err != nil {
		return interference.Result{}, fmt.Errorf("%s: %w: %s", s.cmd, err, bytes.TrimSpace(s.errb.Bytes()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res interference.Result
	if err := json.Unmarshal(s.rest.Bytes(), &res); err != nil {
		return interference.Result{}, fmt.Errorf("desktop-load output: %w", err)
	}
	return res, nil
}
