package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// health is GET path's status and body status.
func health(t *testing.T, base, path string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, body
}

// slapd stops while the site manager serves: logins the directory cannot check are 503
// (not "invalid credentials"), host tokens verified before keep their heartbeats flowing
// past the cache TTL, unknown and revoked tokens are not accepted (503, so agents retry),
// /healthz and /readyz say so, and all of it recovers when slapd is back.
func TestDirectoryOutage(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	// A cache TTL of 1 ns: every request past the first is "past the TTL".
	srv := httptest.NewServer(api.New(env.Svc, api.Options{Now: func() time.Time { return env.Now }, AuthCacheTTL: time.Nanosecond}))
	t.Cleanup(srv.Close)
	user := func(uid, pw string) *client.Client {
		return &client.Client{BaseURL: srv.URL, User: uid, Password: pw}
	}
	admin := user("admin", testenv.AdminPassword)
	verified := client.NewWithToken(srv.URL, issue(t, admin, "pc-a01"))
	revoked := client.NewWithToken(srv.URL, issue(t, admin, "pc-a02"))
	unverified := client.NewWithToken(srv.URL, issue(t, admin, "pc-b01")) // valid, never used
	for _, c := range []*client.Client{verified, revoked} {
		if err := c.Heartbeat(ctx, wire.Heartbeat{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.RevokeHostCredential(ctx, "pc-a02"); err != nil {
		t.Fatal(err)
	}
	if code, body := health(t, srv.URL, "/readyz"); code != 200 || body["status"] != "ok" {
		t.Fatalf("readyz before the outage: %d %v", code, body)
	}

	whoami := func(c *client.Client) error { _, err := c.Get("/api/v1/whoami", nil, nil); return err }
	heartbeat := func(c *client.Client) error { return c.Heartbeat(ctx, wire.Heartbeat{}) }
	type check struct {
		name string
		call func() error
		want int // 0: accepted
	}
	run := func(phase string, checks []check) {
		t.Helper()
		for _, tc := range checks {
			if err := tc.call(); status(err) != tc.want {
				t.Errorf("%s: %s: %d (%v), want %d", phase, tc.name, status(err), err, tc.want)
			}
		}
	}

	if err := env.Slapd.Stop(); err != nil {
		t.Fatal(err)
	}
	run("outage", []check{
		{"user never logged in", func() error { return whoami(user("alice", "alice-secret")) }, 503},
		{"user with a wrong password", func() error { return whoami(user("alice", "wrong")) }, 503},
		{"user past the cache TTL", func() error { return whoami(admin) }, 503},
		{"verified host token past the TTL", func() error { return heartbeat(verified) }, 0},
		{"verified host token fetches its config", func() error { _, err := verified.AgentConfig(ctx); return err }, 0},
		{"host token never verified", func() error { return heartbeat(unverified) }, 503},
		{"token revoked before the outage", func() error { return heartbeat(revoked) }, 503},
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := health(t, srv.URL, path)
		want := map[string]int{"/healthz": 200, "/readyz": 503}[path]
		if code != want || body["status"] != "degraded" || body["reason"] == nil || body["directory_down_since"] == nil || body["snapshot_age_seconds"] == nil {
			t.Errorf("%s during the outage: %d %v, want %d degraded", path, code, body, want)
		}
	}

	if err := env.Slapd.Restart(); err != nil {
		t.Fatal(err)
	}
	run("after the outage", []check{
		{"user never logged in", func() error { return whoami(user("alice", "alice-secret")) }, 0},
		{"user with a wrong password", func() error { return whoami(user("alice", "wrong")) }, 401},
		{"verified host token, re-verified", func() error { return heartbeat(verified) }, 0},
		{"host token never verified", func() error { return heartbeat(unverified) }, 0},
		{"revoked token", func() error { return heartbeat(revoked) }, 401},
	})
	if code, body := health(t, srv.URL, "/readyz"); code != 200 || body["status"] != "ok" || body["reason"] != nil {
		t.Fatalf("readyz after the outage: %d %v", code, body)
	}
}

// The outage grace is bounded: a token verified longer ago than HostAuthOutageGrace is
// not accepted while the directory is down.
func TestDirectoryOutageGraceBound(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	srv := httptest.NewServer(api.New(env.Svc, api.Options{AuthCacheTTL: time.Nanosecond, HostAuthOutageGrace: time.Nanosecond}))
	t.Cleanup(srv.Close)
	admin := &client.Client{BaseURL: srv.URL, User: "admin", Password: testenv.AdminPassword}
	host := client.NewWithToken(srv.URL, issue(t, admin, "pc-a01"))
	if err := host.Heartbeat(ctx, wire.Heartbeat{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Slapd.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := host.Heartbeat(ctx, wire.Heartbeat{}); status(err) != 503 {
		t.Fatalf("token verified longer ago than the grace: %d (%v), want 503", status(err), err)
	}
}
