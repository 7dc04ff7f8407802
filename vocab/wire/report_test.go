package wire

import (
	"strings"
	"testing"
	"time"
)

// A report says which estimate and how sure: the interval and method when the agent sent
// them, the rough "~N%" of an older agent otherwise, and the guest's own loss.
func TestReportSummary(t *testing.T) {
	base := JobReport{Job: "7", Host: "pc1", Start: fixtureStart, End: fixtureStart.Add(time.Minute), Seconds: 60, StealSeconds: 1.5}
	for _, tc := range []struct {
		name string
		edit func(*JobReport)
		want string
	}{
		{"older agent", func(r *JobReport) { r.DesktopSlowdown = 0.03 }, "steal 1.5 s, desktop slowdown ~3%"},
		{"interval and method", func(r *JobReport) {
			r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh, r.SlowdownMethod = 0.004, 0.001, 0.009, "run-queue wait + memory canary"
		}, "desktop slowdown 0.4% (0.1-0.9%, run-queue wait + memory canary)"},
		{"interval from 0", func(r *JobReport) { r.SlowdownHigh = 0.002 }, "desktop slowdown 0.0% (0.0-0.2%)"},
		{"method only", func(r *JobReport) { r.DesktopSlowdown, r.SlowdownMethod = 0.01, "PSI" }, "desktop slowdown 1.0% (PSI)"},
		{"guest slowdown", func(r *JobReport) { r.GuestSlowdown = 0.25 }, "steal 1.5 s (guest slowdown 25.0%), desktop"},
	} {
		r := base
		tc.edit(&r)
		got := ReportSummary(r)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q lacks %q", tc.name, got, tc.want)
		}
		r.Summary = got
		if err := r.Validate(); err != nil {
			t.Errorf("%s: the summary's report is invalid: %v", tc.name, err)
		}
	}
	long := base
	long.Host = strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60)
	long.SlowdownHigh, long.SlowdownMethod = 0.5, strings.Repeat("m", MaxSlowdownMethod)
	if s := ReportSummary(long); len(s) > MaxSummary {
		t.Errorf("summary of %d bytes, at most %d", len(s), MaxSummary)
	}
}

func TestJobReportValidateSlowdown(t *testing.T) {
	base := JobReport{Job: "7", Host: "pc1", Start: fixtureStart, End: fixtureStart.Add(time.Minute), Seconds: 60}
	nan := 0.0
	nan = nan / nan
	for _, tc := range []struct {
		name string
		edit func(*JobReport)
		err  string // "" valid
	}{
		{"no estimate", func(*JobReport) {}, ""},
		{"estimate only (older agent)", func(r *JobReport) { r.DesktopSlowdown = 0.02 }, ""},
		{"full", func(r *JobReport) {
			r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh, r.SlowdownMethod, r.GuestSlowdown = 0.004, 0.001, 0.009, "run-queue wait", 0.1
		}, ""},
		{"estimate at the interval's ends", func(r *JobReport) { r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh = 0.01, 0.01, 0.01 }, ""},
		{"interval from 0", func(r *JobReport) { r.SlowdownHigh = 0.003 }, ""},
		{"estimate above the interval", func(r *JobReport) { r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh = 0.02, 0.001, 0.009 }, "outside its interval"},
		{"estimate below the interval", func(r *JobReport) { r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh = 0.0005, 0.001, 0.009 }, "outside its interval"},
		{"low without high", func(r *JobReport) { r.DesktopSlowdown, r.SlowdownLow = 0.02, 0.01 }, "outside its interval"},
		{"high above 1", func(r *JobReport) { r.SlowdownHigh = 1.5 }, "slowdownHigh"},
		{"negative low", func(r *JobReport) { r.SlowdownLow = -0.1 }, "slowdownLow"},
		{"guest slowdown above 1", func(r *JobReport) { r.GuestSlowdown = 2 }, "guestSlowdown"},
		{"NaN estimate", func(r *JobReport) { r.DesktopSlowdown = nan }, "desktopSlowdown"},
		{"method of two lines", func(r *JobReport) { r.SlowdownMethod = "a\nb" }, "slowdownMethod"},
		{"method too long", func(r *JobReport) { r.SlowdownMethod = strings.Repeat("m", MaxSlowdownMethod+1) }, "slowdownMethod"},
		{"method at the bound", func(r *JobReport) { r.SlowdownMethod = strings.Repeat("m", MaxSlowdownMethod) }, ""},
	} {
		r := base
		tc.edit(&r)
		err := r.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
