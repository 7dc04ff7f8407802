package test

// The Slurm integration end to end (issue 5): a real slurmctld with munge, two desktops
// whose real node agents run container guests with slurmd -Z and the Overtime SPANK
// plugin, the real sync daemon (scheduler-plugin/sync, libslurm) and job_submit.lua. Owner
// activity is injected through a real terminal session in each desktop's utmp.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestSlurm(t *testing.T) {
	l := slurmlab.Start(t, slurmlab.Options{
		Hosts: []slurmlab.Host{
			{Name: "pc1", MAC: "52:54:00:0c:00:01"},                // a desktop
			{Name: "pc2", MAC: "52:54:00:0c:00:02", Cluster: true}, // in cluster mode all day
		},
		// The owner counts as active for 6 s after a key; loosening waits 1 s more. The
		// test machine's own load (slurmctld, other tests) is not a desk owner: load and
		// pressure sensing are off here.
		Policy: "{idleAfter: 6s, hold: 1s, " + noLoad + "}",
	})
	pc1 := l.Host("pc1")
	nodeIs := func(name, state string, weight int, features string) func() bool {
		return func() bool {
			n := l.Node(name)
			return strings.Contains(n["State"], state) && n["Weight"] == fmt.Sprint(weight) && n["AvailableFeatures"] == features
		}
	}

	t.Run("availability", func(t *testing.T) {
		bootlab.Eventually(t, "pc2 dedicated", 30*time.Second, nodeIs("pc2", "IDLE", wire.WeightDedicated, "overtime,dedicated"))
		bootlab.Eventually(t, "pc1 desk empty", 30*time.Second, nodeIs("pc1", "IDLE", wire.WeightDeskEmpty, "overtime,desktop,desk-empty"))
	})

	t.Run("desktop option", func(t *testing.T) {
		// Bad value: refused by the plugin on the submit host, before the controller.
		if out, err := l.SlurmErr("sbatch", "--desktop=sometimes", "--wrap", "true"); err == nil || !strings.Contains(out, "allow, avoid or only-dedicated") {
			t.Fatalf("sbatch --desktop=sometimes: err %v, output %q; want a refusal naming the values", err, out)
		}
		// only-dedicated may not run on the desktop pc1, avoid may not while its owner works.
		if out, err := l.SlurmErr("sbatch", "--desktop=only-dedicated", "-w", "pc1", "--wrap", "true"); err == nil {
			t.Fatalf("only-dedicated job accepted for desktop pc1: %s", out)
		}
		got := srunNode(t, l, "--desktop=only-dedicated")
		if got != "pc2" {
			t.Fatalf("only-dedicated job ran on %q, want pc2", got)
		}
		if got := srunNode(t, l, "--desktop=allow", "-w", "pc1"); got != "pc1" {
			t.Fatalf("allow job with -w pc1 ran on %q", got)
		}
		// The owner starts working: avoid jobs go to pc2 only.
		press(t, pc1)
		bootlab.Eventually(t, "pc1 owner-active", 10*time.Second, nodeIs("pc1", "IDLE", wire.WeightOwnerActive, "overtime,desktop,owner-active"))
		if out, err := l.SlurmErr("sbatch", "--desktop=avoid", "-w", "pc1", "--wrap", "true"); err == nil {
			t.Fatalf("avoid job accepted for pc1 while its owner works: %s", out)
		}
		for i := 0; i < 2; i++ {
			press(t, pc1) // keep the owner active
			if got := srunNode(t, l, "--desktop=avoid"); got != "pc2" {
				t.Fatalf("avoid job ran on %q while pc1's owner works, want pc2", got)
			}
		}
	})

	t.Run("owner activity within 2 s", func(t *testing.T) {
		bootlab.Eventually(t, "pc1 desk empty again", 30*time.Second, nodeIs("pc1", "IDLE", wire.WeightDeskEmpty, "overtime,desktop,desk-empty"))
		at := press(t, pc1)
		bootlab.Eventually(t, "owner-active feature", 10*time.Second, nodeIs("pc1", "", wire.WeightOwnerActive, "overtime,desktop,owner-active"))
		d := time.Since(at)
		t.Logf("key press -> Slurm node features and weight: %s (upper bound; includes scontrol polling)", d.Round(time.Millisecond))
		if d > 2*time.Second {
			t.Errorf("owner activity reached Slurm after %s, want within 2 s", d)
		}
		// Owner changes arrive as deltas of the feed: the sync daemon reconciles the
		// nodes they touch, each loaded on its own, not every node (docs/slurm.md).
		if out := l.Sync.Out.String(); !regexp.MustCompile(`msg=feed revision=\d+ nodes=\d+ reports=\d+ delta=true\n[^\n]*msg="node updated" node=pc1 features=overtime,desktop,owner-active`).MatchString(out) {
			t.Errorf("pc1's owner activity did not reach Slurm through a delta of the feed; sync daemon output:\n%s", out)
		}
	})

	t.Run("job runs niced with an interference report", func(t *testing.T) {
		// SCHED_IDLE (5) and nice 19 in the task, from the plugin's task_init.
		out, err := l.SlurmErr("srun", "-w", "pc1", "sh", "-c", `set -- $(sed 's/^.*) //' /proc/self/stat); echo "nice=${17} policy=${39}"`)
		if err != nil || !strings.Contains(out, "nice=19 policy=5") {
			t.Fatalf("task priority: %v %q, want nice=19 policy=5 (SCHED_IDLE)", err, out)
		}
		bootlab.Eventually(t, "pc1's guest at full speed", 30*time.Second, func() bool {
			st, err := l.Env.Admin().AgentStatusOf(context.Background(), "pc1")
			return err == nil && st.Action == model.ActionRun
		})
		// One busy CPU for 12 s; the owner types for 4 s in the middle of it.
		id := sbatch(t, l, "-w", "pc1", "--wrap", "timeout 12 sh -c 'while :; do :; done'; true")
		jobStarted(t, l, pc1, id)
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			press(t, pc1)
			time.Sleep(500 * time.Millisecond) // the owner's typing rhythm, not synchronisation
		}
		bootlab.Eventually(t, "job completed", 60*time.Second, func() bool { return l.Job(id)["JobState"] == "COMPLETED" })
		var rep *wire.JobReport
		bootlab.Eventually(t, "job report", 30*time.Second, func() bool {
			r, err := l.Env.Admin().JobReport(context.Background(), id, "pc1")
			rep = r
			return err == nil
		})
		t.Logf("report: %s", rep.Summary)
		if rep.Host != "pc1" || rep.Seconds < 10 || rep.Seconds > 40 {
			t.Errorf("report host %q seconds %.1f, want pc1 and about 12 s", rep.Host, rep.Seconds)
		}
		// The owner typed for 4 s and counts as active 6 s after the last key: throttled
		// for about 10 s of the job, never longer than the job.
		if rep.ThrottledSeconds < 4 || rep.ThrottledSeconds > rep.Seconds {
			t.Errorf("throttled %.1f s of %.1f s, want at least 4 s", rep.ThrottledSeconds, rep.Seconds)
		}
		if rep.OwnerActiveFraction <= 0.2 || rep.OwnerActiveFraction > 1 {
			t.Errorf("owner active fraction %.2f, want > 0.2", rep.OwnerActiveFraction)
		}
		if rep.FrozenSeconds != 0 || rep.Actions[model.ActionThrottle] != 1 {
			t.Errorf("frozen %.1f s, actions %v: want no freeze and one throttle", rep.FrozenSeconds, rep.Actions)
		}
		// Throttled to 25 % of 2 CPUs (0.5 CPU) for most of the job, one CPU otherwise.
		if rep.GuestCPUSeconds < 0.4*rep.ThrottledSeconds || rep.GuestCPUSeconds > rep.Seconds+2 {
			t.Errorf("guest CPU %.1f s for a job throttled %.1f s of %.1f s", rep.GuestCPUSeconds, rep.ThrottledSeconds, rep.Seconds)
		}
		// The report as the batch step ended (job still running) is in Slurm's record.
		if c := l.Job(id)["AdminComment"]; !strings.Contains(c, "overtime: job "+id+" on pc1") || !strings.Contains(c, "throttled") {
			t.Errorf("AdminComment %q, want the job's interference report", c)
		}
	})

	t.Run("freeze suspends, thaw resumes", func(t *testing.T) {
		l.Policy = "{idleAfter: 4s, hold: 1s, evictAfter: 1h, actions: {owner-active: freeze}, " + noLoad + "}"
		l.PutSite()
		bootlab.Eventually(t, "agent has the freeze policy", 30*time.Second, func() bool {
			return regexp.MustCompile(`policy in force" ownerActive=freeze .*idleAfter=4s`).MatchString(pc1.Agent.Out.String())
		})
		id := sbatch(t, l, "-w", "pc1", "--wrap", "sleep 600")
		bootlab.Eventually(t, "job running", 30*time.Second, func() bool { return l.Job(id)["JobState"] == "RUNNING" })
		press(t, pc1)
		bootlab.Eventually(t, "job suspended", 15*time.Second, func() bool { return l.Job(id)["JobState"] == "SUSPENDED" })
		if c := l.Job(id)["AdminComment"]; !strings.Contains(c, "overtime: suspended") {
			t.Errorf("AdminComment %q, want the suspend reason", c)
		}
		if n := l.Node("pc1"); !strings.Contains(n["State"], "DRAIN") || !strings.HasPrefix(n["Reason"], "overtime: guest on pc1 frozen") {
			t.Errorf("frozen node: State %q Reason %q, want drained with the reason", n["State"], n["Reason"])
		}
		bootlab.Eventually(t, "job resumed", 30*time.Second, func() bool { return l.Job(id)["JobState"] == "RUNNING" })
		bootlab.Eventually(t, "node undrained", 15*time.Second, func() bool { return !strings.Contains(l.Node("pc1")["State"], "DRAIN") })
		l.Slurm("scancel", id)
	})

	t.Run("eviction requeues with a reason", func(t *testing.T) {
		l.Policy = "{idleAfter: 20s, hold: 1s, evictAfter: 3s, actions: {owner-active: freeze}, " + noLoad + "}"
		l.PutSite()
		bootlab.Eventually(t, "agent has the evict policy", 30*time.Second, func() bool {
			return regexp.MustCompile(`policy in force" ownerActive=freeze .*evictAfter=3s`).MatchString(pc1.Agent.Out.String())
		})
		id := sbatch(t, l, "-w", "pc1", "--requeue", "--wrap", "sleep 600")
		bootlab.Eventually(t, "job running", 30*time.Second, func() bool { return l.Job(id)["JobState"] == "RUNNING" })
		press(t, pc1)
		bootlab.Eventually(t, "job requeued", 40*time.Second, func() bool {
			j := l.Job(id)
			return j["Restarts"] == "1" && strings.Contains(j["AdminComment"], "overtime: requeued")
		})
		j := l.Job(id)
		t.Logf("after eviction: JobState=%s Reason=%s AdminComment=%q", j["JobState"], j["Reason"], j["AdminComment"])
		if !regexp.MustCompile(`evicted`).MatchString(j["AdminComment"]) {
			t.Errorf("AdminComment %q does not say the guest was evicted", j["AdminComment"])
		}
		if j["JobState"] == "FAILED" || j["JobState"] == "NODE_FAIL" {
			t.Errorf("evicted job state %s: a job must be requeued, not failed", j["JobState"])
		}
		n := l.Node("pc1")
		if !strings.Contains(n["State"], "DOWN") || !strings.Contains(n["Reason"], "evicted") {
			t.Errorf("evicted node: State %q Reason %q, want DOWN with the eviction reason", n["State"], n["Reason"])
		}
		l.Slurm("scancel", id)
	})
}

