// Package signals observes, on a running PC, what the desktop suffers from the compute
// guest: the desktop's CPU time and run-queue wait, the guest's CPU time and steal, and a
// memory canary for the cache and memory-bandwidth interference the run queue does not
// show (there are no hardware performance counters on the pool's PCs).
//
// A Monitor samples every Tick and keeps cumulative Totals; the difference of two
// snapshots is a measurement interference.Window (WindowOf), which
// node-agent/interference/estimate turns into a slowdown. Cumulative totals let any
// number of readers (the controller's tick, each job's report, a matrix run) take their
// own windows from one sampler.
//
// Where the desktop's numbers come from:
//   - cgroup v2 with a desktop group (user.slice): its cpu.pressure "some" total (time at
//     least one desktop task waited for a CPU) and cpu.stat usage_usec;
//   - otherwise (cgroup v1, no desktop group): every task's /proc/PID/task/TID/schedstat
//     (run ns, run-queue wait ns), summed over the tasks outside the guest's cgroup,
//     without kernel threads and without the agent's own process (its probes). The
//     scanner keeps each task's schedstat file open and re-reads it with one pread, so a
//     scan costs one readdir of /proc, one of each process's task directory and one pread
//     per task (see BenchmarkScan for the cost per task).
package signals

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// Totals are a Monitor's cumulative counters since it started.
type Totals struct {
	Time    time.Time `json:"time"`
	Samples int       `json:"samples"`
	// Desktop: CPU time of the tasks outside the guest and their run-queue wait (PSI
	// "some" time in the v2 group mode, the tasks' summed wait when scanning).
	DesktopCPU  time.Duration `json:"desktopCPU"`
	DesktopWait time.Duration `json:"desktopWait"`
	// DesktopSlices: timeslices the desktop's tasks ran (schedstat's third field; about
	// one per wake-up). Scan mode only: the v2 group mode has no per-task counts and
	// leaves it 0 (the estimator then applies no per-slice wait baseline).
	DesktopSlices int64 `json:"desktopSlices,omitempty"`
	// Guest: CPU time of the guest's cgroup and its threads' run-queue wait (steal).
	GuestCPU   time.Duration `json:"guestCPU"`
	GuestSteal time.Duration `json:"guestSteal"`
	// OwnerActive: time the owner was active (as SetOwnerActive said).
	OwnerActive time.Duration `json:"ownerActive"`
	// Canary counts the canary's runs by their ratio to the baseline (CanaryHist).
	Canary CanaryHist `json:"canary"`
	// Cost is the CPU time the sampler and canary themselves used.
	Cost time.Duration `json:"cost"`
}

// WindowOf is what was measured between two snapshots of one Monitor.
func WindowOf(from, to Totals) interference.Window {
	s := func(a, b time.Duration) float64 { return math.Max((b - a).Seconds(), 0) }
	w := interference.Window{
		DesktopCPUSeconds:  s(from.DesktopCPU, to.DesktopCPU),
		DesktopWaitSeconds: s(from.DesktopWait, to.DesktopWait),
		DesktopSlices:      math.Max(float64(to.DesktopSlices-from.DesktopSlices), 0),
		GuestCPUSeconds:    s(from.GuestCPU, to.GuestCPU),
		GuestStealSeconds:  s(from.GuestSteal, to.GuestSteal),
		OwnerActiveSeconds: s(from.OwnerActive, to.OwnerActive),
	}
	if !from.Time.IsZero() && !to.Time.IsZero() {
		w.Seconds = math.Max(to.Time.Sub(from.Time).Seconds(), 0)
	}
	w.CanaryRatio = to.Canary.Sub(from.Canary).Median()
	return w
}

// MonitorConfig configures a Monitor.
type MonitorConfig struct {
	// Tick is the sampling interval (default 250 ms).
	Tick time.Duration
	// Guest returns the guest's cgroup now (nil: no guest running). Called every tick.
	Guest func() *cgroup.Group
	// DesktopGroup is a cgroup v2 group holding the desktop's sessions (DesktopGroupV2);
	// nil scans /proc.
	DesktopGroup *cgroup.Group
	// Canary, when set, runs every tick. Without a baseline (Canary.SetBaseline from the
	// host's profile, or Calibrate) the Monitor makes one from the median of its first
	// CalibrationRuns runs while no guest runs; until then CanaryRatio is 0 (unmeasured).
	Canary *Canary
	// DesktopPIDs, when set, names the desktop's processes (a matrix run's desktop
	// workload, tests) instead of every task outside the guest. Scan mode only.
	DesktopPIDs func() []int
	// Proc is the proc file system (default /proc).
	Proc string
	// OnlyWithGuest: sample the desktop only while a guest runs (the agent: there is no
	// interference to measure without one); without a guest only the canary runs, until
	// its baseline is made.
	OnlyWithGuest bool
}

