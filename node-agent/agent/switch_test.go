package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/sensor"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// recorder is the PC and its users as the agent reaches them: what it asked of systemd
// and what it told the people logged in.
type recorder struct {
	mu      sync.Mutex
	acts    []string
	at      []time.Time
	notices []string
}

func (r *recorder) Reboot(context.Context) error   { return r.act("reboot") }
func (r *recorder) PowerOff(context.Context) error { return r.act("poweroff") }
func (r *recorder) act(what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acts, r.at = append(r.acts, what), append(r.at, time.Now())
	return nil
}
func (r *recorder) Notify(_ context.Context, title, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices = append(r.notices, title+": "+text)
	return nil
}
func (r *recorder) get() (acts []string, at []time.Time, notices []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.acts...), append([]time.Time(nil), r.at...), append([]string(nil), r.notices...)
}

// switchConfig is a desktop whose next change, `in` from now, needs a restart.
func switchConfig(in time.Duration, rule model.SwitchRule, grace time.Duration) *wire.AgentConfig {
	c := goodConfig()
	c.Mode, c.Kind = "desktop", model.KindDesktop
	c.Generated = time.Now()
	c.NextChange, c.NextMode = c.Generated.Add(in), "bio"
	c.NextReboot, c.NextSwitch, c.NextLabel = "the course VM starts on a freshly booted desktop", rule, "BIO101"
	c.Policy = model.Policy{SwitchSpread: model.Duration(time.Millisecond), SwitchGrace: model.Duration(grace)}.Effective()
	return c
}

func startSwitchAgent(t *testing.T, site *fakeSite, booted string) (*Agent, *recorder) {
	t.Helper()
	rec := &recorder{}
	a, err := New(Options{Site: site, MAC: testMAC, StateDir: t.TempDir(), Refresh: time.Hour, Heartbeat: time.Hour,
		Machine: rec, Notifier: rec, Booted: booted, Uptime: "/proc/uptime"})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	return a, rec
}

func sessions(a *Agent, n int) {
	a.Signals() <- sensor.Event{Kind: sensor.KindSessions, Time: time.Now(), Source: "test", Sessions: sensor.Sessions{Local: n}}
}

// Nobody at the PC: it restarts at the boundary (plus its place in the spread), not before.
func TestSwitchRebootsAtTheBoundary(t *testing.T) {
	c := switchConfig(400*time.Millisecond, model.SwitchForce, time.Minute)
	_, rec := startSwitchAgent(t, &fakeSite{cfg: c}, "desktop")
	waitFor(t, "a restart", func() bool { acts, _, _ := rec.get(); return len(acts) > 0 })
	acts, at, notices := rec.get()
	if acts[0] != "reboot" || at[0].Before(c.NextChange) {
		t.Fatalf("%s at %s, boundary %s", acts[0], at[0].Format(time.StampMilli), c.NextChange.Format(time.StampMilli))
	}
	if len(notices) != 0 {
		t.Fatalf("nobody logged in, yet told: %q", notices)
	}
}

// A PC that Overtime did not boot is never restarted by a schedule.
func TestSwitchNotOnAPCOvertimeDidNotBoot(t *testing.T) {
	c := switchConfig(100*time.Millisecond, model.SwitchForce, 0)
	a, rec := startSwitchAgent(t, &fakeSite{cfg: c}, "")
	waitFor(t, "the boundary", func() bool { return time.Now().After(c.NextChange.Add(300 * time.Millisecond)) })
	sessions(a, 0) // one more decision after the boundary
	waitFor(t, "a heartbeat document", func() bool { return a.LastHeartbeat().Host != "" })
	if acts, _, _ := rec.get(); len(acts) != 0 {
		t.Fatalf("restarted a PC Overtime did not boot: %q", acts)
	}
}

// Someone logged in, forced switch: told with a countdown, restarted after the grace.
func TestSwitchForcedCountdown(t *testing.T) {
	c := switchConfig(300*time.Millisecond, model.SwitchForce, 700*time.Millisecond)
	site := &fakeSite{cfg: c}
	a, rec := startSwitchAgent(t, site, "desktop")
	sessions(a, 1)
	waitFor(t, "a restart", func() bool { acts, _, _ := rec.get(); return len(acts) > 0 })
	_, at, notices := rec.get()
	if deadline := c.NextChange.Add(700 * time.Millisecond); at[0].Before(deadline) {
		t.Fatalf("restarted at %s, before the grace ended at %s", at[0].Format(time.StampMilli), deadline.Format(time.StampMilli))
	}
	if len(notices) == 0 || !strings.Contains(notices[0], "restarts at") || !strings.Contains(notices[0], "BIO101") {
		t.Fatalf("notices: %q", notices)
	}
	// The heartbeat carried the pending switch before.
	site.mu.Lock()
	defer site.mu.Unlock()
	found := false
	for _, hb := range site.hbs {
		found = found || strings.HasPrefix(hb.Switch, "forced reboot at ")
	}
	if !found {
		t.Fatalf("no heartbeat showed the pending switch: %+v", site.hbs)
	}
}

// Someone logged in, waiting switch: no restart while they are, one when they leave.
func TestSwitchWaitsForLogout(t *testing.T) {
	c := switchConfig(100*time.Millisecond, model.SwitchWait, 0)
	a, rec := startSwitchAgent(t, &fakeSite{cfg: c}, "desktop")
	sessions(a, 1)
	waitFor(t, "the 'when you log out' notice", func() bool {
		_, _, n := rec.get()
		return len(n) > 0 && strings.Contains(n[len(n)-1], "log out") && time.Now().After(c.NextChange)
	})
	if acts, _, _ := rec.get(); len(acts) != 0 {
		t.Fatalf("restarted under a logged-in user: %q", acts)
	}
	sessions(a, 0)
	waitFor(t, "a restart after the logout", func() bool { acts, _, _ := rec.get(); return len(acts) == 1 && acts[0] == "reboot" })
}

// A power-off is refused while someone is logged in, and carried out when nobody is.
func TestPowerOffCommand(t *testing.T) {
	c := goodConfig()
	c.Power = &wire.PowerCommand{ID: "p1", Op: wire.OpPowerOff, By: "slurm", Requested: time.Now()}
	site := &fakeSite{cfg: c}
	a, rec := startSwitchAgent(t, site, "")
	sessions(a, 1)
	waitFor(t, "the refusal in the heartbeat", func() bool {
		p := a.LastHeartbeat().Power
		return p != nil && p.ID == "p1" && p.State == wire.CommandRefused && strings.Contains(p.Reason, "logged in")
	})
	if acts, _, _ := rec.get(); len(acts) != 0 {
		t.Fatalf("switched off under a user: %q", acts)
	}
	sessions(a, 0)
	waitFor(t, "the power-off", func() bool { acts, _, _ := rec.get(); return len(acts) == 1 && acts[0] == "poweroff" })
	site.mu.Lock()
	defer site.mu.Unlock()
	last := site.hbs[len(site.hbs)-1]
	if last.Power == nil || last.Power.State != wire.CommandDone {
		t.Fatalf("the heartbeat sent before the power-off says %+v", last.Power)
	}
}
