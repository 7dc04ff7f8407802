// Package libvirtenv runs a throwaway libvirtd for tests: the real daemon with its QEMU
// driver, in a private mount namespace whose /run, /etc/libvirt, /var/lib/libvirt,
// /var/log/libvirt and /var/cache/libvirt are directories of the test, optionally inside
// a network namespace (bridged guests then attach to that namespace's bridges).
//
// Clients connect with URI (qemu:///system?socket=DIR/sock/libvirt-sock). QEMU runs as
// root (qemu.conf user = "root"): tests need no libvirt-qemu user permissions on their
// temporary files. QEMU writes its logs itself (stdio_handler = "file"), so no virtlogd.
// libvirtd still needs the system user libvirt-qemu to exist (its compiled-in default is
// looked up before qemu.conf is read); scripts/deps.sh creates it.
package libvirtenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/syncbuf"
)

// Env is one running libvirtd.
type Env struct {
	URI string // connection URI for virsh -c
	Dir string // the daemon's directories
	NS  *netns.NS

	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

// Start runs libvirtd for t (in ns when not nil) and stops it, with every domain it runs,
// at cleanup.
func Start(t testing.TB, ns *netns.NS) *Env {
	t.Helper()
	needs.Servers(t, "root", "libvirtd", "QEMU")
	for _, p := range []string{"/usr/sbin/libvirtd", "/usr/bin/virsh", "/usr/bin/qemu-system-x86_64", "/usr/bin/qemu-img"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("libvirtenv: %s missing (run make deps: libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils)", p)
		}
	}
	dir, err := os.MkdirTemp("", "libvirtenv-")
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Dir: dir, NS: ns, done: make(chan struct{})}
	for _, d := range []string{"etc", "run", "lib", "log", "cache", "sock"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/qemu.conf":     "user = \"root\"\ngroup = \"root\"\nremember_owner = 0\nstdio_handler = \"file\"\nsecurity_driver = \"none\"\n",
		"etc/libvirtd.conf": fmt.Sprintf("unix_sock_dir = %q\nlog_outputs = \"3:stderr\"\nauth_unix_rw = \"none\"\n", filepath.Join(dir, "sock")),
	}
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.URI = "qemu:///system?socket=" + filepath.Join(dir, "sock", "libvirt-sock")
	// In a network namespace (entered with nsenter --net only: ip netns exec would mount
	// a sysfs without the cgroup hierarchy, and libvirt then cannot cap a guest's
	// memory), sysfs is mounted again so that /sys/class/net shows the namespace's
	// bridges, with the host's cgroup hierarchy bound back under it.
	script := `set -e
if [ -n "$2" ]; then
	mkdir -p /tmp/.libvirtenv-cgroup-$$
	mount --rbind /sys/fs/cgroup /tmp/.libvirtenv-cgroup-$$
	mount -t sysfs sysfs /sys
	mount --rbind /tmp/.libvirtenv-cgroup-$$ /sys/fs/cgroup
	umount -l /tmp/.libvirtenv-cgroup-$$
	rmdir /tmp/.libvirtenv-cgroup-$$
fi
mount -t tmpfs tmpfs /run
mkdir -p /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt
mount --bind "$1/etc" /etc/libvirt
mount --bind "$1/lib" /var/lib/libvirt
mount --bind "$1/log" /var/log/libvirt
mount --bind "$1/cache" /var/cache/libvirt
exec /usr/sbin/libvirtd`
	args := []string{"unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", dir, ""}
	if ns != nil {
		args[len(args)-1] = "netns"
		e.cmd = ns.NetCommand(args[0], args[1:]...)
	} else {
		e.cmd = exec.Command(args[0], args[1:]...)
	}
	e.out = &syncbuf.Buffer{}
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("libvirtenv: start libvirtd: %v", err)
	}
	go func() { e.cmd.Wait(); close(e.done) }()
	t.Cleanup(func() { e.stop(t) })

	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := e.Virsh("version"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("libvirtenv: libvirtd does not answer: %v\n%s", err, e.Log())
		}
		select {
		case <-e.done:
			t.Fatalf("libvirtenv: libvirtd exited:\n%s", e.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return e
}

// Virsh runs virsh against the daemon.
func (e *Env) Virsh(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", e.URI}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("virsh %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Log is libvirtd's output (errors and warnings).
func (e *Env) Log() string { return e.out.String() }

// QEMULog is the QEMU log of a domain.
func (e *Env) QEMULog(name string) string {
	b, _ := os.ReadFile(filepath.Join(e.Dir, "log", "qemu", name+".log"))
	return string(b)
}

func (e *Env) stop(t testing.TB) {
	// QEMU processes are daemons of their own: destroy every domain before the daemon goes.
	if out, err := e.Virsh("list", "--name"); err == nil {
		for _, name := range strings.Fields(out) {
			if _, err := e.Virsh("destroy", name); err != nil {
				t.Logf("libvirtenv: %v", err)
			}
		}
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
	if t.Failed() {
		t.Logf("libvirtd log:\n%s", e.Log())
	}
	os.RemoveAll(e.Dir)
}
