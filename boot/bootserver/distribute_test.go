package bootserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// distSite: three rooms, each with its own boot server and one PC, all booting the
// desktop image "desk"; the accounts bs1..bs3 hold boot-server roles for their server.
func distSite() *model.Site {
	s := &model.Site{Name: "example", Timezone: "Europe/Berlin", DefaultMode: "desktop",
		Images: []model.Image{{Name: "desk", Kind: model.ImageDesktop}},
		Modes: []model.Mode{
			{Name: "desktop", Kind: model.KindDesktop, Image: "desk"},
			{Name: "local", Kind: model.KindLocalDisk},
		},
		Roles: []model.RoleGrant{{Name: "site-admins", Role: model.RoleSiteAdmin, Members: []string{"admin"}}},
	}
	for i, n := range []string{"1", "2", "3"} {
		ip := "10.2" + n + ".0.1"
		s.BootServers = append(s.BootServers, model.BootServer{Name: "bs" + n, IP: ip, HTTPURL: "http://" + ip + ":8080", DHCP: model.DHCPProxy, Subnet: "10.2" + n + ".0.0/24"})
		s.Pools = append(s.Pools, model.Pool{Name: "room" + n, BootServer: "bs" + n})
		s.Hosts = append(s.Hosts, model.Host{Name: "pc" + n, MAC: "52:54:00:00:00:0" + string(rune('1'+i)), Pool: "room" + n})
		s.Roles = append(s.Roles, model.RoleGrant{Name: "bootsrv" + n, Role: model.RoleBootServer, BootServer: "bs" + n, Members: []string{"bs" + n}})
	}
	return s
}

// buildVersion writes a version directory into the store the way a build does: the three
// artefacts and SHA256SUMS. It returns the version to publish.
func buildVersion(t *testing.T, store, version string, rootSize int) model.ImageVersion {
	t.Helper()
	dir := filepath.Join(store, "desk", version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root := make([]byte, rootSize)
	for i := range root {
		root[i] = byte(i*7) ^ version[0]
	}
	for name, data := range map[string][]byte{model.ImageKernel: []byte("kernel " + version), model.ImageInitrd: []byte("initrd " + version), model.ImageRoot: root} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := artefact.Write(dir, model.ImageKernel, model.ImageInitrd, model.ImageRoot)
	if err != nil {
		t.Fatal(err)
	}
	// Versions published in one second would tie on the creation time that orders them.
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(version[0]) * time.Hour)
	v := model.ImageVersion{Version: version, Path: "desk/" + version, Size: int64(rootSize), Created: created}
	for _, f := range files {
		if f.Name == model.ImageRoot {
			v.SHA256 = f.SHA256
		}
	}
	return v
}

