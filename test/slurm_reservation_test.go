package test

// Slurm told in advance (issue 15): a real slurmctld holds a maintenance reservation for a
// desktop before its course slot, so a job whose time limit crosses the slot does not
// start there but on the dedicated host, while a short one still fits before it; a job hit
// by an exception added at short notice receives the warning signal (its script traps
// USR1 and leaves a marker) and is requeued with the reason when the window starts.
//
// The site manager's clock is the real time at the lab's start, so its windows and the
// sync daemon's clock agree; the agents therefore never reach the slots themselves, and
// what happens to the jobs is the daemon's doing alone. Exceptions sit on the schedule's
// 10-minute grid, so the short-notice exam starts at the next grid line (up to 11.5
// minutes away; the warning lead is 15 minutes so the job is warned at once), and instead
// of waiting for that line the test then moves the exam's start back to the previous one:
// the window is in progress, which is the state the daemon requeues in (test_resv covers
// the instants).

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestSlurmReservations(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	const lead = 900 * time.Second
	l := slurmlab.Start(t, slurmlab.Options{
		Hosts: []slurmlab.Host{
			{Name: "pc1", MAC: "52:54:00:0c:00:01"},                // a desktop with a course slot
			{Name: "pc2", MAC: "52:54:00:0c:00:02", Cluster: true}, // dedicated
		},
		Policy:   "{" + noLoad + "}",
		Now:      time.Now().In(loc),
		SyncArgs: []string{"--warn-lead", "900", "--warn-signal", "USR1"},
	})
	admin := l.Env.Admin()
	pc1 := l.Host("pc1")
	putException := func(x model.Exception) {
		t.Helper()
		if err := admin.Send(http.MethodPut, "/api/v1/exceptions/"+x.Name, nil, &x, nil); err != nil {
			t.Fatalf("exception %s: %v", x.Name, err)
		}
	}

	t.Run("node records carry the guest's size", func(t *testing.T) {
		for _, h := range []string{"pc1", "pc2"} {
			n := l.Node(h)
			// guest-init announces what the agent gave the guest (the lab's 2 CPUs, 256 MB).
			if n["CPUTot"] != "2" || n["RealMemory"] != "256" {
				t.Fatalf("%s: CPUTot=%s RealMemory=%s, want 2 and 256", h, n["CPUTot"], n["RealMemory"])
			}
		}
	})

	// The course slot: 30 to 40 minutes from now for an hour, on pc1 only (clear of the
	// short-notice exam below, whichever grid line that lands on).
	grid := 10 * time.Minute
	slot := time.Now().Truncate(grid).Add(4 * grid)
	putException(model.Exception{Name: "course-bio", Kind: "lecture", Mode: "local", Start: slot, End: slot.Add(time.Hour),
		Targets: []model.Target{{Host: "pc1"}}})

	resvRe := regexp.MustCompile(`ReservationName=(overtime-pc1-\d+) StartTime=(\S+) EndTime=(\S+) .*Nodes=pc1 .*Flags=(\S+)`)
	t.Run("reservation before the course slot", func(t *testing.T) {
		var m []string
		bootlab.Eventually(t, "reservation for pc1's course slot", 60*time.Second, func() bool {
			for _, line := range strings.Split(l.Slurm("scontrol", "-o", "show", "reservation"), "\n") {
				if m = resvRe.FindStringSubmatch(line); m != nil {
					return true
				}
			}
			return false
		})
		start, err := time.ParseInLocation("2006-01-02T15:04:05", m[2], time.Local)
		if err != nil || !start.Equal(slot) {
			t.Fatalf("reservation %s starts %s (%v), want %s", m[1], m[2], err, slot)
		}
		if !strings.Contains(m[4], "MAINT") || !strings.Contains(m[4], "IGNORE_JOBS") {
			t.Fatalf("reservation %s flags %s, want MAINT and IGNORE_JOBS", m[1], m[4])
		}
		t.Logf("slot %s-%s (site clock): Slurm reservation %s %s-%s flags %s", slot.In(loc).Format("15:04"),
			slot.Add(time.Hour).In(loc).Format("15:04"), m[1], m[2], m[3], m[4])
	})

	t.Run("a job crossing the slot runs on the dedicated host only", func(t *testing.T) {
		// Both nodes' CPUs per job: the first long job fills pc2 (the lowest weight); the
		// second would go to pc1 without the reservation.
		long1 := sbatch(t, l, "-t", "60", "-c", "2", "--wrap", "sleep 600")
		bootlab.Eventually(t, "job "+long1+" running on pc2", 60*time.Second, func() bool {
			j := l.Job(long1)
			return j["JobState"] == "RUNNING" && j["NodeList"] == "pc2"
		})
		long2 := sbatch(t, l, "-t", "60", "-c", "2", "--wrap", "sleep 600")
		// A job that ends before the slot still gets pc1: the scheduler has looked at the
		// older long job first and left it pending.
		short := sbatch(t, l, "-t", "5", "-c", "2", "--wrap", "sleep 600")
		bootlab.Eventually(t, "short job "+short+" running on pc1", 60*time.Second, func() bool {
			j := l.Job(short)
			return j["JobState"] == "RUNNING" && j["NodeList"] == "pc1"
		})
		if j := l.Job(long2); j["JobState"] != "PENDING" {
			t.Fatalf("job %s crossing pc1's course slot: %s on %s, want PENDING", long2, j["JobState"], j["NodeList"])
		}
		t.Logf("job %s (60 min) RUNNING on pc2; job %s (60 min) PENDING (%s); job %s (5 min) RUNNING on pc1",
			long1, long2, l.Job(long2)["Reason"], short)
		l.Slurm("scancel", long1, long2, short)
		bootlab.Eventually(t, "jobs gone", 60*time.Second, func() bool {
			return strings.TrimSpace(l.Slurm("squeue", "-h", "-t", "R,CG,PD")) == ""
		})
	})

	t.Run("short notice: signal, then requeue with the reason", func(t *testing.T) {
		// A 15-minute job fits before the course slot; it traps USR1 and leaves a marker.
		job := sbatch(t, l, "-w", "pc1", "-t", "15", "--requeue", "--wrap",
			`trap 'echo USR1 >>/tmp/ot-warned-$SLURM_JOB_ID' USR1; while :; do sleep 1; done`)
		bootlab.Eventually(t, "job "+job+" running on pc1", 60*time.Second, func() bool {
			return l.Job(job)["JobState"] == "RUNNING"
		})
		// An exam added at short notice: it starts within the warning lead time, in the
		// mode pc1 has anyway (an exam runs no compute guest, whatever its mode).
		start := time.Now().Truncate(grid).Add(grid)
		if time.Until(start) < 90*time.Second {
			start = start.Add(grid)
		}
		exam := model.Exception{Name: "exam-now", Kind: "exam", Mode: "desktop", Start: start, End: start.Add(grid),
			Targets: []model.Target{{Host: "pc1"}}}
		putException(exam)
		marker := "/tmp/ot-warned-" + job
		bootlab.Eventually(t, "USR1 marker of job "+job, lead, func() bool {
			b, err := l.GuestFile(pc1, marker)
			return err == nil && strings.Contains(string(b), "USR1")
		})
		warnedAt := time.Now()
		if c := l.Job(job)["AdminComment"]; !strings.Contains(c, "overtime: warned") || !strings.Contains(c, "exam-now") {
			t.Fatalf("job %s AdminComment %q, want the warning naming exam-now", job, c)
		}
		if !warnedAt.Before(start) {
			t.Fatalf("warned at %s, not before the exam at %s", warnedAt, start)
		}
		if j := l.Job(job); j["JobState"] != "RUNNING" || j["Restarts"] != "0" {
			t.Fatalf("job %s after the warning: %s, restarts %s; want still RUNNING until the exam starts", job, j["JobState"], j["Restarts"])
		}
		// The exam now began at the previous grid line: it is in progress.
		exam.Start = start.Add(-2 * grid)
		if time.Until(exam.Start) > -time.Second {
			t.Fatalf("previous grid line %s is not past", exam.Start)
		}
		putException(exam)
		// The job is requeued, by whichever comes first: the daemon's window (its reason
		// names the exam) or pc1's agent, which stops the guest as soon as its
		// configuration says exam (the feed then says pc1 runs no guest). The SPANK
		// plugin's interference report, written as the killed batch step ends, may
		// replace the requeue comment afterwards (a known gap, docs/architecture.md):
		// the daemon's log and Restarts are what is checked.
		requeued := regexp.MustCompile(`msg="job requeued" job=` + job + ` node=pc1 reason="overtime: (desktop \(exception exam-now\) now|pc1 is in mode desktop, which runs no compute guest)"`)
		bootlab.Eventually(t, "job "+job+" requeued", 60*time.Second, func() bool {
			return l.Job(job)["Restarts"] == "1" && requeued.MatchString(l.Sync.Out.String())
		})
		j := l.Job(job)
		// One warning only: the daemon's later rounds saw the comment.
		if b, _ := l.GuestFile(pc1, marker); strings.Count(string(b), "USR1") > 1 {
			t.Fatalf("job warned %d times", strings.Count(string(b), "USR1"))
		}
		t.Logf("exam added for %s (site clock): job %s warned with USR1 %.0f s before; exam moved to %s: requeued: State=%s Restarts=%s AdminComment=%q",
			start.In(loc).Format("15:04"), job, start.Sub(warnedAt).Seconds(), exam.Start.In(loc).Format("15:04"), j["JobState"], j["Restarts"], j["AdminComment"])
		l.Slurm("scancel", job)
	})

	t.Run("the feed's reservation windows", func(t *testing.T) {
		rs, err := admin.SlurmReservations(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, w := range rs.Windows {
			names = append(names, w.Node+":"+w.Exception)
		}
		if got := strings.Join(names, ","); !strings.Contains(got, "pc1:course-bio") || !strings.Contains(got, "pc1:exam-now") || strings.Contains(got, "pc2") {
			t.Fatalf("windows %s", got)
		}
	})
}
