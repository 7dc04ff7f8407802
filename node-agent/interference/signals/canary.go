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
// about twice the L2 (so it lives in the shared last-level cache, well beyond L1),
// timed in the calling thread's CPU time. A guest that thrashes the last-level cache or
// takes the memory bandwidth makes it slower; time spent waiting for a CPU does not
// count (that is the run-queue wait's part). Its time relative to the baseline — the
// median with the guest frozen or absent — is the memory interference the desktop's
// own memory-bound work sees.
//
// Run it on a thread locked with runtime.LockOSThread (the Monitor's Run does):
// otherwise the Go scheduler could move the goroutine between the two clock reads.
type Canary struct {
	mu       sync.Mutex
	next     []uint32 // next[i*lineWords] is the index of the line after line i, in words
	steps    int
	baseline time.Duration
}

// lineWords is one 64-byte cache line in uint32 words.
const lineWords = 16

// NewCanary makes a canary over bytes of memory (0: twice the L2 from sysfs, 2 MiB when
// unknown), chasing every line twice per run: about 1 ms on a current x86.
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
	return &Canary{next: next, steps: 2 * lines}
}

// sink keeps the chase from being optimised away.
var sink uint32

// Run times one chase (after a sequential warm-up pass that brings the buffer back into
// the caches the guest may have emptied since the last run) and returns its CPU time.
func (c *Canary) Run() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var acc uint32
	for i := 0; i < len(c.next); i += lineWords {
		acc += c.next[i]
	}
	t0 := threadCPU()
	p := uint32(0)
	for i := 0; i < c.steps; i++ {
		p = c.next[p]
	}
	d := threadCPU() - t0
	sink = acc + p
	return d
}

// Calibrate runs the canary n times (default 15), sets the median as the baseline and
// returns it. Call it with the guest frozen or absent.
func (c *Canary) Calibrate(n int) time.Duration {
	if n <= 0 {
		n = 15
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c.Run() // first touch: page faults, TLB
	d := make([]time.Duration, n)
	for i := range d {
		d[i] = c.Run()
	}
	slices.Sort(d)
	m := d[n/2]
	c.SetBaseline(m)
	return m
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
