package api_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// runImageSuite: the distribution endpoints on the example site (boot/bootserver's
// TestDistribution runs them with real boot server syncs and files).
func runImageSuite(t *testing.T, env *testenv.Env) {
	admin := env.Admin()
	var bi wire.BootImages
	if _, err := admin.Get("/api/v1/bootservers/bs1/images", nil, &bi); err != nil || len(bi.Wanted) == 0 || !bi.Reported.IsZero() {
		t.Fatalf("wanted: %+v %v", bi, err)
	}
	if _, err := admin.Get("/api/v1/bootservers/nope/images", nil, nil); status(err) != 404 {
		t.Errorf("unknown boot server: %v", err)
	}
	// Reports need the boot server's own account.
	if err := admin.Send("POST", "/api/v1/bootservers/bs1/images", nil, wire.BootImagesReport{}, nil); status(err) != 403 {
		t.Errorf("site admin reporting: %v", err)
	}
	var site model.Site
	if _, err := admin.Get("/api/v1/site", nil, &site); err != nil {
		t.Fatal(err)
	}
	if err := admin.Send("POST", "/api/v1/users", nil, api.UserRequest{UID: "bootsrv1", Password: "bootsrv1-secret"}, nil); err != nil {
		t.Fatal(err)
	}
	grant := model.RoleGrant{Name: "bs1-sync", Role: model.RoleBootServer, BootServer: "bs1", Members: []string{"bootsrv1"}}
	if err := admin.Send("PUT", "/api/v1/roles/bs1-sync", nil, grant, nil); err != nil {
		t.Fatal(err)
	}
	bs := env.Client("bootsrv1", "bootsrv1-secret")
	if err := bs.Send("POST", "/api/v1/bootservers/bs1/images", nil, wire.BootImagesReport{Held: []wire.BootImage{{Image: "x y", Version: "1", SHA256: "00"}}}, nil); status(err) != 400 {
		t.Errorf("bad report: %v", err)
	}
	held := []wire.BootImage{}
	for _, w := range bi.Wanted {
		held = append(held, wire.BootImage{Image: w.Image, Version: w.Version, SHA256: w.SHA256})
	}
	if err := bs.Send("POST", "/api/v1/bootservers/bs1/images", nil, wire.BootImagesReport{Held: held}, &bi); err != nil || len(bi.Held) != len(held) || bi.Reported.IsZero() {
		t.Fatalf("report: %+v %v", bi, err)
	}
	// A boot server's account reads but changes nothing.
	if err := bs.Send("PUT", "/api/v1/images/debian-desktop/current", nil, map[string]string{"version": "2026.11.20-1"}, nil); status(err) != 403 {
		t.Errorf("boot server switching current: %v", err)
	}
	if err := admin.Send("PUT", "/api/v1/images/debian-desktop/current", nil, map[string]string{"version": "nope"}, nil); status(err) != 400 {
		t.Errorf("unknown version: %v", err)
	}
	if err := admin.Send("PUT", "/api/v1/images/debian-desktop/current", nil, map[string]string{"version": "2026.11.20-1"}, nil); err != nil {
		t.Fatal(err)
	}
	var st []wire.ImageStatus
	if _, err := admin.Get("/api/v1/distribution", url.Values{"image": {"debian-desktop"}}, &st); err != nil || len(st) != 1 || !st[0].Explicit ||
		st[0].Current != "2026.11.20-1" || !strings.Contains(strings.Join(st[0].Versions[0].VerifiedOn, ","), "bs1") {
		t.Fatalf("distribution: %+v %v", st, err)
	}
	var res wire.GCResult
	// Dry run: the superseded compute guest would go, the current desktop image stays.
	if err := admin.Send("POST", "/api/v1/images/gc", url.Values{"dryRun": {"true"}}, nil, &res); err != nil || !res.DryRun || len(res.Removed) != 2 ||
		res.Removed[1].Image != "compute-guest" || res.Removed[1].Version != "2026.11.20-1" {
		t.Fatalf("gc: %+v %v", res, err)
	}
	for _, k := range res.Kept {
		if k.Image == "debian-desktop" && !strings.Contains(strings.Join(k.Blockers, ";"), "it is the current version") {
			t.Errorf("debian-desktop kept by %v", k.Blockers)
		}
	}
	// Back to "newest" and the site as it was, so that later suites see the example.
	if err := admin.Send("PUT", "/api/v1/images/debian-desktop/current", nil, map[string]string{"version": ""}, nil); err != nil {
		t.Fatal(err)
	}
	if err := admin.Send("DELETE", "/api/v1/roles/bs1-sync", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}
