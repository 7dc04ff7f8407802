package test

import (
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// An outage of Overtime's own directory must never make Slurm requeue jobs: slapd stops
// while a job runs on a dedicated host, for longer than the host token cache (1 min) and
// the heartbeat staleness bound (90 s) together; the node agent's heartbeats keep being
// accepted from the verified token cache, the sync daemon (whose own login the server now
// answers with 503) changes nothing, and after slapd is back the job still runs, never
// restarted, on a node that never went down. The outage is a window in which nothing may
// happen, so it is watched for its whole length rather than waited on.
//
// This guards the end-to-end property; it does not single out the server's two
// safeguards (verified token cache, no staleness from an outage), which the API and
// service tests do: with both disabled it still passed once, because the sync daemon is
// itself locked out of the feed during the outage and heartbeats resume before it reads
// the feed again.
func TestSlurmDirectoryOutage(t *testing.T) {
	l := slurmlab.Start(t, slurmlab.Options{
		Hosts:  []slurmlab.Host{{Name: "pc2", MAC: "52:54:00:0c:00:02", Cluster: true}},
		Policy: "{idleAfter: 6s, hold: 1s, " + noLoad + "}",
	})
	bootlab.Eventually(t, "pc2 dedicated", 30*time.Second, func() bool { return strings.Contains(l.Node("pc2")["State"], "IDLE") })
	id := sbatch(t, l, "-w", "pc2", "--requeue", "--wrap", "sleep 900")
	bootlab.Eventually(t, "job running", 30*time.Second, func() bool { return l.Job(id)["JobState"] == "RUNNING" })

	healthy := func(when string) {
		t.Helper()
		j, n := l.Job(id), l.Node("pc2")
		if j["JobState"] != "RUNNING" || j["Restarts"] != "0" {
			t.Fatalf("%s: job %s JobState=%s Restarts=%s Reason=%s, want RUNNING, never restarted", when, id, j["JobState"], j["Restarts"], j["Reason"])
		}
		if s := n["State"]; strings.Contains(s, "DOWN") || strings.Contains(s, "DRAIN") || strings.Contains(s, "FAIL") {
			t.Fatalf("%s: node pc2 State=%s Reason=%s, want it up", when, s, n["Reason"])
		}
	}
	if err := l.Env.Slapd.Stop(); err != nil {
		t.Fatal(err)
	}
	outage := 60*time.Second + wire.StaleAfter + 2*wire.HeartbeatInterval
	for end := time.Now().Add(outage); time.Now().Before(end); time.Sleep(5 * time.Second) {
		healthy("during the outage")
	}
	if err := l.Env.Slapd.Restart(); err != nil {
		t.Fatal(err)
	}
	// Long enough for the sync daemon's retry to fetch the feed again and apply it.
	for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Second) {
		healthy("after the outage")
	}
	if n := strings.Count(l.Sync.Out.String(), `msg="request failed" url="`+l.API+`/api/v1/slurm/nodes`); n == 0 {
		t.Errorf("the sync daemon never saw the outage (its login should have been refused with 503)")
	}
	l.Slurm("scancel", id)
}
