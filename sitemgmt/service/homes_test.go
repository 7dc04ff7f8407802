package service_test

import (
	"context"
	"testing"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestPutHomes: only a site admin sets and removes a home server, the site's and a
// pool's own; a pool admin neither, not even their own pool's (it would get the passwords
// of everyone who logs in at the pool's PCs), nor another pool's nor the site's; a
// lecturer none; an invalid value is refused naming the field; nothing refused is
// written.
func TestPutHomes(t *testing.T) {
	svc := bookingService(t)
	ctx := context.Background()
	room := &model.Homes{Type: model.HomesCIFS, Server: "files-lab-a.uni.example", Path: "homes/%(USER)", Options: "vers=3.0"}
	site := &model.Homes{Type: model.HomesNFS, Server: "files.uni.example", Path: "/export/homes/%(USER)"}
	bob := authz.Principal{UID: "bob", PoolAdmin: map[string]bool{"lab-b": true}}
	for _, tc := range []struct {
		name   string
		p      authz.Principal
		pool   string
		h      *model.Homes
		status int
		says   string
	}{
		{"pool admin, own pool", alice, "lab-a", room, 403, "only a site admin may"},
		{"site admin, a pool's own", admin, "lab-a", room, 200, ""},
		{"pool admin, removing own pool's", alice, "lab-a", nil, 403, "only a site admin may"},
		{"pool admin, changing own pool's", alice, "lab-a", &model.Homes{Type: model.HomesCIFS, Server: "evil.example", Path: "homes/%(USER)"}, 403, "only a site admin may"},
		{"pool admin, another pool", bob, "lab-a", nil, 403, "lab-a"},
		{"pool admin, the site's", alice, "", site, 403, ""},
		{"lecturer, own pool", carol, "lab-a", nil, 403, ""},
		{"invalid server", admin, "lab-a", &model.Homes{Type: model.HomesNFS, Server: "nfs://files", Path: "/h/%(USER)"}, 400, "pool lab-a homes.server:"},
		{"no placeholder", admin, "", &model.Homes{Type: model.HomesNFS, Server: "files", Path: "/h"}, 400, "homes.path:"},
		{"invalid options", admin, "", &model.Homes{Type: model.HomesNFS, Server: "files", Path: "/h/%(USER)", Options: "suid"}, 400, "homes.options:"},
		{"no such pool", admin, "lab-z", site, 404, "lab-z"},
		{"site admin, the site's", admin, "", site, 200, ""},
	} {
		before := svc.Snapshot().Site
		changes, err := svc.Entities.PutHomes(ctx, tc.p, false, tc.pool, tc.h)
		wantStatus(t, tc.name, err, tc.status, tc.says)
		if tc.status != 200 && svc.Snapshot().Site != before {
			t.Errorf("%s: refused, wrote %v", tc.name, changes)
		}
	}
	s := svc.Snapshot().Site
	if !model.SameHomes(s.Pool("lab-a").Homes, room) || !model.SameHomes(s.Homes, site) {
		t.Fatalf("stored: site %+v, lab-a %+v", s.Homes, s.Pool("lab-a").Homes)
	}
	if got := s.HomesFor("lab-b"); !model.SameHomes(got, site) {
		t.Errorf("lab-b's homes %+v, want the site's", got)
	}
	if _, err := svc.Entities.PutHomes(ctx, admin, false, "lab-a", nil); err != nil {
		t.Fatal(err)
	}
	if got := svc.Snapshot().Site.HomesFor("lab-a"); !model.SameHomes(got, site) {
		t.Errorf("after removing lab-a's: %+v, want the site's", got)
	}
	// The site's removed: no homes anywhere (temporary ones at the PC).
	if _, err := svc.Entities.PutHomes(ctx, admin, false, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := svc.Snapshot().Site.HomesFor("lab-b"); got != nil {
		t.Errorf("after removing the site's: %+v", got)
	}
}
