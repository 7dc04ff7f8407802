package web

// Desktop logins (docs/desktop.md "Logins"): where the site's desktops, and each pool's
// where it has its own, find and check the accounts of the people at the seat. Every role
// that reads the site reads the page (the configuration holds no secret: bind password
// and keytabs stay on the site manager, --desktop-secrets); the forms are shown to site
// admins. Saving and removing is service.Entities.PutDesktopLogin, the API's operation
// (PUT|DELETE /api/v1/site/desktop-login), which validates the configuration and
// authorises the change: the handler only decodes the form and shows the answer. The
// page also holds the site's printing, "Printing (site default)" (printing.go).

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func (u *UI) desktopLoginRoutes() {
	m := u.mux
	m.HandleFunc("GET "+Prefix+"desktop-login", u.page(u.desktopLoginPage))
	m.HandleFunc("POST "+Prefix+"desktop-login", u.page(u.desktopLoginPost))
}

// siteScope is the form's scope value for the site's own configuration; any other value
// names a pool. "@" is in no pool name (names.Name), so a pool named "site" keeps its form.
const siteScope = "@site"

// loginForm is one scope's form: the text the user typed (lists one item per line) and
// the errors by field (provider, uris, searchBase, bindDN, caCert, realm, kdcs, domain;
// "" : the whole form).
type loginForm struct {
	Provider, URIs, SearchBase, BindDN, CACert, Realm, KDCs, Domain string
	Err                                                             map[string]string
}

func formOf(d *model.DesktopLogin) loginForm {
	f := loginForm{Err: map[string]string{}}
	if d != nil {
		f.Provider, f.SearchBase, f.BindDN, f.CACert, f.Realm, f.Domain = string(d.Provider), d.SearchBase, d.BindDN, d.CACert, d.Realm, d.Domain
		f.URIs, f.KDCs = strings.Join(d.URIs, "\n"), strings.Join(d.KDCs, "\n")
	}
	return f
}

func readLoginForm(q *Req) loginForm {
	// Browsers send a textarea's lines ending in CRLF.
	v := func(k string) string { return strings.ReplaceAll(strings.TrimSpace(q.PostFormValue(k)), "\r\n", "\n") }
	return loginForm{Provider: v("provider"), URIs: v("uris"), SearchBase: v("searchBase"), BindDN: v("bindDN"),
		CACert: v("caCert"), Realm: v("realm"), KDCs: v("kdcs"), Domain: v("domain"),
		Err: map[string]string{}}
}

// lines are a textarea's non-empty lines, trimmed.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// config is the form as the model's configuration (judged by the service).
func (f *loginForm) config() *model.DesktopLogin {
	d := &model.DesktopLogin{Provider: model.LoginProvider(f.Provider), URIs: lines(f.URIs), SearchBase: f.SearchBase,
		BindDN: f.BindDN, Realm: f.Realm, KDCs: lines(f.KDCs), Domain: f.Domain}
	if f.CACert != "" {
		d.CACert = f.CACert + "\n"
	}
	return d
}

// loginFields are the fields a form has, by the model's (JSON) names.
var loginFields = []string{"provider", "uris", "searchBase", "bindDN", "caCert", "realm", "kdcs", "domain"}

// seatErrorField is the field of a seat form (fields of the model's field what, e.g.
// "desktopLogin") that the service's message names: "what.field: …" for the site (pool
// ""), "pool NAME what.field: …" for pool NAME; "" when it names none of them (then the
// message is the whole form's).
func seatErrorField(pool, what string, fields []string, msg string) string {
	if pool != "" {
		var ok bool
		if msg, ok = strings.CutPrefix(msg, "pool "+pool+" "); !ok {
			return ""
		}
	}
	rest, ok := strings.CutPrefix(msg, what+".")
	if !ok {
		return ""
	}
	f, _, ok := strings.Cut(rest, ":")
	if !ok || !slices.Contains(fields, f) {
		return ""
	}
	return f
}

// LoginScope is one scope on the page: the site, or a pool.
type LoginScope struct {
	Scope   string // the form's scope value: siteScope or the pool's name
	Pool    string // "" : the site
	Anchor  string // the element id of its section
	Own     *model.DesktopLogin
	InForce string // for a pool without its own: what its PCs use ("the site's", "nothing: …")
	Form    loginForm
	FormErr string
	Open    bool // a pool without its own configuration shows its form unfolded
}

// Label names the scope in sentences and buttons.
func (s LoginScope) Label() string {
	if s.Pool == "" {
		return "the site"
	}
	return "pool " + s.Pool
}

