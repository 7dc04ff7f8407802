package signals

import (
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Canary is a short memory-bound probe: a dependent pointer chase through a buffer
// about twice the L2 (beyond L1 and L2: it lives in the shared last-level cache when
// nothing disturbs it), timed in the calling thread's CPU time. There is no warm-up
// pass: like an interactive desktop task that wakes up now and then, the canary finds
// its data where the time since its last run left it. A guest that evicts it from the
// caches between runs (on the same core between the desktop's time slices, or from the
// shared last-level cache) or takes memory bandwidth during the run makes it slower;
// time spent waiting for a CPU does not count (that is the run-queue wait's part). Its
// time relative to the baseline — the median with the guest frozen or absent, at the
// same spacing (Gap) — is the memory interference the desktop's own memory-bound work
// sees.
//
// Run it on a thread locked with runtime.LockOSThread (the Monitor's Run does):
// otherwise the Go scheduler could move the goroutine between the two clock reads.
type Canary struct {
	mu       sync.Mutex
	next     []uint32 // next[i*lineWords] is the index of the line after line i, in words
	steps    int
	pos      uint32 // where the last run stopped: the next one goes on from there
	baseline time.Duration
	// Gap is the pause between calibration runs: the same as between the Monitor's runs
	// (its Tick), since the time between runs decides how much of the buffer is still
	// cached. NewMonitor sets it to its Tick when zero.
	Gap time.Duration
}

// lineWords is one 64-byte cache line in uint32 words.
const lineWords = 16

// NewCanary makes a canary over bytes of memory (0: twice the L2 from sysfs, 2 MiB when
// unknown). Each run follows a quarter of the cycle, going on where the last stopped, so
// a line is visited every fourth run (every second at the Monitor's 250 ms): a run costs
// about 0.1 ms when the buffer is cached and under 1 ms when it all comes from memory
// (measured here: 8k lines at ~105 ns), while the buffer the guest must leave alone
// stays twice the L2.
func NewCanary(bytes int) *Canary {
	if bytes <= 0 {
		bytes = 2 * l2Size()
	}
	lines := max(bytes/64, 64)
	// A random cyclic order of the lines (Sattolo): the hardware prefetcher cannot guess
	// the next line; a fixed seed gives every run and host the same chase.
	order := make([]int, lines)
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(16, 2026))
	for i := lines - 1; i > 0; i-- {
		j := rng.IntN(i)
		order[i], order[j] = order[j], order[i]
	}
	next := make([]uint32, lines*lineWords)
	for i := 0; i < lines; i++ {
		next[order[i]*lineWords] = uint32(order[(i+1)%lines] * lineWords)
	}
	return &Canary{next: next, steps: lines / 4}
}

// Run times one chase and returns its CPU time.
func (c *Canary) Run() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	t0 := threadCPU()
	c.pos = chase(c.next, c.pos, c.steps)
	return threadCPU() - t0
}

// chase follows steps links from p and returns where it ended. Not instrumented by the
// race detector: its time is the measurement.
//
//go:norace
func chase(next []uint32, p uint32, steps int) uint32 {
	for i := 0; i < steps; i++ {
		p = next[p]
	}
	return p
}

// Calibrate runs the canary n times (default 15), Gap apart, sets the median as the
// baseline and returns it. Call it with the guest frozen or absent; it takes n×Gap.
func (c *Canary) Calibrate(n int) time.Duration {
	if n <= 0 {
		n = 15
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c.Run() // first touch: page faults
	d := make([]time.Duration, n)
	for i := range d {
		if c.Gap > 0 {
			time.Sleep(c.Gap) // the spacing being calibrated, not synchronisation
		}
		d[i] = c.Run()
	}
	m := median(d)
	c.SetBaseline(m)
	return m
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// SetBaseline sets the baseline (from the host's calibration profile: CanaryNs).
func (c *Canary) SetBaseline(d time.Duration) {
	c.mu.Lock()
	c.baseline = d
	c.mu.Unlock()
}

// Baseline is the calibrated time (0: not calibrated).
func (c *Canary) Baseline() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.baseline
}

// l2Size reads cpu0's level-2 cache size from sysfs (2 MiB when unknown).
func l2Size() int {
	for i := 0; i < 8; i++ {
		dir := "/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/"
		lv, err := os.ReadFile(dir + "level")
		if err != nil || strings.TrimSpace(string(lv)) != "2" {
			continue
		}
		s, err := os.ReadFile(dir + "size")
		if err != nil {
			break
		}
		t := strings.TrimSpace(string(s))
		mult := 1
		switch {
		case strings.HasSuffix(t, "K"):
			mult, t = 1<<10, strings.TrimSuffix(t, "K")
		case strings.HasSuffix(t, "M"):
			mult, t = 1<<20, strings.TrimSuffix(t, "M")
		}
		if v, err := strconv.Atoi(t); err == nil && v > 0 {
			return v * mult
		}
	}
	return 1 << 20
}
