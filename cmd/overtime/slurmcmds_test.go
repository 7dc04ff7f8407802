package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// `overtime job-report JOBID` says which estimate, how sure, and what it means; a report
// of an older agent (no interval, no method) is shown as the rough figure it is.
func TestPrintJobReportSlowdown(t *testing.T) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	base := wire.JobReport{Job: "123", Host: "pc-a03", Mode: "desktop", Start: start, End: start.Add(200 * time.Second),
		Seconds: 200, GuestCPUSeconds: 150, StealSeconds: 2.5}
	full := base
	full.DesktopSlowdown, full.SlowdownLow, full.SlowdownHigh = 0.004, 0.001, 0.009
	full.SlowdownMethod, full.GuestSlowdown = "run-queue wait + memory canary", 0.016
	old := base
	old.DesktopSlowdown = 0.02
	for _, tc := range []struct {
		name    string
		r       wire.JobReport
		want    []string
		notWant []string
	}{
		{"calibrated estimate", full, []string{"Desktop slowdown  0.4% (likely 0.1–0.9%)", "estimated from run-queue wait + memory canary",
			"took about 0.4% longer because the guest ran beside it", "calibrated error", "Guest slowdown    1.6% of the job's time"}, []string{"upper bound", "~"}},
		{"older agent", old, []string{"Desktop slowdown  ~2% (rough: the desktop's CPU pressure"}, []string{"Guest slowdown", "likely", "upper bound"}},
	} {
		var buf bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(&buf)
		printJobReport(&globals{zone: time.UTC}, cmd, &tc.r)
		out := buf.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%s: output has %q:\n%s", tc.name, w, out)
			}
		}
	}
}
