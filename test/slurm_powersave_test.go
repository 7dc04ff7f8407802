package test

// Slurm power saving end to end (issue 5): slurmctld runs `overtime slurm resume` and
// `overtime slurm suspend` as ResumeProgram and SuspendProgram. A desktop whose schedule
// gives it to its local disk is woken for a job (power-save exception, Wake-on-LAN magic
// packet on the pool's LAN), its node agent starts the guest, the job runs, and after
// SuspendTime idle it is given back to its schedule while Slurm keeps the node powered
// down (not DOWN) for the next job.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/internal/testenv/wirecap"
	"github.com/overtime-hpc/overtime/sitemgmt/powersave"
	"github.com/overtime-hpc/overtime/sitemgmt/wol"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestSlurmPowerSave(t *testing.T) {
	l := slurmlab.Start(t, slurmlab.Options{
		Hosts:     []slurmlab.Host{{Name: "pc3", MAC: "52:54:00:0c:00:03", LocalDisk: true}},
		Policy:    "{" + noLoad + "}",
		PowerSave: 15 * time.Second,
		Capture:   true,
		// No maintenance reservations (TestSlurmReservation's subject): the last subtest
		// shows a resume refused for a host in maintenance, and the reservation the
		// daemon's next whole reconcile would make for that window keeps the job off pc3
		// too, so whichever came first decided which of the two the test saw.
		SyncArgs: []string{"--horizon", "0"},
	})
	// Nobody sits at pc3: SuspendProgram's power-off is carried out (with a user logged
	// in it would be refused).
	if err := l.Host("pc3").Logout(); err != nil {
		t.Fatal(err)
	}
	admin := l.Env.Admin()
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(l.PowerLog)
			t.Logf("--- power saving programs:\n%s", log)
		}
	})
	magic, err := wol.MagicPacket("52:54:00:0c:00:03")
	if err != nil {
		t.Fatal(err)
	}
	// The pool's LAN, where the PC's NIC would listen for its magic packet.
	conn, err := l.NS.ListenPacket("udp4", "0.0.0.0:9")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	woken := make(chan net.Addr, 1)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if bytes.Equal(buf[:n], magic) {
				select {
				case woken <- from:
				default:
				}
			}
		}
	}()

	// pc3 has never run a guest, so Slurm has never seen it register: it is declared as
	// a powered-down dynamic node, as docs/slurm.md tells administrators to.
	if out, err := l.SlurmErr("scontrol", "create", "NodeName=pc3", "State=CLOUD", "Features=overtime", "CPUs=2", "RealMemory=256"); err != nil {
		t.Fatalf("scontrol create: %v %s", err, out)
	}
	job := sbatch(t, l, "-w", "pc3", "--wrap", "hostname")

	t.Run("resume wakes the host into the cluster", func(t *testing.T) {
		select {
		case from := <-woken:
			t.Logf("job %s for powered-down pc3: slurmctld ran ResumeProgram; Wake-on-LAN magic packet for pc3 from %s", job, from)
		case <-time.After(90 * time.Second):
			log, _ := os.ReadFile(l.PowerLog)
			t.Fatalf("no Wake-on-LAN packet for pc3 within 90 s; power log:\n%s", log)
		}
		var x model.Exception
		if _, err := admin.Get("/api/v1/exceptions/"+powersave.ExceptionName("pc3"), nil, &x); err != nil || x.Kind != model.ExceptionPowerSave || x.Mode != "cluster" {
			t.Fatalf("power-save exception: %+v %v", x, err)
		}
		bootlab.Eventually(t, "job "+job+" completed on pc3", 120*time.Second, func() bool {
			j := l.Job(job)
			if st := j["JobState"]; st != "" && st != "COMPLETED" && st != "RUNNING" && st != "PENDING" && st != "CONFIGURING" && st != "COMPLETING" {
				t.Fatalf("job %s: %s (%s)", job, st, j["Reason"])
			}
			return j["JobState"] == "COMPLETED" && j["NodeList"] == "pc3"
		})
		t.Logf("power-save exception %s: pc3 in mode %s from %s to %s (site clock); job %s COMPLETED on pc3",
			x.Name, x.Mode, x.Start.Format("Mon 15:04"), x.End.Format("Mon 15:04"), job)
	})

	t.Run("suspend gives the host back, the node stays powered down", func(t *testing.T) {
		bootlab.Eventually(t, "power-save exception released", 120*time.Second, func() bool {
			_, err := admin.Get("/api/v1/exceptions/"+powersave.ExceptionName("pc3"), nil, nil)
			var ae *client.APIError
			return errors.As(err, &ae) && ae.Status == http.StatusNotFound
		})
		// The agent follows the schedule (local disk): the guest stops and the site
		// manager's feed says down.
		var rev uint64
		bootlab.Eventually(t, "feed says pc3 down (no guest)", 60*time.Second, func() bool {
			f, err := admin.SlurmNodes(context.Background(), 0, 0)
			if err != nil {
				return false
			}
			rev = f.Revision
			return len(f.Nodes) == 1 && f.Nodes[0].State == wire.SlurmDown && strings.Contains(f.Nodes[0].Reason, "runs no compute guest")
		})
		// Two feed rounds of the sync daemon at or after that revision: the first one's
		// reconcile has finished when the second is logged.
		feedLine := regexp.MustCompile(`msg=feed revision=(\d+)`)
		bootlab.Eventually(t, "sync daemon reconciled the feed", 60*time.Second, func() bool {
			n := 0
			for _, m := range feedLine.FindAllStringSubmatch(l.Sync.Out.String(), -1) {
				if r, _ := strconv.ParseUint(m[1], 10, 64); r >= rev {
					n++
				}
			}
			return n >= 2
		})
		n := l.Node("pc3")
		if !strings.Contains(n["State"], "POWER") || strings.HasPrefix(n["State"], "DOWN") || strings.HasPrefix(n["Reason"], "overtime:") {
			t.Fatalf("pc3 after suspend: State=%s Reason=%q; want powered down, not DOWN", n["State"], n["Reason"])
		}
		t.Logf("after SuspendTime idle: exception released, guest stopped, Slurm node State=%s", n["State"])
		// SuspendProgram really switches the PC off: a power-off by "slurm" for its agent
		// (recorded in the same call that released the exception).
		var off *wire.PowerRecord
		bootlab.Eventually(t, "power-off by slurm recorded for pc3", 10*time.Second, func() bool {
			list, err := admin.PowerCommands(context.Background(), "pc3")
			if err != nil {
				return false
			}
			for i := range list {
				if list[i].Op == wire.OpPowerOff && list[i].By == "slurm" {
					off = &list[i]
					return true
				}
			}
			return false
		})
		t.Logf("SuspendProgram's power-off of pc3: %s %s %s", off.ID, off.State, off.Result)
		// Nobody is logged in at pc3 (its session ended before the job): its agent
		// switches the PC off and reports the command done.
		bootlab.Eventually(t, "pc3's agent switching the PC off", 60*time.Second, func() bool {
			return strings.Contains(l.Host("pc3").PowerActs(), "poweroff")
		})
		bootlab.Eventually(t, "the power-off reported done", 30*time.Second, func() bool {
			list, err := admin.PowerCommands(context.Background(), "pc3")
			if err != nil {
				return false
			}
			for i := range list {
				if list[i].ID == off.ID {
					return list[i].State == wire.CommandDone
				}
			}
			return false
		})
		log, _ := os.ReadFile(l.PowerLog)
		for _, want := range []string{"resume pc3", "pc3  cluster", "suspend pc3", "pc3  released"} {
			if !bytes.Contains(bytes.Join(bytes.Fields(log), []byte(" ")), []byte(strings.Join(strings.Fields(want), " "))) {
				t.Errorf("power log lacks %q:\n%s", want, log)
			}
		}
	})
	t.Run("maintenance wins: resume refused, node DOWN with the reason", func(t *testing.T) {
		start := l.Env.Now.Truncate(time.Hour)
		x := model.Exception{Name: "repair-pc3", Kind: "maintenance", Mode: "maint", Start: start, End: start.Add(2 * time.Hour),
			Targets: []model.Target{{Host: "pc3"}}}
		if err := admin.Send(http.MethodPut, "/api/v1/exceptions/repair-pc3", nil, &x, nil); err != nil {
			t.Fatal(err)
		}
		job := sbatch(t, l, "-w", "pc3", "--wrap", "hostname")
		bootlab.Eventually(t, "pc3 DOWN with Overtime's reason", 60*time.Second, func() bool {
			n := l.Node("pc3")
			return strings.HasPrefix(n["State"], "DOWN") && strings.Contains(n["Reason"], "overtime: not resumed: host pc3 is in maintenance mode maint")
		})
		if j := l.Job(job); j["JobState"] == "RUNNING" || j["JobState"] == "COMPLETED" {
			t.Fatalf("job %s ran on a host in maintenance: %v", job, j)
		}
		if _, err := admin.Get("/api/v1/exceptions/"+powersave.ExceptionName("pc3"), nil, nil); err == nil {
			t.Fatal("a refused resume made a power-save exception")
		}
		t.Logf("pc3 in maintenance: resume refused, Slurm node State=%s Reason=%q", l.Node("pc3")["State"], l.Node("pc3")["Reason"])
		l.Slurm("scancel", job)
		log, _ := os.ReadFile(l.PowerLog)
		t.Logf("what ResumeProgram and SuspendProgram printed:\n%s", log)
	})
	// Everything above crossed the lab's network: the agent's heartbeats with its token
	// and the power commands in their answers, the guest's munge key on its way to the
	// agent, the power saving programs' and the sync daemon's logins. On the wire they
	// are TLS only (issue 29: anyone on a pool PC's network could otherwise forge jobs).
	t.Run("no token, password or munge key crosses the network in clear", func(t *testing.T) {
		t.Logf("tcpdump: %s", strings.TrimSpace(l.Capture.Stop()))
		streams, err := wirecap.Streams(l.Capture.File)
		if err != nil {
			t.Fatal(err)
		}
		// The capture saw the lab's traffic and reassembled it: the configuration
		// slurmctld handed the guest's slurmd crosses in clear (munge signs Slurm's
		// messages, it does not encrypt them), and the API was spoken to in TLS.
		if len(wirecap.Carrying(streams, "ClusterName=overtime-lab")) == 0 {
			t.Fatalf("the capture (%d flows) does not hold the slurm.conf slurmd fetched: it saw too little to prove anything", len(streams))
		}
		if !wirecap.TLSTo(streams, slurmlab.APIPort) {
			t.Fatalf("no TLS handshake to the site manager's port %d in the capture", slurmlab.APIPort)
		}
		for what, secret := range map[string][]byte{
			"pc3's host token":                      []byte(l.Host("pc3").Token),
			"the site admin's password":             []byte(testenv.AdminPassword),
			"the admin's login (HTTP Basic's text)": []byte("admin:" + testenv.AdminPassword),
			"the cluster's munge key":               l.MungeKey,
		} {
			if hits := wirecap.Find(streams, secret); len(hits) > 0 {
				t.Errorf("%s crossed the lab's network in clear: %v", what, hits)
			}
		}
	})
}
