package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/sensor"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// ender records the agent's logouts.
type ender struct{ n atomic.Int32 }

func (e *ender) EndGraphical(context.Context) ([]string, error) {
	e.n.Add(1)
	return []string{"2 (student)"}, nil
}

// A student left their session ten minutes ago, and the room's switch waits for their
// logout: under the pool's logoutIdle they are warned, logged out a warning's lead later
// (not at once, though the limit has passed), and the waiting switch restarts the PC.
func TestAbandonedSessionLoggedOut(t *testing.T) {
	var offset atomic.Int64 // the agent's clock runs ahead of the wall clock by this
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	c := switchConfig(100*time.Millisecond, model.SwitchWait, 0)
	c.Policy.LogoutIdle = model.Duration(2 * time.Minute) // warned 1 minute before
	rec, end := &recorder{}, &ender{}
	a, err := New(Options{Site: &fakeSite{cfg: c}, MAC: testMAC, StateDir: t.TempDir(), Refresh: time.Hour, Heartbeat: time.Hour,
		Machine: rec, Notifier: rec, Ender: end, Booted: "desktop", Uptime: "/proc/uptime", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	left := now().Add(-10 * time.Minute)
	a.Signals() <- sensor.Event{Kind: sensor.KindSessions, Time: left, Source: "test", Sessions: sensor.Sessions{Local: 1, Graphical: 1}}
	a.Signals() <- sensor.Event{Kind: sensor.KindInput, Time: left, Source: "input:event0"}
	// Keys typed in a terminal (ssh, the console) are not the seat's: they keep nothing
	// alive.
	a.Signals() <- sensor.Event{Kind: sensor.KindInput, Time: now(), Source: "tty:pts/0"}
	waitFor(t, "the logout warning", func() bool {
		_, _, n := rec.get()
		return len(n) > 0 && strings.Contains(strings.Join(n, "\n"), "You will be logged out: Nobody has used this PC for 2 minutes: the session ends in 1 minute")
	})
	if end.n.Load() != 0 {
		t.Fatal("logged out at the warning")
	}
	// A minute later on the agent's clock (a sensor event makes it decide again).
	offset.Store(int64(61 * time.Second))
	a.Signals() <- sensor.Event{Kind: sensor.KindLoad, Time: now(), Source: "test"}
	waitFor(t, "the logout", func() bool { return end.n.Load() == 1 })
	if acts, _, _ := rec.get(); len(acts) != 0 {
		t.Fatalf("restarted before logind said the session was gone: %q", acts)
	}
	// logind: the session is gone; the waiting switch restarts the PC, and nobody is
	// logged out twice.
	a.Signals() <- sensor.Event{Kind: sensor.KindSessions, Time: now(), Source: "test"}
	waitFor(t, "a restart after the logout", func() bool { acts, _, _ := rec.get(); return len(acts) == 1 && acts[0] == "reboot" })
	if n := end.n.Load(); n != 1 {
		t.Fatalf("%d logouts", n)
	}
}
