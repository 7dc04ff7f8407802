package service_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Hosts.BootAnswer: the resolver's answer for a MAC, with the caller's file check joined
// to the resolver's own, and a MAC not in the site answered with the unknown-host mode.
func TestHostsBootAnswer(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	hs := env.Svc.Hosts
	q := resolve.Query{At: env.Now, BootServer: "bs1", Self: "10.20.0.1:8080"}

	b := hs.BootAnswer("52:54:00:0a:00:01", q, nil)
	if b.Host == nil || b.Host.Name != "pc-a01" || b.Mode == nil || b.Mode.Name != "course-bio101" || b.Image == nil {
		t.Fatalf("pc-a01 on Wednesday 10:30: %+v", b)
	}
	if b.Check != nil && b.Check(b.Mode, b.Image) != "" {
		t.Fatalf("no file check given, yet the scheduled image is refused: %q", b.Check(b.Mode, b.Image))
	}
	missing := func(m *model.Mode, v *model.ImageVersion) string { return "files of " + m.Image + " not on disk" }
	if b := hs.BootAnswer("52:54:00:0a:00:01", q, missing); b.Check == nil || b.Check(b.Mode, b.Image) != "files of debian-desktop not on disk" {
		t.Fatalf("the file check is not part of the answer: %+v", b)
	}
	if b := hs.BootAnswer("52:54:00:ff:ff:ff", q, nil); b.Host != nil || b.Mode == nil || b.Mode.Name != "local-disk" {
		t.Fatalf("unknown MAC: %+v", b)
	}
	if b := hs.BootAnswer("", q, nil); b.Host != nil || b.MAC != "" {
		t.Fatalf("no MAC (pxelinux default): %+v", b)
	}
}

// Hosts.AgentConfig: the resolver's configuration with the pending power command; an
// unknown host is a *resolve.UnknownHostError; guest secrets only for a compute guest.
func TestHostsAgentConfig(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	svc := env.Svc
	now := env.Now
	cfg, err := svc.Hosts.AgentConfig("pc-b01", service.AgentRequest{At: now, BootServer: "bs1"})
	if err != nil || cfg.Host != "pc-b01" || cfg.Mode != "desktop" || cfg.Guest == nil || cfg.Power != nil {
		t.Fatalf("pc-b01: %+v %v", cfg, err)
	}
	if _, err := svc.Hosts.AgentConfig("nope", service.AgentRequest{At: now}); !errors.As(err, new(*resolve.UnknownHostError)) {
		t.Fatalf("unknown host: %v", err)
	}
	// A reboot needs a live agent; then the configuration carries it until answered.
	if _, err := svc.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc-b01", Instance: "i", Seq: 1, Time: now, Mode: "desktop",
		OwnerState: model.StateNoUser, Action: model.ActionRun}, now, "10.20.0.21"); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Power.Request(context.Background(), "admin", wire.OpReboot, []string{"pc-b01"}, false, "", now)
	if err != nil || !res.Hosts[0].Accepted {
		t.Fatalf("reboot: %+v %v", res, err)
	}
	cfg, err = svc.Hosts.AgentConfig("pc-b01", service.AgentRequest{At: now, ByAgent: true})
	if err != nil || cfg.Power == nil || cfg.Power.ID != res.Hosts[0].ID || cfg.Power.Op != wire.OpReboot {
		t.Fatalf("pending reboot not in the configuration: %+v %v", cfg, err)
	}

	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"pc-b01", true},  // desktop with the compute guest
		{"pc-a01", false}, // the BIO101 course VM: no compute guest
	} {
		_, err := svc.Hosts.GuestSecretsFor(tc.host, service.AgentRequest{At: now})
		var none *service.NoGuestSecrets
		if tc.ok != (err == nil) || !tc.ok && (!errors.As(err, &none) || err.Error() != "host pc-a01 runs no compute guest in mode course-bio101 now: no guest secrets") {
			t.Errorf("guest secrets for %s: %v", tc.host, err)
		}
	}
}

