package api_test

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// status extracts the HTTP status of a client error (0 for success).
func status(err error) int {
	if err == nil {
		return 0
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return -1
}

func mustSite(t *testing.T, env *testenv.Env) *model.Site {
	t.Helper()
	s, err := env.Store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runAPISuite is the API's behaviour, run through the OpenAPI checker by
// TestOpenAPICoverage (one slapd for all of it keeps the suite fast).
func runAPISuite(t *testing.T, env *testenv.Env) {
	admin := env.Admin()
	anon := env.Client("", "")

	t.Run("apply is idempotent and export round-trips", func(t *testing.T) {
		var ch client.Changes
		if err := admin.Send("PUT", "/api/v1/site", url.Values{"dryRun": {"true"}}, testenv.ExampleSite(t), &ch); err != nil {
			t.Fatal(err)
		}
		if len(ch.Changes) != 0 {
			t.Fatalf("second apply of the same file changes %v", ch.Changes)
		}
		var got model.Site
		if _, err := admin.Get("/api/v1/site", nil, &got); err != nil {
			t.Fatal(err)
		}
		want := testenv.ExampleSite(t)
		if len(got.Hosts) != len(want.Hosts) || len(got.Pools) != 2 || len(got.Exceptions) != 1 {
			t.Fatalf("site after apply: %d hosts %d pools %d exceptions", len(got.Hosts), len(got.Pools), len(got.Exceptions))
		}
		if !got.Exceptions[0].Start.Equal(want.Exceptions[0].Start) || !reflect.DeepEqual(got.Pools, want.Pools) {
			t.Fatalf("site differs from the file:\n got %+v\nwant %+v", got.Pools, want.Pools)
		}
	})

	t.Run("healthz and whoami", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			var h struct {
				Status string `json:"status"`
			}
			if _, err := anon.Get(path, nil, &h); err != nil || h.Status != "ok" {
				t.Fatalf("%s: %+v %v", path, h, err)
			}
		}
		var who struct {
			UID   string   `json:"uid"`
			Roles []string `json:"roles"`
		}
		if _, err := env.Client("alice", "alice-secret").Get("/api/v1/whoami", nil, &who); err != nil {
			t.Fatal(err)
		}
		if who.UID != "alice" || len(who.Roles) != 1 || who.Roles[0] != "pool-admin:lab-a" {
			t.Fatalf("whoami = %+v", who)
		}
	})

	t.Run("authentication", func(t *testing.T) {
		for _, tc := range []struct {
			user, pw string
			want     int
		}{
			{"", "", 401},
			{"admin", "wrong", 401},
			{"admin", "", 401},
			{"*", "x", 401},
			{"admin)(uid=*", "x", 401},
			{"nobody", "nobody-secret", 401},
			{"eve", "eve-secret", 403}, // a valid user without any role
		} {
			_, err := env.Client(tc.user, tc.pw).Get("/api/v1/hosts", nil, nil)
			if status(err) != tc.want {
				t.Errorf("user %q pw %q: status %d (%v), want %d", tc.user, tc.pw, status(err), err, tc.want)
			}
		}
	})

	t.Run("authorisation by role", func(t *testing.T) {
		alice := env.Client("alice", "alice-secret") // pool admin lab-a
		bob := env.Client("bob", "bob-secret")       // pool admin lab-b
		carol := env.Client("carol", "carol-secret") // lecturer lab-a
		dave := env.Client("dave", "dave-secret")    // viewer
		newHost := model.Host{Name: "pc-a09", MAC: "52:54:00:0a:00:09", IP: "10.20.0.19", Pool: "lab-a"}
		steps := []struct {
			name string
			c    *client.Client
			do   func(c *client.Client) error
			want int
		}{
			{"viewer reads", dave, func(c *client.Client) error { _, err := c.Get("/api/v1/hosts/pc-a01", nil, nil); return err }, 0},
			{"viewer cannot write", dave, func(c *client.Client) error { return c.Send("PUT", "/api/v1/hosts/pc-a09", nil, newHost, nil) }, 403},
			{"other pool's admin cannot add", bob, func(c *client.Client) error { return c.Send("PUT", "/api/v1/hosts/pc-a09", nil, newHost, nil) }, 403},
			{"lecturer cannot add hosts", carol, func(c *client.Client) error { return c.Send("PUT", "/api/v1/hosts/pc-a09", nil, newHost, nil) }, 403},
			{"pool admin adds in own pool", alice, func(c *client.Client) error { return c.Send("PUT", "/api/v1/hosts/pc-a09", nil, newHost, nil) }, 0},
			{"pool admin cannot move host out of pool", alice, func(c *client.Client) error {
				h := newHost
				h.Pool = "lab-b"
				return c.Send("PUT", "/api/v1/hosts/pc-a09", nil, h, nil)
			}, 403},
			{"other pool's admin cannot delete", bob, func(c *client.Client) error { return c.Send("DELETE", "/api/v1/hosts/pc-a09", nil, nil, nil) }, 403},
			{"pool admin cannot create pools", alice, func(c *client.Client) error {
				return c.Send("PUT", "/api/v1/pools/lab-c", nil, model.Pool{Name: "lab-c"}, nil)
			}, 403},
			{"pool admin cannot change modes", alice, func(c *client.Client) error {
				return c.Send("PUT", "/api/v1/modes/desktop", nil, model.Mode{Name: "desktop", Kind: "desktop", Image: "debian-desktop", KernelArgs: "quiet"}, nil)
			}, 403},
			{"pool admin cannot touch another pool's exception", bob, func(c *client.Client) error {
				return c.Send("DELETE", "/api/v1/exceptions/exam-2026-12-09", nil, nil, nil)
			}, 403},
			{"lecturer adds a course-vm slot", carol, func(c *client.Client) error {
				return c.Send("PUT", "/api/v1/exceptions/bio-extra", nil, model.Exception{Name: "bio-extra", Kind: "lecture",
					Start: time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC),
					Mode: "course-bio101", Targets: []model.Target{{Pool: "lab-a"}}}, nil)
			}, 0},
			{"lecturer cannot schedule the cluster", carol, func(c *client.Client) error {
				return c.Send("PUT", "/api/v1/exceptions/grab", nil, model.Exception{Name: "grab", Kind: "lecture",
					Start: time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC),
					Mode: "cluster", Targets: []model.Target{{Pool: "lab-a"}}}, nil)
			}, 403},
			{"lecturer cannot use another pool", carol, func(c *client.Client) error {
				return c.Send("PUT", "/api/v1/exceptions/bio-b", nil, model.Exception{Name: "bio-b", Kind: "lecture",
					Start: time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC),
					Mode: "course-bio101", Targets: []model.Target{{Pool: "lab-b"}}}, nil)
			}, 403},
			{"lecturer cannot change what the course mode's kernel runs", carol, func(c *client.Client) error {
				return c.Send("PUT", "/api/v1/modes/course-bio101", nil, model.Mode{Name: "course-bio101", Kind: "course-vm",
					Image: "debian-desktop", VM: "bio101-vm", KernelArgs: "init=/bin/sh"}, nil)
			}, 403},
			{"pool admin cannot set a host's boot server", alice, func(c *client.Client) error {
				h := newHost
				h.BootServer = "bs1"
				return c.Send("PUT", "/api/v1/hosts/pc-a09", nil, h, nil)
			}, 403},
			{"lecturer publishes a course image version", carol, func(c *client.Client) error {
				return c.Send("POST", "/api/v1/images/bio101-vm/versions", nil, model.ImageVersion{Version: "ws2026-2",
					SHA256: strings.Repeat("ab", 32), Path: "bio101-vm/ws2026-2"}, nil)
			}, 0},
			{"lecturer cannot publish the desktop image", carol, func(c *client.Client) error {
				return c.Send("POST", "/api/v1/images/debian-desktop/versions", nil, model.ImageVersion{Version: "x1",
					SHA256: strings.Repeat("ab", 32), Path: "debian-desktop/x1"}, nil)
			}, 403},
			{"non-admin cannot add users", alice, func(c *client.Client) error {
				return c.Send("POST", "/api/v1/users", nil, api.UserRequest{UID: "mallory", Password: "mallory-secret"}, nil)
			}, 403},
			{"pool admin cannot apply a whole site that touches other pools", alice, func(c *client.Client) error {
				s := testenv.ExampleSite(t)
				s.Pools[1].Room = "elsewhere"
				return c.Send("PUT", "/api/v1/site", nil, s, nil)
			}, 403},
			{"site admin deletes", admin, func(c *client.Client) error { return c.Send("DELETE", "/api/v1/hosts/pc-a09", nil, nil, nil) }, 0},
		}
		for _, s := range steps {
			before := mustSite(t, env)
			err := s.do(s.c)
			if status(err) != s.want {
				t.Fatalf("%s: status %d (%v), want %d", s.name, status(err), err, s.want)
			}
			if s.want != 0 && !reflect.DeepEqual(before, mustSite(t, env)) {
				t.Fatalf("%s: refused, but the directory changed", s.name)
			}
		}
	})

	t.Run("bookings belong to who made them", func(t *testing.T) {
		// carol booked bio-extra above. An administrator's change keeps her the owner,
		// whatever owner the body names.
		var e model.Exception
		if _, err := admin.Get("/api/v1/exceptions/bio-extra", nil, &e); err != nil || e.Owner != "carol" {
			t.Fatalf("bio-extra: %+v %v", e, err)
		}
		changed := e
		changed.Description, changed.Owner = "moved to room 0.13", "admin"
		if err := admin.Send("PUT", "/api/v1/exceptions/bio-extra", nil, changed, nil); err != nil {
			t.Fatal(err)
		}
		var got model.Exception
		if _, err := admin.Get("/api/v1/exceptions/bio-extra", nil, &got); err != nil || got.Owner != "carol" || got.Description != changed.Description {
			t.Fatalf("after the admin's change: %+v %v", got, err)
		}
		if err := admin.Send("PUT", "/api/v1/exceptions/bio-extra", nil, e, nil); err != nil {
			t.Fatal(err)
		}
		// Applying the site file, which does not know the booking, leaves it alone.
		var ch client.Changes
		if err := admin.Send("PUT", "/api/v1/site", url.Values{"dryRun": {"true"}}, testenv.ExampleSite(t), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Changes {
			if strings.Contains(c, "bio-extra") {
				t.Fatalf("site apply would touch the booking: %v", ch.Changes)
			}
		}
	})

	t.Run("bad input is refused with one line and changes nothing", func(t *testing.T) {
		host := func(mod func(h *model.Host)) model.Host {
			h := model.Host{Name: "pc-x1", MAC: "52:54:00:0c:00:01", IP: "10.20.0.99", Pool: "lab-a"}
			mod(&h)
			return h
		}
		cases := []struct {
			name, path string
			body       any
			want       int
			msg        string
		}{
			{"invalid MAC", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.MAC = "52:54:00:zz:00:01" }), 400, "invalid MAC"},
			{"multicast MAC", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.MAC = "01:00:5e:00:00:01" }), 400, "multicast"},
			{"invalid IP", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.IP = "10.20.0.300" }), 400, "invalid IPv4"},
			{"hostname with space", "/api/v1/hosts/pc%20x1", host(func(h *model.Host) { h.Name = "pc x1" }), 400, "invalid hostname"},
			{"hostname with newline", "/api/v1/hosts/pc%0Ax1", host(func(h *model.Host) { h.Name = "pc\nx1" }), 400, "invalid hostname"},
			{"hostname with quote", "/api/v1/hosts/pc%22x1", host(func(h *model.Host) { h.Name = "pc\"x1" }), 400, "invalid hostname"},
			{"LDAP filter metacharacters", "/api/v1/hosts/pc*)(cn=*", host(func(h *model.Host) { h.Name = "pc*)(cn=*" }), 400, "invalid hostname"},
			{"duplicate MAC", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.MAC = "52:54:00:0a:00:01" }), 409, "duplicate MAC"},
			{"duplicate IP", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.IP = "10.20.0.11" }), 409, "duplicate IP"},
			{"unknown pool", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.Pool = "lab-z" }), 400, "unknown pool"},
			{"unaligned rule", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.Weekly = []string{"mon 08:05-09:00 desktop"} }), 400, "10"},
			{"rule with unknown mode", "/api/v1/hosts/pc-x1", host(func(h *model.Host) { h.Weekly = []string{"mon 08:00-09:00 party"} }), 400, "unknown mode"},
			{"overlapping rules", "/api/v1/pools/lab-b", model.Pool{Name: "lab-b", BootServer: "bs1",
				Weekly: []string{"mon-fri 08:00-18:00 desktop", "wed 17:00-19:00 maintenance"}}, 409, "mon-fri 08:00-18:00 desktop"},
			{"kernel args with newline", "/api/v1/modes/evil", model.Mode{Name: "evil", Kind: "maintenance", KernelArgs: "quiet\nKERNEL http://evil"}, 400, "kernel argument"},
			{"kernel args with quote", "/api/v1/modes/evil", model.Mode{Name: "evil", Kind: "maintenance", KernelArgs: `init="/bin/sh"`}, 400, "kernel argument"},
			{"unknown image", "/api/v1/modes/m2", model.Mode{Name: "m2", Kind: "desktop", Image: "nope"}, 400, "unknown image"},
			{"course VM that is not a course image", "/api/v1/modes/m3", model.Mode{Name: "m3", Kind: "course-vm", Image: "debian-desktop", VM: "compute-guest"}, 400, "not a course-vm image"},
			{"overlapping exceptions", "/api/v1/exceptions/exam2", model.Exception{Name: "exam2", Kind: "exam",
				Start: time.Date(2026, 12, 9, 11, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 9, 14, 0, 0, 0, time.UTC),
				Mode: "desktop", Targets: []model.Target{{Pool: "lab-a"}}}, 409, "exam-2026-12-09"},
			{"unaligned exception", "/api/v1/exceptions/exam3", model.Exception{Name: "exam3", Kind: "exam",
				Start: time.Date(2026, 12, 10, 11, 5, 0, 0, time.UTC), End: time.Date(2026, 12, 10, 14, 0, 0, 0, time.UTC),
				Mode: "desktop", Targets: []model.Target{{Pool: "lab-a"}}}, 400, "10-minute grid"},
			{"exam allow entry that is not an endpoint", "/api/v1/exceptions/exam4", model.Exception{Name: "exam4", Kind: "exam",
				Start: time.Date(2026, 12, 10, 11, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 10, 14, 0, 0, 0, time.UTC),
				Mode: "desktop", Targets: []model.Target{{Pool: "lab-a"}}, Allow: []string{"exam.uni.example:443", "10.0.0.0/8 accept"}}, 400, "exception exam4: allow[1]: invalid endpoint"},
			{"allow on a lecture", "/api/v1/exceptions/talk", model.Exception{Name: "talk", Kind: "lecture",
				Start: time.Date(2026, 12, 10, 11, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 10, 14, 0, 0, 0, time.UTC),
				Mode: "desktop", Targets: []model.Target{{Pool: "lab-a"}}, Allow: []string{"exam.uni.example"}}, 400, "only exceptions of kind exam"},
			{"name mismatch", "/api/v1/hosts/pc-x2", host(func(h *model.Host) {}), 400, "does not match"},
			{"unknown JSON field", "/api/v1/pools/lab-a", map[string]any{"name": "lab-a", "romm": "typo"}, 400, "unknown field"},
			{"description with newline", "/api/v1/pools/lab-a", model.Pool{Name: "lab-a", Description: "x\ndhcp-boot=evil"}, 400, "one line"},
		}
		for _, tc := range cases {
			before := mustSite(t, env)
			err := admin.Send("PUT", tc.path, nil, tc.body, nil)
			if status(err) != tc.want || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: got %d %v, want %d containing %q", tc.name, status(err), err, tc.want, tc.msg)
				continue
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error has several lines: %q", tc.name, err)
			}
			if !reflect.DeepEqual(before, mustSite(t, env)) {
				t.Errorf("%s: refused, but the directory changed", tc.name)
			}
		}
		// The overlap message names both rules.
		err := admin.Send("PUT", "/api/v1/pools/lab-b", nil, model.Pool{Name: "lab-b", BootServer: "bs1",
			Weekly: []string{"mon-fri 08:00-18:00 desktop", "wed 17:00-19:00 maintenance"}}, nil)
		if !strings.Contains(err.Error(), "wed 17:00-19:00 maintenance") {
			t.Errorf("overlap error does not name both rules: %v", err)
		}
		// Publishing an existing version again is refused: versions are immutable.
		err = admin.Send("POST", "/api/v1/images/debian-desktop/versions", nil, model.ImageVersion{Version: "2026.11.20-1",
			SHA256: strings.Repeat("cd", 32), Path: "debian-desktop/2026.11.20-1"}, nil)
		if status(err) != 409 {
			t.Errorf("republishing a version: %v, want 409", err)
		}
		// Unknown entities.
		if _, err := admin.Get("/api/v1/hosts/nope", nil, nil); status(err) != 404 {
			t.Errorf("GET unknown host: %v", err)
		}
		if err := admin.Send("DELETE", "/api/v1/pools/nope", nil, nil, nil); status(err) != 404 {
			t.Errorf("DELETE unknown pool: %v", err)
		}
		if _, err := admin.Get("/api/v1/mode-at", url.Values{"host": {"nope"}}, nil); status(err) != 404 {
			t.Errorf("mode-at unknown host: %v", err)
		}
		if _, err := admin.Get("/api/v1/mode-at", url.Values{"host": {"pc-a01"}, "time": {"tomorrow"}}, nil); status(err) != 400 {
			t.Errorf("mode-at bad time: %v", err)
		}
		// Deleting a pool that hosts still use is refused by reference validation.
		if err := admin.Send("DELETE", "/api/v1/pools/lab-b", nil, nil, nil); status(err) != 400 {
			t.Errorf("delete pool in use: %v", err)
		}
	})

	t.Run("CSV import", func(t *testing.T) {
		bad := "name,mac,ip,pool\npc-c01,52:54:00:0c:01:01,10.20.0.101,lab-b\npc-c02,52:54:00:0c:01:zz,10.20.0.102,lab-b\n"
		before := mustSite(t, env)
		err := admin.SendRaw("POST", "/api/v1/hosts/import", nil, "text/csv", strings.NewReader(bad), nil)
		if status(err) != 400 || !strings.Contains(err.Error(), "line 3") {
			t.Fatalf("bad CSV: %v", err)
		}
		if !reflect.DeepEqual(before, mustSite(t, env)) {
			t.Fatal("a CSV with one bad line changed the directory")
		}
		good := "pc-c01,52-54-00-0C-01-01,10.20.0.101,lab-b\npc-c02,52:54:00:0c:01:02,,lab-b\npc-b01,52:54:00:0b:00:01,10.20.0.121,lab-b\n"
		var ch client.Changes
		if err := admin.SendRaw("POST", "/api/v1/hosts/import", url.Values{"dryRun": {"true"}}, "text/csv", strings.NewReader(good), &ch); err != nil {
			t.Fatal(err)
		}
		if len(ch.Changes) != 3 || !ch.DryRun || mustSite(t, env).Host("pc-c01") != nil {
			t.Fatalf("dry run: %+v", ch)
		}
		if err := admin.SendRaw("POST", "/api/v1/hosts/import", nil, "text/csv", strings.NewReader(good), &ch); err != nil {
			t.Fatal(err)
		}
		s := mustSite(t, env)
		if h := s.Host("pc-c01"); h == nil || h.MAC != "52:54:00:0c:01:01" {
			t.Fatalf("imported host: %+v", h)
		}
		if h := s.Host("pc-b01"); h.IP != "10.20.0.121" {
			t.Fatalf("updated host: %+v", h)
		}
		dup := "pc-c03,52:54:00:0c:01:01,,lab-b\n"
		if err := admin.SendRaw("POST", "/api/v1/hosts/import", nil, "text/csv", strings.NewReader(dup), nil); status(err) != 409 {
			t.Fatalf("duplicate MAC in CSV: %v", err)
		}
		// Clean up so later subtests see the example site.
		for _, h := range []string{"pc-c01", "pc-c02"} {
			if err := admin.Send("DELETE", "/api/v1/hosts/"+h, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("entities: get, put, list, settings", func(t *testing.T) {
		for _, p := range []string{"pools", "hosts", "bootservers", "modes", "images", "exceptions", "roles"} {
			var list []map[string]any
			if _, err := admin.Get("/api/v1/"+p, nil, &list); err != nil || len(list) == 0 {
				t.Fatalf("list %s: %d %v", p, len(list), err)
			}
			name := list[0]["name"].(string)
			var one map[string]any
			if _, err := admin.Get("/api/v1/"+p+"/"+name, nil, &one); err != nil {
				t.Fatalf("get %s/%s: %v", p, name, err)
			}
			// PUT of the unchanged entity is a no-op.
			var ch client.Changes
			if err := admin.Send("PUT", "/api/v1/"+p+"/"+name, nil, one, &ch); err != nil || len(ch.Changes) != 0 {
				t.Fatalf("idempotent PUT %s/%s: %v %v", p, name, ch.Changes, err)
			}
		}
		var hosts []model.Host
		if _, err := admin.Get("/api/v1/hosts", url.Values{"pool": {"lab-b"}}, &hosts); err != nil || len(hosts) != 3 {
			t.Fatalf("hosts of lab-b: %d %v", len(hosts), err)
		}
		var set api.Settings
		if _, err := admin.Get("/api/v1/site/settings", nil, &set); err != nil || set.DefaultMode != "cluster" {
			t.Fatalf("settings %+v %v", set, err)
		}
		set.DefaultMode = "nope"
		if err := admin.Send("PUT", "/api/v1/site/settings", nil, set, nil); status(err) != 400 {
			t.Fatalf("settings with unknown mode: %v", err)
		}
		set.DefaultMode = "cluster"
		if err := admin.Send("PUT", "/api/v1/site/settings", nil, set, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("create and delete every kind", func(t *testing.T) {
		before := mustSite(t, env)
		steps := []struct {
			path string
			body any
		}{
			{"/api/v1/bootservers/bs2", model.BootServer{Name: "bs2", IP: "10.30.0.1", HTTPURL: "http://10.30.0.1:8080", DHCP: "proxy", Subnet: "10.30.0.0/24"}},
			{"/api/v1/images/old-desktop", model.Image{Name: "old-desktop", Kind: "desktop"}},
			{"/api/v1/modes/old-desktop", model.Mode{Name: "old-desktop", Kind: "desktop", Image: "old-desktop"}},
			{"/api/v1/roles/auditors", model.RoleGrant{Name: "auditors", Role: "viewer", Members: []string{"dave"}}},
		}
		for _, st := range steps {
			var ch client.Changes
			if err := admin.Send("PUT", st.path, nil, st.body, &ch); err != nil || len(ch.Changes) != 1 || !strings.HasPrefix(ch.Changes[0], "+") {
				t.Fatalf("PUT %s: %v %v", st.path, ch.Changes, err)
			}
		}
		// An image a mode still boots cannot go first: references are checked.
		if err := admin.Send("DELETE", "/api/v1/images/old-desktop", nil, nil, nil); status(err) != 400 {
			t.Fatalf("deleting an image in use: %v", err)
		}
		for i := len(steps) - 1; i >= 0; i-- {
			if err := admin.Send("DELETE", steps[i].path, nil, nil, nil); err != nil {
				t.Fatalf("DELETE %s: %v", steps[i].path, err)
			}
		}
		if !reflect.DeepEqual(before, mustSite(t, env)) {
			t.Fatal("create + delete did not restore the directory")
		}
	})

	t.Run("mode-at", func(t *testing.T) {
		for _, tc := range []struct{ host, at, mode, rule, next string }{
			{"pc-a01", "2026-12-02 10:30", "course-bio101", `"wed 10:00-12:00 course-bio101"`, "2026-12-02T12:00:00+01:00"},
			{"pc-a01", "2026-12-09 10:30", "desktop", "exam-2026-12-09", "2026-12-09T20:00:00+01:00"},
			{"pc-a01", "2026-12-05T23:00:00+01:00", "cluster", "site default", "2026-12-07T07:00:00+01:00"},
			{"pc-a05", "2026-12-05 23:00", "desktop", "pc-a05", ""},
		} {
			var m api.ModeAt
			if _, err := admin.Get("/api/v1/mode-at", url.Values{"host": {tc.host}, "time": {tc.at}}, &m); err != nil {
				t.Fatal(err)
			}
			next := ""
			if m.Next != nil {
				next = m.Next.Format(time.RFC3339)
			}
			if m.Mode != tc.mode || !strings.Contains(m.Rule, tc.rule) || next != tc.next {
				t.Errorf("mode-at %s %s = %s / %q / %s, want %s / %q / %s", tc.host, tc.at, m.Mode, m.Rule, next, tc.mode, tc.rule, tc.next)
			}
		}
	})

	t.Run("boot endpoints", func(t *testing.T) {
		get := func(path string) (string, int) {
			b, err := anon.Get(path, nil, nil)
			return string(b), status(err)
		}
		// The test clock is Wednesday 10:30, the BIO101 slot.
		body, code := get("/boot/ipxe/52:54:00:0a:00:01")
		if code != 0 || !strings.HasPrefix(body, "#!ipxe") || !strings.Contains(body, "course-bio101") {
			t.Fatalf("iPXE for pc-a01: %d\n%s", code, body)
		}
		body, code = get("/boot/ipxe/52-54-00-0A-00-01")
		if code != 0 || !strings.Contains(body, "course-bio101") {
			t.Fatalf("iPXE with dashed upper-case MAC: %d", code)
		}
		body, code = get("/pxelinux.cfg/01-52-54-00-0b-00-01")
		if code != 0 || !strings.Contains(body, "overtime.mode=desktop") {
			t.Fatalf("PXELINUX for pc-b01: %d\n%s", code, body)
		}
		// Unknown MAC: the site's unknown-host mode (local disk), never an error.
		body, code = get("/boot/ipxe/52:54:00:ff:ff:ff")
		if code != 0 || !strings.Contains(body, "local-disk") {
			t.Fatalf("unknown MAC: %d\n%s", code, body)
		}
		body, code = get("/pxelinux.cfg/default")
		if code != 0 || !strings.Contains(body, "LOCALBOOT") {
			t.Fatalf("PXELINUX default: %d\n%s", code, body)
		}
		body, code = get("/boot/ipxe")
		if code != 0 || !strings.Contains(body, "chain") {
			t.Fatalf("chain script: %d\n%s", code, body)
		}
		for path, want := range map[string]int{
			"/boot/ipxe/not-a-mac":                      400,
			"/boot/ipxe/52:54:00:0a:00:01:ff":           400,
			"/pxelinux.cfg/01-zz-54-00-0a-00-01":        400,
			"/pxelinux.cfg/C0A80001":                    404,
			"/pxelinux.cfg/a1b2c3d4-0000-1111-2222-333": 404,
			"/pxelinux.cfg/..%2F..%2Fetc%2Fpasswd":      400,
		} {
			if _, code := get(path); code != want {
				t.Errorf("GET %s: %d, want %d", path, code, want)
			}
		}
	})

	t.Run("renders", func(t *testing.T) {
		for what, want := range map[string]string{
			"dnsmasq":       "dhcp-hostsfile=",
			"dnsmasq-hosts": "52:54:00:0a:00:01",
			"slurm":         "NodeName=pc-a01",
			"ganesha":       "EXPORT",
			"exports":       "/srv/overtime/images/debian-desktop/2026.11.20-1",
		} {
			b, err := admin.Get("/api/v1/render/"+what, url.Values{"server": {"bs1"}}, nil)
			if err != nil || !strings.Contains(string(b), want) {
				t.Errorf("render %s: %v\n%s", what, err, b)
			}
		}
		if _, err := admin.Get("/api/v1/render/dnsmasq", url.Values{"server": {"nope"}}, nil); status(err) != 400 {
			t.Errorf("render for unknown server: %v", err)
		}
		if _, err := admin.Get("/api/v1/render/nope", nil, nil); status(err) != 404 {
			t.Errorf("unknown renderer: %v", err)
		}
	})

	t.Run("site settings and users as admin", func(t *testing.T) {
		if err := admin.Send("POST", "/api/v1/users", nil, api.UserRequest{UID: "frank", Password: "short"}, nil); status(err) != 400 {
			t.Errorf("short password: %v", err)
		}
		if err := admin.Send("POST", "/api/v1/users", nil, api.UserRequest{UID: "Frank Smith", Password: "long-enough"}, nil); status(err) != 400 {
			t.Errorf("bad uid: %v", err)
		}
		if err := admin.Send("POST", "/api/v1/users", nil, api.UserRequest{UID: "frank", Password: "frank-secret"}, nil); err != nil {
			t.Fatal(err)
		}
		var ch client.Changes
		if err := admin.Send("PUT", "/api/v1/roles/viewers", url.Values{"dryRun": {"true"}}, model.RoleGrant{Name: "viewers", Role: "viewer", Members: []string{"dave", "frank"}}, &ch); err != nil || len(ch.Changes) != 1 {
			t.Fatalf("dry-run role change: %v %v", ch, err)
		}
	})

	t.Run("users", func(t *testing.T) { runUserSuite(t, env) })
	t.Run("node agent", func(t *testing.T) { runAgentSuite(t, env) })
	t.Run("slurm", func(t *testing.T) { runSlurmSuite(t, env) })
	t.Run("image uploads", func(t *testing.T) { runUploadSuite(t, env) })
	t.Run("slurm power saving", func(t *testing.T) { runPowerSaveSuite(t, env) })
	t.Run("image distribution", func(t *testing.T) { runImageSuite(t, env) })
	t.Run("host power", func(t *testing.T) { runHostPowerSuite(t, env) })
}
