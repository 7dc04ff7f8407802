package test

// TestSlurmDemo is what `make demo` shows of the Slurm integration (scripts/demo.sh runs it
// with -v): an HPC user's batch job on a desktop node while the desk's owner starts
// working, and the job's interference report as the user sees it. It is also a test: the
// report must exist and say what happened.

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
)

func TestSlurmDemo(t *testing.T) {
	t.Log("== Slurm: a pool desktop (desk1) is a Slurm node; its owner comes back while a job runs")
	l := slurmlab.Start(t, slurmlab.Options{
		Hosts:  []slurmlab.Host{{Name: "desk1", MAC: "52:54:00:0e:00:01"}},
		Policy: "{idleAfter: 5s, hold: 1s, " + noLoad + "}",
	})
	desk := l.Host("desk1")
	bootlab.Eventually(t, "desk1 available", 60*time.Second, func() bool {
		return strings.Contains(l.Node("desk1")["AvailableFeatures"], "desk-empty")
	})
	t.Logf("$ sinfo -N -o '%%N %%T %%w %%f'\n%s", l.Slurm("sinfo", "-N", "-o", "%N %T %w %f"))
	id := sbatch(t, l, "--desktop=allow", "-J", "demo", "--wrap", "timeout 10 sh -c 'while :; do :; done'; true")
	t.Logf("$ sbatch --desktop=allow --wrap '<10 s of CPU work>'   -> job %s", id)
	jobStarted(t, l, desk, id)
	t.Log("the owner types on desk1's keyboard for 3 s ...")
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		press(t, desk)
		time.Sleep(500 * time.Millisecond) // typing rhythm
	}
	n := l.Node("desk1")
	t.Logf("$ scontrol show node desk1   -> State=%s Weight=%s Features=%s", n["State"], n["Weight"], n["AvailableFeatures"])
	bootlab.Eventually(t, "job completed", 60*time.Second, func() bool { return l.Job(id)["JobState"] == "COMPLETED" })
	t.Logf("$ scontrol show job %s   -> AdminComment=%s", id, l.Job(id)["AdminComment"])
	var out []byte
	bootlab.Eventually(t, "job report", 30*time.Second, func() bool {
		cmd := exec.Command(l.Bin, "--server", l.Env.HTTP.URL, "--ca-file", l.CAFile, "--user", "admin", "job-report", id)
		cmd.Env = append(os.Environ(), "OVERTIME_PASSWORD="+testenv.AdminPassword)
		var err error
		out, err = cmd.CombinedOutput()
		return err == nil
	})
	t.Logf("$ overtime job-report %s\n%s", id, out)
	for _, want := range []string{"Host", "desk1", "Owner active", "Throttled", "Steal", "Desktop slowdown", "throttle 1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("job-report output lacks %q", want)
		}
	}
	if !strings.Contains(l.Job(id)["AdminComment"], "overtime: job "+id) {
		t.Errorf("AdminComment %q lacks the report", l.Job(id)["AdminComment"])
	}
}
