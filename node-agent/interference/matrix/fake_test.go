package matrix

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// fakeControl records what policies set on a guest's cgroup.
type fakeControl struct {
	mu     sync.Mutex
	idle   bool
	max    float64
	frozen bool
	calls  []string
}

func (f *fakeControl) SetIdle(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idle = on
	f.calls = append(f.calls, fmt.Sprintf("idle %v", on))
	return nil
}
func (f *fakeControl) SetCPUMax(c float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.max = c
	f.calls = append(f.calls, fmt.Sprintf("max %g", c))
	return nil
}
func (f *fakeControl) Freeze(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
	return nil
}
func (f *fakeControl) Thaw(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = false
	return nil
}

// fakeThreads: two threads per PID, with nice and idle class per thread.
type fakeThreads struct {
	mu   sync.Mutex
	nice map[int]int
	idle map[int]bool
}

func newFakeThreads() *fakeThreads { return &fakeThreads{nice: map[int]int{}, idle: map[int]bool{}} }

func (f *fakeThreads) Threads(pid int) ([]int, error) { return []int{pid, pid + 1}, nil }
func (f *fakeThreads) SetNice(tid, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nice[tid] = n
	return nil
}
func (f *fakeThreads) SetIdleSched(tid int, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idle[tid] = on
	return nil
}

// fakeGuest progresses at rate work/s while running (not frozen), slower while a desktop
// runs (world.busy).
type fakeGuest struct {
	w       *world
	ctl     *fakeControl
	mu      sync.Mutex
	work    float64
	last    time.Time
	stopped bool
	pid     int
}

func (g *fakeGuest) Progress() (float64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	r := 1000.0
	if g.w.busyNow() {
		r = 400
	}
	g.ctl.mu.Lock()
	if g.ctl.frozen {
		r = 0
	}
	g.ctl.mu.Unlock()
	g.work += r * now.Sub(g.last).Seconds()
	g.last = now
	return g.work, nil
}
func (g *fakeGuest) Group() *cgroup.Group { return nil }
func (g *fakeGuest) PIDs() ([]int, error) { return []int{g.pid}, nil }
func (g *fakeGuest) Stop(context.Context) error {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	g.stopped = true
	g.w.guests--
	return nil
}

type world struct {
	mu      sync.Mutex
	guests  int // running guests
	busy    int
	started int
	ctls    map[interference.Guest]*fakeControl
	threads *fakeThreads
	jitter  *rand.Rand // noise on the desktop's rate
}

func newWorld() *world {
	return &world{ctls: map[interference.Guest]*fakeControl{}, threads: newFakeThreads()}
}

// active counts the guests running and not frozen.
func (w *world) active() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for g, c := range w.ctls {
		c.mu.Lock()
		if !g.(*fakeGuest).stopped && !c.frozen {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

func (w *world) busyNow() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.busy > 0 }

type fakeRunner struct {
	w    *world
	name string
}

func (r fakeRunner) Name() string { return r.name }
func (r fakeRunner) Start(ctx context.Context, workload string, threads int) (interference.Guest, error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.guests++
	r.w.started++
	g := &fakeGuest{w: r.w, ctl: &fakeControl{}, last: time.Now(), pid: 1000 + 10*r.w.started}
	r.w.ctls[g] = g.ctl
	return g, nil
}

// desktop: 1000 ops/s alone, 900 with a guest running; latencies 50 µs alone, 60 with.
func (w *world) runDesktop(ctx context.Context, name string, d time.Duration) (interference.Result, error) {
	w.mu.Lock()
	w.busy++
	w.mu.Unlock()
	withGuest := w.active() > 0
	defer func() { w.mu.Lock(); w.busy--; w.mu.Unlock() }()
	time.Sleep(d)
	rate, lat := 1000.0, 50.0
	if withGuest {
		rate, lat = 900, 60
	}
	if w.jitter != nil {
		w.mu.Lock()
		rate += 100 * w.jitter.Float64()
		w.mu.Unlock()
	}
	res := interference.Result{Workload: name, Seconds: d.Seconds(), Work: rate * d.Seconds(), Unit: "ops", CPUSeconds: d.Seconds()}
	if KindOf(name) != Throughput {
		res.LatencyUs = []float64{lat, lat, lat, 2 * lat}
		res.Events, res.Missed = 10, 1
	}
	return res, nil
}

type fakeProbe struct{ w *world }

func (p fakeProbe) Stop() interference.Result {
	r := interference.Result{Seconds: 1, CPUSeconds: 0.01, LatencyUs: []float64{20, 30, 100}}
	if p.w.active() > 0 {
		r.LatencyUs[2] = 400
	}
	return r
}

type fakeSignals struct{}

func (fakeSignals) Begin() func() interference.Window {
	t0 := time.Now()
	return func() interference.Window {
		return interference.Window{Seconds: time.Since(t0).Seconds(), DesktopCPUSeconds: 0.5, DesktopWaitSeconds: 0.01}
	}
}
func (fakeSignals) Close() {}

type fakeController struct{ n int }

func (c *fakeController) Step(now time.Time, est Estimate, owner bool) float64 {
	c.n++
	return 0.5
}

func (w *world) deps() Deps {
	return Deps{
		Runners:    map[string]interference.Runner{"process": fakeRunner{w, "process"}, "qemu": fakeRunner{w, "qemu"}},
		RunDesktop: w.runDesktop,
		StartProbe: func(context.Context) (Probe, error) { return fakeProbe{w}, nil },
		Signals:    func(interference.Guest) (Signals, error) { return fakeSignals{}, nil },
		Estimate: func(win interference.Window) Estimate {
			return Estimate{Slowdown: win.DesktopWaitSeconds / win.Seconds, Low: 0, High: 0.1, Method: "fake"}
		},
		NewController: func() Controller { return &fakeController{} },
		control: func(g interference.Guest) control {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.ctls[g]
		},
		threads: w.threads,
	}
}
