package main

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestSlowdownModel(t *testing.T) {
	m := DefaultSlowdownModel()
	tests := []struct {
		k    Activity
		cap  float64
		want float64
	}{
		{ActivityInteractive, 0, 0},
		{ActivityInteractive, 0.05, 0.001}, // from (0, 0) to the first point
		{ActivityInteractive, 0.25, 0.005},
		{ActivityInteractive, 0.375, 0.0075},
		{ActivityInteractive, 1, 0.02},
		{ActivityInteractive, 1.5, 0.02}, // flat beyond the last point
		{ActivityLoad, 0.25, 0.025},
		{ActivityLoad, 1, 0.10},
	}
	for _, tc := range tests {
		if got := m.Slowdown(tc.k, tc.cap); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Slowdown(%s, %g) = %g, want %g", tc.k, tc.cap, got, tc.want)
		}
	}
	if got := m.CapFor(ActivityLoad, 0.01); math.Abs(got-0.1) > 2e-4 {
		t.Errorf("CapFor(load, 1 %%) = %g, want 0.1", got)
	}
	if got := m.CapFor(ActivityInteractive, 0.05); got != 1 {
		t.Errorf("CapFor(interactive, 5 %%) = %g, want 1", got)
	}
}

func TestLoadCoefficients(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"cells": [1, 2], "simCoefficients": {
		"interactive": [{"cap": 0.5, "slowdown": 0.002}, {"cap": 1, "slowdown": 0.004}],
		"load": [{"cap": 1, "slowdown": 0.2}]}}`)
	c, err := LoadCoefficients(good)
	if err != nil {
		t.Fatal(err)
	}
	want := Coefficients{Source: good, Interactive: []CapPoint{{0.5, 0.002}, {1, 0.004}}, Load: []CapPoint{{1, 0.2}}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("loaded %+v, want %+v", c, want)
	}
	m, err := coefficientsFor(good)
	if err != nil || m.Slowdown(ActivityLoad, 0.5) != 0.1 {
		t.Fatalf("model from file: %v, load at 0.5 %g", err, m.Slowdown(ActivityLoad, 0.5))
	}
	for name, body := range map[string]string{
		"nosection.json":  `{"cells": []}`,
		"empty.json":      `{"simCoefficients": {"interactive": [], "load": [{"cap": 1, "slowdown": 0.1}]}}`,
		"unordered.json":  `{"simCoefficients": {"interactive": [{"cap": 1, "slowdown": 0.1}, {"cap": 0.5, "slowdown": 0.1}], "load": [{"cap": 1, "slowdown": 0.1}]}}`,
		"outofrange.json": `{"simCoefficients": {"interactive": [{"cap": 2, "slowdown": 0.1}], "load": [{"cap": 1, "slowdown": 0.1}]}}`,
		"broken.json":     `{`,
	} {
		if _, err := LoadCoefficients(write(name, body)); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := LoadCoefficients(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
	if err := run([]string{"-hosts", "20", "-interference", filepath.Join(dir, "nosection.json")}); err == nil || !strings.Contains(err.Error(), "simCoefficients") {
		t.Errorf("command with a file without simCoefficients: %v", err)
	}
}

// Slowdown accounting on a hand trace: the fixed 25 % throttle, nice19 at full speed and
// HTCondor's suspended guest, for input alone and with a load episode.
func TestSlowdownAccounting(t *testing.T) {
	loaded := walkIn(3600, 7200, Interval{3600, 3660})
	loaded.Load = []Load{{Start: 3600, End: 3720, Cores: 1}}
	opt := DefaultSimOptions()
	opt.JobMedian, opt.JobSigma = 10*time.Hour, 0
	rep := Simulate(handTrace(3*hour, nil, loaded), []PolicySpec{OvertimeDefault(), Nice19(), HTCondorDesktop()}, opt)
	// Owner-active 3600-3960: load 3600-3720 (120 s), interactive 3720-3960 (240 s).
	tests := []struct {
		policy      string
		mean, above float64 // mean slowdown over the 360 s, minutes above 1 %
	}{
		{"overtime-default", (120*0.025 + 240*0.005) / 360, 2},
		{"nice19", (120*0.10 + 240*0.02) / 360, 6},
		{"htcondor-desktop", 0, 0}, // input on a poll: suspended at once
	}
	for i, tc := range tests {
		r := rep.Results[i]
		if r.Policy != tc.policy {
			t.Fatalf("result %d is %s", i, r.Policy)
		}
		if !near(r.MeanSlowdownActive, tc.mean) || !near(r.SlowdownMinutesAbove, tc.above) {
			t.Errorf("%s: mean slowdown %.5f, %.2f min above target; want %.5f and %.2f", r.Policy, r.MeanSlowdownActive, r.SlowdownMinutesAbove, tc.mean, tc.above)
		}
	}
	if r := rep.Results[0]; !near(r.MeanThrottleCap, 0.25) || !near(r.ThrottledHours*hour, 390) || r.ControllerSteps != 0 {
		t.Errorf("overtime-default: mean cap %.3f over %.0f s, %d controller steps; want 0.25, 390, 0", r.MeanThrottleCap, r.ThrottledHours*hour, r.ControllerSteps)
	}
}

// stepLog is a test controller (never published: Policies() has no adaptive row without
// the agent's controller): a fixed cap, recording what the simulator feeds it.
type stepLog struct {
	cap   float64
	p     ControllerParams
	at    []int64
	est   []SlowdownEstimate
	owner []bool
	start time.Time
	// owners: when Owner was called (ms)
	owners []int64
}

func (c *stepLog) Owner(now time.Time, ownerActive bool) float64 {
	c.owners = append(c.owners, int64(now.Sub(c.start)/time.Millisecond))
	return c.cap
}

func (c *stepLog) Step(now time.Time, est SlowdownEstimate, ownerActive bool) float64 {
	c.at = append(c.at, int64(now.Sub(c.start)/time.Millisecond))
	c.est = append(c.est, est)
	c.owner = append(c.owner, ownerActive)
	return c.cap
}

// The adaptive wiring with a test controller: stepped every second from the throttle's
// start to its end, fed the engine's owner state and the modelled slowdown of the cap in
// force during the past tick, and its cap is what the guest gets.
func TestAdaptiveWiring(t *testing.T) {
	var log *stepLog
	spec := overtimeAdaptive(func(p ControllerParams) CapController {
		log = &stepLog{cap: 0.75, p: p, start: DefaultParams().Start}
		return log
	})
	opt := DefaultSimOptions()
	opt.JobMedian, opt.JobSigma, opt.Record, opt.EstimateSigma, opt.EstimateRelSigma = 10*time.Hour, 0, true, 0, 0
	rep := Simulate(handTrace(3*hour, nil, walkIn(3600, 7200, Interval{3600, 3660})), []PolicySpec{spec}, opt)
	r := rep.Results[0]
	want := []Change{{0, 0, model.ActionRun}, {0, 3600, model.ActionThrottle}, {0, 3990, model.ActionRun}}
	if !reflect.DeepEqual(r.Changes, want) {
		t.Fatalf("changes %v, want %v (the engine decides as for overtime-default)", r.Changes, want)
	}
	if log.p.Target != 0.01 || log.p.MinCap != adaptiveMinCap || log.p.MaxCap != 1 || math.Abs(log.p.StartCap-0.1) > 2e-4 {
		t.Errorf("controller params %+v", log.p)
	}
	// Owner at the input event and when the throttle ends; a step at the end of every
	// 250 ms tick in between.
	if !reflect.DeepEqual(log.owners, []int64{3600000, 3990000}) {
		t.Errorf("Owner called at %v ms, want at the throttle's start and end", log.owners)
	}
	if len(log.at) != 1559 || log.at[0] != 3600250 || log.at[1558] != 3989750 || r.ControllerSteps != 1559 {
		t.Fatalf("%d steps from %d to %d ms (counted %d), want 1559 from 3600250 to 3989750", len(log.at), log.at[0], log.at[len(log.at)-1], r.ControllerSteps)
	}
	// Each step sees its tick at the 75 % cap while the owner is active (the engine's
	// owner-active ends at 3960 s, input + 5 min, and with it the slowdown); the owner
	// state passed is the agent's, active for as long as the throttle holds.
	for i, at := range log.at {
		wantSD, wantOwner := 0.015, true
		if at > 3960000 {
			wantSD = 0
		}
		if !near(log.est[i].Slowdown, wantSD) || log.owner[i] != wantOwner {
			t.Fatalf("step at %d ms: estimate %+v, owner %v; want %.3f, %v", at, log.est[i], log.owner[i], wantSD, wantOwner)
		}
		if w := estRelErr*wantSD + estAbsErr; !near(log.est[i].High, wantSD+w) {
			t.Fatalf("step at %d ms: interval %+v, want ±%.4f", at, log.est[i], w)
		}
	}
	if want := (3*hour - 390 + 390*0.75) * 4.0 / hour; !near(r.CPUHours, want) || !near(r.MeanThrottleCap, 0.75) {
		t.Errorf("CPU-hours %.4f, mean cap %.3f; want %.4f and 0.75", r.CPUHours, r.MeanThrottleCap, want)
	}
	if !near(r.SlowdownMinutesAbove, 6) || !near(r.MeanSlowdownActive, 0.015) {
		t.Errorf("%.2f min above target, mean slowdown %.4f; want 6 and 0.015", r.SlowdownMinutesAbove, r.MeanSlowdownActive)
	}
	// Noise is seeded: the same run twice gives the same estimates.
	opt.EstimateSigma, opt.EstimateRelSigma = 0.0025, 0.25
	Simulate(handTrace(3*hour, nil, walkIn(3600, 7200, Interval{3600, 3660})), []PolicySpec{spec}, opt)
	first := log.est
	Simulate(handTrace(3*hour, nil, walkIn(3600, 7200, Interval{3600, 3660})), []PolicySpec{spec}, opt)
	if !reflect.DeepEqual(first, log.est) || first[5].Slowdown == 0.015 {
		t.Error("estimation noise not seeded, or absent")
	}
}

// The report's verdict and sensitivity table, with a test controller at a fixed cap (the
// published report has no adaptive row without the agent's controller).
func TestReportAdaptive(t *testing.T) {
	spec := overtimeAdaptive(func(ControllerParams) CapController { return &stepLog{cap: 1} })
	specs := []PolicySpec{spec, OvertimeDefault(), Nice19()}
	p, opt := smallParams(20), DefaultSimOptions()
	opt.ControlTick = time.Second // the test controller does not care; 4 times fewer steps
	var reps []*Report
	for s := uint64(1); s <= 2; s++ {
		reps = append(reps, Simulate(generate(t, p, s), specs, opt))
	}
	b := newBench(p, opt, specs, reps)
	b.Sensitivity = sensitivity(generate(t, p, 1), spec, opt, sensitivityScales)
	if len(b.Sensitivity) != 6 || !b.Sensitivity[5].NoiseFree || !near(b.Sensitivity[1].MeanSlowdown*4, b.Sensitivity[3].MeanSlowdown) {
		t.Fatalf("sensitivity %+v: the mean slowdown should scale with the coefficients at a fixed cap", b.Sensitivity)
	}
	dir := t.TempDir()
	if err := b.write(dir, specs); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "harvest.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A cap of 1 is nice19 during the day: the share target is met, the slowdown is not.
	for _, want := range []string{"**Met**: overtime-adaptive delivers", "| ×0.25 |", "placeholders, not measurements", "| overtime-adaptive |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("harvest.md lacks %q", want)
		}
	}
	b.Reports[1].Results[0].JobsRequeued = 1
	if v := b.verdict(); !strings.HasPrefix(v, "**Missed**") {
		t.Errorf("a requeue in one week still reads %q", v[:40])
	}
	without := []*Report{Simulate(generate(t, p, 1), specs[1:], opt)}
	if v := newBench(p, opt, specs[1:], without).verdict(); !strings.Contains(v, "not in this run") {
		t.Errorf("without the adaptive policy: %q", v)
	}
}

// creep is a test controller whose cap rises by 0.01 a step from 0.5.
type creep struct {
	cap  float64
	seen []float64 // the estimates' slowdowns
}

func (c *creep) Owner(time.Time, bool) float64 { c.cap = 0.5; return c.cap }
func (c *creep) Step(_ time.Time, e SlowdownEstimate, _ bool) float64 {
	c.seen = append(c.seen, e.Slowdown)
	c.cap += 0.01
	return c.cap
}

// Like the agent, the simulator applies a cap only when it moved by capStep (0.02) or
// more: the guest's cap, and so the slowdown each tick measures, goes up every second
// step.
func TestAdaptiveCapStep(t *testing.T) {
	var c *creep
	spec := overtimeAdaptive(func(ControllerParams) CapController { c = &creep{}; return c })
	opt := DefaultSimOptions()
	opt.EstimateSigma, opt.EstimateRelSigma = 0, 0
	Simulate(handTrace(2*hour, nil, walkIn(3600, 7200, Interval{3600, 3601})), []PolicySpec{spec}, opt)
	// Interactive slowdown is 2 % × cap: applied caps 0.5, 0.5, 0.52, 0.52, 0.54, ...
	for i, want := range []float64{0.010, 0.010, 0.0104, 0.0104, 0.0108, 0.0108} {
		if !near(c.seen[i], want) {
			t.Fatalf("estimates %v, want the applied cap to move in steps of 0.02", c.seen[:6])
		}
	}
}
