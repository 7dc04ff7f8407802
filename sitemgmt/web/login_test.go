package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/web"
)

// postLogin posts the login form with the given proxy headers, not following the
// redirect: the response (its Set-Cookie) and body.
func postLogin(t *testing.T, e *testenv.Env, uid, pw string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	form := url.Values{"uid": {uid}, "password": {pw}, "next": {"/ui/"}}
	req, _ := http.NewRequest("POST", e.HTTP.URL+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.HTTP.URL)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func sessionCookie(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == web.CookieName {
			return c
		}
	}
	return nil
}

// The login form is throttled like the API (the same throttle, in the service): after
// the free failures the page says to wait, with Retry-After, and does not try the
// password; after the wait the right password logs in. An unknown user is answered the
// same way.
func TestLoginFormThrottled(t *testing.T) {
	e, clk, cfg := testenv.NewThrottled(t, "127.0.0.1/32")
	var throttledText string
	for i, uid := range []string{"alice", "nosuchuser"} {
		from := map[string]string{"X-Forwarded-For": "198.51.100." + string(rune('1'+i))}
		for i := 0; i <= cfg.Name.Free; i++ {
			if res, body := postLogin(t, e, uid, "guess", from); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "invalid user name or password") {
				t.Fatalf("%s, guess %d: %d\n%s", uid, i+1, res.StatusCode, body)
			}
		}
		res, body := postLogin(t, e, uid, uid+"-secret", from)
		msg := "too many failed logins for this user name or from this address: try again in 1s"
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" || !strings.Contains(body, msg) || sessionCookie(res) != nil {
			t.Fatalf("%s after %d failures: %d, Retry-After %q, want 429 with the login page saying %q and no session\n%s", uid, cfg.Name.Free+1, res.StatusCode, res.Header.Get("Retry-After"), msg, body)
		}
		if !strings.Contains(body, `action="/ui/login"`) {
			t.Fatalf("%s throttled: not the login page\n%s", uid, body)
		}
		if uid == "alice" {
			throttledText = msg
		} else if !strings.Contains(body, throttledText) {
			t.Fatalf("unknown user throttled with other words than alice\n%s", body)
		}
	}
	clk.Add(time.Second)
	res, body := postLogin(t, e, "alice", "alice-secret", map[string]string{"X-Forwarded-For": "198.51.100.1"})
	if res.StatusCode != http.StatusSeeOther || sessionCookie(res) == nil {
		t.Fatalf("alice after the wait: %d\n%s", res.StatusCode, body)
	}
}

// Behind a reverse proxy that terminates TLS, the session cookie is Secure when the
// proxy is trusted and says X-Forwarded-Proto: https; the same headers from a peer that
// is not a trusted proxy change nothing.
func TestSessionCookieSecureBehindTrustedProxy(t *testing.T) {
	https := map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}
	for _, tc := range []struct {
		name, trusted string
		hdr           map[string]string
		secure        bool
	}{
		{"trusted proxy, https", "127.0.0.1/32", https, true},
		{"trusted proxy, http", "127.0.0.1/32", map[string]string{"X-Forwarded-Proto": "http"}, false},
		{"untrusted peer says https", "192.0.2.0/24", https, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, _ := testenv.NewThrottled(t, tc.trusted)
			res, body := postLogin(t, e, "alice", "alice-secret", tc.hdr)
			c := sessionCookie(res)
			if res.StatusCode != http.StatusSeeOther || c == nil {
				t.Fatalf("login: %d, cookie %v\n%s", res.StatusCode, c, body)
			}
			if c.Secure != tc.secure || !c.HttpOnly {
				t.Fatalf("session cookie %q: Secure %v, want %v (HttpOnly %v)", res.Header.Get("Set-Cookie"), c.Secure, tc.secure, c.HttpOnly)
			}
		})
	}
}
