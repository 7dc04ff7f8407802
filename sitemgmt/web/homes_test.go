package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func siteHomes(e *testenv.Env) *model.Homes { return e.Svc.Snapshot().Site.Homes.Clone() }

func poolHomes(e *testenv.Env, pool string) *model.Homes {
	return e.Svc.Snapshot().Site.Pool(pool).Homes.Clone()
}

func homesForm(tok, action, typ, server, path, options string) url.Values {
	return url.Values{"csrf": {tok}, "action": {action}, "type": {typ}, "server": {server}, "path": {path}, "options": {options}}
}

// TestHomesPool: the site admin gives a pool its own home server on the pool page; a
// refused value is shown at its field with the input kept (400), nothing saved;
// removing it takes the pool back to the site's. The pool's admin reads the pool's homes
// without a form (a home server is a site admin's: it gets the users' passwords), and her
// forged posts are refused (403) and save nothing.
func TestHomesPool(t *testing.T) {
	e := exampleUI(t)
	admin := loginAs(t, e, "admin")
	code, body := admin.get("/ui/pools/lab-a")
	if code != http.StatusOK {
		t.Fatalf("pool page: %d\n%s", code, body)
	}
	mustContain(t, "pool page without homes", body, `<h2 id="homes-h">Homes</h2>`, "users get a temporary home in the PC's memory",
		`<dt>Homes</dt><dd>temporary, in the PC's memory`, `action="/ui/pools/lab-a/homes#homes"`, `id="homes-server"`, `id="homes-type"`,
		"Give pool lab-a its own home server", "Save the homes of pool lab-a")

	// The pool's admin: no form, and nothing she posts is saved.
	alice := loginAs(t, e, "alice")
	noForm := func(what, body string) {
		t.Helper()
		for _, s := range []string{`action="/ui/pools/lab-a/homes#homes"`, `id="homes-server"`, "Give pool lab-a its own home server", "Save the homes of pool lab-a", "Remove (back to the site"} {
			if strings.Contains(body, s) {
				t.Errorf("%s: the pool admin is shown the homes form (%q)", what, s)
			}
		}
		mustContain(t, what, body, "Only site admins change where the pool's homes come from")
	}
	code, body = alice.get("/ui/pools/lab-a")
	if code != http.StatusOK {
		t.Fatalf("alice's pool page: %d\n%s", code, body)
	}
	mustContain(t, "alice's pool page", body, `<h2 id="homes-h">Homes</h2>`, "users get a temporary home in the PC's memory")
	noForm("alice's pool page without homes", body)
	if !strings.Contains(body, "Give pool lab-a its own print server") {
		t.Error("the pool admin lost her pool's printing form")
	}
	aliceTok := alice.csrf("/ui/pools/lab-a")
	forged := func(what string) {
		t.Helper()
		before := poolHomes(e, "lab-a")
		posts := []url.Values{homesForm(aliceTok, "save", "cifs", "collector.example", "homes/%(USER)", "")}
		if before != nil { // removing none is no change, which nobody is refused
			posts = append(posts, url.Values{"csrf": {aliceTok}, "action": {"remove"}})
		}
		for _, f := range posts {
			code, body := alice.post("/ui/pools/lab-a/homes", f)
			if code != http.StatusForbidden {
				t.Fatalf("%s: alice posts %s: %d, want 403\n%s", what, f.Get("action"), code, body)
			}
			mustContain(t, what+": alice's "+f.Get("action"), body, "only a site admin may")
			if got := poolHomes(e, "lab-a"); !model.SameHomes(got, before) {
				t.Fatalf("%s: alice's forged %s saved %+v", what, f.Get("action"), got)
			}
		}
	}
	forged("without homes")

	tok := admin.csrf("/ui/pools/lab-a")
	code, body = admin.post("/ui/pools/lab-a/homes", homesForm(tok, "save", "nfs", " files-a.uni.example ", "/export/homes/%(USER)", "vers=4.2"))
	if code != http.StatusOK {
		t.Fatalf("save: %d\n%s", code, body)
	}
	want := &model.Homes{Type: model.HomesNFS, Server: "files-a.uni.example", Path: "/export/homes/%(USER)", Options: "vers=4.2"}
	if got := poolHomes(e, "lab-a"); !model.SameHomes(got, want) {
		t.Fatalf("saved %+v, want %+v", got, want)
	}
	if siteHomes(e) != nil || poolHomes(e, "lab-b") != nil {
		t.Fatal("saving lab-a's changed another scope")
	}
	mustContain(t, "after saving", body, "homes of pool lab-a come from nfs files-a.uni.example /export/homes/%(USER)",
		"the pool's own file server", "<code>files-a.uni.example</code>", "<code>/export/homes/%(USER)</code>", "<code>vers=4.2</code>",
		"Remove (the site has none)")

	// The pool admin reads the pool's own, read-only, and may neither change nor remove it.
	_, body = alice.get("/ui/pools/lab-a")
	mustContain(t, "alice reads lab-a's own", body, "the pool's own file server", "<code>files-a.uni.example</code>", "<code>/export/homes/%(USER)</code>")
	noForm("alice's pool page with its own homes", body)
	forged("with its own homes")

	// Each refusal at its field, every input kept, nothing saved.
	for _, tc := range []struct {
		f            url.Values
		field, says  string
		keptField    string
		keptValue    string
		notBlamedFld string
	}{
		{homesForm(tok, "save", "cifs", "smb://files", "homes/%(USER)", ""), "homes-server", "pool lab-a homes.server:", "homes-path", `value="homes/%(USER)"`, "homes-path"},
		{homesForm(tok, "save", "nfs", "files", "/export/homes", ""), "homes-path", "pool lab-a homes.path:", "homes-server", `value="files"`, "homes-server"},
		{homesForm(tok, "save", "nfs", "files", "/h/%(USER)", "suid"), "homes-options", "nosuid is always set", "homes-path", `value="/h/%(USER)"`, "homes-server"},
		{homesForm(tok, "save", "afs", "files", "/h/%(USER)", ""), "homes-type", "pool lab-a homes.type:", "homes-server", `value="files"`, "homes-path"},
	} {
		code, body := admin.post("/ui/pools/lab-a/homes", tc.f)
		if code != http.StatusBadRequest {
			t.Fatalf("%v: %d, want 400\n%s", tc.f, code, body)
		}
		mustContain(t, tc.field, poolFieldBlock(t, body, tc.field), `aria-invalid="true"`, tc.says)
		mustContain(t, tc.keptField+" kept", poolFieldBlock(t, body, tc.keptField), tc.keptValue)
		if strings.Contains(poolFieldBlock(t, body, tc.notBlamedFld), "fielderr") {
			t.Errorf("%s: the error shown at %s too", tc.field, tc.notBlamedFld)
		}
		mustContain(t, "refused page", body, "the homes of pool lab-a were not saved: see the marked fields")
	}
	if got := poolHomes(e, "lab-a"); !model.SameHomes(got, want) {
		t.Fatalf("a refused save changed lab-a: %+v", got)
	}
	if code, _ := admin.post("/ui/pools/lab-a/homes", homesForm(tok, "mount", "", "", "", "")); code != http.StatusBadRequest {
		t.Errorf("unknown action: %d, want 400", code)
	}

	// The site gets one: removing lab-a's own takes it back to the site's.
	siteUpdate(t, e, func(site *model.Site) error {
		site.Homes = &model.Homes{Type: model.HomesCIFS, Server: "files.uni.example", Path: "homes/%(USER)"}
		return nil
	})
	_, body = admin.get("/ui/pools/lab-a")
	mustContain(t, "own over the site's", body, "not the site's (<code>files.uni.example</code>)", "Remove (back to the site&#39;s)")
	code, body = admin.post("/ui/pools/lab-a/homes", url.Values{"csrf": {tok}, "action": {"remove"}})
	if code != http.StatusOK || poolHomes(e, "lab-a") != nil {
		t.Fatalf("remove: %d, %+v\n%s", code, poolHomes(e, "lab-a"), body)
	}
	mustContain(t, "after removing", body, "pool lab-a&#39;s own home server removed: its PCs use the site&#39;s (cifs files.uni.example homes/%(USER))",
		"its PCs mount homes from the site's", "cifs (SMB)", "<dt>Homes</dt><dd>the site's file server")
	if siteHomes(e) == nil {
		t.Fatal("removing lab-a's removed the site's")
	}
	_, body = alice.get("/ui/pools/lab-a")
	noForm("alice's pool page with the site's homes", body)
	forged("with the site's homes")
}

