// Package workload holds the workloads of the interference benchmark (docs/interference.md):
// desktop workloads, which stand for what a PC's user does and whose slowdown the benchmark
// measures, and guest workloads, which stand for a compute job and whose harvest it
// measures.
//
// Desktop workloads (RunDesktop) run in the calling process, each on one locked OS thread,
// for a given time, and return an interference.Result. Their CPUSeconds is the getrusage
// (RUSAGE_THREAD) delta of that thread, plus for startup the RUSAGE_CHILDREN delta of the
// started programs: it counts the workload and nothing else of the process (the Go
// runtime's background threads, a Probe).
//
// Guest workloads (RunGuest) run until their context ends with any number of threads and
// report cumulative work as progress lines (ProgressPrefix).
package workload

import (
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// DesktopOptions tune the desktop workloads; the zero value is the benchmark's setting.
type DesktopOptions struct {
	// WakeInterval is the wakeup workload's tick (default 1 ms).
	WakeInterval time.Duration
	// FrameRate is the frame workload's frames per second (default 60) and FrameWork the
	// CPU work per frame, as time on an idle machine (default 4 ms).
	FrameRate float64
	FrameWork time.Duration
	// FSRoot is the tree the fs workload walks (default /usr).
	FSRoot string
	// StartCommand is what the startup workload runs (default DefaultStartCommand).
	StartCommand []string
	// MemoryBytes is the size of each of the memory workload's three arrays (default
	// 64 MiB, twice the 32 MiB L3 of the machines we measured).
	MemoryBytes int
	// Progress, when set, is told the throughput workloads' (cpu, memory, fs) cumulative
	// work after every unit of it: the matrix's paired measurement reads the desktop's
	// rate over short segments of one run (`bench desktop-load --progress`). It must be
	// cheap (an atomic store).
	Progress func(work float64)
}

// progress reports r.Work to o.Progress when set.
func (o DesktopOptions) progress(r *interference.Result) {
	if o.Progress != nil {
		o.Progress(r.Work)
	}
}

// DefaultStartCommand is a Go runtime's start: the agent binary's hidden no-op command
// (`overtime-agent bench noop`), i.e. an exec of a 30 MB static binary and its runtime's
// initialisation, the part of an application's start that CPU contention slows.
var DefaultStartCommand = []string{"/proc/self/exe", "bench", "noop"}

var desktopNames = []string{"wakeup", "frame", "cpu", "memory", "fs", "startup"}

// DesktopUnit is the unit of a desktop workload's Work.
func DesktopUnit(name string) string {
	switch name {
	case "wakeup":
		return "wakeups"
	case "frame":
		return "frames"
	case "cpu":
		return "ops"
	case "memory":
		return "bytes"
	case "fs":
		return "files"
	case "startup":
		return "starts"
	}
	return ""
}

// DesktopNames are the desktop workloads RunDesktop knows.
func DesktopNames() []string { return append([]string(nil), desktopNames...) }

// RunDesktop runs desktop workload name for d (or until ctx ends) with the default options.
func RunDesktop(ctx context.Context, name string, d time.Duration) (interference.Result, error) {
	return DesktopOptions{}.Run(ctx, name, d)
}

// Run runs desktop workload name for d (or until ctx ends, whichever is first). The
// workload runs on a locked OS thread of its own; set-up (allocating the memory workload's
// arrays, the frame workload's one-time calibration) is not part of Seconds.
func (o DesktopOptions) Run(ctx context.Context, name string, d time.Duration) (interference.Result, error) {
	o = o.withDefaults()
	var run func(ctx context.Context, d time.Duration, r *interference.Result) error
	switch name {
	case "wakeup":
		run = o.wakeup
	case "frame":
		run = o.frame
	case "cpu":
		run = o.cpu
	case "memory":
		run = o.memory
	case "fs":
		run = o.fs
	case "startup":
		run = o.startup
	default:
		return interference.Result{}, fmt.Errorf("workload: unknown desktop workload %q (have %v)", name, desktopNames)
	}
	if d <= 0 {
		return interference.Result{}, fmt.Errorf("workload %s: duration %v: want > 0", name, d)
	}
	r := interference.Result{Workload: name}
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread may carry a changed state (the wake-up loops' timer
		// slack), which must not leak into the runtime's pool; it ends with the goroutine.
		runtime.LockOSThread()
		err = run(ctx, d, &r)
	}()
	<-done
	return r, err
}

func (o DesktopOptions) withDefaults() DesktopOptions {
	if o.WakeInterval <= 0 {
		o.WakeInterval = time.Millisecond
	}
	if o.FrameRate <= 0 {
		o.FrameRate = 60
	}
	if o.FrameWork <= 0 {
		o.FrameWork = 4 * time.Millisecond
	}
	if o.FSRoot == "" {
		o.FSRoot = "/usr"
	}
	if len(o.StartCommand) == 0 {
		o.StartCommand = DefaultStartCommand
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = 64 << 20
	}
	return o
}

// span measures a workload's wall and thread CPU time; the caller's thread must be locked.
type span struct {
	wall time.Time
	cpu  time.Duration
}

// startSpan starts measuring, after the workload's set-up, and returns when a run of d
// ends.
func startSpan(d time.Duration) (span, time.Time) {
	s := span{wall: time.Now(), cpu: ThreadCPU()}
	return s, s.wall.Add(d)
}

func (s span) end(r *interference.Result) {
	r.Seconds = time.Since(s.wall).Seconds()
	r.CPUSeconds += (ThreadCPU() - s.cpu).Seconds()
}

// ThreadCPU is the CPU time (user + system) of the calling OS thread (getrusage
// RUSAGE_THREAD); meaningful between calls on a locked thread.
func ThreadCPU() time.Duration { return rusage(unix.RUSAGE_THREAD) }

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// over reports whether the run should end: its deadline passed or ctx ended.
func over(ctx context.Context, deadline time.Time) bool {
	return ctx.Err() != nil || !time.Now().Before(deadline)
}

func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// sleepUntil sleeps to the absolute CLOCK_MONOTONIC time t (ns), as cyclictest does:
// absolute, so that the time spent recording a sample does not shift the next tick.
// Interruptions (the Go runtime preempts threads with signals) resume the same sleep.
func sleepUntil(t int64) {
	ts := unix.NsecToTimespec(t)
	for {
		if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil); err != unix.EINTR {
			return
		}
	}
}

