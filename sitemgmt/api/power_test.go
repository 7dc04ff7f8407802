package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/wake"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// runHostPowerSuite: overtime host reboot|poweroff|wake through the API (run by
// runAPISuite, through the OpenAPI checker), on the example site at the test clock.
func runHostPowerSuite(t *testing.T, env *testenv.Env) {
	admin := env.Admin()
	alice := env.Client("alice", "alice-secret") // pool admin lab-a
	carol := env.Client("carol", "carol-secret") // lecturer lab-a
	dave := env.Client("dave", "dave-secret")    // viewer
	tok := issue(t, admin, "pc-a03")
	a03 := hostClient(env, tok)
	beat := func(hb wire.Heartbeat) {
		t.Helper()
		hb.Mode, hb.ConfigFrom = "course-bio101", wire.ConfigFromAPI
		if err := a03.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
	}
	beat(wire.Heartbeat{Instance: "i1", Seq: 1, Sessions: 2})

	t.Run("who may", func(t *testing.T) {
		for _, tc := range []struct {
			who   string
			c     *client.Client
			req   wire.HostPowerRequest
			code  int
			inErr string
		}{
			{"other pool's admin", alice, wire.HostPowerRequest{Op: wire.OpReboot, Hosts: "pc-b01"}, 403, "user alice may not reboot host pc-b01"},
			{"pool admin, one host of another pool: nothing", alice, wire.HostPowerRequest{Op: wire.OpWake, Hosts: "pc-a04,pc-b01"}, 403, "pc-b01"},
			{"lecturer of the pool", carol, wire.HostPowerRequest{Op: wire.OpReboot, Hosts: "pc-a03"}, 403, "never changes how a PC boots"},
			{"viewer", dave, wire.HostPowerRequest{Op: wire.OpPowerOff, Hosts: "pc-a03"}, 403, "a viewer only reads"},
			{"host credential", a03, wire.HostPowerRequest{Op: wire.OpReboot, Hosts: "pc-a03"}, 403, "a host credential may only"},
			{"unknown op", admin, wire.HostPowerRequest{Op: "explode", Hosts: "pc-a03"}, 400, "op"},
			{"bad hostlist", admin, wire.HostPowerRequest{Op: wire.OpReboot, Hosts: "pc-a[03"}, 400, "hosts"},
			{"reason is one line of inert text", admin, wire.HostPowerRequest{Op: wire.OpReboot, Hosts: "pc-a03", Reason: "$(reboot)"}, 400, "reason"},
		} {
			res, err := tc.c.Power(ctx, tc.req)
			if status(err) != tc.code || !strings.Contains(err.Error(), tc.inErr) {
				t.Errorf("%s: %+v %v; want %d %q", tc.who, res, err, tc.code, tc.inErr)
			}
		}
		if got := env.Svc.Power.Commands(""); len(got) != 0 {
			t.Fatalf("refused requests recorded commands: %+v", got)
		}
	})

	var rebootID string
	t.Run("power-off refused while a user is logged in; reboot accepted; off hosts refused", func(t *testing.T) {
		res, err := alice.Power(ctx, wire.HostPowerRequest{Op: wire.OpPowerOff, Hosts: "pc-a03", Force: true})
		if err != nil || len(res.Hosts) != 1 || res.Hosts[0].Accepted || !strings.Contains(res.Hosts[0].Reason, "2 user session(s) logged in") {
			t.Fatalf("power-off with sessions: %+v %v", res, err)
		}
		res, err = alice.Power(ctx, wire.HostPowerRequest{Op: wire.OpReboot, Hosts: "pc-a[03-04],nope", Reason: "new kernel"})
		if err != nil || len(res.Hosts) != 3 {
			t.Fatalf("reboot: %+v %v", res, err)
		}
		r3, r4, rn := res.Hosts[0], res.Hosts[1], res.Hosts[2]
		if !r3.Accepted || r3.ID == "" || r4.Host != "pc-a04" || r4.Accepted || !strings.Contains(r4.Reason, "off or its agent is not running") ||
			rn.Accepted || !strings.Contains(rn.Reason, "not a host") {
			t.Fatalf("reboot results: %+v", res.Hosts)
		}
		rebootID = r3.ID
	})

	t.Run("the agent gets the command until it answers", func(t *testing.T) {
		cfg, err := a03.AgentConfig(ctx)
		if err != nil || cfg.Power == nil || cfg.Power.ID != rebootID || cfg.Power.Op != wire.OpReboot || cfg.Power.By != "alice" || cfg.Power.Reason != "new kernel" {
			t.Fatalf("config power: %+v %v", cfg.Power, err)
		}
		beat(wire.Heartbeat{Instance: "i1", Seq: 2, Sessions: 2, Power: &wire.CommandStatus{ID: rebootID, State: wire.CommandPending, Reason: "waiting for logout"}})
		if cfg, _ := a03.AgentConfig(ctx); cfg.Power == nil {
			t.Fatal("a pending answer ended the command")
		}
		beat(wire.Heartbeat{Instance: "i1", Seq: 3, Power: &wire.CommandStatus{ID: rebootID, State: wire.CommandDone}})
		if cfg, _ := a03.AgentConfig(ctx); cfg.Power != nil {
			t.Fatalf("done command still handed out: %+v", cfg.Power)
		}
		list, err := dave.PowerCommands(ctx, "pc-a03")
		if err != nil || len(list) != 1 || list[0].ID != rebootID || list[0].State != wire.CommandDone {
			t.Fatalf("power-status: %+v %v", list, err)
		}
		// Nobody logged in now: a power-off is accepted; the PC's next agent instance
		// (it was switched off and woken) ends it.
		res, err := admin.Power(ctx, wire.HostPowerRequest{Op: wire.OpPowerOff, Hosts: "pc-a03"})
		if err != nil || !res.Hosts[0].Accepted {
			t.Fatalf("power-off: %+v %v", res, err)
		}
		if cfg, _ := a03.AgentConfig(ctx); cfg.Power == nil || cfg.Power.Op != wire.OpPowerOff {
			t.Fatalf("config: %+v", cfg.Power)
		}
		beat(wire.Heartbeat{Instance: "i2", Seq: 1})
		if cfg, _ := a03.AgentConfig(ctx); cfg.Power != nil {
			t.Fatalf("a new agent instance did not end the power-off: %+v", cfg.Power)
		}
	})

	t.Run("wake: the boot server sends it and reports it", func(t *testing.T) {
		res, err := alice.Power(ctx, wire.HostPowerRequest{Op: wire.OpWake, Hosts: "pc-a04"})
		if err != nil || !res.Hosts[0].Accepted {
			t.Fatalf("wake: %+v %v", res, err)
		}
		id := res.Hosts[0].ID
		wk, err := dave.Wakes(ctx, "bs1")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(wk.Wakes, func(w wire.Wake) bool { return w.ID == id })
		if i < 0 || wk.Wakes[i].MAC != "52:54:00:0a:00:04" || wk.Wakes[i].Addr != "10.20.0.255:9" || wk.Wakes[i].By != "alice" {
			t.Fatalf("wakes: %+v", wk)
		}
		if _, err := dave.Wakes(ctx, "nope"); status(err) != 404 {
			t.Errorf("unknown boot server: %v", err)
		}
		if _, err := admin.WakesSent(ctx, "bs1", wire.WakesSent{Sent: []string{id}}); status(err) != 403 {
			t.Errorf("site admin reporting wakes: %v", err)
		}
		if err := admin.Send("POST", "/api/v1/users", nil, api.UserRequest{UID: "wakesrv", Password: "wakesrv-secret"}, nil); err != nil {
			t.Fatal(err)
		}
		grant := model.RoleGrant{Name: "bs1-wake", Role: model.RoleBootServer, BootServer: "bs1", Members: []string{"wakesrv"}}
		if err := admin.Send("PUT", "/api/v1/roles/bs1-wake", nil, grant, nil); err != nil {
			t.Fatal(err)
		}
		bs := env.Client("wakesrv", "wakesrv-secret")
		wk2, err := bs.WakesSent(ctx, "bs1", wire.WakesSent{Sent: []string{id}})
		if err != nil || slices.ContainsFunc(wk2.Wakes, func(w wire.Wake) bool { return w.ID == id }) {
			t.Fatalf("report: %+v %v", wk2, err)
		}
		list, _ := dave.PowerCommands(ctx, "pc-a04")
		if len(list) != 1 || list[0].State != wire.CommandSent || !strings.Contains(list[0].Result, "bs1") {
			t.Fatalf("wake after report: %+v", list)
		}
	})

	t.Run("scheduled wakes before a mode that needs the PC", func(t *testing.T) {
		snap := env.Svc.Snapshot()
		h := snap.Site.Host("pc-a04")
		_, d := snap.Resolver.ModeAt(h, env.Now)
		if d.Next.IsZero() || snap.Site.Mode(d.NextMode).Kind == model.KindLocalDisk {
			t.Fatalf("example site changed: pc-a04 next %v %s", d.Next, d.NextMode)
		}
		id := wake.ID("pc-a04", d.Next)
		has := func(at time.Time) bool {
			wk, err := env.Svc.Power.Wakes("bs1", at)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(wk.Wakes, func(w wire.Wake) bool { return w.ID == id && w.By == "schedule" })
		}
		lead := wake.DefaultBoot + wake.Margin // nobody in lab-a reported a boot time
		if has(d.Next.Add(-lead - time.Second)) {
			t.Error("woken before the lead")
		}
		at := d.Next.Add(-lead + time.Second)
		if !has(at) {
			t.Fatalf("no scheduled wake for pc-a04 %v before %s at %v", lead, d.NextMode, d.Next)
		}
		if err := env.Svc.Power.WakesSent("bs1", wire.WakesSent{Sent: []string{id}}, at); err != nil {
			t.Fatal(err)
		}
		if has(at.Add(time.Second)) {
			t.Error("a sent scheduled wake is handed out again")
		}
		list, _ := dave.PowerCommands(ctx, "pc-a04")
		if len(list) < 2 || !slices.ContainsFunc(list, func(r wire.PowerRecord) bool { return r.ID == id && r.State == wire.CommandSent && r.By == "schedule" }) {
			t.Fatalf("scheduled wake not recorded: %+v", list)
		}
	})

	t.Run("audit trail", func(t *testing.T) {
		list, err := dave.Audit(ctx, "pc-a03", "")
		if err != nil {
			t.Fatal(err)
		}
		var text []string
		for _, e := range list {
			text = append(text, e.Kind+" "+e.User+": "+e.Summary)
		}
		all := strings.Join(text, "\n")
		for _, want := range []string{
			"power alice: poweroff --force pc-a03: 0 accepted, 1 refused",
			"power alice: reboot pc-a03,pc-a04,nope: 1 accepted, 2 refused (reason: new kernel)",
			"power alice: reboot pc-a03 (" + rebootID + ", by alice): done",
			"power admin: poweroff pc-a03: 1 accepted",
			"restarted after the request",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("audit lacks %q:\n%s", want, all)
			}
		}
		site, err := dave.Audit(ctx, "", "")
		if err != nil || !slices.ContainsFunc(site, func(e wire.AuditEntry) bool {
			return e.Kind == wire.AuditSite && e.User == "admin" && slices.Contains(e.Detail, "+ role bs1-wake")
		}) {
			t.Errorf("site write not audited: %v", err)
		}
		if l, err := dave.Audit(ctx, "", "2099-01-01 00:00"); err != nil || len(l) != 0 {
			t.Errorf("since the future: %d %v", len(l), err)
		}
		if _, err := dave.Audit(ctx, "", "yesterday"); status(err) != http.StatusBadRequest {
			t.Errorf("bad since: %v", err)
		}
	})
}
