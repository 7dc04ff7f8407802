package sensor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Pressure watches pressure stall information (PSI) of CPU, memory and I/O with the
// kernel's PSI triggers: Run writes "some STALL WINDOW" into each pressure file and
// sleeps in poll(2) until the kernel reports that tasks stalled for Stall within Window;
// nothing runs while there is no pressure.
//
// On a trigger Run reads "some avg10" of every watched file and sends a KindPressure
// Event with the largest (percent; Source is that file). avg10 is a 10 s average that the
// kernel updates every 2 s, so it lags the stall that fired the trigger; and no trigger
// exists for falling pressure. So after a trigger Run also re-reads every Recheck — only
// while the pressure is elevated — and sends each reading that moved by PressureStep or
// more: rising values while the desktop stalls, falling ones after. The elevated phase
// ends at the first re-read that finds the reading below Below with no trigger since the
// previous one; then Run sleeps until the next trigger. A reading that falls below Below
// is always sent.
type Pressure struct {
	// Sources are directories whose cpu, memory and io pressure files are watched:
	// /proc/pressure (system-wide, files cpu, memory, io; the default) or cgroup v2
	// directories (cpu.pressure, memory.pressure, io.pressure), e.g. the desktop's
	// /sys/fs/cgroup/user.slice. System-wide CPU pressure includes the contention the
	// compute guest causes itself; the desktop's cgroup shows what its people feel.
	Sources []string
	// The trigger: a stall of Stall within Window (default 150 ms in 1 s). The kernel
	// accepts windows of 500 ms to 10 s, and without CAP_SYS_RESOURCE only multiples of
	// 2 s: Run then uses 2 s with the same share of stall (and the kernel checks the
	// trigger every 2 s rather than at once).
	Stall, Window time.Duration
	// Below (percent, default 5; the agent's thaw threshold) and Recheck (default 2 s):
	// see the type's comment.
	Below   float64
	Recheck time.Duration
}

// PressureStep (percentage points) is the smallest change of the reading that Pressure
// sends as a new Event.
const PressureStep = 1.0

// DefaultPressure is the system-wide PSI directory.
const DefaultPressure = "/proc/pressure"

type psiFile struct {
	path string
	fd   int
}

// pressureFiles names the cpu, memory and io pressure files of a source directory.
func pressureFiles(dir string) []string {
	var out []string
	cgroup := false
	if _, err := os.Stat(filepath.Join(dir, "cpu.pressure")); err == nil {
		cgroup = true
	}
	for _, r := range []string{"cpu", "memory", "io"} {
		if cgroup {
			out = append(out, filepath.Join(dir, r+".pressure"))
		} else {
			out = append(out, filepath.Join(dir, r))
		}
	}
	return out
}

// readAvg10 reads "some avg10" of a pressure file.
func readAvg10(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 || string(f[0]) != "some" {
			continue
		}
		if v, ok := bytes.CutPrefix(f[1], []byte("avg10=")); ok {
			return strconv.ParseFloat(string(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no some avg10", path)
}

// Run waits for triggers until ctx is done. It fails at once when no trigger can be set
// (no PSI: kernel without CONFIG_PSI or booted with psi=0), and later when every source
// went away (removed cgroups).
func (p *Pressure) Run(ctx context.Context, out chan<- Event) error {
	sources := p.Sources
	if len(sources) == 0 {
		sources = []string{DefaultPressure}
	}
	stall, window := p.Stall, p.Window
	if stall <= 0 {
		stall = 150 * time.Millisecond
	}
	if window <= 0 {
		window = time.Second
	}
	below := p.Below
	if below <= 0 {
		below = 5
	}
	recheck := p.Recheck
	if recheck <= 0 {
		recheck = 2 * time.Second
	}
	// The kernel overwrites the last byte written with a NUL: the trigger ends in one.
	trigger := func(stall, window time.Duration) []byte {
		return append(fmt.Appendf(nil, "some %d %d", stall.Microseconds(), window.Microseconds()), 0)
	}
	// Without CAP_SYS_RESOURCE the kernel takes only windows that are multiples of 2 s
	// (it then evaluates triggers in its 2 s averaging work instead of a real-time
	// thread): Run falls back to 2 s with the same share of stall.
	fallback := trigger(time.Duration(float64(stall)*float64(2*time.Second)/float64(window)), 2*time.Second)

	var files []psiFile
	defer func() {
		for _, f := range files {
			unix.Close(f.fd)
		}
	}()
	var errs []error
	for _, dir := range sources {
		for _, path := range pressureFiles(dir) {
			fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				_, err = unix.Write(fd, trigger(stall, window))
				if errors.Is(err, unix.EINVAL) && window%(2*time.Second) != 0 {
					_, err = unix.Write(fd, fallback)
				}
				if err != nil {
					unix.Close(fd)
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
				continue
			}
			files = append(files, psiFile{path: path, fd: fd})
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("pressure: no PSI trigger could be set: %w", errors.Join(errs...))
	}

	// One goroutine per trigger, blocked in poll(2) on the trigger and on the read end
	// of a pipe whose write end is closed to stop them all. (Go's poller does not wait
	// for POLLPRI, which is all a PSI trigger signals.)
	var wake [2]int
	if err := unix.Pipe2(wake[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("pressure: %w", err)
	}
	fired := make(chan string, len(files))
	gone := make(chan string, len(files))
	var wg sync.WaitGroup
	defer func() {
		unix.Close(wake[1])
		wg.Wait()
		unix.Close(wake[0])
	}()
	for _, f := range files {
		wg.Add(1)
		go func(f psiFile) {
			defer wg.Done()
			for {
				pfd := []unix.PollFd{{Fd: int32(f.fd), Events: unix.POLLPRI}, {Fd: int32(wake[0]), Events: unix.POLLIN}}
				if _, err := unix.Poll(pfd, -1); err != nil {
					if errors.Is(err, unix.EINTR) {
						continue
					}
					gone <- f.path
					return
				}
				if pfd[1].Revents != 0 {
					return
				}
				if pfd[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
					gone <- f.path // its cgroup was removed
					return
				}
				if pfd[0].Revents&unix.POLLPRI != 0 {
					select {
					case fired <- f.path:
					default: // one pending wake-up is as good as several
					}
				}
			}
		}(f)
	}

	readMax := func() (float64, string) {
		best, src := -1.0, ""
		for _, f := range files {
			if v, err := readAvg10(f.path); err == nil && v > best {
				best, src = v, f.path
			}
		}
		if best < 0 {
			best = 0
		}
		return best, src
	}
	lastV := -1.0
	// report sends a reading unless it is within PressureStep of the last one sent (the
	// triggers of several files fire together, and the averages change only every 2 s);
	// a reading that falls below Below is always sent.
	report := func(v float64, src string) bool {
		if lastV >= 0 && math.Abs(v-lastV) < PressureStep && (v >= below || lastV < below) {
			return true
		}
		lastV = v
		return send(ctx, out, Event{Kind: KindPressure, Time: time.Now(), Source: src, Value: v})
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	elevated, triggered := false, false
	live := len(files)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-fired:
			if !report(readMax()) {
				return nil
			}
			triggered = true
			if !elevated {
				elevated = true
				timer.Reset(recheck)
			}
		case <-timer.C:
			v, src := readMax()
			if !report(v, src) {
				return nil
			}
			if v < below && !triggered {
				elevated = false // calm: sleep until the next trigger
				continue
			}
			triggered = false
			timer.Reset(recheck)
		case path := <-gone:
			live--
			if live == 0 {
				return fmt.Errorf("pressure: %s and every other source went away", path)
			}
		}
	}
}
