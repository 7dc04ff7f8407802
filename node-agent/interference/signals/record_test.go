package signals

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
)

// TestRecordTrace records the estimates of a real desktop next to a real guest for the
// controller's trace tests (node-agent/interference/controller/testdata/recorded-*.trace).
// It runs only when asked:
//
//	SIGNALS_RECORD=node-agent/interference/controller/testdata SIGNALS_RECORD_SECONDS=60 \
//	  go test -run TestRecordTrace ./node-agent/interference/signals
//
// A desktop task and a guest CPU hog share CPU 0, the guest uncapped, once at normal
// weight and once in the idle class; every 250 ms tick's estimate is one line.
func TestRecordTrace(t *testing.T) {
	out := os.Getenv("SIGNALS_RECORD")
	if out == "" {
		t.Skip("SIGNALS_RECORD not set")
	}
	secs, _ := strconv.Atoi(os.Getenv("SIGNALS_RECORD_SECONDS"))
	if secs <= 0 {
		secs = 60
	}
	if !filepathIsAbs(out) {
		out = "../../../" + out // from the package directory to the module root
	}
	for _, idle := range []bool{false, true} {
		name := map[bool]string{false: "normal", true: "idle"}[idle]
		t.Run(name, func(t *testing.T) {
			g := guestGroup(t)
			if err := g.SetIdle(idle); err != nil {
				t.Skip(err)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var desk []int
			m := NewMonitor(MonitorConfig{Guest: func() *cgroup.Group { return g }, DesktopPIDs: func() []int { return desk }})
			defer m.scan.close()
			desk = []int{helper(t, "spin").Process.Pid}
			if err := g.AddProc(helper(t, "spin").Process.Pid); err != nil {
				t.Fatal(err)
			}
			uname, _ := os.ReadFile("/proc/sys/kernel/osrelease")
			f, err := os.Create(fmt.Sprintf("%s/recorded-%s.trace", out, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fmt.Fprintf(f, "# Recorded by signals.TestRecordTrace on %s (kernel %s, %d CPUs, shared VM): a desktop\n",
				time.Now().UTC().Format("2006-01-02"), string(uname[:len(uname)-1]), runtime.NumCPU())
			fmt.Fprintf(f, "# task and an uncapped %s-weight guest CPU hog sharing CPU 0; one 250 ms tick a line.\n", name)
			fmt.Fprintf(f, "# seconds slowdown low high desktop-cpu desktop-wait guest-cpu guest-steal\n")
			m.Sample(time.Now())
			t0 := time.Now()
			prev := m.Snapshot()
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for time.Since(t0) < time.Duration(secs)*time.Second {
				<-tick.C
				m.Sample(time.Now())
				cur := m.Snapshot()
				w := WindowOf(prev, cur)
				e := estimate.Desktop(w)
				fmt.Fprintf(f, "%.2f %.5f %.5f %.5f %.4f %.4f %.4f %.4f\n", cur.Time.Sub(t0).Seconds(), e.Slowdown, e.Low, e.High,
					w.DesktopCPUSeconds, w.DesktopWaitSeconds, w.GuestCPUSeconds, w.GuestStealSeconds)
				prev = cur
			}
		})
	}
}

func filepathIsAbs(p string) bool { return len(p) > 0 && p[0] == '/' }
