// Package web is the site manager's web interface for pool administrators, lecturers and
// viewers (docs/admin-guide.md, docs/lecturer-guide.md): server-rendered HTML from Go
// templates under /ui/, with a little vendored-free JavaScript only where interaction
// needs it (the schedule grid). Like the JSON API (sitemgmt/api), it only decodes,
// authorises and encodes: every change goes through service.Update with the user's
// principal as authoriser, so a role the UI hides a button from is refused by the
// server regardless.
//
// Security: sessions and CSRF tokens (session.go), html/template's contextual escaping
// for every user-supplied string, a Content-Security-Policy without inline scripts.
package web

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/loginguard"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/sitemgmt/trustproxy"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Prefix is where the UI is mounted.
const Prefix = "/ui/"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the UI.
type Options struct {
	// Now is the clock (the API's: a demo's fixed instant applies here too).
	Now func() time.Time
	Log *slog.Logger
	// BootServer is the boot server this instance speaks for (as api.Options).
	BootServer string
	// SessionIdle ends a session unused this long (default 8 h); SessionMax any session
	// this long after its login (default 24 h).
	SessionIdle, SessionMax time.Duration
	// OnWrite is told the outcome of every site write the UI makes (the API's metrics:
	// overtime_site_writes_total counts the UI's writes with the API's).
	OnWrite func(dryRun bool, changes []model.Change, err error)
	// TrustedProxies are the reverse proxies whose X-Forwarded-For and X-Forwarded-Proto
	// are believed (as api.Options): the address the login throttle counts, and whether
	// the session cookie is Secure behind a proxy that terminates TLS.
	TrustedProxies trustproxy.Proxies
}

// UI serves the pages.
type UI struct {
	svc   *service.Service
	opt   Options
	sess  *sessions
	mux   *http.ServeMux
	pages map[string]*template.Template
}

// New builds the UI's handler tree.
func New(svc *service.Service, opt Options) *UI {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.SessionIdle <= 0 {
		opt.SessionIdle = 8 * time.Hour
	}
	if opt.SessionMax <= 0 {
		opt.SessionMax = 24 * time.Hour
	}
	u := &UI{svc: svc, opt: opt, sess: newSessions(opt.SessionIdle, opt.SessionMax), mux: http.NewServeMux()}
	u.parseTemplates()
	u.routes()
	return u
}

func (u *UI) routes() {
	m := u.mux
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", staticHandler(http.FileServerFS(static))))
	m.HandleFunc("GET "+Prefix+"login", u.loginPage)
	m.HandleFunc("POST "+Prefix+"login", u.loginPost)
	m.HandleFunc("POST "+Prefix+"logout", u.page(u.logout))
	m.HandleFunc("GET "+Prefix+"{$}", u.page(u.overview))
	u.poolRoutes()
	u.scheduleRoutes()
	u.imageRoutes()
	u.desktopLoginRoutes()
	u.printingRoutes()
	u.homesRoutes()
	u.lecturerRoutes()
	u.harvestRoutes()
	u.auditRoutes()
}

// staticHandler sets long caching off (the files change with the binary) and nosniff.
func staticHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			u.opt.Log.Error("panic in UI handler", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	h := w.Header()
	// No inline script anywhere: a string that escaped its context still could not run.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	u.mux.ServeHTTP(w, r)
}

// ---- the request's user ----

// Req is what a page handler gets: the request, its user and the snapshot in force.
type Req struct {
	*http.Request
	W    http.ResponseWriter
	P    authz.Principal
	Sess *session
	Snap *service.Snapshot
	Now  time.Time
}

// page wraps a handler that needs a logged-in user with a role in the site; POSTs also
// need the session's CSRF token and a same-origin request.
func (u *UI) page(h func(q *Req)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		se := u.sessionOf(r)
		if se == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			u.fail(w, r, nil, http.StatusUnauthorized, "your session has ended: log in again")
			return
		}
		snap := u.svc.Snapshot()
		p := authz.For(snap.Site, se.login.UID, se.login.Grants...)
		p.External = se.login.External
		q := &Req{Request: r, W: w, P: p, Sess: se, Snap: snap, Now: u.opt.Now()}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if !sameOrigin(r) || !validCSRF(r, se) {
				u.fail(w, r, q, http.StatusForbidden, "form refused: missing or wrong CSRF token (reload the page and try again)")
				return
			}
		}
		if r.URL.Path != Prefix+"logout" && !p.CanRead() {
			u.fail(w, r, q, http.StatusForbidden, "user "+p.UID+" has no role in this site")
			return
		}
		q.Request = r.WithContext(service.WithUser(r.Context(), p.UID, u.opt.Now))
		h(q)
	}
}