// wakeLoop sleeps to each tick of interval and records the overshoot in µs until stop
// says so. A tick already past when the previous wake-up is done is skipped (a late
// wake-up is one sample, not a burst of zero sleeps).
//
// The calling (locked) thread's timer slack is set to 1 ns first, as cyclictest's
// measuring threads do: the default 50 µs slack would add a constant that hides the
// scheduling delay the probe is there to see.
func wakeLoop(interval time.Duration, stop func() bool) []float64 {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	lat := make([]float64, 0, 4096)
	iv := interval.Nanoseconds()
	next := monoNow() + iv
	for !stop() {
		sleepUntil(next)
		now := monoNow()
		lat = append(lat, float64(now-next)/1e3)
		next += iv
		if next <= now {
			next = now + iv - (now-next)%iv
		}
	}
	return lat
}

func (o DesktopOptions) wakeup(ctx context.Context, d time.Duration, r *interference.Result) error {
	s, deadline := startSpan(d)
	r.LatencyUs = wakeLoop(o.WakeInterval, func() bool { return over(ctx, deadline) })
	s.end(r)
	r.Work, r.Unit = float64(len(r.LatencyUs)), "wakeups"
	return nil
}

// spin is the frame workload's CPU work: n rounds of integer mixing on registers (no
// memory traffic, so that it measures CPU time given, not cache pressure).
func spin(n int) uint64 {
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		x += uint64(i)
	}
	return x
}

// sink keeps the compiler from dropping work whose result is otherwise unused.
var sink uint64

var (
	calibrateOnce sync.Once
	spinNsPerIter float64
)

// spinRate is the time of one spin iteration on this machine, measured once per process:
// the fastest of several short runs, i.e. the time when nothing else competes (a loaded
// machine at calibration makes the runs slower, never faster).
func spinRate() float64 {
	calibrateOnce.Do(func() {
		const n = 200_000
		best := time.Duration(1 << 62)
		for i := 0; i < 15; i++ {
			t := time.Now()
			sink += spin(n)
			if d := time.Since(t); d < best {
				best = d
			}
		}
		spinNsPerIter = float64(best.Nanoseconds()) / n
	})
	return spinNsPerIter
}

// SpinFor is the number of spin iterations that take d on an idle CPU of this machine.
func spinFor(d time.Duration) int { return int(float64(d.Nanoseconds()) / spinRate()) }

// frame renders FrameRate frames per second: each does FrameWork of CPU work, then sleeps
// to the next frame's start. A frame whose work ends after its deadline (its start plus
// one period) is missed; the next frame then starts at the next period boundary, as a
// compositor drops to the next vblank.
func (o DesktopOptions) frame(ctx context.Context, d time.Duration, r *interference.Result) error {
	iters := spinFor(o.FrameWork)
	period := int64(float64(time.Second) / o.FrameRate)
	s, deadline := startSpan(d)
	start := monoNow()
	for !over(ctx, deadline) {
		t0 := monoNow()
		sink += spin(iters)
		t1 := monoNow()
		r.Events++
		r.LatencyUs = append(r.LatencyUs, float64(t1-t0)/1e3)
		if t1 > start+period {
			r.Missed++
		}
		start += period
		if start <= t1 {
			start = t1 + period - (t1-start)%period
		}
		sleepUntil(start)
	}
	s.end(r)
	r.Work, r.Unit = float64(r.Events), "frames"
	return nil
}

