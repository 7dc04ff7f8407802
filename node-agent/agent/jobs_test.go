package agent

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestCountersFold(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var c counters
	c.fold(t0, inForce{}, false)                                                 // running at full speed, nobody
	c.fold(t0.Add(10*time.Second), inForce{throttled: true, active: true}, true) // owner starts: throttled
	c.fold(t0.Add(25*time.Second), inForce{frozen: true, active: true}, true)    // pressure: frozen
	c.fold(t0.Add(30*time.Second), inForce{}, true)
	c.fold(t0.Add(40*time.Second), inForce{}, false)
	if c.throttledS != 15 || c.frozenS != 5 || c.activS != 20 {
		t.Fatalf("throttled %v frozen %v active %v, want 15 5 20", c.throttledS, c.frozenS, c.activS)
	}
}

func TestReport(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// Over the job the desktop used 50 s of CPU and waited 1 s; the guest used 100 s
	// and waited 25 s: the estimator's slowdown over that window (its own tests check
	// the number), the guest lost 20%.
	sig0 := signals.Totals{Time: t0, DesktopCPU: 100 * time.Second, DesktopWait: time.Second, GuestCPU: 1000 * time.Second}
	sig1 := signals.Totals{Time: t0.Add(200 * time.Second), DesktopCPU: 150 * time.Second, DesktopWait: 2 * time.Second,
		GuestCPU: 1100 * time.Second, GuestSteal: 25 * time.Second}
	start := Counters{Time: t0, Host: "pc1", Mode: "desktop", ThrottledSeconds: 100, FrozenSeconds: 7,
		OwnerActiveSeconds: 50, GuestCPUSeconds: 1000, StealSeconds: 3, DesktopStall: 10,
		Actions: map[model.GuestAction]int{model.ActionThrottle: 4}, Signals: sig0}
	end := Counters{Time: t0.Add(200 * time.Second), Host: "pc1", Mode: "desktop", ThrottledSeconds: 130, FrozenSeconds: 17,
		OwnerActiveSeconds: 100, GuestCPUSeconds: 1150, StealSeconds: 5.5, DesktopStall: 14,
		Actions: map[model.GuestAction]int{model.ActionThrottle: 6, model.ActionFreeze: 1}, Signals: sig1}
	r := Report("42", start, end)
	want := wire.JobReport{Job: "42", Host: "pc1", Mode: "desktop", Seconds: 200, ThrottledSeconds: 30, FrozenSeconds: 10,
		OwnerActiveFraction: 0.25, GuestCPUSeconds: 150, StealSeconds: 2.5, GuestSlowdown: 0.2,
		DesktopSlowdown: estimate.Desktop(signals.WindowOf(sig0, sig1)).Slowdown}
	if !(want.DesktopSlowdown > 0.01 && want.DesktopSlowdown <= 0.02+1e-12) {
		t.Fatalf("estimate %v for a wait of 2%% of the desktop's CPU, the guest's share 2/3: outside 1..2%%", want.DesktopSlowdown)
	}
	for name, got := range map[string][2]float64{
		"seconds": {r.Seconds, want.Seconds}, "throttled": {r.ThrottledSeconds, want.ThrottledSeconds},
		"frozen": {r.FrozenSeconds, want.FrozenSeconds}, "owner": {r.OwnerActiveFraction, want.OwnerActiveFraction},
		"cpu": {r.GuestCPUSeconds, want.GuestCPUSeconds}, "steal": {r.StealSeconds, want.StealSeconds},
		"slowdown": {r.DesktopSlowdown, want.DesktopSlowdown}, "guest slowdown": {r.GuestSlowdown, want.GuestSlowdown},
	} {
		if math.Abs(got[0]-got[1]) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got[0], got[1])
		}
	}
	if r.Actions[model.ActionThrottle] != 2 || r.Actions[model.ActionFreeze] != 1 {
		t.Errorf("actions %v, want throttle 2 freeze 1", r.Actions)
	}
	if r.SlowdownMethod != estimate.MethodWait || !(r.SlowdownLow < r.DesktopSlowdown && r.DesktopSlowdown < r.SlowdownHigh) {
		t.Errorf("slowdown %v in [%v, %v] by %q: want an interval around it and the estimator's name",
			r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh, r.SlowdownMethod)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("report does not validate: %v", err)
	}
	// Without signals over the job (none sampled): no estimate, not a made-up 0 with a method.
	start.Signals, end.Signals = signals.Totals{}, signals.Totals{}
	if r := Report("42", start, end); r.DesktopSlowdown != 0 || r.SlowdownMethod != "" {
		t.Errorf("no signals: slowdown %v by %q", r.DesktopSlowdown, r.SlowdownMethod)
	}
	// A guest restarted during the job resets its CPU counter: never a negative number.
	end.GuestCPUSeconds = 10
	if r := Report("42", start, end); r.GuestCPUSeconds != 0 {
		t.Errorf("guest CPU after a restart = %v, want 0 (clamped)", r.GuestCPUSeconds)
	}
}

func TestReadPSITotal(t *testing.T) {
	f := t.TempDir() + "/cpu.pressure"
	writeFile(t, f, "some avg10=1.00 avg60=0.50 avg300=0.10 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n")
	if got := readPSITotal(f); got != 2.5 {
		t.Fatalf("readPSITotal = %v, want 2.5", got)
	}
	if got := readPSITotal(f + ".missing"); got != 0 {
		t.Fatalf("missing file: %v, want 0", got)
	}
}

func writeFile(t *testing.T, name, s string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
