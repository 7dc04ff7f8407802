package powerctl

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// A user's session bus as /run/user/UID/bus holds it: one that only its own user may
// use, as dbus-daemon --session does.
const sessionBus = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// notifications plays the desktop's notification daemon (org.freedesktop.Notifications,
// as the Desktop Notifications Specification defines Notify).
type notifications struct {
	mu  sync.Mutex
	got []string
}

func (n *notifications) Notify(app string, replaces uint32, icon, summary, body string, actions []string,
	hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, fmt.Sprintf("%s|%s|%s|urgency=%v", app, summary, body, hints["urgency"].Value()))
	return uint32(len(n.got)), nil
}

// The notice reaches a graphical session through its real session bus and busctl, with
// the call the specification defines.
func TestDesktopNotification(t *testing.T) {
	needs.Servers(t, "dbus-daemon (Debian package dbus-daemon)", "busctl (systemd)")
	runUser := t.TempDir()
	uid := strconv.Itoa(os.Getuid())
	if err := os.MkdirAll(filepath.Join(runUser, uid), 0o700); err != nil {
		t.Fatal(err)
	}
	bus := filepath.Join(runUser, uid, "bus")
	conf := filepath.Join(t.TempDir(), "session.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(sessionBus, bus)), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	conn, err := dbus.Connect(strings.TrimSpace(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := &notifications{}
	if err := conn.Export(n, "/org/freedesktop/Notifications", "org.freedesktop.Notifications"); err != nil {
		t.Fatal(err)
	}
	if r, err := conn.RequestName("org.freedesktop.Notifications", dbus.NameFlagDoNotQueue); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("RequestName: %v %v", r, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := Sessions{RunUser: runUser, NoWall: true, Log: func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }}
	if err := s.Notify(ctx, "This PC restarts at 10:05", "This PC restarts at 10:05 (in 5 minutes) for BIO101 'lab' $(x). Save your work now."); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	want := "Overtime|This PC restarts at 10:05|This PC restarts at 10:05 (in 5 minutes) for BIO101 'lab' $(x). Save your work now.|urgency=2"
	if len(n.got) != 1 || n.got[0] != want {
		t.Fatalf("notifications: %q\nwant %q", n.got, want)
	}
}

// wall reaches terminals; without terminals (this test's process has none in utmp) it
// still succeeds, and a failing channel is reported only when nothing was reached.
func TestNotifyWithoutSessions(t *testing.T) {
	needs.Servers(t, "wall (bsdutils)")
	s := Sessions{RunUser: t.TempDir()}
	if err := s.Notify(context.Background(), "title", "text"); err != nil {
		t.Fatalf("wall with nobody logged in: %v", err)
	}
}
