package workload

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// DefaultProbeInterval is the Probe's tick: fine enough to see a scheduler tick's worth of
// delay, coarse enough that the probe itself costs little (see Probe).
const DefaultProbeInterval = 2 * time.Millisecond

// Probe is the wake-up probe run alongside a desktop workload: a locked OS thread of its
// own that sleeps to every tick (absolute CLOCK_MONOTONIC deadlines) and records how late
// it woke, i.e. how long a freshly woken interactive thread of the desktop waits for a
// CPU. Its own cost is its thread's CPU time, reported in the Result's CPUSeconds: on the
// 2-core EPYC VM we develop on about 30 µs of CPU per wake-up (each timer arm and expiry
// exits to the hypervisor), i.e. 1.5 % of a CPU at the default 2 ms; bare metal costs a
// fraction of that. TestProbeOverhead logs it.
type Probe struct {
	start time.Time
	stop  atomic.Bool
	done  chan interference.Result
}

// StartProbe starts a probe ticking every interval (<= 0: DefaultProbeInterval).
func StartProbe(interval time.Duration) *Probe {
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	p := &Probe{start: time.Now(), done: make(chan interference.Result, 1)}
	go func() {
		// Never unlocked: the thread ends with the probe (and its changed timer slack).
		runtime.LockOSThread()
		r := interference.Result{Workload: "probe", Unit: "wakeups"}
		cpu := ThreadCPU()
		r.LatencyUs = wakeLoop(interval, p.stop.Load)
		r.CPUSeconds = (ThreadCPU() - cpu).Seconds()
		r.Work = float64(len(r.LatencyUs))
		p.done <- r
	}()
	return p
}

// Stop ends the probe (within one interval) and returns its wake-up latencies (LatencyUs,
// µs), the number of wake-ups (Work) and the probe thread's CPU time (CPUSeconds: its
// overhead is CPUSeconds/Seconds CPUs).
func (p *Probe) Stop() interference.Result {
	p.stop.Store(true)
	r := <-p.done
	r.Seconds = time.Since(p.start).Seconds()
	return r
}