// Hosts.Add, Edit and Delete: the pages' host writes, each one validated write recorded
// in the audit trail.
func TestHostsAddEditDelete(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	hs := env.Svc.Hosts
	ctx := service.WithUser(context.Background(), "alice", func() time.Time { return env.Now })
	pc := service.HostFields{MAC: "52:54:00:0a:00:09", IP: "10.20.0.19", Pool: "lab-a"}
	for _, tc := range []struct {
		name   string
		do     func() ([]model.Change, error)
		status int    // 0: accepted
		change string // the one change made ("" none)
	}{
		{"add", func() ([]model.Change, error) { return hs.Add(ctx, nil, "pc-a09", pc) }, 0, "+ host pc-a09"},
		{"add again", func() ([]model.Change, error) { return hs.Add(ctx, nil, "pc-a09", pc) }, http.StatusConflict, ""},
		{"add a taken MAC", func() ([]model.Change, error) {
			return hs.Add(ctx, nil, "pc-a10", service.HostFields{MAC: "52:54:00:0a:00:01", Pool: "lab-a"})
		}, http.StatusConflict, ""},
		{"edit", func() ([]model.Change, error) {
			f := pc
			f.IP, f.Pool = "10.20.0.29", "lab-b"
			return hs.Edit(ctx, nil, "pc-a09", f)
		}, 0, "~ host pc-a09 (ip, pool)"},
		{"edit to the same", func() ([]model.Change, error) {
			return hs.Edit(ctx, nil, "pc-a09", service.HostFields{MAC: pc.MAC, IP: "10.20.0.29", Pool: "lab-b"})
		}, 0, ""},
		{"edit a missing host", func() ([]model.Change, error) { return hs.Edit(ctx, nil, "pc-zz", pc) }, http.StatusBadRequest, ""},
		{"delete", func() ([]model.Change, error) { return hs.Delete(ctx, nil, "pc-a09") }, 0, "- host pc-a09"},
		{"delete again", func() ([]model.Change, error) { return hs.Delete(ctx, nil, "pc-a09") }, http.StatusBadRequest, ""},
	} {
		changes, err := tc.do()
		status := 0
		if err != nil {
			status, _, _ = errstatus.Of(err)
		}
		var got []string
		for _, c := range changes {
			got = append(got, c.String())
		}
		if status != tc.status || strings.Join(got, "; ") != tc.change {
			t.Errorf("%s: status %d, changes %q (err %v); want %d, %q", tc.name, status, got, err, tc.status, tc.change)
		}
	}
	if h := env.Svc.Snapshot().Host("pc-a09"); h != nil {
		t.Errorf("pc-a09 still there: %+v", h)
	}
	var trail []string
	for _, e := range env.Svc.Audit("pc-a09", time.Time{}) {
		if e.User == "alice" && e.Kind == wire.AuditSite {
			trail = append(trail, e.Summary)
		}
	}
	if want := []string{"site changed: + host pc-a09", "site changed: ~ host pc-a09 (ip, pool)", "site changed: - host pc-a09"}; !slices.Equal(trail, want) {
		t.Errorf("audit trail of pc-a09: %q, want %q", trail, want)
	}
}

// Hosts.ReadImport and Import: a pool's import refuses rows of other pools row by row;
// a dry run writes nothing; an import keeps the replaced hosts' weekly rules.
func TestHostsImport(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	hs := env.Svc.Hosts
	ctx := context.Background()
	for _, tc := range []struct {
		name, csv, pool string
		refused         []string // problems, in row order
		err             string
	}{
		{"any pool", "pc-a09,52:54:00:0a:00:09,,lab-a\npc-b09,52:54:00:0b:00:09,,lab-b\n", "", nil, ""},
		{"own pool", "pc-a09,52:54:00:0a:00:09,,lab-a\n", "lab-a", nil, ""},
		{"other pool's row", "pc-b09,52:54:00:0b:00:09,,lab-b\n", "lab-a",
			[]string{"host pc-b09 is for pool lab-b: this page imports hosts of pool lab-a only"}, ""},
		{"moves a host", "pc-b01,52:54:00:0b:00:01,,lab-a\n", "lab-a",
			[]string{"host pc-b01 exists in pool lab-b: move it on its own page"}, ""},
		{"unknown boot server", "name,mac,pool,bootServer\npc-a09,52:54:00:0a:00:09,lab-a,bs9\n", "lab-a",
			[]string{`host pc-a09: unknown boot server "bs9"`}, ""},
		{"bad row", "pc-a09,not-a-mac,,lab-a\n", "lab-a", nil, "line 1"},
	} {
		_, refused, err := hs.ReadImport(strings.NewReader(tc.csv), tc.pool)
		var got []string
		for _, r := range refused {
			got = append(got, r.Problem)
		}
		if !slices.Equal(got, tc.refused) || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: refused %q, err %v; want %q, %q", tc.name, got, err, tc.refused, tc.err)
		}
	}

	rows, _, err := hs.ReadImport(strings.NewReader("pc-a01,52:54:00:0a:00:01,10.20.0.31,lab-a\npc-a09,52:54:00:0a:00:09,,lab-a\n"), "lab-a")
	if err != nil {
		t.Fatal(err)
	}
	changes, err := hs.Import(ctx, nil, rows, true)
	if err != nil || len(changes) != 2 || env.Svc.Snapshot().Host("pc-a09") != nil {
		t.Fatalf("dry run: %v %v", changes, err)
	}
	weekly := env.Svc.Snapshot().Host("pc-a05").Weekly
	rows, _, _ = hs.ReadImport(strings.NewReader("pc-a05,52:54:00:0a:00:05,10.20.0.35,lab-a\n"), "lab-a")
	if _, err := hs.Import(ctx, nil, rows, false); err != nil {
		t.Fatal(err)
	}
	if h := env.Svc.Snapshot().Host("pc-a05"); h.IP != "10.20.0.35" || !slices.Equal(h.Weekly, weekly) || len(weekly) == 0 {
		t.Fatalf("imported pc-a05: %+v (weekly before %q)", h, weekly)
	}
}
