package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// testCAPEM is a fresh CA certificate in PEM.
func testCAPEM(t *testing.T) string {
	t.Helper()
	return unidir.NewCA(t, t.TempDir(), "uni-ca").PEM(t)
}

// krb5Form is a complete krb5 configuration as the site's form posts it (lists one per
// line, CRLF as browsers send a textarea).
func krb5Form(tok, scope, ca string) url.Values {
	return url.Values{"csrf": {tok}, "scope": {scope}, "action": {"save"}, "provider": {"krb5"},
		"uris":       {"ldaps://ldap1.uni.example\r\nldaps://ldap2.uni.example:636\r\n"},
		"searchBase": {"dc=uni,dc=example"}, "bindDN": {"cn=pc-reader,ou=services,dc=uni,dc=example"},
		"caCert": {strings.ReplaceAll(ca, "\n", "\r\n")}, "realm": {"UNI.EXAMPLE"},
		"kdcs": {"kdc1.uni.example\r\n\r\nkdc2.uni.example:88"}}
}

func siteLogin(e *testenv.Env) *model.DesktopLogin { return e.Svc.Snapshot().Site.DesktopLogin.Clone() }

func poolLogin(e *testenv.Env, pool string) *model.DesktopLogin {
	return e.Svc.Snapshot().Site.Pool(pool).DesktopLogin.Clone()
}

// TestDesktopLoginSite: a site admin sets the site's configuration through the form; a
// refused value is shown at its field with the input kept (400), nothing saved.
func TestDesktopLoginSite(t *testing.T) {
	e := exampleUI(t)
	admin := loginAs(t, e, "admin")
	code, body := admin.get("/ui/desktop-login")
	if code != http.StatusOK {
		t.Fatalf("desktop logins: %d\n%s", code, body)
	}
	mustContain(t, "empty page", body, "<h1>Desktop logins</h1>", `href="/ui/desktop-login" aria-current="page"`,
		"--desktop-secrets", "docs/desktop.md", "only local accounts can log in", "Not configured",
		`name="scope" value="@site"`, `name="scope" value="lab-a"`, `name="scope" value="lab-b"`,
		`<option>krb5</option>`, "Save the desktop login of the site", "Give pool lab-a its own directory")
	if strings.Contains(body, "Remove the desktop login of the site") {
		t.Error("a Remove button for a configuration that is not there")
	}

	ca := testCAPEM(t)
	tok := admin.csrf("/ui/desktop-login")
	code, body = admin.post("/ui/desktop-login", krb5Form(tok, "@site", ca))
	if code != http.StatusOK {
		t.Fatalf("save: %d\n%s", code, body)
	}
	got := siteLogin(e)
	want := &model.DesktopLogin{Provider: model.LoginKerberos, URIs: []string{"ldaps://ldap1.uni.example", "ldaps://ldap2.uni.example:636"},
		SearchBase: "dc=uni,dc=example", BindDN: "cn=pc-reader,ou=services,dc=uni,dc=example", CACert: ca,
		Realm: "UNI.EXAMPLE", KDCs: []string{"kdc1.uni.example", "kdc2.uni.example:88"}}
	if !model.SameDesktopLogin(got, want) {
		t.Fatalf("saved %+v\nwant %+v", got, want)
	}
	mustContain(t, "after saving", body, "the desktop login of the site set (krb5, UNI.EXAMPLE)", "<code>ldaps://ldap2.uni.example:636</code>",
		"kdc1.uni.example, kdc2.uni.example:88", "Remove the desktop login of the site", "No own configuration: its desktops use the site's.", ">the site&#39;s</td>")
	// The pool page says which directory its PCs use, and links here.
	_, body = admin.get("/ui/pools/lab-a")
	mustContain(t, "pool page", body, "the site's directory (krb5, UNI.EXAMPLE)", `href="/ui/desktop-login#pool-lab-a"`)

	// A bad realm: 400, the error at the realm field, the user's input kept, nothing saved.
	f := krb5Form(tok, "@site", ca)
	f.Set("realm", "uni.example")
	f.Set("searchBase", "ou=people,dc=uni,dc=example")
	code, body = admin.post("/ui/desktop-login", f)
	if code != http.StatusBadRequest {
		t.Fatalf("bad realm: %d, want 400\n%s", code, body)
	}
	realm := poolFieldBlock(t, body, "site-realm")
	mustContain(t, "realm field", realm, `value="uni.example"`, `aria-invalid="true"`, "desktopLogin.realm: invalid realm")
	if blk := poolFieldBlock(t, body, "site-searchBase"); !strings.Contains(blk, `value="ou=people,dc=uni,dc=example"`) || strings.Contains(blk, "fielderr") {
		t.Errorf("search base not kept, or blamed: %s", blk)
	}
	mustContain(t, "refused page", body, "was not saved: see the marked fields", "ldaps://ldap1.uni.example\nldaps://ldap2.uni.example:636</textarea>", "-----BEGIN CERTIFICATE-----")
	if !model.SameDesktopLogin(siteLogin(e), want) {
		t.Fatalf("a refused save changed the site: %+v", siteLogin(e))
	}
	// An error no field names is the form's (ldap with a realm).
	f = krb5Form(tok, "@site", ca)
	f.Set("provider", "ldap")
	code, body = admin.post("/ui/desktop-login", f)
	if code != http.StatusBadRequest {
		t.Fatalf("ldap with a realm: %d, want 400", code)
	}
	mustContain(t, "form error", body, "realm, kdcs and domain are for the krb5 and ad providers", "see its form")

	// A change names what changed; removing it leaves the site without.
	f = krb5Form(tok, "@site", ca)
	f.Set("kdcs", "kdc3.uni.example")
	if code, body = admin.post("/ui/desktop-login", f); code != http.StatusOK || !strings.Contains(body, "saved: kdcs changed") {
		t.Fatalf("change: %d\n%s", code, body)
	}
	if code, body = admin.post("/ui/desktop-login", url.Values{"csrf": {tok}, "scope": {"@site"}, "action": {"remove"}}); code != http.StatusOK {
		t.Fatalf("remove: %d\n%s", code, body)
	}
	if d := siteLogin(e); d != nil {
		t.Fatalf("removed, still %+v", d)
	}
	mustContain(t, "after removing", body, "the site&#39;s desktop login removed")
	if code, _ := admin.post("/ui/desktop-login", url.Values{"csrf": {tok}, "scope": {"@site"}, "action": {"nope"}}); code != http.StatusBadRequest {
		t.Errorf("unknown action: %d, want 400", code)
	}
	if code, _ := admin.post("/ui/desktop-login", url.Values{"csrf": {tok}, "scope": {"no-such-pool"}, "action": {"remove"}}); code != http.StatusNotFound {
		t.Errorf("unknown pool: %d, want 404", code)
	}
}

