package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func sitePrinting(e *testenv.Env) *model.Printing { return e.Svc.Snapshot().Site.Printing.Clone() }

func poolPrinting(e *testenv.Env, pool string) *model.Printing {
	return e.Svc.Snapshot().Site.Pool(pool).Printing.Clone()
}

func printingForm(tok, action, server, queue string) url.Values {
	return url.Values{"csrf": {tok}, "action": {action}, "server": {server}, "defaultPrinter": {queue}}
}

// TestPrintingPool: lab-a's pool admin gives the pool its own print server on the pool
// page; a refused value is shown at its field with the input kept (400), nothing saved;
// removing it takes the pool back to the site's.
func TestPrintingPool(t *testing.T) {
	e := exampleUI(t)
	alice := loginAs(t, e, "alice")
	code, body := alice.get("/ui/pools/lab-a")
	if code != http.StatusOK {
		t.Fatalf("pool page: %d\n%s", code, body)
	}
	mustContain(t, "pool page without printing", body, `<h2 id="printing-h">Printing</h2>`, "None configured, for the pool or the site",
		`<dt>Printing</dt><dd>none configured`, `action="/ui/pools/lab-a/printing#printing"`, `id="printing-server"`,
		"Give pool lab-a its own print server", "Save the printing of pool lab-a")
	if strings.Contains(body, `name="action" value="remove"`) {
		t.Error("a Remove button for a configuration that is not there")
	}

	tok := alice.csrf("/ui/pools/lab-a")
	code, body = alice.post("/ui/pools/lab-a/printing", printingForm(tok, "save", " print-lab-a.uni.example:631 ", "lab-a-laser"))
	if code != http.StatusOK {
		t.Fatalf("save: %d\n%s", code, body)
	}
	want := &model.Printing{Server: "print-lab-a.uni.example:631", DefaultPrinter: "lab-a-laser"}
	if got := poolPrinting(e, "lab-a"); !model.SamePrinting(got, want) {
		t.Fatalf("saved %+v, want %+v", got, want)
	}
	if sitePrinting(e) != nil || poolPrinting(e, "lab-b") != nil {
		t.Fatal("saving lab-a's changed another scope")
	}
	mustContain(t, "after saving", body, "pool lab-a prints on print-lab-a.uni.example:631, default queue lab-a-laser",
		"the pool's own print server", "<code>print-lab-a.uni.example:631</code>", "<code>lab-a-laser</code>",
		`value="print-lab-a.uni.example:631"`, "Remove (the site has none)")

	// An invalid server: 400, the error at the server field, both inputs kept, nothing saved.
	code, body = alice.post("/ui/pools/lab-a/printing", printingForm(tok, "save", "ipp://print.uni.example", "lab-a-color"))
	if code != http.StatusBadRequest {
		t.Fatalf("URL as server: %d, want 400\n%s", code, body)
	}
	mustContain(t, "server field", poolFieldBlock(t, body, "printing-server"), `value="ipp://print.uni.example"`, `aria-invalid="true"`,
		"pool lab-a printing.server:", "not a URL")
	if blk := poolFieldBlock(t, body, "printing-defaultPrinter"); !strings.Contains(blk, `value="lab-a-color"`) || strings.Contains(blk, "fielderr") {
		t.Errorf("queue not kept, or blamed: %s", blk)
	}
	mustContain(t, "refused page", body, "the printing of pool lab-a was not saved: see the marked fields")
	// An invalid queue: at the queue field.
	code, body = alice.post("/ui/pools/lab-a/printing", printingForm(tok, "save", "print.uni.example", "lab a"))
	if code != http.StatusBadRequest {
		t.Fatalf("bad queue: %d, want 400\n%s", code, body)
	}
	mustContain(t, "queue field", poolFieldBlock(t, body, "printing-defaultPrinter"), "pool lab-a printing.defaultPrinter:", `value="lab a"`)
	if strings.Contains(poolFieldBlock(t, body, "printing-server"), "fielderr") {
		t.Error("the queue's error shown at the server")
	}
	// A missing server: at the server field, queue kept.
	if code, body = alice.post("/ui/pools/lab-a/printing", printingForm(tok, "save", "", "lab-a-laser")); code != http.StatusBadRequest {
		t.Fatalf("no server: %d, want 400", code)
	}
	mustContain(t, "missing server", poolFieldBlock(t, body, "printing-server"), "printing.server: missing")
	if got := poolPrinting(e, "lab-a"); !model.SamePrinting(got, want) {
		t.Fatalf("a refused save changed lab-a: %+v", got)
	}
	if code, _ := alice.post("/ui/pools/lab-a/printing", printingForm(tok, "print", "", "")); code != http.StatusBadRequest {
		t.Errorf("unknown action: %d, want 400", code)
	}
	// The same again changes nothing; without a queue, the server's default.
	if _, body = alice.post("/ui/pools/lab-a/printing", printingForm(tok, "save", want.Server, want.DefaultPrinter)); !strings.Contains(body, "printing of pool lab-a: nothing changed") {
		t.Errorf("unchanged save:\n%s", body)
	}
	if _, body = alice.post("/ui/pools/lab-a/printing", printingForm(tok, "save", "print-lab-a.uni.example", "")); !strings.Contains(body, "pool lab-a prints on print-lab-a.uni.example, the server&#39;s default queue") {
		t.Errorf("save without queue:\n%s", body)
	}

	// The site gets one: removing lab-a's own takes it back to the site's.
	siteUpdate(t, e, func(site *model.Site) error {
		site.Printing = &model.Printing{Server: "print.uni.example", DefaultPrinter: "room-101"}
		return nil
	})
	_, body = alice.get("/ui/pools/lab-a")
	mustContain(t, "own over the site's", body, "not the site's (<code>print.uni.example</code>)", "Remove (back to the site&#39;s)")
	code, body = alice.post("/ui/pools/lab-a/printing", url.Values{"csrf": {tok}, "action": {"remove"}})
	if code != http.StatusOK || poolPrinting(e, "lab-a") != nil {
		t.Fatalf("remove: %d, %+v\n%s", code, poolPrinting(e, "lab-a"), body)
	}
	mustContain(t, "after removing", body, "pool lab-a&#39;s own print server removed: its PCs use the site&#39;s (print.uni.example, default queue room-101)",
		"its PCs print on the site's", "<code>room-101</code>", "<dt>Printing</dt><dd>the site's print server")
	if sitePrinting(e) == nil {
		t.Fatal("removing lab-a's removed the site's")
	}
}

