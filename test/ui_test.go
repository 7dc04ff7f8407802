package test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/browser"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestUIBrowser: the web UI (sitemgmt/web) in headless Chromium against a real site
// manager with the example site: what each role sees on the overview, the login's
// errors, user-supplied text that stays text under the CSP, the CSRF check on a form
// the browser posts, logout. OVERTIME_SCREENSHOTS=1 refreshes docs/screenshots/login.png
// and overview.png.
func TestUIBrowser(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	admin := e.Admin()

	// One user per role, besides the site admin: a pool admin and a lecturer of lab-b
	// (the example's own grants are in lab-a) and a viewer.
	users := []struct{ uid, name, role, pool string }{
		{"pia", "Pia Pool", "pool-admin", "lab-b"},
		{"leo", "Leo Lecturer", "lecturer", "lab-b"},
		{"vera", "Vera Viewer", "viewer", ""},
	}
	for _, u := range users {
		if err := admin.PutUser(t.Context(), u.uid, u.name, u.uid+"-secret"); err != nil {
			t.Fatalf("add user %s: %v", u.uid, err)
		}
	}
	updateSite(t, e, func(s *model.Site) {
		for _, u := range users {
			s.Roles = append(s.Roles, model.RoleGrant{Name: "ui-" + u.uid, Role: model.RoleKind(u.role), Pool: u.pool, Members: []string{u.uid}})
		}
	})

	t.Run("login page", func(t *testing.T) {
		b := browser.New(t, e.HTTP.URL)
		// An anonymous visit to the overview lands on the login form.
		b.Go("/ui/")
		if p := b.Path(); !strings.HasPrefix(p, "/ui/login") {
			t.Fatalf("anonymous /ui/ ended at %s, want the login page", p)
		}
		b.WaitVisible("#uid")
		if b.Exists("header nav") || b.Exists("form.who") {
			t.Errorf("the login page shows the navigation or a logout form")
		}
		b.Screenshot("login")
		if code := b.TryLogin("admin", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("wrong password: status %d, want 401", code)
		}
		if got := b.Text("main .error"); got != "invalid user name or password" {
			t.Errorf("wrong password: error %q", got)
		}
		if got := b.Value("#uid"); got != "admin" {
			t.Errorf("after a wrong password the user name field holds %q, want it kept", got)
		}
		if b.Exists("form.who") {
			t.Errorf("a wrong password logged in")
		}
	})

	allPools := []string{"lab-a", "lab-b"}
	nav := []string{"Overview", "Pools", "Schedule", "Images", "Desktop logins", "Course VMs", "Harvest", "Audit log"}
	for _, c := range []struct {
		name, uid, pw string
		pools         []string
	}{
		{"site admin", "admin", testenv.AdminPassword, allPools},
		{"pool admin", "pia", "pia-secret", []string{"lab-b"}},
		{"lecturer", "leo", "leo-secret", []string{"lab-b"}},
		{"viewer", "vera", "vera-secret", allPools},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := browser.New(t, e.HTTP.URL)
			b.Login(c.uid, c.pw)
			if p := b.Path(); p != "/ui/" {
				t.Errorf("after login at %s, want /ui/", p)
			}
			if got := b.Text("form.who span"); got != c.uid {
				t.Errorf("header names %q, want %s", got, c.uid)
			}
			if got := b.Texts("header nav a"); !slices.Equal(got, nav) {
				t.Errorf("navigation %q, want %q", got, nav)
			}
			if got := b.Text(`header nav a[aria-current="page"]`); got != "Overview" {
				t.Errorf("current navigation entry %q", got)
			}
			if got := b.Texts("table.pools tbody th[scope=row] a"); !slices.Equal(got, c.pools) {
				t.Errorf("pools shown %q, want %q", got, c.pools)
			}
			// The host table has only the visible pools' hosts.
			for _, p := range b.Texts("table.hosts tbody td:nth-child(2)") {
				if !slices.Contains(c.pools, p) {
					t.Errorf("the host table shows a host of %s", p)
				}
			}
			if n := b.Count("table.hosts tbody tr"); n == 0 {
				t.Errorf("no hosts on the overview")
			}
			if c.uid == "admin" {
				b.Screenshot("overview")
			}
			if code := b.Logout(); code != http.StatusOK || !strings.HasPrefix(b.Path(), "/ui/login") {
				t.Errorf("logout: status %d at %s", code, b.Path())
			}
		})
	}

	t.Run("hostile description", func(t *testing.T) {
		const evil = `<img src=x onerror=alert(1)> <script>window.pwned=1</script>`
		updateSite(t, e, func(s *model.Site) {
			for i := range s.Pools {
				if s.Pools[i].Name == "lab-a" {
					s.Pools[i].Description = evil
				}
			}
		})
		b := browser.New(t, e.HTTP.URL)
		b.Login("admin", testenv.AdminPassword)
		if got := b.Text("table.pools .desc"); got != evil {
			t.Errorf("lab-a's description shows as %q, want the literal text %q", got, evil)
		}
		if n := b.Count("main img, main script"); n != 0 {
			t.Errorf("the description made %d elements", n)
		}
		if got := b.TypeOf("window.pwned"); got != "undefined" {
			t.Errorf("the description's script ran: typeof window.pwned = %s", got)
		}
		if d := b.Dialogs(); len(d) != 0 {
			t.Errorf("dialogs opened: %q", d)
		}
	})

	t.Run("CSRF and logout", func(t *testing.T) {
		b := browser.New(t, e.HTTP.URL)
		b.Login("pia", "pia-secret")
		// Remove the logout form's token (DevTools evaluation: the CSP does not apply),
		// then post the form: refused, and the session stays.
		b.Eval(`document.querySelector("form.who input[name=csrf]").remove()`, nil)
		if code := b.Logout(); code != http.StatusForbidden {
			t.Errorf("logout without the CSRF token: status %d, want 403", code)
		}
		if got := b.Text("main"); !strings.Contains(got, "missing or wrong CSRF token") {
			t.Errorf("403 page says %q", got)
		}
		if code := b.Go("/ui/"); code != http.StatusOK || b.Path() != "/ui/" || b.Text("form.who span") != "pia" {
			t.Fatalf("after the refused logout: status %d at %s, want still logged in", code, b.Path())
		}
		if code := b.Logout(); code != http.StatusOK || !strings.HasPrefix(b.Path(), "/ui/login") {
			t.Errorf("logout: status %d at %s", code, b.Path())
		}
		// The session is gone: the overview asks to log in again, and so does the cookie
		// the browser might still send.
		b.Go("/ui/")
		if p := b.Path(); !strings.HasPrefix(p, "/ui/login") || b.Exists("form.who") {
			t.Errorf("after logout /ui/ ended at %s", p)
		}
	})
}

// updateSite changes the site as the site admin: read, edit, write back.
func updateSite(t *testing.T, e *testenv.Env, edit func(*model.Site)) {
	t.Helper()
	var site model.Site
	if _, err := e.Admin().Get("/api/v1/site", nil, &site); err != nil {
		t.Fatalf("read the site: %v", err)
	}
	edit(&site)
	if err := e.Admin().Send("PUT", "/api/v1/site", nil, &site, nil); err != nil {
		t.Fatalf("write the site: %v", err)
	}
}
