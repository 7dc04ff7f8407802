package web

// Homes (docs/desktop.md "Homes"): the file server whose per-user directory the PCs of a
// pool mount as the home at login. A pool's own is edited on its pool page, the site's,
// which the pools without their own use, on the Desktop logins page; both by site admins
// alone (authz: the home server gets the users' files and, for cifs, their passwords),
// unlike printing, whose pool's own is its pool admins'. The pool page offers the form
// to whom authz's MayChangeAll allows the pool's homes; the service checks every POST.
// Everyone who sees a pool reads what its PCs use. Saving and removing is service.Entities.PutHomes, which validates
// the configuration and authorises the change: the handlers only decode the form and
// show the answer.

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func (u *UI) homesRoutes() {
	m := u.mux
	m.HandleFunc("POST "+Prefix+"pools/{name}/homes", u.page(u.poolHomesPost))
	m.HandleFunc("POST "+Prefix+"desktop-login/homes", u.page(u.siteHomesPost))
}

// homesFields are the form's fields, named as in model.Homes (and in its errors).
var homesFields = []string{"type", "server", "path", "options"}

// homesForm is the homes form's input and its errors by field; FormErr: an error that
// names none.
type homesForm struct {
	Type, Server, Path, Options string
	Err                         map[string]string
	FormErr                     string
}

func homesFormOf(h *model.Homes) homesForm {
	f := homesForm{Type: model.HomesNFS, Err: map[string]string{}}
	if h != nil {
		f.Type, f.Server, f.Path, f.Options = h.Type, h.Server, h.Path, h.Options
	}
	return f
}

func readHomesForm(q *Req) homesForm {
	v := func(k string) string { return strings.TrimSpace(q.PostFormValue(k)) }
	return homesForm{Type: v("type"), Server: v("server"), Path: v("path"), Options: v("options"), Err: map[string]string{}}
}

// failed records the service's refusal msg at the field it names ("homes.server: …" for
// the site, "pool lab-a homes.server: …" for pool lab-a), else as the form's.
func (f *homesForm) failed(pool, msg string) {
	if field := seatErrorField(pool, "homes", homesFields, msg); field != "" {
		f.Err[field] = msg
		return
	}
	f.FormErr = msg
}

// homesSummary says where homes come from ("" for nil).
func homesSummary(h *model.Homes) string {
	if h == nil {
		return ""
	}
	return h.Type + " " + h.Server + " " + h.Path
}

// homesView is what the form template gets.
type homesView struct {
	Page   Page
	Action string // the form's URL
	ID     string // prefix of its fields' ids
	Label  string // "pool lab-a", "the site"
	Own    bool   // a configuration to remove exists
	Remove string // the Remove button's text
	Types  []string
	F      homesForm
}

// putHomes saves (action save: the form's values) or removes (action remove) the homes
// of pool ("": the site's), before being what was stored. It answers the form as the
// user sent it, with the service's refusal recorded at its field, and its status (200:
// saved, msg says what changed); status 0: the error page was sent.
func (u *UI) putHomes(q *Req, pool string, before *model.Homes) (f homesForm, status int, msg string) {
	label := "the site"
	if pool != "" {
		label = "pool " + pool
	}
	var h *model.Homes
	switch action := q.PostFormValue("action"); action {
	case "save":
		f = readHomesForm(q)
		h = &model.Homes{Type: f.Type, Server: f.Server, Path: f.Path, Options: f.Options}
	case "remove":
		f = homesFormOf(before)
	default:
		u.Fail(q, http.StatusBadRequest, fmt.Sprintf("unknown action %q (save or remove)", action))
		return f, 0, ""
	}
	changes, err := u.svc.Entities.PutHomes(q.Context(), q.P, false, pool, h)
	u.wrote(false, changes, err)
	if err != nil {
		status, msg := ErrorStatus(err)
		u.opt.Log.Info("UI: homes refused", "user", q.P.UID, "pool", pool, "err", err)
		if status == http.StatusForbidden || status == http.StatusNotFound {
			u.Fail(q, status, msg)
			return f, 0, ""
		}
		f.failed(pool, msg)
		return f, status, ""
	}
	site := q.Snap.Site // before the change: the site's homes are not changed by a pool's
	switch {
	case len(changes) == 0:
		msg = "homes of " + label + ": nothing changed"
	case h == nil && pool == "":
		msg = "the site's home server removed: the PCs of pools without their own give temporary homes"
	case h == nil && site.Homes != nil:
		msg = "pool " + pool + "'s own home server removed: its PCs use the site's (" + homesSummary(site.Homes) + ")"
	case h == nil:
		msg = "pool " + pool + "'s own home server removed: its PCs give temporary homes, as the site has none"
	default:
		msg = "homes of " + label + " come from " + homesSummary(h)
	}
	return f, http.StatusOK, msg
}

func (u *UI) poolHomesPost(q *Req) {
	p := u.poolOf(q, true)
	if p == nil {
		return
	}
	f, status, msg := u.putHomes(q, p.Name, p.Homes)
	switch {
	case status == 0:
	case status == http.StatusOK:
		u.Done(q, Prefix+"pools/"+p.Name+"#homes", msg)
	default:
		u.renderPool(q, p, status, hostForm{Err: map[string]string{}}, func(pg *poolPage) {
			pg.HomesF, pg.HomesFailed = f, true
			pg.Error = "the homes of pool " + p.Name + " were not saved: see its form"
			if len(f.Err) > 0 {
				pg.Error = "the homes of pool " + p.Name + " were not saved: see the marked fields"
			}
		})
	}
}

func (u *UI) siteHomesPost(q *Req) {
	f, status, msg := u.putHomes(q, "", q.Snap.Site.Homes)
	switch {
	case status == 0:
	case status == http.StatusOK:
		u.Done(q, Prefix+"desktop-login#homes", msg)
	default:
		u.renderDesktopLoginPage(q, status, nil, nil, &f)
	}
}

// ---- the pool page's section ----

// HomesForm is the pool's homes form.
func (pg poolPage) HomesForm() homesView {
	rm := "Remove (back to the site's)"
	if pg.SiteHomes == nil {
		rm = "Remove (the site has none)"
	}
	return homesView{Page: pg.Page, Action: pg.Prefix + "pools/" + pg.Pool.Name + "/homes#homes", ID: "homes",
		Label: "pool " + pg.Pool.Name, Own: pg.Pool.Homes != nil, Remove: rm, Types: homesTypes, F: pg.HomesF}
}

// ---- the Desktop logins page's section ----

// PoolHomes is a pool's own homes, as the site's section lists them.
type PoolHomes struct {
	Pool string
	Own  *model.Homes
}

// HomesForm is the site's homes form.
func (pg desktopLoginPage) HomesForm() homesView {
	return homesView{Page: pg.Page, Action: pg.Prefix + "desktop-login/homes#homes", ID: "site-homes",
		Label: "the site", Own: pg.SiteHomes != nil, Remove: "Remove the site's home server", Types: homesTypes, F: pg.HomesF}
}

var homesTypes = []string{model.HomesNFS, model.HomesCIFS}
