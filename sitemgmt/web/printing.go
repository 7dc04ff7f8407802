package web

// Printing (docs/desktop.md "Printing"): the CUPS server, and the default queue, that the
// PCs of a pool print on. A pool's own is edited on its pool page by its pool admins (and
// site admins); the site's, which the pools without their own use, on the Desktop logins
// page by site admins. Everyone who sees a pool reads what its PCs use. Saving and
// removing is service.Entities.PutPrinting, which validates the configuration and
// authorises the change: the handlers only decode the form and show the answer.

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func (u *UI) printingRoutes() {
	m := u.mux
	m.HandleFunc("POST "+Prefix+"pools/{name}/printing", u.page(u.poolPrintingPost))
	m.HandleFunc("POST "+Prefix+"desktop-login/printing", u.page(u.sitePrintingPost))
}

// printingForm is the printing form's input and its errors by field (server,
// defaultPrinter); FormErr: an error that names neither.
type printingForm struct {
	Server, DefaultPrinter string
	Err                    map[string]string
	FormErr                string
}

func printingFormOf(p *model.Printing) printingForm {
	f := printingForm{Err: map[string]string{}}
	if p != nil {
		f.Server, f.DefaultPrinter = p.Server, p.DefaultPrinter
	}
	return f
}

func readPrintingForm(q *Req) printingForm {
	return printingForm{Server: strings.TrimSpace(q.PostFormValue("server")),
		DefaultPrinter: strings.TrimSpace(q.PostFormValue("defaultPrinter")), Err: map[string]string{}}
}

// failed records the service's refusal msg at the field it names ("printing.server: …"
// for the site, "pool lab-a printing.server: …" for pool lab-a), else as the form's.
func (f *printingForm) failed(pool, msg string) {
	if field := seatErrorField(pool, "printing", []string{"server", "defaultPrinter"}, msg); field != "" {
		f.Err[field] = msg
		return
	}
	f.FormErr = msg
}

// printingSummary says where a configuration prints ("" for nil).
func printingSummary(p *model.Printing) string {
	if p == nil {
		return ""
	}
	if p.DefaultPrinter == "" {
		return p.Server + ", the server's default queue"
	}
	return p.Server + ", default queue " + p.DefaultPrinter
}

// printingView is what the form template gets.
type printingView struct {
	Page   Page
	Action string // the form's URL
	ID     string // prefix of its fields' ids
	Label  string // "pool lab-a", "the site"
	Own    bool   // a configuration to remove exists
	Remove string // the Remove button's text
	F      printingForm
}

// putPrinting saves (action save: the form's values) or removes (action remove) the
// printing of pool ("" : the site's), before being what was stored. It answers the form
// as the user sent it, with the service's refusal recorded at its field, and its status
// (200: saved, msg says what changed); status 0: the error page was sent.
func (u *UI) putPrinting(q *Req, pool string, before *model.Printing) (f printingForm, status int, msg string) {
	label := "the site"
	if pool != "" {
		label = "pool " + pool
	}
	var pr *model.Printing
	switch action := q.PostFormValue("action"); action {
	case "save":
		f = readPrintingForm(q)
		pr = &model.Printing{Server: f.Server, DefaultPrinter: f.DefaultPrinter}
	case "remove":
		f = printingFormOf(before)
	default:
		u.Fail(q, http.StatusBadRequest, fmt.Sprintf("unknown action %q (save or remove)", action))
		return f, 0, ""
	}
	changes, err := u.svc.Entities.PutPrinting(q.Context(), q.P, false, pool, pr)
	u.wrote(false, changes, err)
	if err != nil {
		status, msg := ErrorStatus(err)
		u.opt.Log.Info("UI: printing refused", "user", q.P.UID, "pool", pool, "err", err)
		if status == http.StatusForbidden || status == http.StatusNotFound {
			u.Fail(q, status, msg)
			return f, 0, ""
		}
		f.failed(pool, msg)
		return f, status, ""
	}
	site := q.Snap.Site // before the change: the site's printing is not changed by a pool's
	switch {
	case len(changes) == 0:
		msg = "printing of " + label + ": nothing changed"
	case pr == nil && pool == "":
		msg = "the site's print server removed: the PCs of pools without their own have none"
	case pr == nil && site.Printing != nil:
		msg = "pool " + pool + "'s own print server removed: its PCs use the site's (" + printingSummary(site.Printing) + ")"
	case pr == nil:
		msg = "pool " + pool + "'s own print server removed: its PCs have none, as the site has none"
	default:
		msg = label + " prints on " + printingSummary(pr)
	}
	return f, http.StatusOK, msg
}

func (u *UI) poolPrintingPost(q *Req) {
	p := u.poolOf(q, true)
	if p == nil {
		return
	}
	f, status, msg := u.putPrinting(q, p.Name, p.Printing)
	switch {
	case status == 0:
	case status == http.StatusOK:
		u.Done(q, Prefix+"pools/"+p.Name+"#printing", msg)
	default:
		u.renderPool(q, p, status, hostForm{Err: map[string]string{}}, func(pg *poolPage) {
			pg.Print, pg.PrintFailed = f, true
			pg.Error = "the printing of pool " + p.Name + " was not saved: see its form"
			if len(f.Err) > 0 {
				pg.Error = "the printing of pool " + p.Name + " was not saved: see the marked fields"
			}
		})
	}
}

func (u *UI) sitePrintingPost(q *Req) {
	f, status, msg := u.putPrinting(q, "", q.Snap.Site.Printing)
	switch {
	case status == 0:
	case status == http.StatusOK:
		u.Done(q, Prefix+"desktop-login#printing", msg)
	default:
		u.renderDesktopLoginPage(q, status, nil, &f, nil)
	}
}

// ---- the pool page's section ----

// PrintingForm is the pool's printing form.
func (pg poolPage) PrintingForm() printingView {
	rm := "Remove (back to the site's)"
	if pg.SitePrinting == nil {
		rm = "Remove (the site has none)"
	}
	return printingView{Page: pg.Page, Action: pg.Prefix + "pools/" + pg.Pool.Name + "/printing#printing", ID: "printing",
		Label: "pool " + pg.Pool.Name, Own: pg.Pool.Printing != nil, Remove: rm, F: pg.Print}
}

// ---- the Desktop logins page's section ----

// PoolPrinting is a pool's own printing, as the site's section lists it.
type PoolPrinting struct {
	Pool string
	Own  *model.Printing
}

// PrintingForm is the site's printing form.
func (pg desktopLoginPage) PrintingForm() printingView {
	return printingView{Page: pg.Page, Action: pg.Prefix + "desktop-login/printing#printing", ID: "site-printing",
		Label: "the site", Own: pg.SitePrinting != nil, Remove: "Remove the site's print server", F: pg.Print}
}
