package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Homes from the file server: a site admin sets the site's and a pool's own (through
// the pool); a pool admin neither, not even their own pool's (like desktopLogin: the home
// server gets the passwords of the pool's users), though they still change the rest of
// their pool with its homes carried back unchanged; a refused value names its field;
// each PC gets pam_mount.conf.xml for its pool's (or the site's) server, and none once
// the site has no homes.
func TestSeatHomes(t *testing.T) {
	runHomesSuite(t, testenv.Options{})
}

// runHomesSuite is TestSeatHomes on an environment made with opt (TestOpenAPICoverage
// passes its spec checker).
func runHomesSuite(t *testing.T, opt testenv.Options) {
	env := testenv.New(t, opt)
	env.ApplyExample(t)
	admin := env.Admin()
	pamMount := func(host string) string {
		t.Helper()
		sl, err := pcSeat(t, env, admin, host)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range sl.Files {
			if f.Path == wire.SeatPamMount {
				if f.Mode != 0o644 {
					t.Errorf("%s: pam_mount.conf.xml mode %o", host, f.Mode)
				}
				return string(f.Content)
			}
		}
		return ""
	}
	if got := pamMount("pc-a01"); got != "" {
		t.Fatalf("no homes configured, pc-a01 got pam_mount.conf.xml:\n%s", got)
	}
	if _, err := admin.Get("/api/v1/site/homes", nil, &model.Homes{}); status(err) != http.StatusNotFound {
		t.Fatalf("GET without a configuration: %v, want 404", err)
	}

	site := model.Homes{Type: model.HomesNFS, Server: "files.uni.example", Path: "/export/homes/%(USER)", Options: "vers=4.2"}
	bad := site
	bad.Path = "/export/homes"
	if err := admin.Send("PUT", "/api/v1/site/homes", nil, bad, nil); status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "homes.path") {
		t.Fatalf("path without %%(USER): %v, want 400 naming homes.path", err)
	}
	alice, bob := env.Client("alice", "alice-secret"), env.Client("bob", "bob-secret")
	if err := alice.Send("PUT", "/api/v1/site/homes", nil, site, nil); status(err) != http.StatusForbidden {
		t.Fatalf("pool admin sets the site's homes: %v, want 403", err)
	}
	if err := admin.Send("PUT", "/api/v1/site/homes", nil, site, nil); err != nil {
		t.Fatal(err)
	}
	var back model.Homes
	if _, err := env.Client("dave", "dave-secret").Get("/api/v1/site/homes", nil, &back); err != nil || !model.SameHomes(&back, &site) {
		t.Fatalf("viewer reads %+v %v, want what was set", back, err)
	}

	// The site admin gives lab-a its own SMB server; neither lab-a's admin nor lab-b's may.
	var pool model.Pool
	if _, err := alice.Get("/api/v1/pools/lab-a", nil, &pool); err != nil {
		t.Fatal(err)
	}
	pool.Homes = &model.Homes{Type: model.HomesCIFS, Server: "files-a.uni.example", Path: "homes/%(USER)"}
	if err := alice.Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); status(err) != http.StatusForbidden || !strings.Contains(err.Error(), "only a site admin may") {
		t.Fatalf("lab-a's admin sets lab-a's homes: %v, want 403 saying only a site admin may", err)
	}
	if err := bob.Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); status(err) != http.StatusForbidden {
		t.Fatalf("lab-b's admin sets lab-a's homes: %v, want 403", err)
	}
	pool.Homes.Server = "files-a.uni.example:445"
	if err := admin.Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "pool lab-a homes.server") {
		t.Fatalf("a server with a port: %v, want 400 naming pool lab-a homes.server", err)
	}
	pool.Homes.Server = "files-a.uni.example"
	if err := admin.Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); err != nil {
		t.Fatalf("site admin sets the pool's homes: %v", err)
	}

	// lab-a's admin still changes the rest of the pool, its homes sent back as they are,
	// but may neither point them elsewhere nor remove them.
	if _, err := alice.Get("/api/v1/pools/lab-a", nil, &pool); err != nil {
		t.Fatal(err)
	}
	pool.Description = "Lab A, homes from files-a"
	if err := alice.Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); err != nil {
		t.Fatalf("pool admin changes the description, homes unchanged: %v", err)
	}
	evil := pool
	evil.Homes = &model.Homes{Type: model.HomesCIFS, Server: "collector.example", Path: "homes/%(USER)"}
	if err := alice.Send("PUT", "/api/v1/pools/lab-a", nil, evil, nil); status(err) != http.StatusForbidden || !strings.Contains(err.Error(), "only a site admin may") {
		t.Fatalf("lab-a's admin points lab-a's homes at another server: %v, want 403 saying only a site admin may", err)
	}
	evil.Homes = nil
	if err := alice.Send("PUT", "/api/v1/pools/lab-a", nil, evil, nil); status(err) != http.StatusForbidden {
		t.Fatalf("lab-a's admin removes lab-a's homes: %v, want 403", err)
	}

	a, b := pamMount("pc-a01"), pamMount("pc-b01")
	if !strings.Contains(a, `fstype="cifs" server="files-a.uni.example" path="homes/%(USER)" mountpoint="/home/%(USER)"`) {
		t.Errorf("pc-a01 (lab-a's own):\n%s", a)
	}
	if !strings.Contains(b, `fstype="nfs" server="files.uni.example" path="/export/homes/%(USER)" mountpoint="/home/%(USER)" options="nosuid,nodev,retry=0,vers=4.2"`) {
		t.Errorf("pc-b01 (the site's):\n%s", b)
	}

	if err := admin.Send("DELETE", "/api/v1/site/homes", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := pamMount("pc-b01"); got != "" {
		t.Errorf("after DELETE, pc-b01 still gets:\n%s", got)
	}
	if got := pamMount("pc-a01"); !strings.Contains(got, "files-a.uni.example") {
		t.Errorf("after DELETE of the site's, lab-a keeps its own:\n%s", got)
	}
}