// TestPrintingSite: a site admin sets and removes the site's print server on the
// Desktop logins page; pools without their own show it.
func TestPrintingSite(t *testing.T) {
	e := exampleUI(t)
	admin := loginAs(t, e, "admin")
	code, body := admin.get("/ui/desktop-login")
	if code != http.StatusOK {
		t.Fatalf("desktop logins: %d", code)
	}
	mustContain(t, "page", body, "<h2 id=\"printing-h\">Printing (site default)</h2>", "Not configured: PCs of pools without their own print server have no printers",
		`action="/ui/desktop-login/printing#printing"`, `id="site-printing-server"`, "Save the printing of the site")

	tok := admin.csrf("/ui/desktop-login")
	code, body = admin.post("/ui/desktop-login/printing", printingForm(tok, "save", "print.uni.example", "room-101"))
	if code != http.StatusOK {
		t.Fatalf("save: %d\n%s", code, body)
	}
	want := &model.Printing{Server: "print.uni.example", DefaultPrinter: "room-101"}
	if got := sitePrinting(e); !model.SamePrinting(got, want) {
		t.Fatalf("saved %+v", got)
	}
	mustContain(t, "after saving", body, "the site prints on print.uni.example, default queue room-101", "<code>print.uni.example</code>",
		"Remove the site&#39;s print server")
	_, body = admin.get("/ui/pools/lab-b")
	mustContain(t, "lab-b's page", body, "its PCs print on the site's", "<code>print.uni.example</code>", "Give pool lab-b its own print server")

	// A pool's own is listed with the site's.
	siteUpdate(t, e, func(site *model.Site) error {
		site.Pool("lab-a").Printing = &model.Printing{Server: "print-lab-a.uni.example"}
		return nil
	})
	_, body = admin.get("/ui/desktop-login")
	mustContain(t, "pools with their own", body, `<a href="/ui/pools/lab-a#printing">lab-a</a>`, "<code>print-lab-a.uni.example</code>")

	// A refused queue: at its field, input kept, nothing saved.
	code, body = admin.post("/ui/desktop-login/printing", printingForm(tok, "save", "print2.uni.example", "room/101"))
	if code != http.StatusBadRequest {
		t.Fatalf("bad queue: %d, want 400\n%s", code, body)
	}
	mustContain(t, "queue field", poolFieldBlock(t, body, "site-printing-defaultPrinter"), `aria-invalid="true"`, "printing.defaultPrinter: invalid queue name", `value="room/101"`)
	mustContain(t, "server kept", poolFieldBlock(t, body, "site-printing-server"), `value="print2.uni.example"`)
	mustContain(t, "refused page", body, "the site&#39;s printing was not saved: see the marked fields")
	if !model.SamePrinting(sitePrinting(e), want) {
		t.Fatalf("a refused save changed the site: %+v", sitePrinting(e))
	}

	code, body = admin.post("/ui/desktop-login/printing", url.Values{"csrf": {tok}, "action": {"remove"}})
	if code != http.StatusOK || sitePrinting(e) != nil {
		t.Fatalf("remove: %d, %+v\n%s", code, sitePrinting(e), body)
	}
	mustContain(t, "after removing", body, "the site&#39;s print server removed")
	if poolPrinting(e, "lab-a") == nil {
		t.Fatal("removing the site's removed lab-a's")
	}
}

