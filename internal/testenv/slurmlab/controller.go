package slurmlab

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// Controller is a Slurm controller (munged + slurmctld, configless, dynamic nodes) in a
// network namespace someone else made, for nodes that are real machines: compute guests
// in PXE-booted desktop VMs (test/desktop_test.go). Unlike Lab it runs no site manager,
// agents or guests of its own.
//
// munged listens on munge's default socket, /run/munge/munge.socket.2, as a production
// controller's does, so that slurm.conf names no socket and the nodes' configless copy
// of it works with their own munged. The test's processes see a private directory of
// their own there (each runs in a mount namespace with it bound over /run/munge), so the
// host's munge, if any, and other tests' are untouched.
type Controller struct {
	T        testing.TB
	NS       *netns.NS
	Dir      string
	IP       string
	Conf     string // slurm.conf
	MungeKey string // the key file
	Ctld     *Proc
	mungeDir string
}

// NewMungeKey writes a random munge key (1024 bytes, root, 0600) into dir.
func NewMungeKey(t testing.TB, dir string) string {
	t.Helper()
	key := make([]byte, 1024)
	rand.Read(key)
	p := filepath.Join(dir, "munge.key")
	if err := os.WriteFile(p, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// StartController starts munged and slurmctld at ip (an address of ns) with the munge
// key in keyFile (made by the caller: the site manager hands it to the agents) and waits
// until slurmctld answers. users are the directory's users the controller and its client
// commands know (InstallUsers); SlurmAs submits as one of them.
func StartController(t testing.TB, ns *netns.NS, ip, keyFile string, users ...User) *Controller {
	t.Helper()
	needs.Servers(t, "root (mount namespaces)", "slurmctld", "munge")
	_, _, jobSubmit := BuildC(t)
	c := &Controller{T: t, NS: ns, Dir: t.TempDir(), IP: ip}
	if len(users) > 0 {
		// Before slurmctld starts: ip netns exec binds the files at its start.
		InstallUsers(t, ns, users)
		openPath(t, c.Dir)
	}
	c.mungeDir = filepath.Join(c.Dir, "munge")
	// munged wants its socket directory searchable by all, the key readable by it alone.
	if err := os.MkdirAll(c.mungeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/run/munge", 0o755); err != nil {
		t.Fatal(err)
	}
	c.MungeKey = keyFile
	munged := startProc(t, "munged", c.command("munged", "--foreground", "--force", "--key-file="+c.MungeKey,
		"--pid-file="+filepath.Join(c.mungeDir, "munged.pid"), "--log-file="+filepath.Join(c.Dir, "munged.log"),
		"--seed-file="+filepath.Join(c.Dir, "munged.seed")))
	waitFor(t, "munged socket", 20*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(c.mungeDir, "munge.socket.2"))
		return err == nil
	}, munged)
	// Production's plugin directory only: the nodes are real images (the plugin comes
	// with their overtime-slurm package), and slurmd refuses a PluginDir entry that does
	// not exist. This test host, the submit host, has the plugin only in the build tree,
	// so the plugin is optional here (it loads on the nodes, which is what the tests
	// check: the job reports it sends).
	c.Conf = writeSlurmConf(t, c.Dir, ip, "", "", jobSubmit, slurmPluginDir, "optional")
	c.Ctld = startProc(t, "slurmctld", c.command("slurmctld", "-D", "-i", "-f", c.Conf))
	waitFor(t, "slurmctld", 60*time.Second, func() bool {
		return strings.Contains(c.Slurm("scontrol", "ping"), "is UP")
	}, c.Ctld)
	return c
}

// command runs name in the namespace with the controller's munge directory at /run/munge
// and its slurm.conf.
func (c *Controller) command(name string, args ...string) *exec.Cmd {
	return c.commandContext(context.Background(), name, args...)
}

func (c *Controller) commandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := c.NS.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /run/munge && exec "$@"`, c.mungeDir, name}, args...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	return cmd
}

// Slurm runs a Slurm client command and returns its output ("" on failure).
func (c *Controller) Slurm(name string, args ...string) string {
	out, err := c.SlurmErr(name, args...)
	if err != nil {
		return ""
	}
	return out
}

// SlurmErr is Slurm with the error (which carries the output).
func (c *Controller) SlurmErr(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.commandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Log is slurmctld's log file.
func (c *Controller) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "etc", "slurmctld.log"))
	return string(b)
}
