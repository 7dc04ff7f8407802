package slurmlab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
)

// User is one of the university's users, known to the controller and the submit host
// (the lab's network namespace) the way a site's directory makes them known there.
type User struct {
	Name     string
	UID, GID uint32
}

// installUsers makes the users resolvable for the lab's commands (InstallUsers) and its
// slurm.conf and munge socket reachable for them.
func (l *Lab) installUsers(users []User) {
	l.T.Helper()
	if len(users) == 0 {
		return
	}
	InstallUsers(l.T, l.NS, users)
	openPath(l.T, l.Dir)
}

// InstallUsers makes the users resolvable for every command run in ns with `ip netns
// exec` (slurmctld, sbatch, scontrol): ip binds the files of /etc/netns/NAME over /etc in
// the command's own mount namespace, so the host's /etc/passwd stays as it is. The
// directory goes when the test ends.
func InstallUsers(t testing.TB, ns *netns.NS, users []User) {
	t.Helper()
	dir := filepath.Join("/etc/netns", ns.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, f := range []struct {
		name string
		line func(User) string
	}{
		{"passwd", func(u User) string {
			return fmt.Sprintf("%s:x:%d:%d:%s:/home/%s:/bin/sh\n", u.Name, u.UID, u.GID, u.Name, u.Name)
		}},
		{"group", func(u User) string { return fmt.Sprintf("%s:x:%d:\n", u.Name, u.GID) }},
	} {
		b, err := os.ReadFile(filepath.Join("/etc", f.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			b = append(b, f.line(u)...)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// openPath makes dir and its parents below the temporary directory searchable: a user's
// sbatch reads slurm.conf (and, in a Lab, munged's socket) there.
func openPath(t testing.TB, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// asUser is the argv that runs name as u: `ip netns exec` needs root, so the user's
// credentials come after it, from setpriv, which reads the user's groups from the
// namespace's files.
func asUser(u User, name string, args ...string) []string {
	return append([]string{"setpriv", "--reuid=" + strconv.Itoa(int(u.UID)), "--regid=" + strconv.Itoa(int(u.GID)), "--init-groups", "--", name}, args...)
}

// userEnv is a user's environment for Slurm's client commands.
func userEnv(u User, conf string) []string {
	return []string{"PATH=/usr/bin:/bin", "SLURM_CONF=" + conf, "USER=" + u.Name, "HOME=/home/" + u.Name}
}

// SlurmAs runs a Slurm client command as user u (its uid and gid; its groups as the
// lab's files say), from /.
func (l *Lab) SlurmAs(u User, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := asUser(u, name, args...)
	c := l.NS.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = userEnv(u, l.Conf)
	c.Dir = "/"
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s as %s: %v: %s", name, strings.Join(args, " "), u.Name, err, out)
	}
	return string(out), nil
}

// SlurmAs runs a Slurm client command as user u (one of StartController's users), from /.
func (c *Controller) SlurmAs(u User, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := asUser(u, name, args...)
	cmd := c.commandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = userEnv(u, c.Conf)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s as %s: %v: %s", name, strings.Join(args, " "), u.Name, err, out)
	}
	return string(out), nil
}
