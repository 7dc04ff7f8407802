package web_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
)

// browser is an HTTP client with a cookie jar, as a browser keeps the session cookie.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, e *testenv.Env) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: e.HTTP.URL, c: &http.Client{Jar: jar}}
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	res, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// post sends a form as the page would: with the Origin header browsers add.
func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	return b.postBody(path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
}

// postBody posts a body of the given content type as a page's form would.
func (b *browser) postBody(path, contentType string, body io.Reader) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, body)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Origin", b.base)
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(got)
}

func (b *browser) login(uid, pw string) {
	b.t.Helper()
	code, body := b.post("/ui/login", url.Values{"uid": {uid}, "password": {pw}, "next": {"/ui/"}})
	if code != http.StatusOK || !strings.Contains(body, "Log out") {
		b.t.Fatalf("login as %s: %d\n%s", uid, code, body)
	}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the session's token from a page.
func (b *browser) csrf(page string) string {
	b.t.Helper()
	_, body := b.get(page)
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s", page)
	}
	return m[1]
}

func TestLoginOverviewLogout(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	b := newBrowser(t, e)
	if code, body := b.get("/ui/"); code != http.StatusOK || !strings.Contains(body, `action="/ui/login"`) {
		t.Fatalf("anonymous overview: %d, want the login form", code)
	}
	if code, body := b.post("/ui/login", url.Values{"uid": {"admin"}, "password": {"wrong"}}); code != http.StatusUnauthorized || !strings.Contains(body, "invalid user name or password") {
		t.Fatalf("wrong password: %d\n%s", code, body)
	}
	b.login("admin", testenv.AdminPassword)
	code, body := b.get("/ui/")
	if code != http.StatusOK {
		t.Fatalf("overview: %d", code)
	}
	site := testenv.ExampleSite(t)
	for _, h := range site.Hosts[:3] {
		if !strings.Contains(body, ">"+h.Name+"<") {
			t.Errorf("overview lacks host %s", h.Name)
		}
	}
	// A form without its token is refused, and so is one with the token from another origin.
	if code, _ := b.post("/ui/logout", url.Values{}); code != http.StatusForbidden {
		t.Errorf("logout without CSRF token: %d, want 403", code)
	}
	tok := b.csrf("/ui/")
	if code, _ := b.post("/ui/logout", url.Values{"csrf": {tok}}); code != http.StatusOK {
		t.Errorf("logout: %d", code)
	}
	if _, body := b.get("/ui/"); !strings.Contains(body, `action="/ui/login"`) {
		t.Errorf("after logout the overview does not ask to log in")
	}
}
