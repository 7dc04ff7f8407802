package slurmlab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// User is one of the university's users, known to the controller and the submit host
// (the lab's network namespace) the way a site's directory makes them known there.
type User struct {
	Name     string
	UID, GID uint32
}

// installUsers makes the users resolvable for every command the lab runs with `ip netns
// exec` (slurmctld, sbatch, scontrol): ip binds the files of /etc/netns/NAME over /etc in
// the command's own mount namespace, so the host's /etc/passwd stays as it is. The
// directory goes when the test ends.
func (l *Lab) installUsers(users []User) {
	l.T.Helper()
	if len(users) == 0 {
		return
	}
	dir := filepath.Join("/etc/netns", l.NS.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.T.Fatal(err)
	}
	l.T.Cleanup(func() { os.RemoveAll(dir) })
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
			l.T.Fatal(err)
		}
		for _, u := range users {
			b = append(b, f.line(u)...)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), b, 0o644); err != nil {
			l.T.Fatal(err)
		}
	}
	// A user's sbatch reads slurm.conf and munged's socket under the lab's directory.
	for d := l.Dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			l.T.Fatal(err)
		}
	}
}

// SlurmAs runs a Slurm client command as user u (its uid and gid; its groups as the
// lab's files say), from /.
func (l *Lab) SlurmAs(u User, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// ip netns exec needs root: the user's credentials come after it, from setpriv,
	// which reads the user's groups from the namespace's files.
	c := l.NS.CommandContext(ctx, "setpriv", append([]string{"--reuid=" + strconv.Itoa(int(u.UID)), "--regid=" + strconv.Itoa(int(u.GID)), "--init-groups", "--", name}, args...)...)
	c.Env = []string{"PATH=/usr/bin:/bin", "SLURM_CONF=" + l.Conf, "USER=" + u.Name, "HOME=/home/" + u.Name}
	c.Dir = "/"
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s as %s: %v: %s", name, strings.Join(args, " "), u.Name, err, out)
	}
	return string(out), nil
}