// Monitor samples the signals. Its methods are safe from any goroutine; Run samples.
type Monitor struct {
	cfg   MonitorConfig
	ticks chan Totals

	mu     sync.Mutex
	tot    Totals
	active bool

	// Sampler state (Run's goroutine, or the Sample caller).
	scan       *scanner
	guestPath  string
	guestUsage time.Duration
	deskUsage  time.Duration
	deskWait   time.Duration
	deskInit   bool
	calib      []time.Duration // canary runs without a guest, until the baseline is set
	idleCanary bool
}

// CalibrationRuns is how many canary runs without a guest make the Monitor's baseline.
const CalibrationRuns = 15

// NewMonitor returns a monitor; Run (or Sample) does the work.
func NewMonitor(cfg MonitorConfig) *Monitor {
	if cfg.Tick <= 0 {
		cfg.Tick = 250 * time.Millisecond
	}
	if cfg.Proc == "" {
		cfg.Proc = "/proc"
	}
	if cfg.Guest == nil {
		cfg.Guest = func() *cgroup.Group { return nil }
	}
	if cfg.Canary != nil && cfg.Canary.Gap == 0 {
		cfg.Canary.Gap = cfg.Tick
	}
	return &Monitor{cfg: cfg, ticks: make(chan Totals, 1), scan: newScanner(cfg.Proc)}
}

// Ticks delivers the totals after each sample (only the newest when the reader is slow).
func (m *Monitor) Ticks() <-chan Totals { return m.ticks }

// Tick is the sampling interval.
func (m *Monitor) Tick() time.Duration { return m.cfg.Tick }

// Snapshot is the totals as of the last sample.
func (m *Monitor) Snapshot() Totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tot
}

// Window is what was measured between two snapshots (WindowOf).
func (m *Monitor) Window(from, to Totals) interference.Window { return WindowOf(from, to) }

// SetOwnerActive says whether someone is at the desk (counted into OwnerActive from the
// next sample on).
func (m *Monitor) SetOwnerActive(on bool) {
	m.mu.Lock()
	m.active = on
	m.mu.Unlock()
}

