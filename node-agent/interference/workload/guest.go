package workload

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

var guestNames = []string{"cpu", "memory", "io", "idle"}

// GuestNames are the guest workloads RunGuest knows: cpu (blocked dense float64 matrix
// multiply, flop), memory (STREAM triad, bytes), io (write a 64 MiB file, fsync, read it
// back, bytes), idle (nothing: the cost of a guest merely being there).
func GuestNames() []string { return append([]string(nil), guestNames...) }

// GuestUnit is the unit of guest workload name's progress ("" for an unknown name).
func GuestUnit(name string) string {
	switch name {
	case "cpu":
		return "flop"
	case "memory", "io":
		return "bytes"
	case "idle":
		return "none"
	}
	return ""
}

// ProgressInterval is how often RunGuest writes a progress line.
const ProgressInterval = 100 * time.Millisecond

// GuestOptions tune the guest workloads; the zero value is the benchmark's setting.
type GuestOptions struct {
	Threads int // worker threads (default 1)
	// Dir is where the io workload writes its files (default os.TempDir()).
	Dir string
	// MemoryBytes is the memory workload's total size of each triad array, split among
	// the threads (default 64 MiB); IOBytes the io workload's file size per thread
	// (default 64 MiB).
	MemoryBytes, IOBytes int
}

// RunGuest runs guest workload name with threads worker threads until ctx ends, writing
// progress lines (FormatProgress) to w: the first (work 0) once every worker has done its
// set-up (allocated and touched its arrays: under emulation that takes seconds), so that
// a runner that waits for it gets a warm guest; then one every ProgressInterval and a last
// one when it ends. It returns nil when ctx ended it.
func RunGuest(ctx context.Context, name string, threads int, w io.Writer) error {
	return GuestOptions{Threads: threads}.Run(ctx, name, w)
}

// Run is RunGuest with o.
func (o GuestOptions) Run(ctx context.Context, name string, w io.Writer) error {
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = 64 << 20
	}
	if o.IOBytes <= 0 {
		o.IOBytes = 64 << 20
	}
	// A worker calls ready once its set-up is done, before any work.
	var worker func(ctx context.Context, i int, ready func(), work *atomic.Uint64) error
	switch name {
	case "cpu":
		worker = func(ctx context.Context, _ int, ready func(), work *atomic.Uint64) error {
			return matmulLoop(ctx, ready, work)
		}
	case "memory":
		per := max(o.MemoryBytes/o.Threads, triadChunk*8)
		worker = func(ctx context.Context, _ int, ready func(), work *atomic.Uint64) error {
			return triadLoop(ctx, per, ready, work)
		}
	case "io":
		worker = func(ctx context.Context, i int, ready func(), work *atomic.Uint64) error {
			ready()
			return ioLoop(ctx, filepath.Join(o.Dir, fmt.Sprintf("overtime-io-%d-%d", os.Getpid(), i)), o.IOBytes, work)
		}
	case "idle":
		worker = func(ctx context.Context, _ int, ready func(), _ *atomic.Uint64) error {
			ready()
			<-ctx.Done()
			return nil
		}
	default:
		return fmt.Errorf("workload: unknown guest workload %q (have %v)", name, guestNames)
	}
	unit := GuestUnit(name)
	counters := make([]atomic.Uint64, o.Threads)
	total := func() float64 {
		var s uint64
		for i := range counters {
			s += counters[i].Load()
		}
		return float64(s)
	}
	report := func() error {
		_, err := io.WriteString(w, FormatProgress(total(), unit))
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Workers wait after their set-up until the first line (work 0) is out: a runner
	// takes that line as the start of the guest's work.
	var wg, setUp sync.WaitGroup
	start := make(chan struct{})
	for i := range counters {
		wg.Add(1)
		setUp.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			ready := func() {
				once.Do(setUp.Done)
				select {
				case <-start:
				case <-ctx.Done():
				}
			}
			defer once.Do(setUp.Done) // a worker that failed in its set-up
			if err := worker(ctx, i, ready, &counters[i]); err != nil {
				cancel(err)
			}
		}()
	}
	setUp.Wait()
	if err := report(); err != nil {
		cancel(err)
	}
	close(start)
	t := time.NewTicker(ProgressInterval)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
			if err := report(); err != nil {
				cancel(err)
			}
		}
	}
	wg.Wait()
	_ = report()
	if err := context.Cause(ctx); err != context.Canceled && err != context.DeadlineExceeded {
		return err
	}
	return nil
}

// matmulN and matmulBlock size the cpu workload: 256×256 float64 matrices (512 KiB each,
// 1.5 MiB for three: beyond a 1 MiB L2, as Linpack's are) multiplied in 32×32 blocks.
const (
	matmulN     = 256
	matmulBlock = 32
)

// matmulLoop multiplies C += A·B again and again, counting 2 flop per multiply-add after
// every block so that progress is fine-grained even under emulation.
func matmulLoop(ctx context.Context, ready func(), work *atomic.Uint64) error {
	const n, bs = matmulN, matmulBlock
	a, b, c := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i], b[i] = float64(i%7)*0.5, float64(i%5)*0.25
	}
	ready()
	for ctx.Err() == nil {
		for ii := 0; ii < n; ii += bs {
			for kk := 0; kk < n; kk += bs {
				for jj := 0; jj < n; jj += bs {
					for i := ii; i < ii+bs; i++ {
						ci := c[i*n+jj : i*n+jj+bs]
						for k := kk; k < kk+bs; k++ {
							aik := a[i*n+k]
							bk := b[k*n+jj : k*n+jj+bs]
							for j := range ci {
								ci[j] += aik * bk[j]
							}
						}
					}
					work.Add(2 * bs * bs * bs)
				}
				if ctx.Err() != nil {
					return nil
				}
			}
		}
		// Keep the values bounded (and the FPU on normal numbers) across repetitions.
		clear(c)
	}
	return nil
}

func triadLoop(ctx context.Context, bytesEach int, ready func(), work *atomic.Uint64) error {
	a, b, c := triadArrays(bytesEach)
	ready()
	for i := 0; ctx.Err() == nil; i = (i + triadChunk) % len(a) {
		hi := min(i+triadChunk, len(a))
		triad(a, b, c, i, hi)
		work.Add(uint64(24 * (hi - i)))
	}
	return nil
}

// ioChunk is the io workload's write and read size.
const ioChunk = 1 << 20

// ioLoop writes size bytes to path, fsyncs, drops the file from the page cache (so the
// read comes from the device, not memory), reads it back and starts over; it counts the
// bytes written and read and removes the file when it ends.
func ioLoop(ctx context.Context, path string, size int, work *atomic.Uint64) error {
	buf := make([]byte, ioChunk)
	for i := range buf {
		buf[i] = byte(i*131 + 7)
	}
	defer os.Remove(path)
	for ctx.Err() == nil {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
		if err != nil {
			return fmt.Errorf("workload io: %w", err)
		}
		err = ioPass(ctx, f, size, buf, work)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func ioPass(ctx context.Context, f *os.File, size int, buf []byte, work *atomic.Uint64) error {
	for off := 0; off < size && ctx.Err() == nil; off += len(buf) {
		n, err := f.Write(buf[:min(len(buf), size-off)])
		if err != nil {
			return fmt.Errorf("workload io: %w", err)
		}
		work.Add(uint64(n))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("workload io: fsync %s: %w", f.Name(), err)
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) // best effort (tmpfs ignores it)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	for ctx.Err() == nil {
		n, err := f.Read(buf)
		work.Add(uint64(n))
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("workload io: %w", err)
		}
	}
	return nil
}
