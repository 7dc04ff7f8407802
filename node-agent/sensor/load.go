package sensor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Load measures the CPU use of everything but the compute guest — a long compile, a
// render — in cores: the busy time of /proc/stat minus the guest's own CPU time (Guest).
// There is no kernel event for this, so Load samples, unlike the other sensors: every
// Interval (1 s), averaged over the last Window (5 s). It sends a KindLoad Event when the
// average crosses Threshold upwards, and again when it falls below 80% of Threshold
// (hysteresis), with the average as Value; the state at start is "below".
type Load struct {
	// Guest returns the guest's cumulative CPU time (e.g. usage_usec of its cgroups'
	// cpu.stat); nil counts everything.
	Guest     func() time.Duration
	Threshold float64       // cores; default 0.5 (the policy's DesktopLoad)
	Interval  time.Duration // default 1 s
	Window    time.Duration // default 5 s
	Stat      string        // default /proc/stat
}

// Hysteresis is the fraction of Threshold below which a high load counts as fallen.
const Hysteresis = 0.8

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on every Linux architecture's
// ABI).
const userHZ = 100

// cpuBusy reads the busy time of all CPUs from /proc/stat: user, nice, system, irq,
// softirq (guest and guest_nice are part of user and nice; idle, iowait and steal are
// not busy).
func cpuBusy(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[0] != "cpu" {
			continue
		}
		var ticks uint64
		for _, i := range []int{1, 2, 3, 6, 7} { // user nice system (idle iowait) irq softirq
			v, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %v", path, err)
			}
			ticks += v
		}
		return time.Duration(ticks) * time.Second / userHZ, nil
	}
	return 0, fmt.Errorf("%s: no cpu line", path)
}

type loadSample struct {
	at   time.Time
	busy time.Duration // outside the guest
}

// Run samples until ctx is done. It fails at once only when Stat cannot be read.
func (l *Load) Run(ctx context.Context, out chan<- Event) error {
	stat := l.Stat
	if stat == "" {
		stat = "/proc/stat"
	}
	threshold := l.Threshold
	if threshold <= 0 {
		threshold = 0.5
	}
	interval := l.Interval
	if interval <= 0 {
		interval = time.Second
	}
	window := l.Window
	if window <= 0 {
		window = 5 * time.Second
	}
	sample := func() (loadSample, error) {
		busy, err := cpuBusy(stat)
		if err != nil {
			return loadSample{}, err
		}
		if l.Guest != nil {
			busy -= l.Guest()
		}
		return loadSample{at: time.Now(), busy: busy}, nil
	}
	first, err := sample()
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	samples := []loadSample{first}
	high := false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		s, err := sample()
		if err != nil {
			continue // a transient read failure: the next sample spans the gap
		}
		samples = append(samples, s)
		// The oldest sample kept is the newest one at least Window old.
		for len(samples) > 2 && s.at.Sub(samples[1].at) >= window {
			samples = samples[1:]
		}
		old := samples[0]
		span := s.at.Sub(old.at)
		if span <= 0 {
			continue
		}
		cores := float64(s.busy-old.busy) / float64(span)
		if cores < 0 {
			cores = 0 // the guest's counter ran ahead of /proc/stat's ticks
		}
		if (!high && cores >= threshold) || (high && cores < threshold*Hysteresis) {
			high = !high
			if !send(ctx, out, Event{Kind: KindLoad, Time: s.at, Source: "load", Value: cores}) {
				return nil
			}
		}
	}
}
