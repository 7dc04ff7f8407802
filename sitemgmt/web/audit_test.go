package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestAuditPage(t *testing.T) {
	e := exampleUI(t)
	var p model.Pool
	if _, err := e.Admin().Get("/api/v1/pools/lab-b", nil, &p); err != nil {
		t.Fatal(err)
	}
	p.Description = "Self-study room <b>quiet</b>"
	if err := e.Admin().Send("PUT", "/api/v1/pools/lab-b", nil, p, nil); err != nil {
		t.Fatal(err)
	}
	admin := loginAs(t, e, "admin")
	code, body := admin.get("/ui/audit")
	if code != http.StatusOK {
		t.Fatalf("audit: %d", code)
	}
	mustContain(t, "audit page", body, `<th scope="row" class="user">admin</th>`, "~ pool lab-b (description)", `class="mod"`,
		// The field diff, old → new, escaped like every string.
		`<li class="field">description: &#34;Self-study room&#34; → &#34;Self-study room &lt;b&gt;quiet&lt;/b&gt;&#34;</li>`)
	// Newest first: the description change comes before the example's apply.
	if i, j := strings.Index(body, "~ pool lab-b (description)"), strings.Index(body, "&#43; host pc-a01"); i < 0 || j < 0 || i > j {
		t.Errorf("audit is not newest first (%d, %d)", i, j)
	}
	_, body = admin.get("/ui/audit?q=lab-b+(DESCRIPTION)")
	mustContain(t, "text filter", body, "~ pool lab-b (description)", "1 entries match")
	_, body = admin.get("/ui/audit?user=carol")
	mustContain(t, "user filter", body, "0 entries match")
	_, body = admin.get("/ui/audit?host=pc-b01")
	mustContain(t, "host filter", body, "&#43; host pc-b01", "1 entries match")

	// lab-b's admin sees the change of lab-b; lab-a's admin does not.
	bob := loginAs(t, e, "bob")
	_, body = bob.get("/ui/audit")
	mustContain(t, "bob's audit", body, "~ pool lab-b (description)", "admin")
	alice := loginAs(t, e, "alice")
	if _, body = alice.get("/ui/audit"); strings.Contains(body, "pool lab-b") {
		t.Errorf("alice sees lab-b's change:\n%s", body)
	}
}
