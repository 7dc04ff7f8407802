package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/wire"
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

// `overtime job-report JOBID` shows every host's report of the job, one line per host,
// when several hosts reported it (a requeued job, or a PC posting a report of a job it
// never ran): none hides another. One host's report is shown in detail.
func TestJobReportCommandAllHosts(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	t.Setenv("OVERTIME_PASSWORD", testenv.AdminPassword)
	root := func(args ...string) (string, error) {
		return run(t, newRoot(), append([]string{"--server", env.HTTP.URL, "--user", "admin"}, args...)...)
	}
	ctx := context.Background()
	start := env.Now.UTC().Add(-time.Hour)
	post := func(host, job string, throttled float64) {
		t.Helper()
		cred, err := env.Admin().CreateHostCredential(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		r := wire.JobReport{Job: job, Start: start, End: start.Add(100 * time.Second), Seconds: 100, ThrottledSeconds: throttled}
		if _, err := client.NewWithToken(env.HTTP.URL, cred.Token).PostJobReport(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	post("pc-b01", "42", 10)
	post("pc-a01", "42", 77) // later, from a PC that did not run it
	post("pc-b02", "43", 5)

	out, err := root("job-report", "42")
	if err != nil || !strings.Contains(out, "Job 42 has reports from 2 hosts") {
		t.Fatalf("job-report 42: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "42   pc-a01") || !strings.Contains(lines[2], " 77 ") ||
		!strings.HasPrefix(lines[3], "42   pc-b01") || !strings.Contains(lines[3], " 10 ") {
		t.Fatalf("job-report 42, want one line per host by host:\n%s", out)
	}
	out, err = root("job-report", "42", "-o", "json")
	var all wire.JobReports
	if err != nil || json.Unmarshal([]byte(out), &all) != nil || all.Job != "42" || len(all.Reports) != 2 || all.Reports[1].Host != "pc-b01" {
		t.Fatalf("job-report 42 -o json: %v\n%s", err, out)
	}
	out, err = root("job-report", "42", "--host", "pc-b01")
	if err != nil || !strings.Contains(out, "Host              pc-b01") || !strings.Contains(out, "Throttled         10 s") {
		t.Fatalf("job-report 42 --host pc-b01: %v\n%s", err, out)
	}
	out, err = root("job-report", "43")
	if err != nil || !strings.Contains(out, "Host              pc-b02") || strings.Contains(out, "reports from") {
		t.Fatalf("job-report 43 (one host): %v\n%s", err, out)
	}
}
