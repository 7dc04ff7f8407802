package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// exampleUI is the example site with its users, and a browser logged in as uid
// ("admin" or one of the example's users, whose password is "<uid>-secret").
func exampleUI(t *testing.T) *testenv.Env {
	t.Helper()
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	return e
}

func loginAs(t *testing.T, e *testenv.Env, uid string) *browser {
	t.Helper()
	b := newBrowser(t, e)
	pw := uid + "-secret"
	if uid == "admin" {
		pw = testenv.AdminPassword
	}
	b.login(uid, pw)
	return b
}

// siteUpdate changes the site directly (no authorisation), as a site admin's tooling would.
func siteUpdate(t *testing.T, e *testenv.Env, fn func(site *model.Site) error) {
	t.Helper()
	if _, err := e.Svc.Update(context.Background(), nil, false, fn); err != nil {
		t.Fatal(err)
	}
}

func mustContain(t *testing.T, what, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
	if t.Failed() {
		t.Logf("%s:\n%s", what, body)
		t.FailNow()
	}
}

func TestImagesPages(t *testing.T) {
	e := exampleUI(t)
	// A second version of the course VM, and a description an attacker chose.
	siteUpdate(t, e, func(site *model.Site) error {
		im := site.Image("bio101-vm")
		im.Description = `<script>x</script>`
		im.Versions = append(im.Versions, model.ImageVersion{Version: "ws2026-2", SHA256: strings.Repeat("ab", 32),
			Size: 2 << 30, Path: "bio101-vm/ws2026-2", Created: time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)})
		return nil
	})
	admin := loginAs(t, e, "admin")
	code, body := admin.get("/ui/images")
	if code != http.StatusOK {
		t.Fatalf("images: %d", code)
	}
	mustContain(t, "image list", body, ">debian-desktop<", ">compute-guest<", ">bio101-vm<", "&lt;script&gt;x&lt;/script&gt;", "ws2026-2")
	if strings.Contains(body, "<script>x</script>") {
		t.Fatal("the image description is not escaped on the list")
	}
	code, body = admin.get("/ui/images/bio101-vm")
	if code != http.StatusOK {
		t.Fatalf("image page: %d", code)
	}
	mustContain(t, "image page", body, "ws2026-1", "ws2026-2", "2.0 GiB", "Make current", "Roll back to ws2026-1",
		"mode course-bio101 starts it as the course VM", "&lt;script&gt;x&lt;/script&gt;")
	if strings.Contains(body, "<script>x</script>") {
		t.Fatal("the image description is not escaped on its page")
	}
	_, body = admin.get("/ui/images/debian-desktop")
	mustContain(t, "desktop image page", body, "mode desktop (desktop) boots it", "mode course-bio101 (course-vm) boots it")
	if code, _ := admin.get("/ui/images/nope"); code != http.StatusNotFound {
		t.Errorf("unknown image: %d, want 404", code)
	}

	current := func() string { return e.Svc.Snapshot().Site.Image("bio101-vm").Current }

	// A pool admin of another pool may not switch lab-a's course VM, nor anyone but a
	// site admin the desktop image: refused, nothing written.
	bob := loginAs(t, e, "bob")
	tok := bob.csrf("/ui/images")
	if code, body := bob.post("/ui/images/bio101-vm/current", url.Values{"csrf": {tok}, "version": {"ws2026-1"}}); code != http.StatusForbidden {
		t.Fatalf("make-current by bob: %d, want 403\n%s", code, body)
	}
	if code, _ := bob.post("/ui/images/bio101-vm/rollback", url.Values{"csrf": {tok}}); code != http.StatusForbidden {
		t.Fatalf("rollback by bob: %d, want 403", code)
	}
	if c := current(); c != "" {
		t.Fatalf("bob's refused switch wrote current %q", c)
	}
	alice := loginAs(t, e, "alice")
	tok = alice.csrf("/ui/images")
	if code, _ := alice.post("/ui/images/debian-desktop/current", url.Values{"csrf": {tok}, "version": {"2026.11.20-1"}}); code != http.StatusForbidden {
		t.Fatalf("make-current of the desktop image by a pool admin: %d, want 403", code)
	}
	if c := e.Svc.Snapshot().Site.Image("debian-desktop").Current; c != "" {
		t.Fatalf("alice's refused switch wrote current %q", c)
	}
	// Without the CSRF token nothing happens either.
	if code, _ := admin.post("/ui/images/bio101-vm/current", url.Values{"version": {"ws2026-1"}}); code != http.StatusForbidden {
		t.Fatalf("make-current without CSRF token: %d, want 403", code)
	}

	// The site admin rolls back to the previous version, then makes the newest current.
	tok = admin.csrf("/ui/images")
	code, body = admin.post("/ui/images/bio101-vm/rollback", url.Values{"csrf": {tok}, "version": {"ws2026-1"}})
	if code != http.StatusOK || current() != "ws2026-1" {
		t.Fatalf("rollback: %d, current %q\n%s", code, current(), body)
	}
	mustContain(t, "after the rollback", body, "rolled back to version ws2026-1", "(set explicitly)")
	code, body = admin.post("/ui/images/bio101-vm/current", url.Values{"csrf": {tok}, "version": {"ws2026-2"}})
	if code != http.StatusOK || current() != "ws2026-2" {
		t.Fatalf("make current: %d, current %q\n%s", code, current(), body)
	}
	if code, _ := admin.post("/ui/images/bio101-vm/current", url.Values{"csrf": {tok}, "version": {"nope"}}); code != http.StatusBadRequest {
		t.Fatalf("make current of an unknown version: %d, want 400", code)
	}
	// The lab-a pool admin may switch lab-a's course VM.
	tok = alice.csrf("/ui/images")
	if code, _ := alice.post("/ui/images/bio101-vm/current", url.Values{"csrf": {tok}, "version": {""}}); code != http.StatusOK || current() != "" {
		t.Fatalf("alice follows the newest: %d, current %q", code, current())
	}
}