// noLoad turns off the desktop-load and pressure triggers of a policy.
// noLoad: the test machine's own load (slurmctld, other tests) is not a desk owner's, so
// load and pressure sensing are off, and the guest's throttle is the fixed cap: the
// adaptive controller would (rightly) see the machine's other processes suffer and cut
// the guest further (docs/interference.md).
const noLoad = "desktopLoad: 100, freezePressure: 100, thawPressure: 99, controller: fixed"

// press types on the desk's terminal.
func press(t *testing.T, h *slurmlab.Host) time.Time {
	t.Helper()
	at, err := h.Session.Key()
	if err != nil {
		t.Fatal(err)
	}
	return at
}

var jobIDRe = regexp.MustCompile(`Submitted batch job (\d+)`)

func sbatch(t *testing.T, l *slurmlab.Lab, args ...string) string {
	t.Helper()
	out, err := l.SlurmErr("sbatch", append([]string{"-o", "/dev/null"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := jobIDRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sbatch: %q", out)
	}
	return m[1]
}

// srunNode runs a one-task job and returns the node it ran on.
func srunNode(t *testing.T, l *slurmlab.Lab, args ...string) string {
	t.Helper()
	out, err := l.SlurmErr("srun", append(append([]string{"-N1", "-n1"}, args...), "sh", "-c", "echo node=$SLURMD_NODENAME")...)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`node=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("srun output %q", out)
	}
	return m[1]
}

// jobStarted waits until the host's agent has taken the job's start snapshot (the SPANK
// prolog's call): Slurm shows a job RUNNING before its prolog has run on the node.
func jobStarted(t *testing.T, l *slurmlab.Lab, h *slurmlab.Host, id string) {
	t.Helper()
	bootlab.Eventually(t, "job "+id+" started on "+h.Name, 30*time.Second, func() bool {
		return strings.Contains(h.Agent.Out.String(), `msg="job started" job=`+id+` `)
	})
}