// TestPrintingRefused: lecturers and viewers read the print servers without forms; a pool
// admin has no form for the site's; forged posts (valid token, valid values) to a scope
// the user may not change are refused 403 and change nothing.
func TestPrintingRefused(t *testing.T) {
	e := exampleUI(t)
	siteUpdate(t, e, func(site *model.Site) error {
		site.Printing = &model.Printing{Server: "print.uni.example"}
		site.Pool("lab-a").Printing = &model.Printing{Server: "print-lab-a.uni.example", DefaultPrinter: "lab-a-laser"}
		return nil
	})
	before, beforeA, beforeB := sitePrinting(e), poolPrinting(e, "lab-a"), poolPrinting(e, "lab-b")
	unchanged := func(who string) {
		t.Helper()
		if !model.SamePrinting(sitePrinting(e), before) || !model.SamePrinting(poolPrinting(e, "lab-a"), beforeA) || !model.SamePrinting(poolPrinting(e, "lab-b"), beforeB) {
			t.Fatalf("%s's refused posts changed the printing", who)
		}
	}
	forged := func(tok string) []url.Values {
		return []url.Values{printingForm(tok, "save", "evil.example", "q"), {"csrf": {tok}, "action": {"remove"}}}
	}
	for _, uid := range []string{"carol", "dave"} {
		b := loginAs(t, e, uid)
		code, body := b.get("/ui/pools/lab-a")
		if code != http.StatusOK {
			t.Fatalf("%s reads lab-a: %d", uid, code)
		}
		mustContain(t, uid+"'s pool page", body, "<code>print-lab-a.uni.example</code>", "<code>lab-a-laser</code>", "not the site's (<code>print.uni.example</code>)")
		_, dl := b.get("/ui/desktop-login")
		mustContain(t, uid+"'s desktop logins", dl, "Printing (site default)", "<code>print.uni.example</code>")
		if strings.Contains(body+dl, `name="server"`) || strings.Contains(body+dl, "Save the printing") {
			t.Errorf("%s is shown a printing form", uid)
		}
		tok := b.csrf("/ui/pools/lab-a")
		for _, f := range forged(tok) {
			for _, path := range []string{"/ui/pools/lab-a/printing", "/ui/desktop-login/printing"} {
				if code, body := b.post(path, f); code != http.StatusForbidden {
					t.Fatalf("%s posts %s to %s: %d, want 403\n%s", uid, f.Get("action"), path, code, body)
				}
			}
		}
		unchanged(uid)
	}

	// alice, lab-a's pool admin: her pool's form, not the site's; lab-b's and the site's
	// are refused.
	alice := loginAs(t, e, "alice")
	_, dl := alice.get("/ui/desktop-login")
	mustContain(t, "alice's desktop logins", dl, "<code>print.uni.example</code>")
	if strings.Contains(dl, `id="site-printing-server"`) {
		t.Error("a pool admin is shown the site's printing form")
	}
	tok := alice.csrf("/ui/pools/lab-a")
	for _, f := range forged(tok) {
		for _, path := range []string{"/ui/pools/lab-b/printing", "/ui/desktop-login/printing"} {
			if code, body := alice.post(path, f); code != http.StatusForbidden {
				t.Fatalf("alice posts %s to %s: %d, want 403\n%s", f.Get("action"), path, code, body)
			}
		}
	}
	unchanged("alice")
	// bob, lab-b's pool admin, not lab-a's.
	bob := loginAs(t, e, "bob")
	if code, _ := bob.post("/ui/pools/lab-a/printing", forged(bob.csrf("/ui/pools/lab-b"))[0]); code != http.StatusForbidden {
		t.Fatalf("bob sets lab-a's: %d, want 403", code)
	}
	unchanged("bob")
	// Without the session's token: refused before anything.
	if code, _ := alice.post("/ui/pools/lab-a/printing", printingForm("forged", "remove", "", "")); code != http.StatusForbidden {
		t.Errorf("no CSRF token: %d, want 403", code)
	}
	unchanged("alice")
}

// TestPrintingEscaped: a hostile value in a refused field is shown escaped, in the field
// and in the message.
func TestPrintingEscaped(t *testing.T) {
	e := exampleUI(t)
	admin := loginAs(t, e, "admin")
	tok := admin.csrf("/ui/desktop-login")
	hostile := `"><script>alert(1)</script>`
	var all string
	for _, tc := range []struct{ path, field string }{
		{"/ui/pools/lab-a/printing", "printing-server"},
		{"/ui/desktop-login/printing", "site-printing-server"},
	} {
		code, body := admin.post(tc.path, printingForm(tok, "save", hostile, ""))
		if code != http.StatusBadRequest {
			t.Fatalf("%s: %d, want 400\n%s", tc.path, code, body)
		}
		mustContain(t, tc.path+" server field", poolFieldBlock(t, body, tc.field), "printing.server:", "&lt;script&gt;alert(1)&lt;/script&gt;", "&#34;&gt;")
		all += body
		code, body = admin.post(tc.path, printingForm(tok, "save", "print.uni.example", hostile))
		if code != http.StatusBadRequest {
			t.Fatalf("%s queue: %d, want 400\n%s", tc.path, code, body)
		}
		all += body
	}
	if strings.Contains(all, "<script>alert") {
		t.Fatal("a value is not escaped")
	}
	if sitePrinting(e) != nil || poolPrinting(e, "lab-a") != nil {
		t.Fatal("a refused value was saved")
	}
}