// maxForm bounds a form post (a CSV import of a large pool fits many times over).
const maxForm = 16 << 20

// ---- rendering ----

// Page is the data every template gets; pages embed it.
type Page struct {
	Title   string
	User    string
	Roles   []string
	CSRF    string
	Nav     string // which menu entry is current
	Flash   string // a success message from the previous POST (?done=...)
	Error   string // an error for the whole page
	Prefix  string
	P       authz.Principal
	Now     time.Time
	Site    string
	Version string
}

// Base is the Page for q (title and nav filled by the page).
func (u *UI) Base(q *Req, title, nav string) Page {
	pg := Page{Title: title, Nav: nav, Prefix: Prefix, Now: q.Now, Site: q.Snap.Site.Name}
	if q.Sess != nil {
		pg.User, pg.CSRF, pg.P, pg.Roles = q.P.UID, q.Sess.csrf, q.P, q.P.Roles()
	}
	if q.Request != nil {
		pg.Flash = q.URL.Query().Get("done")
	}
	return pg
}

// funcs are the templates' functions. Times are shown in the site's time zone (the
// snapshot's, looked up per call: an administrator may change it).
func (u *UI) funcs() template.FuncMap {
	local := func(t time.Time) time.Time { return t.In(u.svc.Snapshot().Engine.Location()) }
	return template.FuncMap{
		"join": strings.Join,
		"clock": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return local(t).Format("Mon 15:04")
		},
		"datetime": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return local(t).Format("2006-01-02 15:04")
		},
		"ago": func(now, t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return humanDuration(now.Sub(t)) + " ago"
		},
		"pct":      func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
		"f1":       func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"add":      func(a, b int) int { return a + b },
		"sub":      func(a, b int) int { return a - b },
		"slowdown": slowdownRange,
		"hours":    func(sec float64) string { return fmt.Sprintf("%.2f", sec/3600) },
		"query": func(kv ...string) string {
			v := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					v.Set(kv[i], kv[i+1])
				}
			}
			if len(v) == 0 {
				return ""
			}
			return "?" + v.Encode()
		},
	}
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// parseTemplates builds one template set per page: the layout plus the page's file
// (each page defines "title" and "content"; pages may add "head").
func (u *UI) parseTemplates() {
	base := template.Must(template.New("layout.html").Funcs(u.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/partials.html"))
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	u.pages = map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/"), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		u.pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, f))
	}
}

// render writes a page with the layout; the whole page is rendered before a byte is
// sent, so a template error is a clean 500, not half a page.
func (u *UI) render(w http.ResponseWriter, status int, name string, data any) {
	t := u.pages[name]
	if t == nil {
		panic("web: no template " + name)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", data); err != nil {
		u.opt.Log.Error("rendering a page", "page", name, "err", err)
		http.Error(w, "internal error rendering "+name, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// Render is render for q's response.
func (u *UI) Render(q *Req, status int, name string, data any) { u.render(q.W, status, name, data) }

type errorPage struct {
	Page
	Status int
}

// fail answers with an error page (q nil: before the user is known).
func (u *UI) fail(w http.ResponseWriter, r *http.Request, q *Req, status int, msg string) {
	var pg Page
	if q != nil {
		pg = u.Base(q, http.StatusText(status), "")
	} else {
		pg = Page{Title: http.StatusText(status), Prefix: Prefix, Now: u.opt.Now(), Site: u.svc.Snapshot().Site.Name}
	}
	pg.Error = msg
	u.render(w, status, "error", errorPage{Page: pg, Status: status})
}

// Fail answers q with an error page.
func (u *UI) Fail(q *Req, status int, msg string) { u.fail(q.W, q.Request, q, status, msg) }

// ErrorStatus maps the service's errors to a status and a message for the user.
// (errstatus.Of, the API's mapping too).
func ErrorStatus(err error) (int, string) {
	status, msg, _ := errstatus.Of(err)
	return status, msg
}

// wrote reports a write made by a named operation of the service (every change the UI
// makes is one) to the write metrics, and passes its result on.
func (u *UI) wrote(dryRun bool, changes []model.Change, err error) ([]model.Change, error) {
	if u.opt.OnWrite != nil {
		u.opt.OnWrite(dryRun, changes, err)
	}
	return changes, err
}

// Done redirects after a successful POST (post/redirect/get) with a message; path may
// end in a #fragment (the message goes before it).
func (u *UI) Done(q *Req, path, msg string) {
	path, frag, hasFrag := strings.Cut(path, "#")
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	to := path + sep + "done=" + url.QueryEscape(msg)
	if hasFrag {
		to += "#" + frag
	}
	http.Redirect(q.W, q.Request, to, http.StatusSeeOther)
}

// ---- login ----

type loginPage struct {
	Page
	UID  string
	Next string
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	pg := Page{Title: "Log in", Prefix: Prefix, Now: u.opt.Now(), Site: u.svc.Snapshot().Site.Name}
	u.render(w, http.StatusOK, "login", loginPage{Page: pg, Next: localNext(r.URL.Query().Get("next"))})
}

func (u *UI) loginPost(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	pg := Page{Title: "Log in", Prefix: Prefix, Now: u.opt.Now(), Site: u.svc.Snapshot().Site.Name}
	uid, pw, next := r.PostFormValue("uid"), r.PostFormValue("password"), localNext(r.PostFormValue("next"))
	again := func(status int, msg string) {
		pg.Error = msg
		u.render(w, status, "login", loginPage{Page: pg, UID: uid, Next: next})
	}
	if !sameOrigin(r) {
		again(http.StatusForbidden, "login refused: the form came from another site")
		return
	}
	if uid == "" || pw == "" {
		again(http.StatusBadRequest, "enter your user name and password")
		return
	}
	if model.ValidUID(uid) != nil {
		again(http.StatusUnauthorized, "invalid user name or password")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	from := u.opt.TrustedProxies.Client(r)
	l, err := u.svc.Accounts.Login(ctx, uid, pw, from)
	if err != nil {
		if wait, ok := service.IsThrottled(err); ok {
			// The service refused before trying the password (sitemgmt/loginguard).
			u.opt.Log.Info("UI login throttled", "uid", uid, "from", from.String(), "wait", wait.String())
			w.Header().Set("Retry-After", loginguard.RetryAfter(wait))
			again(http.StatusTooManyRequests, err.Error())
			return
		}
		if service.IsInvalidCredentials(err) {
			u.opt.Log.Info("UI login refused", "uid", uid)
			again(http.StatusUnauthorized, "invalid user name or password")
			return
		}
		u.opt.Log.Error("UI login: directory unavailable", "uid", uid, "err", err)
		again(http.StatusServiceUnavailable, "the directory cannot be asked now; try again in a minute")
		return
	}
	se := u.sess.open(l, u.opt.Now())
	u.setCookie(w, r, se.id, 0)
	u.opt.Log.Info("UI login", "uid", uid)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *UI) logout(q *Req) {
	u.sess.close(q.Sess.id)
	u.setCookie(q.W, q.Request, "", -1)
	http.Redirect(q.W, q.Request, Prefix+"login", http.StatusSeeOther)
}

// ---- helpers for pages ----

// Paging is where a paged table is: page PageNo (1-based) of Pages, Total rows in all.
type Paging struct{ PageNo, Pages, Total int }

// pageOf is the page of n rows (size a page) that q asks for with ?page=, clamped to the
// pages there are, and the rows [from, to) it shows.
func pageOf(q *Req, n, size int) (p Paging, from, to int) {
	p.Total = n
	p.Pages = (n + size - 1) / size
	p.PageNo, _ = strconv.Atoi(q.URL.Query().Get("page"))
	p.PageNo = max(1, min(p.PageNo, p.Pages))
	from = (p.PageNo - 1) * size
	return p, from, min(from+size, n)
}

// VisiblePools are the pools q's user may look at in the UI: all for site admins and
// viewers, otherwise those they hold a role in. (The UI is stricter than the API's
// read endpoints: a pool admin works on their pools and is not shown the others.)
func VisiblePools(q *Req) []string {
	var out []string
	for _, p := range q.Snap.Site.Pools {
		if MaySeePool(q.P, p.Name) {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// MaySeePool reports whether p may look at pool's pages.
func MaySeePool(p authz.Principal, pool string) bool {
	return p.SiteAdmin || p.Viewer || p.PoolAdmin[pool] || p.Lecturer[pool]
}

// MayAdminPool reports whether p may change pool's hosts and schedule (the server's
// authz.Check decides each change; this only decides which controls are shown).
func MayAdminPool(p authz.Principal, pool string) bool { return p.SiteAdmin || p.PoolAdmin[pool] }
