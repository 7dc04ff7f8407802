package api_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// A host that never ran a job posts a report of it after the host that did: a read of the
// job without ?host= shows both side by side, each under its own host, and neither
// replaces the other (issue 26: it used to answer whichever arrived last, so any PC's
// credential could overshadow the report of a job it never ran). The impostor cannot post
// under the other host's name, nor make its summary speak for it.
func TestJobReportsSideBySide(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	admin := env.Admin()
	ran := hostClient(env, issue(t, admin, "pc-b01"))      // the job's node
	stranger := hostClient(env, issue(t, admin, "pc-a01")) // never ran job 42
	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)

	genuine := wire.JobReport{Job: "42", Start: start, End: start.Add(time.Minute), Seconds: 60, ThrottledSeconds: 10}
	if _, err := ran.PostJobReport(ctx, genuine); err != nil {
		t.Fatal(err)
	}
	// The stranger claims pc-b01's name: refused, and pc-b01's report is untouched.
	forged := wire.JobReport{Job: "42", Host: "pc-b01", Start: start, End: start.Add(time.Minute), Seconds: 60, FrozenSeconds: 60}
	if _, err := stranger.PostJobReport(ctx, forged); status(err) != 403 || !strings.Contains(err.Error(), "host pc-a01 may act only for itself, not for host pc-b01") {
		t.Fatalf("pc-a01 posted as pc-b01: %v", err)
	}
	// Under its own name it may post, later than the genuine one; a summary naming the other
	// host is not kept: the server writes it from the numbers and the poster's name.
	forged.Host = ""
	forged.Summary = "overtime: job 42 on pc-b01 60 s: throttled 0 s, frozen 0 s"
	got, err := stranger.PostJobReport(ctx, forged)
	if err != nil || got.Host != "pc-a01" || !strings.HasPrefix(got.Summary, "overtime: job 42 on pc-a01 60 s:") || !strings.Contains(got.Summary, "frozen 60 s") {
		t.Fatalf("pc-a01's own report: %+v %v", got, err)
	}

	// Every reader of the job, down to a directory user without a role, gets both.
	check := func(who string, all wire.JobReports) {
		t.Helper()
		if all.Job != "42" || len(all.Reports) != 2 {
			t.Fatalf("%s: job 42's reports: %+v, want pc-a01's and pc-b01's", who, all)
		}
		a, b := all.Reports[0], all.Reports[1]
		if a.Host != "pc-a01" || a.FrozenSeconds != 60 || b.Host != "pc-b01" || b.ThrottledSeconds != 10 || b.FrozenSeconds != 0 ||
			!strings.Contains(b.Summary, "on pc-b01") || !strings.Contains(a.Summary, "on pc-a01") {
			t.Fatalf("%s: job 42's reports by host: %+v", who, all.Reports)
		}
	}
	for _, who := range []string{"admin", "eve"} {
		c := admin
		if who == "eve" {
			c = env.Client("eve", "eve-secret")
		}
		var raw wire.JobReports // the document itself, as any API client reads it
		if _, err := c.Get("/api/v1/jobs/42", nil, &raw); err != nil {
			t.Fatalf("%s: GET /api/v1/jobs/42: %v", who, err)
		}
		check(who+" (GET)", raw)
		all, err := c.JobReportsOf(ctx, "42")
		if err != nil {
			t.Fatal(err)
		}
		check(who+" (client)", *all)
	}

	// ?host= picks one host's report.
	if r, err := admin.JobReport(ctx, "42", "pc-b01"); err != nil || r.Host != "pc-b01" || r.ThrottledSeconds != 10 {
		t.Fatalf("pc-b01's report of job 42: %+v %v", r, err)
	}
	if _, err := admin.JobReport(ctx, "42", "pc-a02"); status(err) != 404 || !strings.Contains(err.Error(), "no interference report for job 42 from host pc-a02") {
		t.Fatalf("a host without a report of job 42: %v", err)
	}
	if _, err := admin.Get("/api/v1/jobs/42", url.Values{"host": {"pc_a01;x"}}, nil); status(err) != 400 || !strings.Contains(err.Error(), "host:") {
		t.Fatalf("an invalid host name: %v", err)
	}
	if _, err := admin.JobReport(ctx, "42", ""); err == nil {
		t.Fatal("the client asked for one host's report without naming the host")
	}
	if _, err := admin.JobReportsOf(ctx, "43"); status(err) != 404 || !strings.Contains(err.Error(), "no interference report for job 43") {
		t.Fatalf("a job without reports: %v", err)
	}

	// A repost by pc-b01 replaces only its own report.
	genuine.ThrottledSeconds = 12
	if _, err := ran.PostJobReport(ctx, genuine); err != nil {
		t.Fatal(err)
	}
	all, err := admin.JobReportsOf(ctx, "42")
	if err != nil || len(all.Reports) != 2 || all.Reports[0].FrozenSeconds != 60 || all.Reports[1].ThrottledSeconds != 12 {
		t.Fatalf("after pc-b01's repost: %+v %v", all, err)
	}
}
