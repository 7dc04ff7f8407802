package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/powersave"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

var ctx = context.Background()

// hostClient is a node agent's client for a token, through the same (spec-checking)
// transport as the test's user clients.
func hostClient(env *testenv.Env, token string) *client.Client {
	c := env.Client("", "")
	c.Token = token
	return c
}

func issue(t *testing.T, c *client.Client, host string) string {
	t.Helper()
	cred, err := c.CreateHostCredential(ctx, host)
	if err != nil {
		t.Fatalf("issue credential for %s: %v", host, err)
	}
	if cred.Host != host || !strings.HasPrefix(cred.Token, "ot1."+host+".") || cred.Created.IsZero() {
		t.Fatalf("credential %+v", cred)
	}
	return cred.Token
}

// runAgentSuite is the node agent API, run by runAPISuite (and so through the OpenAPI
// checker) on the example site at the test clock, Wednesday 2026-12-02 10:30 Berlin.
func runAgentSuite(t *testing.T, env *testenv.Env) {
	admin := env.Admin()
	alice := env.Client("alice", "alice-secret") // pool admin lab-a
	bob := env.Client("bob", "bob-secret")       // pool admin lab-b
	carol := env.Client("carol", "carol-secret") // lecturer lab-a
	dave := env.Client("dave", "dave-secret")    // viewer
	berlin := env.Now.Location()

	tokA := issue(t, admin, "pc-a01")
	tokB := issue(t, alice, "pc-a02") // a pool admin issues for their pool's host
	tokC := issue(t, bob, "pc-b01")
	// Guest secrets: this site manager has no munge key (TestGuestSecrets has one).
	if _, err := hostClient(env, tokA).GuestSecrets(ctx); status(err) != http.StatusNotFound {
		t.Errorf("guest secrets without --munge-key: %v", err)
	}
	a, b, c := hostClient(env, tokA), hostClient(env, tokB), hostClient(env, tokC)

	t.Run("credentials: who may issue and revoke", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			c    *client.Client
			host string
			want int
		}{
			{"other pool's admin", bob, "pc-a03", 403},
			{"lecturer", carol, "pc-a03", 403},
			{"viewer", dave, "pc-a03", 403},
			{"a host for itself", a, "pc-a01", 403},
			{"a host for another", a, "pc-a03", 403},
			{"unknown host", admin, "pc-zz", 404},
			{"host name with filter characters", admin, "pc*)(cn=*", 404},
		} {
			before := mustSite(t, env)
			_, err := tc.c.CreateHostCredential(ctx, tc.host)
			if status(err) != tc.want {
				t.Errorf("%s: issue: %d (%v), want %d", tc.name, status(err), err, tc.want)
			}
			if _, err := tc.c.RevokeHostCredential(ctx, tc.host); status(err) != tc.want {
				t.Errorf("%s: revoke: %d (%v), want %d", tc.name, status(err), err, tc.want)
			}
			if !reflect.DeepEqual(before, mustSite(t, env)) {
				t.Errorf("%s: the site changed", tc.name)
			}
		}
		// Issuing changes no configuration: the site (and its export) never holds a credential.
		var site model.Site
		raw, err := admin.Get("/api/v1/site", nil, &site)
		if err != nil || strings.Contains(string(raw), tokA) || strings.Contains(string(raw), "sha256:") {
			t.Fatalf("site export carries credentials: %v", err)
		}
	})

	t.Run("host tokens: authorisation", func(t *testing.T) {
		get := func(path string, q url.Values) func(*client.Client) error {
			return func(c *client.Client) error { _, err := c.Get(path, q, nil); return err }
		}
		hb := func(host string) func(*client.Client) error {
			return func(c *client.Client) error { return c.Heartbeat(ctx, wire.Heartbeat{Host: host, Mode: "desktop"}) }
		}
		raw := func(tok string) *client.Client { return hostClient(env, tok) }
		secretA := tokA[len("ot1.pc-a01."):]
		for _, tc := range []struct {
			name string
			c    *client.Client
			do   func(*client.Client) error
			want int
		}{
			{"own config", a, get("/api/v1/agent/config", nil), 0},
			{"own config by name", a, get("/api/v1/agent/config", url.Values{"host": {"pc-a01"}}), 0},
			{"another host's config", a, get("/api/v1/agent/config", url.Values{"host": {"pc-a02"}}), 403},
			{"another pool's host's config", b, get("/api/v1/agent/config", url.Values{"host": {"pc-b01"}}), 403},
			{"own heartbeat, host left out", a, hb(""), 0},
			{"own heartbeat, host given", b, hb("pc-a02"), 0},
			{"another host's heartbeat", a, hb("pc-a02"), 403},
			{"another pool's host's heartbeat", c, hb("pc-a01"), 403},
			{"the site", a, get("/api/v1/site", nil), 403},
			{"the host list", a, get("/api/v1/hosts", nil), 403},
			{"its own host entry", a, get("/api/v1/hosts/pc-a01", nil), 403},
			{"whoami", a, get("/api/v1/whoami", nil), 403},
			{"agent status", a, get("/api/v1/agent/status", nil), 403},
			{"its own status", a, get("/api/v1/agent/status/pc-a01", nil), 403},
			{"put the site", a, func(c *client.Client) error { return c.Send("PUT", "/api/v1/site", nil, testenv.ExampleSite(t), nil) }, 403},
			{"change itself", a, func(c *client.Client) error {
				return c.Send("PUT", "/api/v1/hosts/pc-a01", nil, model.Host{Name: "pc-a01", MAC: "52:54:00:0a:00:01", Pool: "lab-a"}, nil)
			}, 403},
			{"a user posts a heartbeat", admin, hb("pc-a01"), 403},
			{"a user without role reads a config", env.Client("eve", "eve-secret"), get("/api/v1/agent/config", url.Values{"host": {"pc-a01"}}), 403},
			{"garbage token", raw("garbage"), get("/api/v1/agent/config", nil), 401},
			{"empty bearer", raw(" "), get("/api/v1/agent/config", nil), 401},
			{"other version", raw("ot2.pc-a01." + secretA), get("/api/v1/agent/config", nil), 401},
			{"truncated secret", raw(tokA[:len(tokA)-1]), get("/api/v1/agent/config", nil), 401},
			{"A's secret under B's name", raw("ot1.pc-a02." + secretA), get("/api/v1/agent/config", nil), 401},
			{"A's secret for an unknown host", raw("ot1.pc-zz." + secretA), get("/api/v1/agent/config", nil), 401},
			{"filter injection in the host name", raw("ot1.pc*)(cn=*." + secretA), get("/api/v1/agent/config", nil), 401},
			{"DN injection in the host name", raw("ot1.cn=pc-a01,ou=hosts." + secretA), get("/api/v1/agent/config", nil), 401},
			{"host without credential", raw("ot1.pc-a03." + secretA), get("/api/v1/agent/config", nil), 401},
			{"bad token on a user endpoint", raw("garbage"), get("/api/v1/site", nil), 401},
		} {
			before := mustSite(t, env)
			err := tc.do(tc.c)
			if status(err) != tc.want {
				t.Errorf("%s: status %d (%v), want %d", tc.name, status(err), err, tc.want)
			}
			if tc.want != 0 && !reflect.DeepEqual(before, mustSite(t, env)) {
				t.Errorf("%s: refused, but the directory changed", tc.name)
			}
		}
		// The 403 says what a host may do.
		_, err := a.Get("/api/v1/site", nil, nil)
		if err == nil || !strings.Contains(err.Error(), "may only fetch its agent configuration") {
			t.Errorf("host 403 message: %v", err)
		}
	})

	t.Run("revocation and rotation", func(t *testing.T) {
		tok := issue(t, admin, "pc-a04")
		h := hostClient(env, tok)
		if _, err := h.AgentConfig(ctx); err != nil {
			t.Fatal(err)
		}
		// A new credential replaces the old one at once.
		tok2 := issue(t, alice, "pc-a04")
		if _, err := h.AgentConfig(ctx); status(err) != 401 {
			t.Fatalf("replaced token: %v", err)
		}
		h2 := hostClient(env, tok2)
		if _, err := h2.AgentConfig(ctx); err != nil {
			t.Fatal(err)
		}
		if revoked, err := alice.RevokeHostCredential(ctx, "pc-a04"); err != nil || !revoked {
			t.Fatalf("revoke: %v %v", revoked, err)
		}
		for _, do := range []func() error{
			func() error { _, err := h2.AgentConfig(ctx); return err },
			func() error { return h2.Heartbeat(ctx, wire.Heartbeat{}) },
		} {
			if err := do(); status(err) != 401 {
				t.Fatalf("revoked token: %v", err)
			}
		}
		if revoked, err := admin.RevokeHostCredential(ctx, "pc-a04"); err != nil || revoked {
			t.Fatalf("second revoke: %v %v", revoked, err)
		}
		// Deleting the host takes its credential along (a host added again under the
		// same name starts without one).
		tok3 := issue(t, admin, "pc-a04")
		h3 := hostClient(env, tok3)
		var host model.Host
		if _, err := admin.Get("/api/v1/hosts/pc-a04", nil, &host); err != nil {
			t.Fatal(err)
		}
		if err := admin.Send("DELETE", "/api/v1/hosts/pc-a04", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := admin.Send("PUT", "/api/v1/hosts/pc-a04", nil, host, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := h3.AgentConfig(ctx); status(err) != 401 {
			t.Fatalf("token of a deleted and re-added host: %v", err)
		}
	})

	t.Run("config resolution", func(t *testing.T) {
		// pc-a01 is in the Wednesday course slot: a course-vm mode runs no guest.
		cfg, err := a.AgentConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != "pc-a01" || cfg.MAC != "52:54:00:0a:00:01" || cfg.Pool != "lab-a" || cfg.Mode != "course-bio101" ||
			cfg.Kind != model.KindCourseVM || cfg.Guest != nil || cfg.GuestUnavailable != "" {
			t.Fatalf("pc-a01: %+v", cfg)
		}
		if !cfg.NextChange.Equal(time.Date(2026, 12, 2, 12, 0, 0, 0, berlin)) || cfg.NextMode != "desktop" || !cfg.Generated.Equal(env.Now) {
			t.Fatalf("pc-a01 next change %v %s, generated %v", cfg.NextChange, cfg.NextMode, cfg.Generated)
		}
		// lab-a's policy, with the defaults filled.
		want := model.DefaultPolicy()
		want.Actions[model.StateOwnerActive] = model.ActionFreeze
		want.IdleAfter, want.EvictAfter, want.DesktopMemoryMB = model.Duration(10*time.Minute), model.Duration(5*time.Minute), 2048
		if !reflect.DeepEqual(cfg.Policy, want) {
			t.Fatalf("pc-a01 policy:\n got %+v\nwant %+v", cfg.Policy, want)
		}

		// pc-b01 is at a desktop: the guest, newest version, located on bs1. lab-b has no
		// policy: the default one.
		cfg, err = c.AgentConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		g := cfg.Guest
		if cfg.Mode != "desktop" || cfg.Kind != model.KindDesktop || g == nil || !reflect.DeepEqual(cfg.Policy, model.DefaultPolicy()) {
			t.Fatalf("pc-b01: %+v", cfg)
		}
		if g.Name != "overtime-pc-b01" || g.Image != "compute-guest" || g.Version != "" || g.Backend != model.BackendQEMU ||
			g.Network != model.NetBridged || g.Bridge != "br0" || g.MemoryMB != 4096 || g.ImageKind != model.ImageCompute ||
			g.Resolved.Version != "2026.11.20-1" || g.Resolved.Path != "compute-guest/2026.11.20-1" ||
			g.ImageURL != "http://10.20.0.1:8080/images/compute-guest/2026.11.20-1" ||
			g.NFS != "10.20.0.1:/srv/overtime/images/compute-guest/2026.11.20-1" {
			t.Fatalf("pc-b01 guest: %+v", g)
		}
		if !cfg.NextChange.Equal(time.Date(2026, 12, 2, 18, 0, 0, 0, berlin)) || cfg.NextMode != "cluster" {
			t.Fatalf("pc-b01 next change %v %s", cfg.NextChange, cfg.NextMode)
		}
		// The kernel URL of the boot script lives under the same directory.
		script, err := env.Client("", "").Get("/boot/ipxe/52:54:00:0b:00:01", nil, nil)
		if err != nil || !strings.Contains(string(script), "http://10.20.0.1:8080/images/debian-desktop/") {
			t.Fatalf("boot script: %v\n%s", err, script)
		}

		// A newer version is picked up; a pinned one is kept.
		newer := model.ImageVersion{Version: "2026.12.01-1", SHA256: strings.Repeat("ef", 32), Path: "compute-guest/2026.12.01-1",
			Created: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
		if err := admin.Send("POST", "/api/v1/images/compute-guest/versions", nil, newer, nil); err != nil {
			t.Fatal(err)
		}
		if cfg, err = c.AgentConfig(ctx); err != nil || cfg.Guest.Resolved.Version != "2026.12.01-1" ||
			!strings.HasSuffix(cfg.Guest.ImageURL, "/compute-guest/2026.12.01-1") {
			t.Fatalf("newest: %+v %v", cfg, err)
		}
		var mode model.Mode
		if _, err := admin.Get("/api/v1/modes/desktop", nil, &mode); err != nil {
			t.Fatal(err)
		}
		pinned := mode
		pinned.Guest = mode.Guest.Clone()
		pinned.Guest.Version = "2026.11.20-1"
		if err := admin.Send("PUT", "/api/v1/modes/desktop", nil, pinned, nil); err != nil {
			t.Fatal(err)
		}
		if cfg, err = c.AgentConfig(ctx); err != nil || cfg.Guest.Version != "2026.11.20-1" || cfg.Guest.Resolved.Version != "2026.11.20-1" {
			t.Fatalf("pinned: %+v %v", cfg.Guest, err)
		}
		// A pin to a version that does not exist is refused.
		bad := pinned
		bad.Guest = pinned.Guest.Clone()
		bad.Guest.Version = "1999.01.01-1"
		if err := admin.Send("PUT", "/api/v1/modes/desktop", nil, bad, nil); status(err) != 400 || !strings.Contains(err.Error(), `guest: image compute-guest has no version "1999.01.01-1"`) {
			t.Fatalf("pin to a missing version: %v", err)
		}
		if err := admin.Send("PUT", "/api/v1/modes/desktop", nil, mode, nil); err != nil {
			t.Fatal(err)
		}

		// Maintenance now (a host exception): no guest, and the change back announced.
		exc := model.Exception{Name: "fix-pc-b01", Kind: "maintenance", Mode: "maintenance",
			Start: time.Date(2026, 12, 2, 10, 0, 0, 0, berlin), End: time.Date(2026, 12, 2, 11, 0, 0, 0, berlin),
			Targets: []model.Target{{Host: "pc-b01"}}}
		if err := alice.Send("PUT", "/api/v1/exceptions/fix-pc-b01", nil, exc, nil); status(err) != 403 {
			t.Fatalf("lab-a's admin scheduled lab-b: %v", err)
		}
		if err := bob.Send("PUT", "/api/v1/exceptions/fix-pc-b01", nil, exc, nil); err != nil {
			t.Fatal(err)
		}
		if cfg, err = c.AgentConfig(ctx); err != nil || cfg.Mode != "maintenance" || cfg.Kind != model.KindMaintenance || cfg.Guest != nil ||
			!cfg.NextChange.Equal(exc.End) || cfg.NextMode != "desktop" {
			t.Fatalf("maintenance: %+v %v", cfg, err)
		}
		if err := bob.Send("DELETE", "/api/v1/exceptions/fix-pc-b01", nil, nil, nil); err != nil {
			t.Fatal(err)
		}

		// People debugging: any role, ?host= required.
		if cfg, err := dave.AgentConfigFor(ctx, "pc-b01"); err != nil || cfg.Host != "pc-b01" || cfg.Guest == nil {
			t.Fatalf("viewer: %+v %v", cfg, err)
		}
		if _, err := admin.AgentConfig(ctx); status(err) != 400 || !strings.Contains(err.Error(), "?host=NAME") {
			t.Fatalf("user without ?host: %v", err)
		}
		if _, err := admin.AgentConfigFor(ctx, "nope"); status(err) != 404 || err.Error() != `host "nope" not found` {
			t.Fatalf("unknown host: %v", err)
		}
	})

	t.Run("heartbeats and status", func(t *testing.T) {
		hb := wire.Heartbeat{Time: env.Now.Add(-time.Second), Mode: "course-bio101", ConfigFrom: wire.ConfigFromAPI,
			OwnerState: model.StateOwnerActive, Action: model.ActionFreeze, GuestState: "paused", Backend: "qemu",
			Pressure: 21.5, GuestCPUSeconds: 1234.5, Restarts: 1, Version: "0.1"}
		if err := a.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []struct {
			hb  wire.Heartbeat
			msg string
		}{
			{wire.Heartbeat{OwnerState: "asleep"}, `unknown owner state "asleep"`},
			{wire.Heartbeat{Pressure: 500}, "pressure 500 out of range"},
			{wire.Heartbeat{GuestReason: "two\nlines"}, "not one line"},
		} {
			if err := a.Heartbeat(ctx, bad.hb); status(err) != 400 || !strings.Contains(err.Error(), bad.msg) {
				t.Errorf("bad heartbeat %+v: %v", bad.hb, err)
			}
		}
		if err := a.Send("POST", "/api/v1/agent/heartbeat", nil, map[string]any{"mode": "desktop", "cpu": 1}, nil); status(err) != 400 || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("unknown field: %v", err)
		}
		list, err := dave.AgentStatus(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var got *wire.AgentStatus
		for i := range list {
			if list[i].Host == "pc-a01" {
				got = &list[i]
			}
		}
		if got == nil || got.Stale || !got.Received.Equal(env.Now) || got.Remote != "127.0.0.1" ||
			got.OwnerState != model.StateOwnerActive || got.Pressure != 21.5 || got.GuestState != "paused" || !got.Time.Equal(hb.Time) {
			t.Fatalf("status list %+v", list)
		}
		for i := 1; i < len(list); i++ {
			if list[i-1].Host >= list[i].Host {
				t.Fatalf("status list not in host order: %+v", list)
			}
		}
		if l, err := admin.AgentStatus(ctx, "lab-b"); err != nil || len(l) != 0 {
			t.Fatalf("lab-b has not posted: %+v %v", l, err)
		}
		if l, err := admin.AgentStatus(ctx, "lab-a"); err != nil || len(l) != 2 {
			t.Fatalf("lab-a status: %+v %v", l, err)
		}
		one, err := carol.AgentStatusOf(ctx, "pc-a01")
		if err != nil || one.Host != "pc-a01" || one.Mode != "course-bio101" {
			t.Fatalf("status of pc-a01: %+v %v", one, err)
		}
		if _, err := admin.AgentStatusOf(ctx, "pc-b03"); status(err) != 404 || !strings.Contains(err.Error(), "no heartbeat from host pc-b03") {
			t.Fatalf("status of a silent host: %v", err)
		}
		if _, err := admin.AgentStatusOf(ctx, "nope"); status(err) != 404 || err.Error() != `host "nope" not found` {
			t.Fatalf("status of an unknown host: %v", err)
		}
		// The heartbeat is kept in memory only: the directory did not change.
		before := mustSite(t, env)
		if err := a.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, mustSite(t, env)) {
			t.Fatal("a heartbeat changed the directory")
		}
	})

	t.Run("exam network", func(t *testing.T) {
		// An exam of lab-a now: pc-a01's configuration says what it may reach, its boot
		// server and the exam's allow list among it; pc-b01's (lab-b) says nothing.
		x := model.Exception{Name: "exam-now", Kind: model.ExceptionExam, Mode: "desktop",
			Start: env.Now.Truncate(time.Hour), End: env.Now.Truncate(time.Hour).Add(2 * time.Hour),
			Targets: []model.Target{{Pool: "lab-a"}}, Allow: []string{"exam.uni.example:443", "10.20.5.0/24"}}
		if err := admin.Send("PUT", "/api/v1/exceptions/exam-now", nil, x, nil); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := admin.Send("DELETE", "/api/v1/exceptions/exam-now", nil, nil, nil); err != nil {
				t.Fatal(err)
			}
		}()
		cfg, err := a.AgentConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.Exam || cfg.ExamNetwork == nil {
			t.Fatalf("pc-a01 in an exam: exam %v network %v", cfg.Exam, cfg.ExamNetwork)
		}
		var got []string
		for _, e := range cfg.ExamNetwork.Allow {
			got = append(got, string(e.For)+" "+e.Endpoint)
		}
		for _, want := range []string{"exam exam.uni.example:443", "exam 10.20.5.0/24"} {
			if !slices.Contains(got, want) {
				t.Errorf("exam network %v lacks %q", got, want)
			}
		}
		if !slices.ContainsFunc(cfg.ExamNetwork.Allow, func(e wire.ExamEndpoint) bool { return e.For == wire.ExamForBootServer }) {
			t.Errorf("exam network %v lacks the boot server", got)
		}
		if cfg, err := c.AgentConfig(ctx); err != nil || cfg.Exam || cfg.ExamNetwork != nil {
			t.Errorf("pc-b01 outside the exam: %v exam %v network %v", err, cfg.Exam, cfg.ExamNetwork)
		}
	})

	// Clean up: the later checks see the example site without credentials.
	for _, h := range []string{"pc-a01", "pc-a02", "pc-b01"} {
		if _, err := admin.RevokeHostCredential(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.AgentConfig(ctx); status(err) != 401 {
		t.Fatalf("revoked: %v", err)
	}
}

// clock is a settable clock for a server of the test's own.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// A host is stale when its last heartbeat is older than three intervals (90 s), on the
// server's clock (the one --now moves).
func TestAgentStatusStale(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	clk := &clock{t: env.Now}
	srv := httptest.NewServer(api.New(env.Svc, api.Options{Now: clk.now}))
	t.Cleanup(srv.Close)
	admin := &client.Client{BaseURL: srv.URL, User: "admin", Password: testenv.AdminPassword}
	tok := issue(t, admin, "pc-b02")
	host := client.NewWithToken(srv.URL, tok)
	if err := host.Heartbeat(ctx, wire.Heartbeat{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after time.Duration
		stale bool
	}{{0, false}, {wire.HeartbeatInterval, false}, {90 * time.Second, false}, {91 * time.Second, true}, {time.Hour, true}} {
		clk.set(env.Now.Add(tc.after))
		st, err := admin.AgentStatusOf(ctx, "pc-b02")
		if err != nil || st.Stale != tc.stale || !st.Received.Equal(env.Now) {
			t.Errorf("after %v: %+v %v, want stale %v", tc.after, st, err, tc.stale)
		}
		list, err := admin.AgentStatus(ctx, "")
		if err != nil || len(list) != 1 || list[0].Stale != tc.stale {
			t.Errorf("list after %v: %+v %v", tc.after, list, err)
		}
	}
	// A new heartbeat makes it fresh again.
	if err := host.Heartbeat(ctx, wire.Heartbeat{Host: "pc-b02"}); err != nil {
		t.Fatal(err)
	}
	if st, err := admin.AgentStatusOf(ctx, "pc-b02"); err != nil || st.Stale {
		t.Fatalf("after a new heartbeat: %+v %v", st, err)
	}
	// The schedule follows the same clock: Saturday night pc-b02 is in the cluster.
	clk.set(time.Date(2026, 12, 5, 23, 0, 0, 0, env.Now.Location()))
	cfg, err := host.AgentConfig(ctx)
	if err != nil || cfg.Mode != "cluster" || cfg.Guest == nil || cfg.Guest.Network != model.NetBridged {
		t.Fatalf("Saturday night: %+v %v", cfg, err)
	}
}

// service.Hosts.AgentConfig directly: guests that cannot run say why, a pool without a boot server
// uses the site's, a site without a guest runs none.
func TestAgentConfigResolution(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	admin := env.Admin()
	wed := env.Now
	at := func(host string, tm time.Time) *wire.AgentConfig {
		t.Helper()
		cfg, err := env.Svc.Hosts.AgentConfig(host, service.AgentRequest{At: tm})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// An image without versions: the mode names a guest, but there is nothing to run.
	if err := admin.Send("PUT", "/api/v1/images/compute-next", nil, model.Image{Name: "compute-next", Kind: model.ImageCompute}, nil); err != nil {
		t.Fatal(err)
	}
	var mode model.Mode
	if _, err := admin.Get("/api/v1/modes/desktop", nil, &mode); err != nil {
		t.Fatal(err)
	}
	mode.Guest = &model.Guest{Image: "compute-next", Network: model.NetNAT, Ports: []string{"6818:6818"}}
	if err := admin.Send("PUT", "/api/v1/modes/desktop", nil, mode, nil); err != nil {
		t.Fatal(err)
	}
	cfg := at("pc-b01", wed)
	if cfg.Guest != nil || cfg.GuestUnavailable != "image compute-next has no published version" {
		t.Fatalf("unpublished guest image: %+v", cfg)
	}
	// Cluster time: the cluster mode's guest, from the same boot server.
	sat := time.Date(2026, 12, 5, 23, 0, 0, 0, wed.Location())
	cfg = at("pc-b01", sat)
	if cfg.Mode != "cluster" || cfg.Guest == nil || cfg.Guest.Resolved.Version != "2026.11.20-1" || cfg.NextMode != "desktop" ||
		!cfg.NextChange.Equal(time.Date(2026, 12, 7, 8, 0, 0, 0, wed.Location())) {
		t.Fatalf("Saturday night: %+v", cfg)
	}
	// A pool without a boot server: the site's (first) boot server serves the image.
	var pool model.Pool
	if _, err := admin.Get("/api/v1/pools/lab-b", nil, &pool); err != nil {
		t.Fatal(err)
	}
	pool.BootServer = ""
	if err := admin.Send("PUT", "/api/v1/pools/lab-b", nil, pool, nil); err != nil {
		t.Fatal(err)
	}
	if cfg = at("pc-b01", sat); cfg.Guest == nil || !strings.HasPrefix(cfg.Guest.ImageURL, "http://10.20.0.1:8080/images/") {
		t.Fatalf("pool without boot server: %+v", cfg)
	}
	// No guest in the mode: none in the configuration, and no excuse either.
	mode.Guest = nil
	if err := admin.Send("PUT", "/api/v1/modes/desktop", nil, mode, nil); err != nil {
		t.Fatal(err)
	}
	if cfg = at("pc-b01", wed); cfg.Guest != nil || cfg.GuestUnavailable != "" || cfg.Kind != model.KindDesktop {
		t.Fatalf("mode without guest: %+v", cfg)
	}
	// The local-disk mode (site unknown-host default) never has a guest; a guest cannot
	// be given to it.
	if err := admin.Send("PUT", "/api/v1/modes/local-disk", nil, model.Mode{Name: "local-disk", Kind: model.KindLocalDisk,
		Guest: &model.Guest{Image: "compute-guest"}}, nil); status(err) != 400 || !strings.Contains(err.Error(), "only desktop and cluster modes run a compute guest") {
		t.Fatalf("guest on local-disk: %v", err)
	}
	if _, err := env.Svc.Hosts.AgentConfig("nope", service.AgentRequest{At: wed}); err == nil || err.Error() != `host "nope" not found` {
		t.Fatalf("unknown host: %v", err)
	}
	// Policies through the API: a bad one is refused with the reason.
	pool.Policy = &model.Policy{ThrottleCPU: 150}
	if err := admin.Send("PUT", "/api/v1/pools/lab-b", nil, pool, nil); status(err) != 400 || err.Error() != "pool lab-b: policy: throttleCPU 150 out of range (1-100 percent)" {
		t.Fatalf("bad policy: %v", err)
	}
	if err := admin.Send("PUT", "/api/v1/pools/lab-b", nil, map[string]any{"name": "lab-b", "policy": map[string]any{"idleAftr": "5m"}}, nil); status(err) != 400 || !strings.Contains(err.Error(), `unknown field "idleAftr"`) {
		t.Fatalf("policy with a typo: %v", err)
	}
	pool.Policy = &model.Policy{ThrottleCPU: 50}
	if err := admin.Send("PUT", "/api/v1/pools/lab-b", nil, pool, nil); err != nil {
		t.Fatal(err)
	}
	if cfg = at("pc-b01", wed); cfg.Policy.ThrottleCPU != 50 || cfg.Policy.IdleAfter != model.DefaultPolicy().IdleAfter {
		t.Fatalf("policy after PUT: %+v", cfg.Policy)
	}
}

// runSlurmSuite (run by runAPISuite, so through the OpenAPI checker): the Slurm feed
// long-polls on heartbeats, which are ordered without the agent's clock; job reports are
// posted by a host for itself only, replace only that host's report of the job, and are
// read by any role, and by id by any directory user.
func runSlurmSuite(t *testing.T, env *testenv.Env) {
	admin := env.Admin()
	host := hostClient(env, issue(t, admin, "pc-b02"))
	feed, err := admin.SlurmNodes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var pcb02 wire.SlurmNode
	for _, n := range feed.Nodes {
		if n.Name == "pc-b02" {
			pcb02 = n
		}
	}
	if pcb02.State != wire.SlurmDown || !strings.Contains(pcb02.Reason, "no heartbeat") {
		t.Fatalf("pc-b02 before any heartbeat: %+v", pcb02)
	}
	// A long poll at the current revision is woken by the heartbeat: it answers promptly,
	// well before its timeout, with the heartbeat's revision, and not before. The heartbeat
	// goes out only once the request has been sent and held unanswered a while: a poll that
	// reached the server after the change would answer at once, wake-up or not.
	const pollTimeout, held, prompt = 30 * time.Second, 300 * time.Millisecond, 5 * time.Second
	type pollAnswer struct {
		f   *wire.SlurmFeed
		err error
	}
	pollCtx, cancelPoll := context.WithCancel(ctx)
	defer cancelPoll() // on a failure below, so that the poll ends with the test
	sent := make(chan struct{}, 1)
	pollCtx = httptrace.WithClientTrace(pollCtx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		select {
		case sent <- struct{}{}:
		default: // a retried request: sent already
		}
	}})
	got := make(chan pollAnswer, 1)
	go func() {
		f, err := admin.SlurmNodes(pollCtx, feed.Revision, pollTimeout)
		got <- pollAnswer{f, err}
	}()
	select {
	case <-sent:
	case a := <-got:
		t.Fatalf("long poll answered without being sent: %v", a.err)
	case <-time.After(10 * time.Second):
		t.Fatal("long poll not sent within 10 s")
	}
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatalf("long poll at the current revision failed before any change: %v", a.err)
		}
		t.Fatalf("long poll at revision %d answered before any change, at revision %d", feed.Revision, a.f.Revision)
	case <-time.After(held):
	}
	start := time.Now()
	if err := host.Heartbeat(ctx, wire.Heartbeat{Host: "pc-b02", Time: time.Now(), Mode: "desktop",
		OwnerState: model.StateOwnerActive, Action: model.ActionThrottle, GuestState: "running"}); err != nil {
		t.Fatal(err)
	}
	var f *wire.SlurmFeed
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatalf("long poll: %v", a.err)
		}
		f = a.f
	case <-time.After(prompt):
		t.Fatalf("long poll not woken by the heartbeat: no answer %s after it (its timeout is %s)", prompt, pollTimeout)
	}
	if f.Revision <= feed.Revision {
		t.Fatalf("long poll woken %s after the heartbeat at revision %d, not past %d", time.Since(start), f.Revision, feed.Revision)
	}
	now, err := admin.SlurmNodes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if now.Revision != f.Revision {
		t.Fatalf("long poll answered revision %d, not the heartbeat's %d", f.Revision, now.Revision)
	}
	for _, n := range f.Nodes {
		if n.Name == "pc-b02" && (n.State != wire.SlurmUp || n.Features != "overtime,desktop,owner-active") {
			t.Fatalf("pc-b02 after the heartbeat: %+v", n)
		}
	}
	// An older heartbeat (posted late) does not overwrite a newer one; an agent without
	// an instance id is ordered by its clock while that agrees with the server's.
	if err := host.Heartbeat(ctx, wire.Heartbeat{Host: "pc-b02", Time: time.Now().Add(-2 * time.Second), Action: model.ActionRun}); err != nil {
		t.Fatal(err)
	}
	if st, _ := admin.AgentStatusOf(ctx, "pc-b02"); st.Action != model.ActionThrottle {
		t.Fatalf("a late heartbeat overwrote the newer one: %+v", st)
	}
	// A PC whose clock ran five hours ahead until NTP stepped it back: the heartbeats
	// after the step are kept (they used to be dropped as older, and the host went
	// stale, down in Slurm); a late post of a document made before stays out.
	for _, tc := range []struct {
		seq     uint64
		agent   time.Duration
		action  model.GuestAction
		want    model.GuestAction
		wantSeq uint64
	}{
		{5, 5 * time.Hour, model.ActionFreeze, model.ActionFreeze, 5},
		{6, 0, model.ActionThrottle, model.ActionThrottle, 6},
		{4, 0, model.ActionRun, model.ActionThrottle, 6},
	} {
		hb := wire.Heartbeat{Host: "pc-b02", Instance: "0123456789abcdef", Seq: tc.seq, Time: time.Now().Add(tc.agent),
			Mode: "desktop", OwnerState: model.StateOwnerActive, Action: tc.action, GuestState: "running"}
		if err := host.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
		if st, err := admin.AgentStatusOf(ctx, "pc-b02"); err != nil || st.Action != tc.want || st.Seq != tc.wantSeq || st.Stale {
			t.Fatalf("after seq %d: %+v %v, want %s", tc.seq, st, err, tc.want)
		}
	}

	rep := wire.JobReport{Job: "42", Start: time.Now().Add(-time.Minute), End: time.Now(), Seconds: 60, ThrottledSeconds: 10}
	if _, err := admin.PostJobReport(ctx, rep); err == nil || !strings.Contains(err.Error(), "only a host's node agent") {
		t.Fatalf("a user posted a job report: %v", err)
	}
	rep.Host = "pc-b01"
	if _, err := host.PostJobReport(ctx, rep); err == nil || !strings.Contains(err.Error(), "only for itself") {
		t.Fatalf("pc-b02 posted a report for pc-b01: %v", err)
	}
	rep.Host = ""
	rep.Seconds = -1
	if _, err := host.PostJobReport(ctx, rep); err == nil {
		t.Fatal("a report with negative seconds was accepted")
	}
	rep.Seconds = 60
	posted, err := host.PostJobReport(ctx, rep)
	if err != nil || posted.Host != "pc-b02" || !strings.Contains(posted.Summary, "throttled 10 s") {
		t.Fatalf("post: %+v %v", posted, err)
	}
	// The job is requeued onto pc-b01, which reports its own run; it can neither replace
	// nor remove pc-b02's report, while pc-b02 may replace its own (a repost).
	other := hostClient(env, issue(t, admin, "pc-b01"))
	requeued := wire.JobReport{Job: "42", Start: rep.End.Add(time.Minute), End: rep.End.Add(2 * time.Minute), Seconds: 60, FrozenSeconds: 5}
	if jr, err := other.PostJobReport(ctx, requeued); err != nil || jr.Host != "pc-b01" {
		t.Fatalf("pc-b01's report: %+v %v", jr, err)
	}
	rep.ThrottledSeconds = 12
	if _, err := host.PostJobReport(ctx, rep); err != nil {
		t.Fatal(err)
	}
	// Any role reads every report; a directory user without one (eve: an HPC user)
	// reads one job's report by its id; a host credential reads none.
	byHost := func(c *client.Client, host string) (wire.JobReport, error) {
		jr, err := c.JobReport(ctx, "42", host) // GET /api/v1/jobs/42?host=...
		if err != nil {
			return wire.JobReport{}, err
		}
		return *jr, nil
	}
	for _, who := range []struct {
		name string
		c    *client.Client
	}{
		{"site admin", admin},
		{"pool admin of another pool", env.Client("alice", "alice-secret")},
		{"lecturer", env.Client("carol", "carol-secret")},
		{"viewer", env.Client("dave", "dave-secret")},
		{"user without a role", env.Client("eve", "eve-secret")},
	} {
		// Without ?host=: every host's report, by host, none replacing another.
		if all, err := who.c.JobReportsOf(ctx, "42"); err != nil || len(all.Reports) != 2 ||
			all.Reports[0].Host != "pc-b01" || all.Reports[0].FrozenSeconds != 5 || all.Reports[1].Host != "pc-b02" || all.Reports[1].ThrottledSeconds != 12 {
			t.Fatalf("%s reads every host's report: %+v %v", who.name, all, err)
		}
		if r, err := byHost(who.c, "pc-b01"); err != nil || r.Host != "pc-b01" || r.FrozenSeconds != 5 {
			t.Fatalf("%s reads pc-b01's report: %+v %v", who.name, r, err)
		}
	}
	if _, err := byHost(admin, "pc-a01"); status(err) != 404 {
		t.Fatalf("a report of a host the job did not run on: %v", err)
	}
	if _, err := env.Client("eve", "eve-secret").JobReports(ctx, ""); status(err) != 403 {
		t.Fatalf("a user without a role listed the reports: %v", err)
	}
	if _, err := other.JobReports(ctx, ""); status(err) != 403 {
		t.Fatalf("a host credential listed the reports: %v", err)
	}
	if _, err := admin.JobReportsOf(ctx, "42;rm"); status(err) != 400 {
		t.Fatal("an invalid job id was accepted")
	}
	if _, err := host.JobReportsOf(ctx, "42"); err == nil {
		t.Fatal("a host credential read a job report")
	}
	if list, err := admin.JobReports(ctx, "pc-b02"); err != nil || len(list) != 1 || list[0].Job != "42" || list[0].ThrottledSeconds != 12 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list, err := admin.JobReports(ctx, "pc-b01"); err != nil || len(list) != 1 || list[0].FrozenSeconds != 5 {
		t.Fatalf("list of pc-b01: %+v %v", list, err)
	}
	if list, err := admin.JobReports(ctx, "pc-a01"); err != nil || len(list) != 0 {
		t.Fatalf("list for another host: %+v %v", list, err)
	}
	if f, err := admin.SlurmNodes(ctx, feed.Revision, 0); err != nil || len(f.Reports) != 2 || f.Reports[0].Host != "pc-b01" || f.Reports[1].Host != "pc-b02" {
		t.Fatalf("feed reports: %+v %v", f, err)
	}

	// Reservation windows: computed from the schedule at the API's clock, default horizon
	// a week; a bad horizon is refused.
	rs, err := admin.SlurmReservations(ctx, 0)
	if err != nil || !rs.Now.Equal(env.Now.UTC().Truncate(time.Second)) || rs.HorizonSeconds != 7*86400 {
		t.Fatalf("reservations: %+v %v", rs, err)
	}
	for _, w := range rs.Windows {
		if !w.End.After(w.Start) || w.Start.Before(rs.Now) || !strings.HasPrefix(w.Reason, "overtime: ") {
			t.Fatalf("malformed window %+v", w)
		}
	}
	if rs, err = admin.SlurmReservations(ctx, 48*time.Hour); err != nil || rs.HorizonSeconds != 2*86400 {
		t.Fatalf("reservations within 48h: %+v %v", rs, err)
	}
	for _, bad := range []string{"soon", "-1h", "800h"} {
		if _, err := admin.Get("/api/v1/slurm/reservations", url.Values{"horizon": {bad}}, nil); status(err) != 400 {
			t.Fatalf("horizon %q: %v, want 400", bad, err)
		}
	}
	// The feed's delta over HTTP: from the build just read, nothing changed.
	var whole, delta wire.SlurmFeed
	if _, err := admin.Get("/api/v1/slurm/nodes", nil, &whole); err != nil || whole.Delta || whole.Build == 0 {
		t.Fatalf("whole feed: build %d delta %v %v", whole.Build, whole.Delta, err)
	}
	if _, err := admin.Get("/api/v1/slurm/nodes", url.Values{"base": {fmt.Sprint(whole.Build)}}, &delta); err != nil || !delta.Delta || len(delta.Nodes) != 0 {
		t.Fatalf("delta from build %d: %+v %v", whole.Build, delta, err)
	}
	for _, q := range []url.Values{{"base": {"-1"}}, {"base": {"x"}}, {"since": {"1.5"}}, {"wait": {"-2"}}} {
		if _, err := admin.Get("/api/v1/slurm/nodes", q, nil); status(err) != 400 {
			t.Fatalf("feed with %v: %v, want 400", q, err)
		}
	}

	// The controller's Slurm version: the sync daemon (a viewer or site admin) sends it
	// with its feed request, every agent's configuration carries it on. A value that is
	// not a version is refused naming it; a pool admin or lecturer may not send one.
	dave, bob, carol := env.Client("dave", "dave-secret"), env.Client("bob", "bob-secret"), env.Client("carol", "carol-secret")
	agentVersion := func() string {
		t.Helper()
		cfg, err := admin.AgentConfigFor(ctx, "pc-b02")
		if err != nil {
			t.Fatal(err)
		}
		return cfg.SlurmctldVersion
	}
	for _, bad := range []string{"", "22.05.8-4+deb12u3", "23.11.0-0rc1", "22.05.8;rm", "22", "12345.1.1", strings.Repeat("1.", 10) + "1"} {
		_, err := dave.Get("/api/v1/slurm/nodes", url.Values{"slurmctld": {bad}}, nil)
		var ae *client.APIError
		if status(err) != 400 || !errors.As(err, &ae) || !strings.Contains(ae.Msg, "slurmctld") || !strings.Contains(ae.Msg, fmt.Sprintf("%q", bad)) {
			t.Fatalf("slurmctld=%q: %v, want 400 naming the parameter and the value", bad, err)
		}
	}
	for _, who := range []*client.Client{bob, carol} {
		if _, err := who.Get("/api/v1/slurm/nodes", url.Values{"slurmctld": {"99.05.1"}}, nil); status(err) != 403 {
			t.Fatalf("a pool admin or lecturer reported a controller version: %v, want 403", err)
		}
	}
	if v := agentVersion(); v != "" {
		t.Fatalf("refused reports set the controller version to %q", v)
	}
	if _, err := dave.Get("/api/v1/slurm/nodes", url.Values{"slurmctld": {"22.05.8"}}, nil); err != nil {
		t.Fatal(err)
	}
	if v := agentVersion(); v != "22.05.8" {
		t.Fatalf("agent configuration after the viewer's report: slurmctldVersion %q, want 22.05.8", v)
	}
	if _, err := admin.Get("/api/v1/slurm/nodes", url.Values{"slurmctld": {"23.02.7"}, "since": {fmt.Sprint(whole.Revision)}}, nil); err != nil {
		t.Fatal(err)
	}
	if v := agentVersion(); v != "23.02.7" {
		t.Fatalf("after an upgrade reported by the site admin: %q, want 23.02.7", v)
	}
	// A feed read without it keeps the version.
	if _, err := dave.Get("/api/v1/slurm/nodes", nil, nil); err != nil || agentVersion() != "23.02.7" {
		t.Fatalf("a read without slurmctld: %v, version %q", err, agentVersion())
	}
}