// Run samples every Tick until ctx is done. It locks its goroutine to one OS thread:
// the canary's timing is that thread's CPU time.
func (m *Monitor) Run(ctx context.Context) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer m.scan.close()
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		m.Sample(time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sample takes one sample at now. Call it from one goroutine at a time, locked to its
// thread when a canary is configured (Run does both).
func (m *Monitor) Sample(now time.Time) {
	c0 := threadCPU()
	g := m.cfg.Guest()
	var d sample
	first := m.tot.Samples == 0
	if g == nil && m.cfg.OnlyWithGuest {
		m.idleSample(now, c0)
		return
	}

	// The guest's CPU from its cgroup (a new group, or a counter that went back, is a new
	// guest: its usage so far is not counted).
	guestPIDs := map[int]bool{}
	if g != nil {
		if u, err := g.CPUUsage(); err == nil {
			if p := g.Path(); p == m.guestPath && u >= m.guestUsage {
				d.guestCPU = u - m.guestUsage
			}
			m.guestPath, m.guestUsage = g.Path(), u
		}
		if pids, err := g.AllProcs(); err == nil {
			for _, p := range pids {
				guestPIDs[p] = true
			}
		}
	} else {
		m.guestPath = ""
	}

	if dg := m.cfg.DesktopGroup; dg != nil {
		// v2: the group's own accounting; the scan only looks at the guest's tasks.
		u, err1 := dg.CPUUsage()
		p, err2 := dg.Pressure()
		if err1 == nil && err2 == nil {
			w := p.CPU.Some.Total
			if m.deskInit && u >= m.deskUsage && w >= m.deskWait {
				d.deskCPU, d.deskWait = u-m.deskUsage, w-m.deskWait
			}
			m.deskUsage, m.deskWait, m.deskInit = u, w, true
		}
		s := m.scan.scan(guestPIDs, nil, true)
		d.guestSteal = s.guestWait
	} else {
		var desk []int
		if m.cfg.DesktopPIDs != nil {
			desk = m.cfg.DesktopPIDs()
		}
		s := m.scan.scan(guestPIDs, desk, false)
		d.deskCPU, d.deskWait, d.guestSteal = s.deskRun, s.deskWait, s.guestWait
		d.deskSlices = int64(s.deskSlices)
	}

	var ratio float64
	if c := m.cfg.Canary; c != nil {
		d := c.Run()
		switch b := c.Baseline(); {
		case b > 0:
			ratio = float64(d) / float64(b)
		case g == nil && !first:
			// No guest: this run is a baseline run (the first, with its page faults,
			// is not).
			m.calib = append(m.calib, d)
			if len(m.calib) >= CalibrationRuns {
				c.SetBaseline(median(m.calib))
				m.calib = nil
			}
		}
	}
	cost := threadCPU() - c0

	m.mu.Lock()
	if !first && !m.tot.Time.IsZero() && now.After(m.tot.Time) && m.active {
		m.tot.OwnerActive += now.Sub(m.tot.Time)
	}
	m.tot.Time = now
	m.tot.Samples++
	m.tot.DesktopCPU += d.deskCPU
	m.tot.DesktopWait += d.deskWait
	m.tot.DesktopSlices += d.deskSlices
	m.tot.GuestCPU += d.guestCPU
	m.tot.GuestSteal += d.guestSteal
	m.tot.Cost += cost
	if ratio > 0 {
		m.tot.Canary.Add(ratio)
	}
	tot := m.tot
	m.mu.Unlock()
	m.deliver(tot)
}

// deliver hands the totals to the Ticks reader.
func (m *Monitor) deliver(tot Totals) {
	select {
	case m.ticks <- tot:
	default:
		// The reader has not taken the previous one: replace it with the newest.
		select {
		case <-m.ticks:
		default:
		}
		select {
		case m.ticks <- tot:
		default:
		}
	}
}

// idleSample is a sample without a guest under OnlyWithGuest: time passes, the canary
// makes its baseline, the scanner forgets its tasks (their counters would be stale).
func (m *Monitor) idleSample(now time.Time, c0 time.Duration) {
	if c := m.cfg.Canary; c != nil && c.Baseline() == 0 {
		d := c.Run()
		if !m.idleCanary {
			m.idleCanary = true // the first run, with its page faults, is not a baseline run
		} else if m.calib = append(m.calib, d); len(m.calib) >= CalibrationRuns {
			c.SetBaseline(median(m.calib))
			m.calib = nil
		}
	}
	if m.scan.n > 0 {
		m.scan.close()
		m.scan = newScanner(m.cfg.Proc)
	}
	m.guestPath, m.deskInit = "", false
	cost := threadCPU() - c0
	m.mu.Lock()
	if !m.tot.Time.IsZero() && now.After(m.tot.Time) && m.active {
		m.tot.OwnerActive += now.Sub(m.tot.Time)
	}
	m.tot.Time = now
	m.tot.Samples++
	m.tot.Cost += cost
	tot := m.tot
	m.mu.Unlock()
	m.deliver(tot)
}

// SetCanaryBaseline sets the canary's baseline (from the host's calibration profile,
// wire.InterferenceProfile.CanaryNs); no-op without a canary.
func (m *Monitor) SetCanaryBaseline(d time.Duration) {
	if m.cfg.Canary != nil && d > 0 {
		m.cfg.Canary.SetBaseline(d)
	}
}

type sample struct {
	deskCPU, deskWait, guestCPU, guestSteal time.Duration
	deskSlices                              int64
}

// DesktopGroupV2 is the cgroup v2 group the desktop's sessions run in (user.slice) when
// the host is on cgroup v2 and the group has cpu.pressure; nil otherwise (scan /proc).
func DesktopGroupV2() *cgroup.Group {
	h, err := cgroup.Detect()
	if err != nil || h.Version() != cgroup.V2 {
		return nil
	}
	g := h.Group("user.slice")
	if _, err := os.Stat(filepath.Join(g.Dir(""), "cpu.pressure")); err != nil {
		return nil
	}
	return g
}

// GuestCPUAndSteal reads a guest's cgroup once: CPU used by all its processes and the
// run-queue wait of its live threads (schedstat), both since they started. Threads that
// exited take their wait with them: steal is a lower bound. (The Monitor counts steal
// by differences and keeps what exited threads waited while it watched.)
func GuestCPUAndSteal(g *cgroup.Group) (cpu, steal time.Duration, err error) {
	if cpu, err = g.CPUUsage(); err != nil {
		return 0, 0, err
	}
	pids, err := g.AllProcs()
	if err != nil {
		return cpu, 0, err
	}
	for _, p := range pids {
		_, w, _ := processSchedstat("/proc", p)
		steal += w
	}
	return cpu, steal, nil
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

var errShort = errors.New("signals: short schedstat")
