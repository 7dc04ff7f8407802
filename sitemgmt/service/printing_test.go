package service_test

import (
	"context"
	"testing"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestPutPrinting: a pool admin sets and removes their pool's print server, not another
// pool's nor the site's; a lecturer none; a site admin the site's; an invalid server is
// refused naming the field; nothing refused is written.
func TestPutPrinting(t *testing.T) {
	svc := bookingService(t)
	ctx := context.Background()
	room := &model.Printing{Server: "print-lab-a.uni.example:631", DefaultPrinter: "lab-a-laser"}
	site := &model.Printing{Server: "print.uni.example"}
	bob := authz.Principal{UID: "bob", PoolAdmin: map[string]bool{"lab-b": true}}
	for _, tc := range []struct {
		name   string
		p      authz.Principal
		pool   string
		pr     *model.Printing
		status int
		says   string
	}{
		{"pool admin, own pool", alice, "lab-a", room, 200, ""},
		{"pool admin, another pool", bob, "lab-a", nil, 403, "lab-a"},
		{"pool admin, the site's", alice, "", site, 403, ""},
		{"lecturer, own pool", carol, "lab-a", nil, 403, ""},
		{"invalid server", alice, "lab-a", &model.Printing{Server: "ipp://print.uni.example"}, 400, "pool lab-a printing.server:"},
		{"invalid queue", admin, "", &model.Printing{Server: "print.uni.example", DefaultPrinter: "a b"}, 400, "printing.defaultPrinter:"},
		{"no such pool", admin, "lab-z", site, 404, "lab-z"},
		{"site admin, the site's", admin, "", site, 200, ""},
	} {
		before := svc.Snapshot().Site
		changes, err := svc.Entities.PutPrinting(ctx, tc.p, false, tc.pool, tc.pr)
		wantStatus(t, tc.name, err, tc.status, tc.says)
		if tc.status != 200 && svc.Snapshot().Site != before {
			t.Errorf("%s: refused, wrote %v", tc.name, changes)
		}
	}
	s := svc.Snapshot().Site
	if !model.SamePrinting(s.Pool("lab-a").Printing, room) || !model.SamePrinting(s.Printing, site) {
		t.Fatalf("stored: site %+v, lab-a %+v", s.Printing, s.Pool("lab-a").Printing)
	}
	if got := s.PrintingFor("lab-b"); !model.SamePrinting(got, site) {
		t.Errorf("lab-b prints on %+v, want the site's", got)
	}
	// Removing lab-a's own: its PCs use the site's.
	if _, err := svc.Entities.PutPrinting(ctx, alice, false, "lab-a", nil); err != nil {
		t.Fatal(err)
	}
	if got := svc.Snapshot().Site.PrintingFor("lab-a"); !model.SamePrinting(got, site) {
		t.Errorf("after removing lab-a's: %+v, want the site's", got)
	}
}
