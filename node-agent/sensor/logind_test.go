package sensor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// busConfig is a private bus like the system bus, open to everyone (root runs the test).
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>overtime-test</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_type="method_return"/>
    <allow send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="signal"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
  </policy>
</busconfig>
`

// startBus starts a real dbus-daemon (Debian package dbus) on a private socket and
// returns its address and a function that kills it (also at the end of the test).
func startBus(t *testing.T) (addr string, kill func()) {
	t.Helper()
	needs.Servers(t, "dbus-daemon (Debian package dbus)")
	bin, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Fatalf("%v (Debian package dbus: apt-get install -y --no-install-recommends dbus)", err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(busConfig, filepath.Join(dir, "bus"))), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill = func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("dbus-daemon: %s", stderr.String())
		}
	})
	// The daemon prints its address once it listens.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		kill()
		t.Fatalf("dbus-daemon printed no address: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(line), kill
}

// fakeLogind is a stand-in for systemd-logind on a private bus, for the shape of the D-Bus
// protocol only: the real logind cannot run here (it needs systemd as PID 1). It exports
// org.freedesktop.login1 with Manager.ListSessions, session objects whose properties
// (org.freedesktop.DBus.Properties: Get, GetAll, PropertiesChanged) are those of logind's
// Session interface, and the SessionNew/SessionRemoved signals.
type fakeLogind struct {
	conn *dbus.Conn

	mu       sync.Mutex // ListSessions runs in godbus's goroutines
	sessions map[string]*prop.Properties
	order    []string
}

type sessionEntry struct {
	ID   string
	UID  uint32
	User string
	Seat string
	Path dbus.ObjectPath
}

func (f *fakeLogind) ListSessions() ([]sessionEntry, *dbus.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sessionEntry
	for _, id := range f.order {
		out = append(out, sessionEntry{ID: id, UID: 1000, User: "u" + id, Seat: "seat0", Path: sessionPath(id)})
	}
	return out, nil
}

func sessionPath(id string) dbus.ObjectPath {
	return dbus.ObjectPath("/org/freedesktop/login1/session/_3" + id)
}

func newFakeLogind(t *testing.T, addr string) *fakeLogind {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeLogind{conn: conn, sessions: map[string]*prop.Properties{}}
	if err := conn.Export(f, login1Path, login1Manager); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(login1Name, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("RequestName: %v %v", reply, err)
	}
	return f
}

func (f *fakeLogind) add(t *testing.T, id, class, typ string, remote bool, signal bool) {
	t.Helper()
	p, err := prop.Export(f.conn, sessionPath(id), prop.Map{login1Session: {
		"Id":            {Value: id, Emit: prop.EmitConst},
		"Class":         {Value: class, Emit: prop.EmitConst},
		"Type":          {Value: typ, Emit: prop.EmitConst},
		"Remote":        {Value: remote, Emit: prop.EmitConst},
		"State":         {Value: "active", Emit: prop.EmitTrue},
		"IdleHint":      {Value: false, Emit: prop.EmitFalse}, // signalled together by idle
		"IdleSinceHint": {Value: uint64(0), Emit: prop.EmitFalse},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.sessions[id] = p
	f.order = append(f.order, id)
	f.mu.Unlock()
	if signal {
		if err := f.conn.Emit(login1Path, login1Manager+".SessionNew", id, sessionPath(id)); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fakeLogind) remove(t *testing.T, id string) {
	t.Helper()
	f.mu.Lock()
	for i, x := range f.order {
		if x == id {
			f.order = append(f.order[:i], f.order[i+1:]...)
			break
		}
	}
	delete(f.sessions, id)
	f.mu.Unlock()
	_ = f.conn.Export(nil, sessionPath(id), dbusProps)
	if err := f.conn.Emit(login1Path, login1Manager+".SessionRemoved", id, sessionPath(id)); err != nil {
		t.Fatal(err)
	}
}

// idle sets a session's idle hint as logind does (session_set_idle_hint): both
// properties, then one PropertiesChanged that names both.
func (f *fakeLogind) idle(t *testing.T, id string, idle bool, since time.Time) {
	t.Helper()
	f.mu.Lock()
	p := f.sessions[id]
	f.mu.Unlock()
	us := uint64(since.UnixMicro())
	p.SetMust(login1Session, "IdleSinceHint", us)
	p.SetMust(login1Session, "IdleHint", idle)
	changed := map[string]dbus.Variant{"IdleHint": dbus.MakeVariant(idle), "IdleSinceHint": dbus.MakeVariant(us)}
	if err := f.conn.Emit(sessionPath(id), dbusProps+".PropertiesChanged", login1Session, changed, []string{}); err != nil {
		t.Fatal(err)
	}
}

func expectLogind(t *testing.T, out <-chan Event, want Sessions, what string) {
	t.Helper()
	ev := nextEvent(t, out, 5*time.Second, what)
	if ev.Kind != KindSessions || ev.Source != "logind" || !ev.Sessions.Equal(want) {
		t.Fatalf("%s: event %+v, want sessions %+v", what, ev, want)
	}
}

// TestLogind: the logind sensor against a real dbus-daemon with a fake logind (see
// fakeLogind): the first state at once, then one event per change: a remote login
// (SessionNew), idle hints (PropertiesChanged; all idle since the later of the two), a
// logout (SessionRemoved). Greeters do not count. When the bus goes away Run ends with an
// error.
func TestLogind(t *testing.T) {
	addr, kill := startBus(t)
	f := newFakeLogind(t, addr)
	f.add(t, "1", "greeter", "x11", false, false)
	f.add(t, "2", "user", "x11", false, false)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Event, 16)
	done := make(chan error, 1)
	go func() { done <- (&Logind{Address: addr}).Run(ctx, out) }()

	expectLogind(t, out, Sessions{Local: 1, Graphical: 1}, "start")
	f.add(t, "3", "user", "tty", true, true)
	expectLogind(t, out, Sessions{Local: 1, Remote: 1, Graphical: 1}, "remote login")

	t1 := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	t2 := t1.Add(10 * time.Second)
	f.idle(t, "2", true, t1)
	noEvent(t, out, 300*time.Millisecond, "one of two sessions idle changes nothing the agent sees")
	f.idle(t, "3", true, t2)
	expectLogind(t, out, Sessions{Local: 1, Remote: 1, Graphical: 1, AllIdle: true, IdleSince: t2}, "both idle")
	f.idle(t, "2", false, time.Now())
	expectLogind(t, out, Sessions{Local: 1, Remote: 1, Graphical: 1}, "local session active again")

	f.remove(t, "3")
	expectLogind(t, out, Sessions{Local: 1, Graphical: 1}, "remote logout")
	// A text console at the PC is local, not graphical.
	f.add(t, "4", "user", "tty", false, true)
	expectLogind(t, out, Sessions{Local: 2, Graphical: 1}, "console login")

	kill()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "lost") {
			t.Fatalf("Run after the bus went away: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not notice that the bus went away")
	}
}

// TestLogindUnavailable: without a system bus, and on a bus without logind, Run fails at
// once with an error that says why.
func TestLogindUnavailable(t *testing.T) {
	start := time.Now()
	err := (&Logind{Address: "unix:path=" + filepath.Join(t.TempDir(), "no-bus")}).Run(context.Background(), make(chan Event))
	if err == nil || !strings.Contains(err.Error(), "no system bus") {
		t.Fatalf("Run without a bus: %v", err)
	}
	addr, _ := startBus(t)
	err = (&Logind{Address: addr}).Run(context.Background(), make(chan Event))
	if err == nil || !strings.Contains(err.Error(), "ListSessions") {
		t.Fatalf("Run on a bus without logind: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	t.Logf("errors: %v", err)
}