type desktopLoginPage struct {
	Page
	CanEdit   bool
	Providers []string
	SiteScope LoginScope // not Site: Page.Site is the site's name
	Pools     []LoginScope
	// The site's printing (printing.go): CanEditPrinting offers its form (site admins),
	// PoolPrintings are the visible pools with their own, PrintFailed when a POST of the
	// form was refused.
	CanEditPrinting bool
	SitePrinting    *model.Printing
	PoolPrintings   []PoolPrinting
	Print           printingForm
	PrintFailed     bool
	// The site's homes (homes.go), like its printing.
	SiteHomes   *model.Homes
	PoolHomes   []PoolHomes
	HomesF      homesForm
	HomesFailed bool
}

// MayEditDesktopLogin reports whether the page offers the forms (the service's authz
// decides each change: a site admin only).
func MayEditDesktopLogin(q *Req) bool { return q.P.SiteAdmin }

func (u *UI) desktopLoginPage(q *Req) {
	u.renderDesktopLogin(q, http.StatusOK, nil)
}

// loginSummary says in a few words what a configuration is ("" for nil).
func loginSummary(d *model.DesktopLogin) string {
	if d == nil {
		return ""
	}
	var where string
	switch {
	case d.Realm != "":
		where = d.Realm
	case len(d.URIs) > 0:
		where = d.URIs[0]
	}
	if where == "" {
		return string(d.Provider)
	}
	return string(d.Provider) + ", " + where
}

// renderDesktopLogin shows the page; failed, if not nil, is the scope whose POST was
// refused, with the user's input and errors, shown instead of what is stored.
func (u *UI) renderDesktopLogin(q *Req, status int, failed *LoginScope) {
	u.renderDesktopLoginPage(q, status, failed, nil, nil)
}

// renderDesktopLoginPage is renderDesktopLogin, with printFailed or homesFailed, if not
// nil, the site's printing or homes form whose POST was refused.
func (u *UI) renderDesktopLoginPage(q *Req, status int, failed *LoginScope, printFailed *printingForm, homesFailed *homesForm) {
	site := q.Snap.Site
	pg := desktopLoginPage{Page: u.Base(q, "Desktop logins", "desktop-login"), CanEdit: MayEditDesktopLogin(q),
		CanEditPrinting: q.P.SiteAdmin, SitePrinting: site.Printing, Print: printingFormOf(site.Printing),
		SiteHomes: site.Homes, HomesF: homesFormOf(site.Homes)}
	for _, p := range model.LoginProviders {
		pg.Providers = append(pg.Providers, string(p))
	}
	scope := func(s LoginScope) LoginScope {
		s.Form = formOf(s.Own)
		if failed != nil && failed.Scope == s.Scope && failed.Pool == s.Pool {
			s.Form, s.FormErr, s.Open = failed.Form, failed.FormErr, true
		}
		return s
	}
	pg.SiteScope = scope(LoginScope{Scope: siteScope, Anchor: "site", Own: site.DesktopLogin})
	for _, name := range VisiblePools(q) {
		p := site.Pool(name)
		s := LoginScope{Scope: name, Pool: name, Anchor: "pool-" + name, Own: p.DesktopLogin}
		if p.DesktopLogin == nil {
			s.InForce = "the site's"
			if site.DesktopLogin == nil {
				s.InForce = "nothing: only local accounts"
			}
		}
		pg.Pools = append(pg.Pools, scope(s))
		if p.Printing != nil {
			pg.PoolPrintings = append(pg.PoolPrintings, PoolPrinting{Pool: name, Own: p.Printing})
		}
		if p.Homes != nil {
			pg.PoolHomes = append(pg.PoolHomes, PoolHomes{Pool: name, Own: p.Homes})
		}
	}
	if printFailed != nil {
		pg.Print, pg.PrintFailed = *printFailed, true
		pg.Error = "the site's printing was not saved: see its form"
		if len(printFailed.Err) > 0 {
			pg.Error = "the site's printing was not saved: see the marked fields"
		}
		if !pg.CanEditPrinting {
			pg.Error = printFailed.FormErr
			for _, e := range printFailed.Err {
				pg.Error = e
			}
		}
	}
	if homesFailed != nil {
		pg.HomesF, pg.HomesFailed = *homesFailed, true
		pg.Error = "the site's homes were not saved: see its form"
		if len(homesFailed.Err) > 0 {
			pg.Error = "the site's homes were not saved: see the marked fields"
		}
		if !pg.CanEditPrinting {
			pg.Error = homesFailed.FormErr
			for _, e := range homesFailed.Err {
				pg.Error = e
			}
		}
	}
	if failed != nil {
		pg.Error = "the desktop login of " + failed.Label() + " was not saved: see its form"
		if len(failed.Form.Err) > 0 {
			pg.Error = "the desktop login of " + failed.Label() + " was not saved: see the marked fields"
		}
		if !pg.CanEdit || !failed.inPage(&pg) {
			// No form shows it (a role without forms, a pool the user does not see):
			// the message is the page's.
			pg.Error = failed.FormErr
			for _, e := range failed.Form.Err {
				pg.Error = e
			}
		}
	}
	u.Render(q, status, "desktoplogin", pg)
}