// TestDesktopLoginPool: a pool's own configuration saved, shown on its pool page, a
// refused field marked in that pool's form, then removed.
func TestDesktopLoginPool(t *testing.T) {
	e := exampleUI(t)
	admin := loginAs(t, e, "admin")
	tok := admin.csrf("/ui/desktop-login")
	form := url.Values{"csrf": {tok}, "scope": {"lab-b"}, "action": {"save"}, "provider": {"ldap"},
		"uris": {"ldaps://ldap.physics.example"}, "searchBase": {"dc=physics,dc=example"}}
	code, body := admin.post("/ui/desktop-login", form)
	if code != http.StatusOK {
		t.Fatalf("save lab-b: %d\n%s", code, body)
	}
	want := &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://ldap.physics.example"}, SearchBase: "dc=physics,dc=example"}
	if got := poolLogin(e, "lab-b"); !model.SameDesktopLogin(got, want) {
		t.Fatalf("lab-b's: %+v", got)
	}
	if siteLogin(e) != nil || poolLogin(e, "lab-a") != nil {
		t.Fatal("saving lab-b's changed another scope")
	}
	mustContain(t, "after saving lab-b's", body, "the desktop login of pool lab-b set (ldap, ldaps://ldap.physics.example)",
		"its own (ldap)", "Remove the desktop login of pool lab-b")
	_, body = admin.get("/ui/pools/lab-b")
	mustContain(t, "lab-b's page", body, "the pool's own directory (ldap, ldaps://ldap.physics.example)")
	_, body = admin.get("/ui/pools/lab-a")
	mustContain(t, "lab-a's page", body, "none configured: only local accounts log in")

	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("uris", "ldaps://ldap.physics.example\nldap://other.example")
	code, body = admin.post("/ui/desktop-login", bad)
	if code != http.StatusBadRequest {
		t.Fatalf("mixed schemes: %d, want 400", code)
	}
	mustContain(t, "lab-b's uris", poolFieldBlock(t, body, "pool-lab-b-uris"), "pool lab-b desktopLogin.uris:", "ldap://other.example")
	if strings.Contains(poolFieldBlock(t, body, "site-uris"), "fielderr") {
		t.Error("lab-b's error shown at the site's form")
	}

	code, body = admin.post("/ui/desktop-login", url.Values{"csrf": {tok}, "scope": {"lab-b"}, "action": {"remove"}})
	if code != http.StatusOK || poolLogin(e, "lab-b") != nil {
		t.Fatalf("remove lab-b's: %d, %+v\n%s", code, poolLogin(e, "lab-b"), body)
	}
	mustContain(t, "after removing", body, "pool lab-b&#39;s own desktop login removed: its PCs use the site&#39;s")
}

