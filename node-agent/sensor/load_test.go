package sensor

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procCPU is the CPU time (utime+stime) of a running process, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...: fields after the command's closing parenthesis.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64) // utime, field 14
	s, err2 := strconv.ParseUint(f[12], 10, 64) // stime, field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * time.Second / userHZ, true
}

// TestLoad: a real busy process. Seen by a sensor whose "guest" is everything except
// that process (so the test does not depend on what else runs on the host), its load
// crosses the threshold upwards while it spins and downwards (hysteresis) once it is
// gone, with values near one core. A sensor that subtracts no guest sees at least that
// core too.
func TestLoad(t *testing.T) {
	var mu sync.Mutex
	pid, lastCPU := 0, time.Duration(0)
	child := func() time.Duration { // the busy process's CPU time, frozen once it is gone
		mu.Lock()
		defer mu.Unlock()
		if pid != 0 {
			if d, ok := procCPU(pid); ok {
				lastCPU = d
			}
		}
		return lastCPU
	}
	guest := func() time.Duration {
		busy, err := cpuBusy("/proc/stat")
		if err != nil {
			t.Error(err)
		}
		return busy - child()
	}
	out := runSensor(t, &Load{Guest: guest, Threshold: 0.5, Interval: 250 * time.Millisecond, Window: 2 * time.Second})
	all := runSensor(t, &Load{Threshold: 0.9, Interval: 250 * time.Millisecond, Window: 2 * time.Second})
	noEvent(t, out, time.Second, "no load outside the guest before the busy process")

	pids, stop := spin(t, 1, -1)
	start := time.Now()
	mu.Lock()
	pid = pids[0]
	mu.Unlock()
	ev := nextEvent(t, out, 10*time.Second, "load crossing 0.5 cores upwards")
	if ev.Kind != KindLoad || ev.Value < 0.5 || ev.Value > 1.3 {
		t.Fatalf("event %+v, want load between 0.5 and 1.3 cores", ev)
	}
	t.Logf("up after %v: %.2f cores", time.Since(start), ev.Value)
	aev := nextEvent(t, all, 10*time.Second, "system-wide load crossing 0.9 cores")
	if aev.Value < 0.9 {
		t.Errorf("system-wide event %+v", aev)
	}

	stop()
	stopped := time.Now()
	ev = nextEvent(t, out, 10*time.Second, "load falling below 0.4 cores")
	if ev.Kind != KindLoad || ev.Value >= 0.5*Hysteresis {
		t.Fatalf("event %+v, want load below %.2f", ev, 0.5*Hysteresis)
	}
	t.Logf("down after %v: %.2f cores", time.Since(stopped), ev.Value)
}