// runPowerSaveSuite: Slurm's ResumeProgram/SuspendProgram calls. bob administers lab-b,
// alice lab-a, dave only views. pc-b03 is given to its local disk all week for the test.
func runPowerSaveSuite(t *testing.T, env *testenv.Env) {
	admin := env.Admin()
	bob := env.Client("bob", "bob-secret")
	var pcb03 model.Host
	if _, err := admin.Get("/api/v1/hosts/pc-b03", nil, &pcb03); err != nil {
		t.Fatal(err)
	}
	local := pcb03
	local.Weekly = []string{"daily 00:00-24:00 local-disk"}
	if err := admin.Send("PUT", "/api/v1/hosts/pc-b03", nil, &local, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := admin.Send("PUT", "/api/v1/hosts/pc-b03", nil, &pcb03, nil); err != nil {
			t.Error(err)
		}
	})

	for _, tc := range []struct {
		who  string
		c    *client.Client
		host string
		want string
	}{
		{"viewer", env.Client("dave", "dave-secret"), "pc-b01", "user dave may not change the site: a viewer only reads"},
		{"other pool's admin", env.Client("alice", "alice-secret"), "pc-b03", "user alice may not wake or release host pc-b03"},
		{"host credential", hostClient(env, issue(t, admin, "pc-b01")), "pc-b01", "a host credential may only"},
	} {
		if _, err := tc.c.SlurmResume(ctx, wire.PowerRequest{Hosts: []string{tc.host}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s resumed %s: %v", tc.who, tc.host, err)
		}
	}
	if _, err := bob.SlurmResume(ctx, wire.PowerRequest{}); err == nil || !strings.Contains(err.Error(), "no hosts") {
		t.Errorf("empty request: %v", err)
	}

	res, err := bob.SlurmResume(ctx, wire.PowerRequest{Hosts: []string{"pc-b03", "pc-b01", "nope"}, ForMinutes: 60})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]wire.PowerResult{}
	for _, r := range res.Hosts {
		got[r.Host] = r
	}
	if r := got["pc-b03"]; r.Action != wire.PowerCluster || r.Mode != "cluster" || r.MAC != "52:54:00:0b:00:03" || r.WakeAddr != "10.20.0.255:9" {
		t.Errorf("pc-b03 (local disk): %+v", r)
	}
	// pc-b01 is a desktop or (nights, weekends) a cluster node: woken only.
	if r := got["pc-b01"]; r.Action != wire.PowerWake || r.MAC == "" {
		t.Errorf("pc-b01: %+v", r)
	}
	if r := got["nope"]; r.Action != wire.PowerRefused || !strings.Contains(r.Reason, "not a host") {
		t.Errorf("unknown host: %+v", r)
	}
	var x model.Exception
	if _, err := admin.Get("/api/v1/exceptions/"+powersave.ExceptionName("pc-b03"), nil, &x); err != nil ||
		x.Kind != model.ExceptionPowerSave || x.Targets[0].Host != "pc-b03" || x.End.Sub(x.Start) != time.Hour {
		t.Fatalf("power-save exception: %+v %v", x, err)
	}
	// The node agent's configuration follows: pc-b03 runs the cluster guest now.
	cfg, err := admin.AgentConfigFor(ctx, "pc-b03")
	if err != nil || cfg.Kind != model.KindCluster || cfg.Guest == nil {
		t.Fatalf("pc-b03 agent config after resume: %+v %v", cfg, err)
	}

	res, err = bob.SlurmSuspend(ctx, wire.PowerRequest{Hosts: []string{"pc-b03"}})
	if err != nil || len(res.Hosts) != 1 || res.Hosts[0].Action != wire.PowerReleased || res.Hosts[0].Mode != "local-disk" {
		t.Fatalf("suspend: %+v %v", res, err)
	}
	if _, err := admin.Get("/api/v1/exceptions/"+powersave.ExceptionName("pc-b03"), nil, nil); err == nil {
		t.Fatal("the power-save exception survived suspend")
	}
}