// TestDesktopLoginReadOnly: pool admins, lecturers and viewers read the page without
// forms; a form posted by hand with a valid token is refused by the service (403).
func TestDesktopLoginReadOnly(t *testing.T) {
	e := exampleUI(t)
	siteUpdate(t, e, func(site *model.Site) error {
		site.DesktopLogin = &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://ldap.uni.example"}, SearchBase: "dc=uni,dc=example"}
		site.Pool("lab-a").DesktopLogin = &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://ldap.bio.example"}, SearchBase: "dc=bio,dc=example"}
		return nil
	})
	before, beforeA := siteLogin(e), poolLogin(e, "lab-a")
	for _, uid := range []string{"alice", "carol", "dave"} {
		b := loginAs(t, e, uid)
		code, body := b.get("/ui/desktop-login")
		if code != http.StatusOK {
			t.Fatalf("%s reads: %d", uid, code)
		}
		mustContain(t, uid+"'s page", body, "<h1>Desktop logins</h1>", "<code>ldaps://ldap.uni.example</code>", "<code>ldaps://ldap.bio.example</code>", "its own (ldap)")
		if strings.Contains(body, `name="scope"`) || strings.Contains(body, "Save the desktop login") {
			t.Errorf("%s is shown a form", uid)
		}
		tok := b.csrf("/ui/desktop-login")
		forged := []url.Values{
			krb5Form(tok, "@site", testCAPEM(t)),
			{"csrf": {tok}, "scope": {"@site"}, "action": {"remove"}},
			krb5Form(tok, "lab-a", ""),
			{"csrf": {tok}, "scope": {"lab-a"}, "action": {"remove"}},
		}
		for _, f := range forged {
			if code, body := b.post("/ui/desktop-login", f); code != http.StatusForbidden {
				t.Fatalf("%s posts %s %s: %d, want 403\n%s", uid, f.Get("action"), f.Get("scope"), code, body)
			}
		}
		if !model.SameDesktopLogin(siteLogin(e), before) || !model.SameDesktopLogin(poolLogin(e, "lab-a"), beforeA) {
			t.Fatalf("%s's refused posts changed the site", uid)
		}
	}
	// alice sees her pool, not the others.
	_, body := loginAs(t, e, "alice").get("/ui/desktop-login")
	if strings.Contains(body, "lab-b") {
		t.Error("a pool admin of lab-a is shown lab-b")
	}
}

// TestDesktopLoginEscaped: hostile text, stored or refused, is shown escaped.
func TestDesktopLoginEscaped(t *testing.T) {
	e := exampleUI(t)
	admin := loginAs(t, e, "admin")
	tok := admin.csrf("/ui/desktop-login")
	// A search base the model takes (a DN's value is the directory's business).
	f := url.Values{"csrf": {tok}, "scope": {"@site"}, "action": {"save"}, "provider": {"ldap"},
		"uris": {"ldaps://ldap.uni.example"}, "searchBase": {"dc=<script>alert(1)</script>"}}
	code, body := admin.post("/ui/desktop-login", f)
	if code != http.StatusOK {
		t.Fatalf("save: %d\n%s", code, body)
	}
	if d := siteLogin(e); d == nil || d.SearchBase != "dc=<script>alert(1)</script>" {
		t.Fatalf("saved %+v", d)
	}
	mustContain(t, "page", body, "dc=&lt;script&gt;alert(1)&lt;/script&gt;")
	// A bind DN it refuses: the message and the kept input, both escaped.
	f.Set("bindDN", `"><script>alert(2)</script>`)
	code, body = admin.post("/ui/desktop-login", f)
	if code != http.StatusBadRequest {
		t.Fatalf("bad bind DN: %d, want 400\n%s", code, body)
	}
	mustContain(t, "bind DN field", poolFieldBlock(t, body, "site-bindDN"), "desktopLogin.bindDN:", "&lt;script&gt;alert(2)&lt;/script&gt;", "&#34;&gt;")
	for _, path := range []string{"/ui/desktop-login", "/ui/pools/lab-a"} {
		_, b := admin.get(path)
		body += b
	}
	if strings.Contains(body, "<script>alert") {
		t.Fatal("a value is not escaped")
	}
}