// TestHomesSite: a site admin sets and removes the site's home server on the Desktop
// logins page; pools with their own are listed; lecturers, viewers and pool admins read
// it without a form, and their forged posts (to the site's and to any pool's, their own
// included) are refused and change nothing; hostile input is shown escaped.
func TestHomesSite(t *testing.T) {
	e := exampleUI(t)
	admin := loginAs(t, e, "admin")
	code, body := admin.get("/ui/desktop-login")
	if code != http.StatusOK {
		t.Fatalf("desktop logins: %d", code)
	}
	mustContain(t, "page", body, `<h2 id="homes-h">Homes (site default)</h2>`, "Not configured: PCs of pools without their own home server give temporary homes",
		`action="/ui/desktop-login/homes#homes"`, `id="site-homes-server"`, "Save the homes of the site")
	tok := admin.csrf("/ui/desktop-login")
	code, body = admin.post("/ui/desktop-login/homes", homesForm(tok, "save", "cifs", "dc1.ad.uni.example", "users$/%(USER)", "vers=3.0,sec=krb5"))
	if code != http.StatusOK {
		t.Fatalf("save: %d\n%s", code, body)
	}
	want := &model.Homes{Type: model.HomesCIFS, Server: "dc1.ad.uni.example", Path: "users$/%(USER)", Options: "vers=3.0,sec=krb5"}
	if got := siteHomes(e); !model.SameHomes(got, want) {
		t.Fatalf("saved %+v", got)
	}
	mustContain(t, "after saving", body, "homes of the site come from cifs dc1.ad.uni.example users$/%(USER)", "Remove the site&#39;s home server")
	siteUpdate(t, e, func(site *model.Site) error {
		site.Pool("lab-a").Homes = &model.Homes{Type: model.HomesNFS, Server: "files-a.uni.example", Path: "/h/%(USER)"}
		return nil
	})
	_, body = admin.get("/ui/desktop-login")
	mustContain(t, "pools with their own", body, `<a href="/ui/pools/lab-a#homes">lab-a</a>`, "<code>files-a.uni.example</code>")

	// Refused: at the field, input kept, nothing saved; hostile input escaped.
	hostile := `"><script>alert(1)</script>`
	code, body = admin.post("/ui/desktop-login/homes", homesForm(tok, "save", "nfs", "files", hostile, ""))
	if code != http.StatusBadRequest {
		t.Fatalf("bad path: %d, want 400\n%s", code, body)
	}
	mustContain(t, "path field", poolFieldBlock(t, body, "site-homes-path"), `aria-invalid="true"`, "homes.path:", "&lt;script&gt;alert(1)&lt;/script&gt;")
	mustContain(t, "refused page", body, "the site&#39;s homes were not saved: see the marked fields")
	if _, body = admin.post("/ui/pools/lab-a/homes", homesForm(tok, "save", "nfs", hostile, "/h/%(USER)", "")); strings.Contains(body, "<script>alert") {
		t.Fatal("a value is not escaped")
	}
	if !model.SameHomes(siteHomes(e), want) {
		t.Fatalf("a refused save changed the site: %+v", siteHomes(e))
	}

	beforeA := poolHomes(e, "lab-a")
	unchanged := func(who string) {
		t.Helper()
		if !model.SameHomes(siteHomes(e), want) || !model.SameHomes(poolHomes(e, "lab-a"), beforeA) || poolHomes(e, "lab-b") != nil {
			t.Fatalf("%s's refused posts changed the homes", who)
		}
	}
	for _, uid := range []string{"carol", "dave", "alice", "bob"} {
		b := loginAs(t, e, uid)
		_, dl := b.get("/ui/desktop-login")
		mustContain(t, uid+"'s desktop logins", dl, "Homes (site default)", "<code>dc1.ad.uni.example</code>")
		if strings.Contains(dl, `id="site-homes-server"`) {
			t.Errorf("%s is shown the site's homes form", uid)
		}
		tok := b.csrf("/ui/desktop-login")
		// Everyone's forged posts: the site's, and a pool that is not theirs.
		paths := []string{"/ui/desktop-login/homes", "/ui/pools/lab-a/homes"}
		if uid == "alice" { // lab-a's admin: not even her own pool's
			paths = append(paths, "/ui/pools/lab-b/homes")
		}
		for _, f := range []url.Values{homesForm(tok, "save", "nfs", "evil.example", "/x/%(USER)", ""), {"csrf": {tok}, "action": {"remove"}}} {
			for _, path := range paths {
				if code, body := b.post(path, f); code != http.StatusForbidden {
					t.Fatalf("%s posts %s to %s: %d, want 403\n%s", uid, f.Get("action"), path, code, body)
				}
			}
		}
		unchanged(uid)
	}

	code, body = admin.post("/ui/desktop-login/homes", url.Values{"csrf": {tok}, "action": {"remove"}})
	if code != http.StatusOK || siteHomes(e) != nil {
		t.Fatalf("remove: %d, %+v\n%s", code, siteHomes(e), body)
	}
	mustContain(t, "after removing", body, "the site&#39;s home server removed")
	if poolHomes(e, "lab-a") == nil {
		t.Fatal("removing the site's removed lab-a's")
	}
}
