package render

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The rendered Slurm lines checked by the real slurmctld (Debian 12: slurm-wlm 22.05 and
// munge). Packages: apt-get install -y --no-install-recommends slurm-wlm munge
//
// slurmctldWith starts a private munged and slurmctld on a temporary slurm.conf that
// includes nodesConf, and returns a function that runs scontrol against it. Everything
// lives in t.TempDir(): munged gets its own key and socket (AuthInfo=socket=...), so a
// munged or slurmctld of the machine is neither needed nor touched; slurmctld listens on
// a free port on this host only, and no slurmd is started. Both daemons are stopped when
// the test ends.
func slurmctldWith(t *testing.T, nodesConf string) func(args ...string) (string, error) {
	t.Helper()
	munged := lookTool(t, "munged", "munge")
	slurmctld := lookTool(t, "slurmctld", "slurm-wlm (slurmctld)")
	scontrol := lookTool(t, "scontrol", "slurm-wlm (slurm-client)")

	dir := t.TempDir()
	for _, d := range []string{"munge", "state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "munge", "munge.socket")
	// --force: munged otherwise refuses a socket directory that not every user can enter.
	md := startDaemon(t, munged, "--foreground", "--force", "--socket="+socket, "--key-file="+keyFile,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "munge", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "munged.seed"))
	if !waitFor(md, 10*time.Second, func() bool { _, err := os.Stat(socket); return err == nil }) {
		log, _ := os.ReadFile(filepath.Join(dir, "munge", "munged.log"))
		t.Fatalf("munged did not create its socket: %v\n%s\n%s", md.err, md.out.String(), log)
	}

	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".") // slurmctld compares its short host name with SlurmctldHost
	nodes := filepath.Join(dir, "overtime-nodes.conf")
	if err := os.WriteFile(nodes, []byte(nodesConf), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "slurm.conf")
	log := filepath.Join(dir, "slurmctld.log")
	slurmConf := strings.Join([]string{
		"ClusterName=overtimetest",
		fmt.Sprintf("SlurmctldHost=%s(127.0.0.1)", host),
		fmt.Sprintf("SlurmctldPort=%d", freePort(t)),
		fmt.Sprintf("SlurmdPort=%d", freePort(t)),
		"SlurmUser=" + u.Username,
		"AuthType=auth/munge",
		"CredType=cred/munge",
		"AuthInfo=socket=" + socket,
		"StateSaveLocation=" + filepath.Join(dir, "state"),
		"SlurmdSpoolDir=" + filepath.Join(dir, "spool"),
		"SlurmctldPidFile=" + filepath.Join(dir, "slurmctld.pid"),
		"SlurmctldLogFile=" + log,
		"ProctrackType=proctrack/linuxproc",
		"TaskPlugin=task/none",
		"SelectType=select/cons_tres",
		"SchedulerType=sched/backfill",
		"MpiDefault=none",
		"MailProg=/bin/true",
		"ReturnToService=2",
		"Include " + nodes,
		"",
	}, "\n")
	if err := os.WriteFile(conf, []byte(slurmConf), 0o644); err != nil {
		t.Fatal(err)
	}

	sd := startDaemon(t, slurmctld, "-D", "-c", "-f", conf)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(scontrol, args...)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	up := waitFor(sd, 30*time.Second, func() bool {
		out, err := run("ping")
		return err == nil && strings.Contains(out, "is UP")
	})
	if !up {
		l, _ := os.ReadFile(log)
		t.Fatalf("slurmctld did not come up (exited: %v, %v)\n%s\n%s", sd.exited(), sd.err, sd.out.String(), l)
	}
	return run
}

// TestSlurmRealTool loads the rendered node and partition lines into slurmctld and asks
// it, through scontrol, what it made of every node and partition.
func TestSlurmRealTool(t *testing.T) {
	site := testSite()
	// Hosts without an address would make slurmctld resolve their names through DNS,
	// which a test machine cannot; give them loopback addresses.
	for i := range site.Hosts {
		if site.Hosts[i].IP == "" {
			site.Hosts[i].IP = fmt.Sprintf("127.0.100.%d", i+1)
		}
	}
	var buf bytes.Buffer
	if err := SlurmNodes(&buf, site, modeOf(site)); err != nil {
		t.Fatal(err)
	}
	scontrol := slurmctldWith(t, buf.String())

	// Expected from the fixture, written out rather than computed with the renderer's
	// own helpers.
	want := map[string]struct{ features, weight string }{
		"pc-a01":  {"pool-lab-a,desktop", "100"},
		"pc-a02":  {"pool-lab-a,dedicated", "1"},
		"pc-a03":  {"pool-lab-a,course-vm", "1000"},
		"pc-a04":  {"pool-lab-a,dedicated", "1"},
		"pc-a10":  {"pool-lab-a,local-disk", "1000"},
		"pc-b1":   {"pool-lab-b,maintenance", "1000"},
		"pc-b2":   {"pool-lab-b,desktop", "100"},
		"seminar": {"pool-lab-c,desktop", "100"},
	}
	for _, h := range site.Hosts {
		out, err := scontrol("-o", "show", "node", h.Name)
		if err != nil {
			t.Errorf("scontrol show node %s: %v\n%s", h.Name, err, out)
			continue
		}
		f := fields(out)
		w := want[h.Name]
		if f["AvailableFeatures"] != w.features || f["Weight"] != w.weight || f["NodeAddr"] != h.IP {
			t.Errorf("node %s: features %q weight %q addr %q; want %q %q %q", h.Name,
				f["AvailableFeatures"], f["Weight"], f["NodeAddr"], w.features, w.weight, h.IP)
		}
	}

	wantParts := map[string]struct {
		nodes string
		def   string
	}{
		"pool-lab-a": {"pc-a01,pc-a02,pc-a03,pc-a04,pc-a10", "NO"},
		"pool-lab-b": {"pc-b1,pc-b2", "NO"},
		"pool-lab-c": {"seminar", "NO"},
		"overtime":   {"pc-a01,pc-a02,pc-a03,pc-a04,pc-a10,pc-b1,pc-b2,seminar", "YES"},
	}
	out, err := scontrol("-o", "show", "partition")
	if err != nil {
		t.Fatalf("scontrol show partition: %v\n%s", err, out)
	}
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := fields(l)
		w, ok := wantParts[f["PartitionName"]]
		if !ok {
			t.Errorf("unexpected partition %q", f["PartitionName"])
			continue
		}
		seen++
		// Slurm's own expansion of the compressed host list.
		exp, err := scontrol("show", "hostnames", f["Nodes"])
		if err != nil {
			t.Errorf("scontrol show hostnames %s: %v", f["Nodes"], err)
			continue
		}
		names := strings.Fields(exp)
		sort.Strings(names)
		if got := strings.Join(names, ","); got != w.nodes || f["Default"] != w.def || f["State"] != "UP" {
			t.Errorf("partition %s: nodes %s default %s state %s; want %s %s UP", f["PartitionName"], got, f["Default"], f["State"], w.nodes, w.def)
		}
	}
	if seen != len(wantParts) {
		t.Errorf("%d partitions, want %d:\n%s", seen, len(wantParts), out)
	}
}

// fields splits scontrol -o output ("Key=Value Key=Value ...") into a map.
func fields(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}
