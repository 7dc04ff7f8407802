package web

// The audit trail (GET /api/v1/audit, Service.Audit): power commands and every site write
// with its change list ("~ pool lab-a (weekly)"), who made it and when. Newest first,
// filtered by host, user and text, paged. Site admins and viewers see every entry;
// others only entries all of whose hosts and entities belong to pools they may see.

import (
	"net/http"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func (u *UI) auditRoutes() {
	u.mux.HandleFunc("GET "+Prefix+"audit", u.page(u.audit))
}

// AuditPageSize is how many entries one page shows.
const AuditPageSize = 50

// AuditRow is one entry as shown.
type AuditRow struct {
	wire.AuditEntry
	Changes []AuditChange
}

// AuditChange is one line of an entry's detail; for site writes Op is the change's sign
// (+, ~, -) for styling.
type AuditChange struct{ Op, Text string }

type auditPage struct {
	Page
	Rows []AuditRow
	// The filter; UserFilter is not User, which would hide Page.User (the logged-in
	// user the layout shows, with the navigation and the logout form).
	Host, UserFilter, Q, Kind string
	Paging
	All bool // the user sees every entry
}

// auditEntityPools maps a site change's detail line ("~ host pc-a01 (ip)") to the pools
// the entity belongs to in site (nil: the site admin's alone, or not known any more).
func auditEntityPools(site *model.Site, line string) []string {
	f := strings.Fields(line)
	if len(f) < 3 {
		return nil
	}
	kind, name := f[1], f[2]
	switch kind {
	case model.EntityPool:
		if site.Pool(name) != nil {
			return []string{name}
		}
	case model.EntityHost:
		if h := site.Host(name); h != nil {
			return []string{h.Pool}
		}
	case model.EntityException:
		if e := site.Exception(name); e != nil {
			var out []string
			for _, t := range e.Targets {
				if t.Pool != "" {
					out = append(out, t.Pool)
				} else if h := site.Host(t.Host); h != nil {
					out = append(out, h.Pool)
				} else {
					return nil
				}
			}
			return out
		}
	case model.EntityImage, model.EntityImageVersion:
		image, _ := model.SplitImageVersionName(name)
		if im := site.Image(image); im != nil && im.Kind == model.ImageCourseVM && im.Pool != "" {
			return []string{im.Pool}
		}
	case model.EntityMode:
		if m := site.Mode(name); m != nil {
			if p := courseModePool(site, m); p != "" {
				return []string{p}
			}
		}
	}
	return nil
}

// mayAudit reports whether q's user may see entry e: site admins and viewers all; others
// when every host and every changed entity belongs to a pool they may see.
func mayAudit(q *Req, e *wire.AuditEntry) bool {
	if q.P.SiteAdmin || q.P.Viewer {
		return true
	}
	site := q.Snap.Site
	seen := false
	for _, name := range e.Hosts {
		h := site.Host(name)
		if h == nil || !MaySeePool(q.P, h.Pool) {
			return false
		}
		seen = true
	}
	if e.Kind == wire.AuditSite {
		for _, line := range e.Detail {
			if strings.HasPrefix(line, "    ") {
				continue // a field diff line of the change above (model.FieldDiff)
			}
			pools := auditEntityPools(site, line)
			if len(pools) == 0 {
				return false
			}
			for _, p := range pools {
				if !MaySeePool(q.P, p) {
					return false
				}
			}
			seen = true
		}
	}
	return seen
}

func (u *UI) audit(q *Req) {
	v := q.URL.Query()
	pg := auditPage{Page: u.Base(q, "Audit log", "audit"), Host: strings.TrimSpace(v.Get("host")),
		UserFilter: strings.TrimSpace(v.Get("user")), Q: strings.TrimSpace(v.Get("q")), Kind: v.Get("kind"),
		All: q.P.SiteAdmin || q.P.Viewer}
	entries := u.svc.Audit(pg.Host, time.Time{}) // oldest first
	text, user := strings.ToLower(pg.Q), strings.ToLower(pg.UserFilter)
	var match []AuditRow
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if pg.Kind != "" && e.Kind != pg.Kind || user != "" && strings.ToLower(e.User) != user {
			continue
		}
		if text != "" && !strings.Contains(strings.ToLower(e.Summary+"\n"+e.Target+"\n"+e.User+"\n"+strings.Join(e.Detail, "\n")), text) {
			continue
		}
		if !mayAudit(q, &e) {
			continue
		}
		match = append(match, AuditRow{AuditEntry: e})
	}
	var from, to int
	pg.Paging, from, to = pageOf(q, len(match), AuditPageSize)
	if from < to {
		pg.Rows = match[from:to]
	}
	for i := range pg.Rows {
		for _, d := range pg.Rows[i].Detail {
			op := ""
			switch {
			case pg.Rows[i].Kind == wire.AuditSite && strings.HasPrefix(d, "    "):
				op, d = "field", strings.TrimSpace(d) // old → new of the change above
			case pg.Rows[i].Kind == wire.AuditSite && d != "":
				op = map[byte]string{'+': "add", '~': "mod", '-': "del"}[d[0]]
			}
			pg.Rows[i].Changes = append(pg.Rows[i].Changes, AuditChange{Op: op, Text: d})
		}
	}
	u.Render(q, http.StatusOK, "audit", pg)
}
