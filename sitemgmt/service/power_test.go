package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Power commands are shared runtime state: a command made on one replica is handed to
// the agent by another, the agent's answer on that one ends it on the first, and a
// restarted replica has the commands and the audit trail.
func TestReplicasSharePowerCommands(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	a := env.Svc
	b := replica(t, env)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	hb := wire.Heartbeat{Host: "pc-a02", Instance: "agent-1", Seq: 1, Time: now, Mode: "desktop", OwnerState: model.StateNoUser, Action: model.ActionRun, Sessions: 1}
	if _, err := a.Agents.PutHeartbeat(hb, now, "10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	// b refuses a power-off by the sessions a's heartbeat reported.
	poll.Until(t, "b sees the heartbeat", 10*time.Second, func() bool {
		st, ok, _ := b.Agents.Status("pc-a02", now)
		return ok && st.Sessions == 1
	})
	res, err := b.Power.Request(ctx, "alice", wire.OpPowerOff, []string{"pc-a02"}, false, "", now)
	if err != nil || res.Hosts[0].Accepted || !strings.Contains(res.Hosts[0].Reason, "logged in") {
		t.Fatalf("power-off with a session, on the other replica: %+v %v", res, err)
	}
	res, err = b.Power.Request(ctx, "alice", wire.OpReboot, []string{"pc-a02"}, true, "kernel update", now)
	if err != nil || !res.Hosts[0].Accepted {
		t.Fatalf("reboot: %+v %v", res, err)
	}
	id := res.Hosts[0].ID
	poll.Until(t, "a hands the reboot made on b to the agent", 10*time.Second, func() bool {
		c := a.Power.Pending("pc-a02")
		return c != nil && c.ID == id && c.Force && c.Reason == "kernel update"
	})
	hb.Seq, hb.Power = 2, &wire.CommandStatus{ID: id, State: wire.CommandDone}
	if _, err := a.Agents.PutHeartbeat(hb, now.Add(time.Second), "10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "b sees the command done", 10*time.Second, func() bool {
		return b.Power.Pending("pc-a02") == nil && slices.ContainsFunc(b.Power.Commands("pc-a02"), func(r wire.PowerRecord) bool { return r.ID == id && r.State == wire.CommandDone })
	})
	for _, s := range []*service.Service{a, b} {
		if err := s.FlushState(ctx); err != nil || s.StatePending() != 0 {
			t.Fatalf("flush: %v, %d pending", err, s.StatePending())
		}
	}
	c := replica(t, env)
	if l := c.Power.Commands("pc-a02"); len(l) != 1 || l[0].State != wire.CommandDone {
		t.Errorf("restarted replica's commands: %+v", l)
	}
	var kinds []string
	for _, e := range c.Audit("pc-a02", time.Time{}) {
		kinds = append(kinds, e.Summary)
	}
	if got := strings.Join(kinds, "\n"); !strings.Contains(got, "poweroff pc-a02: 0 accepted, 1 refused") || !strings.Contains(got, "reboot --force pc-a02: 1 accepted") || !strings.Contains(got, ": done") {
		t.Errorf("restarted replica's audit trail of pc-a02:\n%s", got)
	}
}