// A host credential's bodies are bounded like a user's: each agent body is small
// (413 before reading a larger declared one), and bodies held open on many connections
// at once stop being admitted (429) before the server holds more than a few of them.
func TestAgentBodyBudget(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	tok := issue(t, env.Admin(), "pc-a01")
	post := func(body io.Reader, length int64) (*http.Response, error) {
		req, err := http.NewRequest("POST", env.HTTP.URL+"/api/v1/agent/heartbeat", body)
		if err != nil {
			return nil, err
		}
		req.ContentLength = length
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	big, bigW := io.Pipe() // declared 1 MiB, never sent: refused unread
	resp, err := post(big, 1<<20)
	bigW.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 1 MiB heartbeat: %s, want 413", resp.Status)
	}
	// Hold four bodies open on raw connections: each request declares 16 KiB and sends
	// half. A fifth, complete request is then refused with 429 (net/http answers a
	// refusal only after reading what remains of a body, so it must be complete).
	u, _ := url.Parse(env.HTTP.URL)
	const size = 16 << 10
	request := func(conn net.Conn, body string) {
		fmt.Fprintf(conn, "POST /api/v1/agent/heartbeat HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			u.Host, tok, size, body)
	}
	status := func(conn net.Conn) int {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	held := make(chan int, 4)
	var conns []net.Conn
	for range 4 {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns = append(conns, conn)
		request(conn, strings.Repeat(" ", size/2))
		go func() { held <- status(conn) }()
	}
	// The held requests are still being admitted: ask again until the fifth is refused.
	code := 0
	if !poll.Wait(10*time.Second, func() bool {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		request(conn, strings.Repeat(" ", size))
		code = status(conn)
		conn.Close()
		return code == http.StatusTooManyRequests
	}) {
		t.Fatalf("a fifth heartbeat body while four are held: %d, want 429", code)
	}
	select {
	case c := <-held:
		t.Fatalf("a held request finished (%d) before its body was sent", c)
	default:
	}
	// The held ones were admitted: sent in full, they are decoded (and refused: blanks
	// are no JSON), and the budget is free again.
	for _, conn := range conns {
		fmt.Fprint(conn, strings.Repeat(" ", size/2))
	}
	for range 4 {
		if c := <-held; c != http.StatusBadRequest {
			t.Fatalf("a held request completed with %d, want 400", c)
		}
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	request(conn, strings.Repeat(" ", size))
	if c := status(conn); c != http.StatusBadRequest {
		t.Fatalf("after the held bodies were released: %d, want 400 (admitted)", c)
	}
}

// TestGuestSecrets: the munge key goes only to a host's own credential, only while its
// mode runs a compute guest, only from a site manager given one, and only over TLS
// (unless the lab said --insecure-http); a credential issued over TLS pins the CA.
func TestGuestSecrets(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "munge.key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef munge"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Options{TLS: true, API: api.Options{MungeKeyFile: keyFile}})
	env.ApplyExample(t)
	admin := env.Admin()
	if cred, err := admin.CreateHostCredential(ctx, "pc-b02"); err != nil || cred.CAPin != env.CAPin || env.CAPin == "" {
		t.Fatalf("a credential issued over TLS: %+v %v, want the pin %s", cred, err, env.CAPin)
	}
	var mode model.Mode
	if _, err := admin.Get("/api/v1/modes/desktop", nil, &mode); err != nil {
		t.Fatal(err)
	}
	mode.Guest = &model.Guest{Image: "compute-guest", Backend: model.BackendContainer}
	if err := admin.Send("PUT", "/api/v1/modes/desktop", nil, mode, nil); err != nil {
		t.Fatal(err)
	}
	host := hostClient(env, issue(t, admin, "pc-b01"))
	sec, err := host.GuestSecrets(ctx)
	if err != nil || string(sec.MungeKey) != "0123456789abcdef munge" {
		t.Fatalf("host with a compute guest: %v %+v", err, sec)
	}
	// Users never, whatever their role.
	if _, err := admin.GuestSecrets(ctx); status(err) != http.StatusForbidden {
		t.Fatalf("site admin got guest secrets: %v", err)
	}
	if _, err := env.Client("", "").GuestSecrets(ctx); status(err) != http.StatusUnauthorized {
		t.Fatalf("anonymous: %v", err)
	}
	// No guest now: none.
	mode.Guest = nil
	if err := admin.Send("PUT", "/api/v1/modes/desktop", nil, mode, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := host.GuestSecrets(ctx); status(err) != http.StatusForbidden || !strings.Contains(err.Error(), "runs no compute guest") {
		t.Fatalf("host without a guest: %v", err)
	}
	// A site manager without a key says so.
	env2 := testenv.New(t, testenv.Options{TLS: true})
	env2.ApplyExample(t)
	if _, err := hostClient(env2, issue(t, env2.Admin(), "pc-b01")).GuestSecrets(ctx); status(err) != http.StatusNotFound || !strings.Contains(err.Error(), "--munge-key") {
		t.Fatalf("no key configured: %v", err)
	}
	// Over plain HTTP: refused, unless the lab chose it; a credential issued there pins
	// nothing.
	for _, insecure := range []bool{false, true} {
		env := testenv.New(t, testenv.Options{API: api.Options{MungeKeyFile: keyFile, InsecureHTTP: insecure}})
		env.ApplyExample(t)
		mode.Guest = &model.Guest{Image: "compute-guest", Backend: model.BackendContainer}
		if err := env.Admin().Send("PUT", "/api/v1/modes/desktop", nil, mode, nil); err != nil {
			t.Fatal(err)
		}
		cred, err := env.Admin().CreateHostCredential(ctx, "pc-b01")
		if err != nil || cred.CAPin != "" {
			t.Fatalf("a credential issued over plain HTTP: %+v %v", cred, err)
		}
		sec, err := hostClient(env, cred.Token).GuestSecrets(ctx)
		switch {
		case insecure && (err != nil || string(sec.MungeKey) != "0123456789abcdef munge"):
			t.Errorf("--insecure-http: %v %+v", err, sec)
		case !insecure && (status(err) != http.StatusForbidden || !strings.Contains(err.Error(), "over TLS only") || !strings.Contains(err.Error(), "--insecure-http")):
			t.Errorf("plain HTTP: %v, want 403 naming TLS and --insecure-http", err)
		}
	}
}

// A calibration travels in a heartbeat: validated (400 naming the field), kept as the
// host's last profile across heartbeats without one, handed back in the host's agent
// configuration (and only its own), and shown in its status with the controller's
// slowdown and cap.
func TestHeartbeatInterference(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	admin := env.Admin()
	host := hostClient(env, issue(t, admin, "pc-b02"))
	other := hostClient(env, issue(t, admin, "pc-b01"))
	prof := wire.InterferenceProfile{Measured: env.Now.Add(-time.Hour).UTC(), Kernel: "6.8.0-45-generic", CPUModel: "Intel Core i5-8500",
		CPUs: 6, Cgroup: "v2", Backend: "container", CanaryNs: 850000, CPUSlowdown: 0.021, MemorySlowdown: 0.094,
		WakeupP99AloneUs: 60, WakeupP99GuestUs: 75, StartCap: 0.4, Harvest: 0.7}
	bad := prof
	bad.CPUSlowdown = 11
	err := host.Heartbeat(ctx, wire.Heartbeat{Interference: &bad})
	var he *client.APIError
	if !errors.As(err, &he) || he.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "cpuSlowdown") {
		t.Fatalf("invalid profile: %v, want 400 naming cpuSlowdown", err)
	}
	if err := host.Heartbeat(ctx, wire.Heartbeat{Cap: 1.5}); !errors.As(err, &he) || he.Status != http.StatusBadRequest {
		t.Fatalf("cap above 1: %v, want 400", err)
	}
	if err := host.Heartbeat(ctx, wire.Heartbeat{Instance: "i", Seq: 1, Interference: &prof, Slowdown: 0.004, Cap: 0.35}); err != nil {
		t.Fatal(err)
	}
	if err := host.Heartbeat(ctx, wire.Heartbeat{Instance: "i", Seq: 2, Slowdown: 0.005, Cap: 0.3}); err != nil {
		t.Fatal(err)
	}
	st, err := admin.AgentStatusOf(ctx, "pc-b02")
	if err != nil || st.Interference == nil || st.Interference.MemorySlowdown != 0.094 || st.Slowdown != 0.005 || st.Cap != 0.3 {
		t.Fatalf("status: %+v %v", st, err)
	}
	cfg, err := host.AgentConfig(ctx)
	if err != nil || cfg.Interference == nil || !cfg.Interference.Measured.Equal(prof.Measured) || cfg.Interference.Kernel != prof.Kernel {
		t.Fatalf("agent configuration: %+v %v", cfg, err)
	}
	if cfg, err := other.AgentConfig(ctx); err != nil || cfg.Interference != nil {
		t.Fatalf("another host's configuration carries a profile: %+v %v", cfg, err)
	}
}
