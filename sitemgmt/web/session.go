package web

// Sessions: a login (an LDAP bind through service.Login, the same identities as the API)
// opens a server-side session whose random id travels in an HttpOnly, SameSite=Lax
// cookie (Secure when the client's connection is TLS: this server's own, or a trusted
// reverse proxy's that says X-Forwarded-Proto: https, see sitemgmt/trustproxy). Roles are not stored in the session:
// every request derives them from the snapshot in force (authz.For), so a role taken
// away applies at the next click. Each session has a CSRF token that every form posts
// back (synchronizer token); a POST without it, or from another origin, is refused.
//
// Sessions live in the memory of one `overtime serve` process: replicas behind a load
// balancer need sticky sessions for the UI (the API's HTTP Basic needs nothing).

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/service"
)

// CookieName is the session cookie.
const CookieName = "overtime_ui"

// csrfField is the form field (and X-CSRF-Token the header) carrying the token.
const csrfField = "csrf"

type session struct {
	id      string
	login   service.Login
	csrf    string
	created time.Time
	seen    time.Time
}

type sessions struct {
	mu   sync.Mutex
	m    map[string]*session
	idle time.Duration // a session unused this long ends
	max  time.Duration // and every session ends this long after login
}

func newSessions(idle, max time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, idle: idle, max: max}
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// open starts a session for a login that just succeeded (a fresh id: no fixation).
func (s *sessions) open(l service.Login, now time.Time) *session {
	se := &session{id: randomToken(), login: l, csrf: randomToken(), created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	s.m[se.id] = se
	return se
}

// get finds a live session and marks it used.
func (s *sessions) get(id string, now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[id]
	if se == nil {
		return nil
	}
	if now.Sub(se.seen) > s.idle || now.Sub(se.created) > s.max {
		delete(s.m, id)
		return nil
	}
	se.seen = now
	return se
}

func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// sweep drops ended sessions (called with mu held, on each login: bounded work).
func (s *sessions) sweep(now time.Time) {
	for id, se := range s.m {
		if now.Sub(se.seen) > s.idle || now.Sub(se.created) > s.max {
			delete(s.m, id)
		}
	}
}

func (u *UI) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: u.opt.TrustedProxies.TLS(r), SameSite: http.SameSiteLaxMode})
}

// sessionOf is the request's live session (nil: not logged in).
func (u *UI) sessionOf(r *http.Request) *session {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	return u.sess.get(c.Value, u.opt.Now())
}

// validCSRF checks the token a form or fetch sent against the session's.
func validCSRF(r *http.Request, se *session) bool {
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = r.PostFormValue(csrfField)
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(se.csrf)) == 1
}

// sameOrigin refuses a state-changing request whose Origin (or, without one, Referer)
// names another site; browsers send one of them with every POST.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" || o == "null" {
		return o == "" // no header at all: not a browser's cross-site form
	}
	p, err := url.Parse(o)
	return err == nil && strings.EqualFold(p.Host, r.Host)
}

// localNext is where to go after login: a path under the UI, never another site.
func localNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}