// TestDistribution: publishing reaches three boot servers, each verifies before it
// reports; hosts get only what their boot server verified (the previous version
// meanwhile); corrupt copies are refused at publish, on a boot server and never
// reported; `image current` switches and rolls back; gc keeps what is referenced and
// removes the rest from the catalogue, the store and (at their next sync) boot servers.
// The site manager is the real one (slapd, API over HTTP); the boot servers' image syncs
// run in this process, each with its own export tree and state directory.
func TestDistribution(t *testing.T) {
	store := t.TempDir()
	env := testenv.New(t, testenv.Options{API: api.Options{ImagesDir: store}})
	admin := env.Admin()
	if err := admin.Send(http.MethodPut, "/api/v1/site", nil, distSite(), nil); err != nil {
		t.Fatal(err)
	}
	servers := map[string]*Config{}
	for _, n := range []string{"bs1", "bs2", "bs3"} {
		if err := admin.Send(http.MethodPost, "/api/v1/users", nil, api.UserRequest{UID: n, Password: n + "-secret"}, nil); err != nil {
			t.Fatal(err)
		}
		servers[n] = &Config{Client: env.Client(n, n+"-secret"), Name: n, StateDir: t.TempDir(), ExportRoot: t.TempDir(),
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	ctx := context.Background()
	// syncWant runs one image sync of a boot server and returns the keys it reports held.
	// Its error fails the test unless wantErr (nil: none) matches it: from the moment
	// desk/3 is corrupted in the store, every fetch of it fails, and says so.
	syncWant := func(name string, wantErr *regexp.Regexp) []string {
		t.Helper()
		held, err := servers[name].SyncImagesOnce(ctx, nil)
		switch {
		case wantErr == nil && err != nil:
			t.Fatalf("%s sync: %v", name, err)
		case wantErr != nil && (err == nil || !wantErr.MatchString(err.Error())):
			t.Fatalf("%s sync: error %v, want one matching %q", name, err, wantErr)
		}
		var keys []string
		for _, h := range held {
			keys = append(keys, h.Key())
		}
		return keys
	}
	sync := func(name string) []string {
		t.Helper()
		return syncWant(name, nil)
	}
	corrupt3 := regexp.MustCompile(`^image desk 3: .*root\.squashfs: artefact does not match its checksum`)
	publish := func(v model.ImageVersion) error {
		return admin.Send(http.MethodPost, "/api/v1/images/desk/versions", nil, v, nil)
	}
	boots := func(host string) string { // the image version a PC's boot script names, or "none"
		t.Helper()
		mac := map[string]string{"pc1": "52:54:00:00:00:01", "pc2": "52:54:00:00:00:02", "pc3": "52:54:00:00:00:03"}[host]
		resp, err := http.Get(env.HTTP.URL + "/boot/ipxe/" + mac)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, v := range []string{"1", "2", "3"} {
			if strings.Contains(string(body), "/images/desk/"+v+"/vmlinuz") {
				return v
			}
		}
		return "none"
	}

	// Nothing published: every boot server reports an empty set and is gated from now on.
	for n := range servers {
		if got := sync(n); len(got) != 0 {
			t.Fatalf("%s holds %v before anything was published", n, got)
		}
	}
	// Version 1 reaches every boot server, verified.
	v1 := buildVersion(t, store, "1", 1<<20)
	if err := publish(v1); err != nil {
		t.Fatal(err)
	}
	if got := boots("pc1"); got != "none" {
		t.Errorf("pc1 boots %s before bs1 verified anything", got)
	}
	for n, c := range servers {
		if got := strings.Join(sync(n), " "); got != "desk/1" {
			t.Fatalf("%s holds %q, want desk/1", n, got)
		}
		if _, err := artefact.Verify(filepath.Join(c.ExportRoot, "desk", "1")); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	for _, h := range []string{"pc1", "pc2", "pc3"} {
		if got := boots(h); got != "1" {
			t.Errorf("%s boots %s, want 1", h, got)
		}
	}

	// A truncated build is refused at publish with a clear message.
	bad := buildVersion(t, store, "9", 1<<20)
	if err := os.Truncate(filepath.Join(store, "desk", "9", model.ImageRoot), 1000); err != nil {
		t.Fatal(err)
	}
	err := publish(bad)
	if e, ok := err.(*client.APIError); !ok || e.Status != 400 || !strings.Contains(e.Msg, "corrupt or truncated") || !strings.Contains(e.Msg, "root.squashfs") {
		t.Fatalf("publishing a truncated build: %v", err)
	}

	// Version 2: bs1 has it, bs2 not yet: pc2 keeps booting 1 meanwhile.
	v2 := buildVersion(t, store, "2", 2<<20)
	if err := publish(v2); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sync("bs1"), " "); got != "desk/1 desk/2" {
		t.Fatalf("bs1 holds %q", got)
	}
	if a, b := boots("pc1"), boots("pc2"); a != "2" || b != "1" {
		t.Errorf("pc1 boots %s (want 2), pc2 boots %s (want 1: bs2 has not verified 2)", a, b)
	}
	// A copy damaged on bs3 after it verified it is refused, not reported, and fetched
	// again (it is bs3's own copy).
	sync("bs2")
	sync("bs3")
	root3 := filepath.Join(servers["bs3"].ExportRoot, "desk", "2", model.ImageRoot)
	if err := os.WriteFile(root3, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	var bi wire.BootImages
	stats := &ImageStats{}
	if _, err := servers["bs3"].SyncImagesOnce(ctx, stats); err != nil {
		t.Fatal(err)
	}
	if stats.Refused.Load() != 1 || stats.VersionsFetched.Load() != 1 {
		t.Errorf("bs3: refused %d, fetched %d; want 1, 1", stats.Refused.Load(), stats.VersionsFetched.Load())
	}
	if fi, err := os.Stat(root3); err != nil || fi.Size() != 2<<20 {
		t.Errorf("bs3's copy was not replaced: %v %v", fi, err)
	}
	// A copy corrupted in the store after publishing never counts anywhere.
	v3 := buildVersion(t, store, "3", 1<<20)
	if err := publish(v3); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "desk", "3", model.ImageRoot), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(syncWant("bs2", corrupt3), " "); got != "desk/1 desk/2" {
		t.Errorf("bs2 holds %q after fetching a corrupt desk/3", got)
	}
	if _, err := admin.Get("/api/v1/bootservers/bs2/images", nil, &bi); err != nil || len(bi.Held) != 2 {
		t.Errorf("bs2 reported %v (%v)", bi.Held, err)
	}
	if _, err := os.Stat(filepath.Join(servers["bs2"].ExportRoot, "desk", "3")); !os.IsNotExist(err) {
		t.Errorf("a corrupt copy was put in place on bs2: %v", err)
	}
	if got := boots("pc2"); got != "2" {
		t.Errorf("pc2 boots %s, want 2 (3 is not verified on bs2)", got)
	}
	// Only bs2's own account reports for bs2.
	err = servers["bs1"].Client.Send(http.MethodPost, "/api/v1/bootservers/bs2/images", nil, wire.BootImagesReport{Held: []wire.BootImage{}}, nil)
	if e, ok := err.(*client.APIError); !ok || e.Status != 403 {
		t.Errorf("bs1 reporting for bs2: %v", err)
	}
	if err := admin.Send(http.MethodPost, "/api/v1/bootservers/bs2/images", nil, wire.BootImagesReport{Held: []wire.BootImage{}}, nil); err == nil {
		t.Error("a site admin reported for bs2")
	}

	// Switch current to 1 (a rollback) and forward to 2 again.
	current := func(v string) {
		t.Helper()
		if err := admin.Send(http.MethodPut, "/api/v1/images/desk/current", nil, map[string]string{"version": v}, nil); err != nil {
			t.Fatal(err)
		}
	}
	current("1")
	for _, h := range []string{"pc1", "pc2", "pc3"} {
		if got := boots(h); got != "1" {
			t.Errorf("after rollback %s boots %s, want 1", h, got)
		}
	}
	current("2")
	for _, h := range []string{"pc1", "pc2", "pc3"} {
		if got := boots(h); got != "2" {
			t.Errorf("after switching to 2, %s boots %s", h, got)
		}
	}

	// gc: 2 is current, 3 staged, 1 no longer referenced (every PC was given 2 since).
	var res wire.GCResult
	if err := admin.Send(http.MethodPost, "/api/v1/images/gc", map[string][]string{"dryRun": {"true"}}, nil, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Removed[0].Version != "1" || len(res.Kept) != 2 {
		t.Fatalf("gc dry run: %+v", res)
	}
	// A PC given 1 again (a maintenance boot of the old build, say, by a pinned mode)
	// blocks it: pin the desktop mode to 1, boot pc3, unpin.
	pin := func(v string) {
		t.Helper()
		var m model.Mode
		if _, err := admin.Get("/api/v1/modes/desktop", nil, &m); err != nil {
			t.Fatal(err)
		}
		m.ImageVersion = v
		if err := admin.Send(http.MethodPut, "/api/v1/modes/desktop", nil, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	pin("1")
	if err := admin.Send(http.MethodPost, "/api/v1/images/gc", nil, nil, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 || !strings.Contains(strings.Join(res.Kept[0].Blockers, ";"), "mode desktop is pinned to it") {
		t.Fatalf("gc with a pinned mode: %+v", res)
	}
	if got := boots("pc3"); got != "1" {
		t.Fatalf("pc3 boots %s with desktop pinned to 1", got)
	}
	pin("")
	if err := admin.Send(http.MethodPost, "/api/v1/images/gc", nil, nil, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 0 || !strings.Contains(strings.Join(res.Kept[0].Blockers, ";"), "host pc3 was given it") {
		t.Fatalf("gc with pc3 running 1: %+v", res)
	}
	boots("pc3") // pc3 reboots into 2
	if err := admin.Send(http.MethodPost, "/api/v1/images/gc", nil, nil, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Removed[0].Version != "1" || strings.Join(res.FilesRemoved, ",") != "desk/1" {
		t.Fatalf("gc: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(store, "desk", "1")); !os.IsNotExist(err) {
		t.Errorf("desk/1 still in the store: %v", err)
	}
	for n, c := range servers {
		syncWant(n, corrupt3) // desk/3 is still staged, still corrupt in the store
		if _, err := os.Stat(filepath.Join(c.ExportRoot, "desk", "1")); !os.IsNotExist(err) {
			t.Errorf("%s still has desk/1: %v", n, err)
		}
	}
}