// inPage reports whether s is one of the page's scopes.
func (s *LoginScope) inPage(pg *desktopLoginPage) bool {
	if s.Pool == "" {
		return true
	}
	for _, p := range pg.Pools {
		if p.Pool == s.Pool {
			return true
		}
	}
	return false
}

// changedLoginFields names the fields that differ between two configurations.
func changedLoginFields(a, b *model.DesktopLogin) []string {
	fa, fb := formOf(a), formOf(b)
	va := []string{fa.Provider, fa.URIs, fa.SearchBase, fa.BindDN, fa.CACert, fa.Realm, fa.KDCs, fa.Domain}
	vb := []string{fb.Provider, fb.URIs, fb.SearchBase, fb.BindDN, fb.CACert, fb.Realm, fb.KDCs, fb.Domain}
	var out []string
	for i, f := range loginFields {
		if va[i] != vb[i] {
			out = append(out, f)
		}
	}
	return out
}

func (u *UI) desktopLoginPost(q *Req) {
	scope := strings.TrimSpace(q.PostFormValue("scope"))
	s := LoginScope{Scope: scope, Pool: scope}
	if scope == siteScope {
		s.Pool = ""
	}
	if scope == "" {
		u.Fail(q, http.StatusBadRequest, "the form names no scope (the site or a pool)")
		return
	}
	var before *model.DesktopLogin
	if s.Pool == "" {
		before = q.Snap.Site.DesktopLogin
	} else if p := q.Snap.Site.Pool(s.Pool); p != nil {
		before = p.DesktopLogin
	}
	var d *model.DesktopLogin
	switch action := q.PostFormValue("action"); action {
	case "save":
		s.Form = readLoginForm(q)
		d = s.Form.config()
	case "remove":
		s.Form = formOf(before)
	default:
		u.Fail(q, http.StatusBadRequest, fmt.Sprintf("unknown action %q (save or remove)", action))
		return
	}
	changes, err := u.svc.Entities.PutDesktopLogin(q.Context(), q.P, false, s.Pool, d)
	u.wrote(false, changes, err)
	if err != nil {
		status, msg := ErrorStatus(err)
		if f := seatErrorField(s.Pool, "desktopLogin", loginFields, msg); f != "" {
			s.Form.Err[f] = msg
		} else {
			s.FormErr = msg
		}
		u.opt.Log.Info("UI: desktop login refused", "user", q.P.UID, "scope", s.Scope, "err", err)
		u.renderDesktopLogin(q, status, &s)
		return
	}
	var msg string
	switch {
	case len(changes) == 0:
		msg = "the desktop login of " + s.Label() + ": nothing changed"
	case d == nil && s.Pool == "":
		msg = "the site's desktop login removed: PCs without a pool's own configuration have no university logins"
	case d == nil:
		msg = "pool " + s.Pool + "'s own desktop login removed: its PCs use the site's"
	case before == nil:
		msg = "the desktop login of " + s.Label() + " set (" + loginSummary(d) + ")"
	default:
		msg = "the desktop login of " + s.Label() + " saved: " + strings.Join(changedLoginFields(before, d), ", ") + " changed"
	}
	anchor := "site"
	if s.Pool != "" {
		anchor = "pool-" + s.Pool
	}
	u.Done(q, Prefix+"desktop-login#"+anchor, msg)
}

// scopeView is what the form template gets: one scope with the page's token and choices.
type scopeView struct {
	Page      Page
	Providers []string
	S         LoginScope
}

// With is s with the page's token and choices, for the form template.
func (pg desktopLoginPage) With(s LoginScope) scopeView {
	return scopeView{Page: pg.Page, Providers: pg.Providers, S: s}
}
