package test

// Jobs of the university's users run as themselves in the container guest (issue 29): a
// job submitted by u1234567 runs under uid 1234567 (the same uid to the desktop's kernel),
// resolves its name, cannot read another user's private file and sees nothing of the
// desktop user's processes or files; a user outside the guest's id ranges gets an error
// naming the uid; storage that cannot be mounted keeps the guest out of Slurm with a
// reason naming the mount. (This machine's kernel has no NFS client: a mount that works,
// with a job writing its home, is TestDesktopImageRunsSlurmJob's, on the desktop image.)

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
)

func TestSlurmJobsRunAsTheirUsers(t *testing.T) {
	u1 := slurmlab.User{Name: "u1234567", UID: 1234567, GID: 1234567}
	u2 := slurmlab.User{Name: "u7654321", UID: 7654321, GID: 7654321}
	outside := slurmlab.User{Name: "u70000", UID: 70000, GID: 70000} // not in the guest's ranges

	mkdir := func(p string, mode os.FileMode, u slurmlab.User) {
		t.Helper()
		if err := os.MkdirAll(p, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		if err := os.Chown(p, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
	}

	// The desktop's own user at the seat: a session process and files of the same
	// person (uid 1234567) on the desktop's side.
	desktopHome := filepath.Join(t.TempDir(), "desktop-home-u1234567")
	mkdir(desktopHome, 0o700, u1)
	os.WriteFile(filepath.Join(desktopHome, "thesis.txt"), []byte("the desktop user's work\n"), 0o600)
	session := exec.Command("/bin/sleep", "600")
	session.Args = []string{"desktop-session-marker", "600"}
	session.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u1.UID, Gid: u1.GID}, Pdeathsig: syscall.SIGKILL}
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Process.Kill(); session.Wait() })

	const jobUsers = `jobUsers: {uids: ["1000000-9999999"], gids: ["1000000-9999999"]}`
	l := slurmlab.Start(t, slurmlab.Options{
		Hosts:     []slurmlab.Host{{Name: "upc1", MAC: "52:54:00:0c:01:01", Cluster: true}},
		Policy:    "{" + noLoad + "}",
		Users:     []slurmlab.User{u1, u2, outside},
		SlurmConf: "SlurmdLogFile=/tmp/slurmd.log\n",
		GuestYAML: jobUsers,
	})
	h := l.Host("upc1")

	// u7654321 keeps a private file in the guest's /tmp; then u1234567's job runs.
	sbatch := func(u slurmlab.User, args ...string) {
		t.Helper()
		out, err := l.SlurmAs(u, "sbatch", append([]string{"--parsable", "-w", "upc1", "--chdir=/tmp"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(out)
		bootlab.Eventually(t, "job "+id+" ended", 90*time.Second, func() bool {
			st := l.Job(id)["JobState"]
			return st == "COMPLETED" || st == "FAILED" || st == "CANCELLED"
		})
		if st := l.Job(id)["JobState"]; st != "COMPLETED" {
			log, _ := l.GuestFile(h, "/tmp/slurmd.log")
			t.Fatalf("job %s of %s: %s\nslurmd log:\n%s", id, u.Name, l.Job(id), log)
		}
	}
	script := filepath.Join(l.Dir, "job.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
echo "uid=$(id -u) gid=$(id -g) user=$(id -un) home=$(grep '^u1234567:' /etc/passwd | cut -d: -f6)"
echo "written by the job" > /tmp/u1234567-written.txt
if cat /tmp/u7654321/private.txt 2>/dev/null; then echo "LEAK: read u7654321's private file"; else echo "other user's file: denied"; fi
if ps -o pid,user,args | grep -v grep | grep -q desktop-session-marker; then echo "LEAK: the desktop user's process is visible"; else echo "desktop processes: invisible"; fi
if ls `+desktopHome+` >/dev/null 2>&1; then echo "LEAK: the desktop user's files are visible"; else echo "desktop files: invisible"; fi
`), 0o755)

	t.Run("a job runs as its user", func(t *testing.T) {
		sbatch(u2, "--output=/dev/null", "--wrap", "umask 077; mkdir -p /tmp/u7654321; chmod 755 /tmp/u7654321; echo secret > /tmp/u7654321/private.txt")
		sbatch(u1, "--output=/tmp/u1234567-job.out", script)
		b, err := l.GuestFile(h, "/tmp/u1234567-job.out")
		if err != nil {
			t.Fatal(err)
		}
		got := string(b)
		t.Logf("the job's output:\n%s", got)
		for _, want := range []string{
			"uid=1234567 gid=1234567 user=u1234567 home=/home/u1234567\n",
			"other user's file: denied\n", "desktop processes: invisible\n", "desktop files: invisible\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("job output lacks %q", want)
			}
		}
		if strings.Contains(got, "LEAK") {
			t.Errorf("the job saw what it must not")
		}
		// The mapping is the identity for the site's users: to the desktop's kernel (and
		// so to an NFS server) what the job wrote belongs to uid 1234567 itself.
		pid := guestPID(t, l, h)
		for _, f := range []string{"/tmp/u1234567-written.txt", "/tmp/u1234567-job.out"} {
			var st syscall.Stat_t
			if err := syscall.Stat(fmt.Sprintf("/proc/%d/root%s", pid, f), &st); err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if st.Uid != u1.UID || st.Gid != u1.GID {
				t.Errorf("%s is %d:%d on the desktop, want the job's user 1234567:1234567", f, st.Uid, st.Gid)
			}
		}
	})

	t.Run("a user outside the guest's ids", func(t *testing.T) {
		out, err := l.SlurmAs(outside, "sbatch", "--parsable", "-w", "upc1", "--chdir=/tmp", "--output=/tmp/u70000.out", "--wrap", "id")
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(out)
		// slurmstepd's check fails the launch: Slurm requeues the job and holds it
		// ("launch failed requeued held"), the node stays up for everyone else.
		var log []byte
		bootlab.Eventually(t, "the launch of job "+id+" failed", 60*time.Second, func() bool {
			j := l.Job(id)
			return j["JobState"] == "FAILED" || strings.Contains(j["Reason"], "launch_failed") || strings.Contains(j["Reason"], "launch failed")
		})
		log, _ = l.GuestFile(h, "/tmp/slurmd.log")
		t.Logf("job %s: %s\nslurmd log:\n%s", id, l.Job(id), log)
		if !strings.Contains(string(log), "uid 70000 is outside this guest's user ids") {
			t.Errorf("slurmd's log does not name the uid")
		}
		l.Slurm("scancel", id)
	})

	t.Run("storage that cannot be mounted", func(t *testing.T) {
		// The guest definition now names a file server nobody answers for: the agent
		// restarts the guest with it, the start fails, and the node goes down with the
		// mount in its reason instead of taking jobs that would fail.
		l.GuestYAML = jobUsers + ", storage: [{server: 10.31.0.250, export: /export/home, path: /home}]"
		l.PutSite()
		bootlab.Eventually(t, "node down naming the mount", 120*time.Second, func() bool {
			n := l.Node("upc1")
			return strings.Contains(n["State"], "DOWN") && strings.Contains(n["Reason"], "cluster storage 10.31.0.250:/export/home at /home: mount failed")
		})
		t.Logf("node: %s", l.Node("upc1")["Reason"])
	})
}

// guestPID is a process of the host's running container guest.
func guestPID(t *testing.T, l *slurmlab.Lab, h *slurmlab.Host) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.Dir, "agent-"+h.Name, "state", "guest", "overtime-"+h.Name, "bundle", "init.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