// compileLikeInput is text-like data for the cpu workload: words from a small vocabulary,
// which deflate finds matches in, the branchy integer work a compiler does.
func compileLikeInput(n int) []byte {
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "struct", "int", "string",
		"ctx", "context", ":=", "{", "}", "(", ")", "package", "import", "var", "const", "type"}
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(8) == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.Bytes()[:n]
}

// cpu compresses a 64 KiB text-like block again and again; one op is one block.
func (o DesktopOptions) cpu(ctx context.Context, d time.Duration, r *interference.Result) error {
	in := compileLikeInput(64 << 10)
	zw, err := flate.NewWriter(io.Discard, flate.BestSpeed)
	if err != nil {
		return err
	}
	s, deadline := startSpan(d)
	for !over(ctx, deadline) {
		zw.Reset(io.Discard)
		if _, err := zw.Write(in); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		r.Work++
		o.progress(r)
	}
	s.end(r)
	r.Unit = "ops"
	return nil
}

// triadChunk is how many elements a triad pass does between checks of the deadline.
const triadChunk = 1 << 18

// triad is STREAM's triad a = b + s·c over [lo, hi); it moves 24 bytes per element.
func triad(a, b, c []float64, lo, hi int) {
	const s = 3.0
	a, b, c = a[lo:hi], b[lo:hi], c[lo:hi]
	for i := range a {
		a[i] = b[i] + s*c[i]
	}
}

func triadArrays(bytesEach int) (a, b, c []float64) {
	n := bytesEach / 8
	a, b, c = make([]float64, n), make([]float64, n), make([]float64, n)
	// Touch every page before timing: first-touch page faults are not memory bandwidth.
	for i := range a {
		a[i], b[i], c[i] = 0, 1, 2
	}
	return
}

func (o DesktopOptions) memory(ctx context.Context, d time.Duration, r *interference.Result) error {
	a, b, c := triadArrays(o.MemoryBytes)
	s, deadline := startSpan(d)
	for i := 0; !over(ctx, deadline); i = (i + triadChunk) % len(a) {
		hi := min(i+triadChunk, len(a))
		triad(a, b, c, i, hi)
		r.Work += float64(24 * (hi - i))
		o.progress(r)
	}
	s.end(r)
	r.Unit = "bytes"
	return nil
}

// errStop ends a directory walk early.
var errStop = errors.New("stop")

// fs is the seeds' `find /`: walk FSRoot, stat every entry, read the first 4 KiB of every
// regular file; start again at the top when the tree is done (the second pass is served
// from the page cache, as a desktop's repeated searches are).
func (o DesktopOptions) fs(ctx context.Context, d time.Duration, r *interference.Result) error {
	buf := make([]byte, 4096)
	s, deadline := startSpan(d)
	for !over(ctx, deadline) {
		before := r.Work
		err := filepath.WalkDir(o.FSRoot, func(p string, e fs.DirEntry, err error) error {
			if over(ctx, deadline) {
				return errStop
			}
			if err != nil {
				return nil // unreadable directories are part of any real tree
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			r.Work++
			o.progress(r)
			if info.Mode().IsRegular() {
				if f, err := os.Open(p); err == nil {
					_, _ = f.Read(buf)
					f.Close()
				}
			}
			return nil
		})
		if err != nil && err != errStop {
			return err
		}
		if r.Work == before {
			return fmt.Errorf("workload fs: nothing to walk in %s", o.FSRoot)
		}
	}
	s.end(r)
	r.Unit = "files"
	return nil
}

// startup starts StartCommand and waits for it, again and again; LatencyUs is each start's
// fork-to-exit time.
func (o DesktopOptions) startup(ctx context.Context, d time.Duration, r *interference.Result) error {
	children := rusage(unix.RUSAGE_CHILDREN)
	s, deadline := startSpan(d)
	for !over(ctx, deadline) {
		cmd := exec.Command(o.StartCommand[0], o.StartCommand[1:]...)
		t := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("workload startup: %v: %v: %s", o.StartCommand, err, bytes.TrimSpace(out))
		}
		r.LatencyUs = append(r.LatencyUs, float64(time.Since(t).Microseconds()))
	}
	s.end(r)
	// RUSAGE_CHILDREN is per process: it counts only children that were waited for, which
	// in the benchmark's desktop process are these.
	r.CPUSeconds += (rusage(unix.RUSAGE_CHILDREN) - children).Seconds()
	r.Work, r.Unit = float64(len(r.LatencyUs)), "starts"
	return nil
}

// Percentile is the p-th percentile (0..100, nearest rank) of xs; 0 for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
