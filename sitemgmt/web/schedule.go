package web

// The weekly schedule editor: a 7 × 144 grid of a pool's or host's own weekly rules
// (schedgrid.go converts), edited in the browser (static/schedule.js) and saved as one
// change of the rule list (service.Bookings.ApplyGrid), previewed with its dry run and
// the candidate site (Bookings.PreviewGrid) compiled; and, on a pool's page, the dated
// exceptions of the pool (Bookings.AddException, RemoveException).
//
// Saving follows `overtime schedule add/remove` (a PUT of the rule list): rules the save
// adds are booked by the user, rules it keeps keep their owners, and a booking the grid
// still holds stays as written (the service records the owners). authz judges the rule
// list's change as for the API: a lecturer may only add, change or cancel their own
// course-vm bookings of their pool.
//
// What the page offers is asked of authz with the same rules: the grid is editable for
// whoever may change every rule of the pool or host (authz.MayChangeAll: its pool admins
// and site admins); a lecturer sees it read-only, with a Cancel button at each rule
// authz lets them remove (their own bookings) and a Delete button at each exception
// authz lets them delete; they book on the Course VMs page (lecturer.go).

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// maxPreviewHosts bounds the "what boots at T" table.
const maxPreviewHosts = 200

// modeColours is how many colour classes (m0 ...) static/schedule.css defines; mode i
// gets class m(i mod modeColours).
const modeColours = 12

func (u *UI) scheduleRoutes() {
	m := u.mux
	m.HandleFunc("GET "+Prefix+"schedule", u.page(u.scheduleIndex))
	m.HandleFunc("GET "+Prefix+"schedule/pools/{pool}", u.page(func(q *Req) { u.scheduleEditor(q, "pool", q.PathValue("pool")) }))
	m.HandleFunc("POST "+Prefix+"schedule/pools/{pool}", u.page(func(q *Req) { u.schedulePost(q, "pool", q.PathValue("pool")) }))
	m.HandleFunc("GET "+Prefix+"schedule/hosts/{host}", u.page(func(q *Req) { u.scheduleEditor(q, "host", q.PathValue("host")) }))
	m.HandleFunc("POST "+Prefix+"schedule/hosts/{host}", u.page(func(q *Req) { u.schedulePost(q, "host", q.PathValue("host")) }))
	m.HandleFunc("POST "+Prefix+"schedule/pools/{pool}/exceptions", u.page(u.exceptionAdd))
	m.HandleFunc("POST "+Prefix+"schedule/pools/{pool}/exceptions/{name}/delete", u.page(u.exceptionDelete))
}

// ---- the index ----

type schedPoolRow struct {
	Name, Room, Description string
	Rules, Hosts, OwnHosts  int
	CanEdit                 bool
}

type schedHostRow struct {
	Name, Pool string
	Rules      int
}

type scheduleIndexPage struct {
	Page
	Pools     []schedPoolRow
	Host      string
	Hosts     []schedHostRow
	HostsMore int
	OwnRules  []schedHostRow // hosts with rules of their own
}

func (u *UI) scheduleIndex(q *Req) {
	site := q.Snap.Site
	pg := scheduleIndexPage{Page: u.Base(q, "Schedule", "schedule"), Host: strings.TrimSpace(q.URL.Query().Get("host"))}
	rows := map[string]*schedPoolRow{}
	for _, name := range VisiblePools(q) {
		p := site.Pool(name)
		rows[name] = &schedPoolRow{Name: p.Name, Room: p.Room, Description: p.Description, Rules: len(p.Weekly),
			CanEdit: q.P.MayChangeAll(site, model.EntityPool, name, "weekly")}
	}
	needle := strings.ToLower(pg.Host)
	for i := range site.Hosts {
		h := &site.Hosts[i]
		r := rows[h.Pool]
		if r == nil {
			continue
		}
		r.Hosts++
		if len(h.Weekly) > 0 {
			r.OwnHosts++
			if len(pg.OwnRules) < 100 {
				pg.OwnRules = append(pg.OwnRules, schedHostRow{Name: h.Name, Pool: h.Pool, Rules: len(h.Weekly)})
			}
		}
		if needle != "" && (strings.Contains(h.Name, needle) || strings.EqualFold(h.MAC, needle) || h.IP == needle) {
			if len(pg.Hosts) < 50 {
				pg.Hosts = append(pg.Hosts, schedHostRow{Name: h.Name, Pool: h.Pool, Rules: len(h.Weekly)})
			} else {
				pg.HostsMore++
			}
		}
	}
	for _, name := range VisiblePools(q) {
		pg.Pools = append(pg.Pools, *rows[name])
	}
	u.Render(q, http.StatusOK, "schedule_index", pg)
}

// mayEdit decides whether a schedule write is passed on to authz at all (which decides
// what is saved): pool admins and the pool's lecturers (who book course-vm slots). What
// the page offers is decided per control by authz (editorPage).
func mayEdit(q *Req, pool string) bool { return MayAdminPool(q.P, pool) || q.P.Lecturer[pool] }

// ---- the editor ----

// GridCell is one slot of the editor's grid.
type GridCell struct {
	Day, Slot     int
	Mode, Inherit string // own mode ("" none) and the mode inherited where there is none
	Class, Label  string
}

// GridRow is one day.
type GridRow struct {
	Day   int
	Label string
	Cells []GridCell
}

// ModeLegend is one mode in the legend and the mode select.
type ModeLegend struct {
	Index       int
	Name, Kind  string
	Description string
	Class       string
}

// RuleView is one current rule and who owns it; CanCancel: the user may not edit the
// grid but may remove this rule (their own booking: authz.CheckRemoveRule).
type RuleView struct {
	Text, Owner string
	CanCancel   bool
}

// HostAt is one host's mode at the preview's instant.
type HostAt struct {
	Name, Mode, Rule, Now string // Now: the mode the rules in force give at that instant
	Changed               bool
}

// ExcView is one exception in the pool's calendar list.
type ExcView struct {
	Name, Kind, Description, Mode string
	When, Targets, Owner          string
	Allow                         string // an exam's allow list, as written
	Current                       bool
	CanDelete                     bool // authz.CheckDelete allows the user to delete it
}

// ExcDay is the exceptions starting on one date.
type ExcDay struct {
	Date string
	List []ExcView
}

// ExcForm is the add-exception form's values and errors by field.
type ExcForm struct {
	Name, Kind, Description, Start, End, Mode, Hosts string
	Allow                                            string // exams: what the PCs may reach, space- or comma-separated
	Err                                              map[string]string
	General                                          string
}

type schedulePage struct {
	Page
	Kind, Name, Pool string // "pool" or "host"; for a host, its pool
	Action           string
	Inherit          string // what an empty slot means, for the legend
	Rows             []GridRow
	Hours            []string
	Modes            []ModeLegend
	ModeList         string // the modes' names in index order, for the form
	GridValue        string
	Rev              string
	Rules            []RuleView
	CanEdit          bool   // the grid and the add-exception form (authz.MayChangeAll)
	CanBook          bool   // a lecturer of the pool: read-only but for their bookings
	At               string // the preview's instant (datetime-local, site time)
	Zone             string

	Checked    bool // a preview ran
	CheckErr   string
	Changes    []string
	NewRules   []string
	HostsAt    []HostAt
	HostsMore  int
	AtLabel    string
	SaveErr    string
	Exceptions []ExcDay
	Past       []ExcDay
	Kinds      []string
	ExcForm    ExcForm
	CanExc     bool
}

// targetRules are pointers to the rules and owners of the pool or host in site (nil:
// none such), for the page; writes go through service.Bookings.
func targetRules(site *model.Site, kind, name string) (*[]string, *model.RuleOwners, string) {
	switch kind {
	case "pool":
		if p := site.Pool(name); p != nil {
			return &p.Weekly, &p.RuleOwners, p.Name
		}
	case "host":
		if h := site.Host(name); h != nil {
			return &h.Weekly, &h.RuleOwners, h.Pool
		}
	}
	return nil, nil, ""
}

// scheduleTarget names the pool or host of the editor (kind "pool" or "host").
func scheduleTarget(kind, name string) model.Target {
	if kind == "host" {
		return model.Target{Host: name}
	}
	return model.Target{Pool: name}
}

// lookupTarget finds the pool or host q may see; otherwise it answers 404 and says false.
func (u *UI) lookupTarget(q *Req, kind, name string) (pool string, ok bool) {
	w, _, pool := targetRules(q.Snap.Site, kind, name)
	if w == nil || !MaySeePool(q.P, pool) {
		u.Fail(q, http.StatusNotFound, fmt.Sprintf("no %s %q that you may see", kind, name))
		return "", false
	}
	return pool, true
}

func (u *UI) scheduleEditor(q *Req, kind, name string) {
	if _, ok := u.lookupTarget(q, kind, name); !ok {
		return
	}
	w, _, _ := targetRules(q.Snap.Site, kind, name)
	g, err := schedule.GridOf(*w)
	pg := u.editorPage(q, kind, name, g)
	if err != nil {
		pg.Error = "the rules in force do not fit the grid: " + err.Error()
	}
	u.Render(q, http.StatusOK, "schedule", pg)
}

// editorPage builds the editor for grid g (the rules in force, or a grid posted back).
func (u *UI) editorPage(q *Req, kind, name string, g schedule.WeekGrid) schedulePage {
	site := q.Snap.Site
	w, o, pool := targetRules(site, kind, name)
	loc := q.Snap.Engine.Location()
	canEdit := q.P.MayChangeAll(site, kind, name, "weekly")
	pg := schedulePage{Page: u.Base(q, "Schedule of "+kind+" "+name, "schedule"), Kind: kind, Name: name, Pool: pool,
		Action: Prefix + "schedule/" + kind + "s/" + name, Rev: service.RulesRev(*w), CanEdit: canEdit,
		CanBook: !canEdit && mayEdit(q, pool), At: q.Now.In(loc).Format("2006-01-02T15:04"), Zone: loc.String()}
	for _, r := range *w {
		v := RuleView{Text: r, Owner: (*o)[r]}
		v.CanCancel = pg.CanBook && q.P.CheckRemoveRule(site, kind, name, r) == nil
		pg.Rules = append(pg.Rules, v)
	}
	names := make([]string, len(site.Modes))
	index := map[string]int{}
	for i, m := range site.Modes {
		names[i] = m.Name
		index[m.Name] = i
		pg.Modes = append(pg.Modes, ModeLegend{Index: i, Name: m.Name, Kind: string(m.Kind), Description: m.Description, Class: fmt.Sprintf("m%d", i%modeColours)})
	}
	pg.ModeList = strings.Join(names, ",")
	pg.GridValue = EncodeGrid(g, names)
	// What an empty slot gets: for a pool the site default, for a host its pool's rules
	// and, where those give none, the site default.
	var inherit schedule.WeekGrid
	pg.Inherit = "site default (" + site.DefaultMode + ")"
	if kind == "host" {
		if p := site.Pool(pool); p != nil {
			inherit, _ = schedule.GridOf(p.Weekly)
		}
		pg.Inherit = "pool " + pool + ", else the site default (" + site.DefaultMode + ")"
	}
	for h := 0; h < 24; h++ {
		pg.Hours = append(pg.Hours, fmt.Sprintf("%02d", h))
	}
	pg.Rows = make([]GridRow, schedule.GridDays)
	for d := 0; d < schedule.GridDays; d++ {
		row := GridRow{Day: d, Label: schedule.DayLabels[d], Cells: make([]GridCell, schedule.GridSlots)}
		for s := 0; s < schedule.GridSlots; s++ {
			c := GridCell{Day: d, Slot: s, Mode: g[d][s], Inherit: inherit[d][s]}
			if c.Inherit == "" {
				c.Inherit = site.DefaultMode
			}
			span := schedule.DayLabels[d] + " " + schedule.SlotClock(s) + "-" + slotEnd(s)
			if c.Mode != "" {
				c.Class = fmt.Sprintf("m%d", index[c.Mode]%modeColours)
				c.Label = span + " " + c.Mode
			} else {
				c.Class = fmt.Sprintf("m%d inh", index[c.Inherit]%modeColours)
				c.Label = span + " inherited " + c.Inherit
			}
			row.Cells[s] = c
		}
		pg.Rows[d] = row
	}
	if kind == "pool" {
		u.fillExceptions(q, &pg)
	}
	return pg
}

func slotEnd(s int) string {
	if s == schedule.GridSlots-1 {
		return "24:00"
	}
	return schedule.SlotClock(s + 1)
}

// parseLocal reads a date and time in the site's zone (datetime-local's form, or with a
// space), or RFC 3339.
func parseLocal(v string, loc *time.Location) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, f := range []string{"2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(f, v, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, model.Invalid("invalid time %q: use YYYY-MM-DD HH:MM in the site's time zone (%s)", v, loc)
}

func (u *UI) schedulePost(q *Req, kind, name string) {
	pool, ok := u.lookupTarget(q, kind, name)
	if !ok {
		return
	}
	preview := q.PostFormValue("preview") == "1"
	if !preview && !mayEdit(q, pool) {
		u.Fail(q, http.StatusForbidden, fmt.Sprintf("user %s may not change the schedule of pool %s: only its pool admins, its lecturers (course-vm slots) and site admins may", q.P.UID, pool))
		return
	}
	modes := strings.Split(q.PostFormValue("modes"), ",")
	g, err := DecodeGrid(q.PostFormValue("grid"), modes)
	if err != nil {
		w, _, _ := targetRules(q.Snap.Site, kind, name)
		cur, _ := schedule.GridOf(*w)
		pg := u.editorPage(q, kind, name, cur)
		pg.SaveErr = err.Error()
		u.Render(q, http.StatusBadRequest, "schedule", pg)
		return
	}
	changes, err := u.svc.Bookings.ApplyGrid(q.Context(), q.P, preview, scheduleTarget(kind, name), g, q.PostFormValue("rev"))
	u.wrote(preview, changes, err)
	if err == nil && !preview {
		msg := "no change: the schedule was already so"
		if len(changes) > 0 {
			msg = fmt.Sprintf("saved the schedule of %s %s", kind, name)
		}
		u.Done(q, Prefix+"schedule/"+kind+"s/"+name, msg)
		return
	}
	pg := u.editorPage(q, kind, name, g)
	status := http.StatusOK
	if err != nil {
		var msg string
		status, msg = ErrorStatus(err)
		if preview {
			pg.CheckErr = msg
		} else {
			pg.SaveErr = msg
		}
	}
	if preview {
		pg.Checked = true
		for _, c := range changes {
			pg.Changes = append(pg.Changes, c.String())
		}
		u.previewHosts(q, &pg, kind, name, pool, g)
	}
	u.Render(q, status, "schedule", pg)
}

// previewHosts fills the candidate rules and what the pool's hosts boot at the posted
// instant under them, from the real engine compiled on a copy of the site.
func (u *UI) previewHosts(q *Req, pg *schedulePage, kind, name, pool string, g schedule.WeekGrid) {
	loc := q.Snap.Engine.Location()
	at := q.Now
	if v := strings.TrimSpace(q.PostFormValue("at")); v != "" {
		t, err := parseLocal(v, loc)
		if err != nil {
			pg.CheckErr = joinErr(pg.CheckErr, err.Error())
			return
		}
		at = t
	}
	pg.At = at.In(loc).Format("2006-01-02T15:04")
	pg.AtLabel = at.In(loc).Format("Mon 2006-01-02 15:04 MST")
	cand, err := u.svc.Bookings.PreviewGrid(q.P, scheduleTarget(kind, name), g)
	if err != nil {
		pg.CheckErr = joinErr(pg.CheckErr, err.Error())
		return
	}
	w, _, _ := targetRules(cand, kind, name)
	pg.NewRules = append([]string(nil), *w...)
	eng, err := schedule.Compile(cand)
	if err != nil {
		pg.CheckErr = joinErr(pg.CheckErr, err.Error())
		return
	}
	for i := range cand.Hosts {
		h := &cand.Hosts[i]
		if h.Pool != pool {
			continue
		}
		if len(pg.HostsAt) >= maxPreviewHosts {
			pg.HostsMore++
			continue
		}
		d := eng.AtHost(h, at)
		now := q.Snap.Engine.AtHost(h, at)
		pg.HostsAt = append(pg.HostsAt, HostAt{Name: h.Name, Mode: d.Mode, Rule: d.Rule, Now: now.Mode, Changed: now.Mode != d.Mode})
	}
}

func joinErr(a, b string) string {
	if a == "" || a == b {
		return b
	}
	return a + "; " + b
}

// ---- exceptions ----

// poolException reports whether e targets pool or one of its hosts.
func poolException(site *model.Site, e *model.Exception, pool string) bool {
	for _, t := range e.Targets {
		if t.Pool == pool {
			return true
		}
		if t.Host != "" {
			if h := site.Host(t.Host); h != nil && h.Pool == pool {
				return true
			}
		}
	}
	return false
}

func (u *UI) fillExceptions(q *Req, pg *schedulePage) {
	site := q.Snap.Site
	loc := q.Snap.Engine.Location()
	pg.CanExc = pg.CanEdit
	for _, k := range model.ExceptionKinds {
		if k != model.ExceptionPowerSave {
			pg.Kinds = append(pg.Kinds, string(k))
		}
	}
	if pg.ExcForm.Kind == "" {
		pg.ExcForm.Kind = "lecture"
	}
	var upcoming, past []*model.Exception
	for i := range site.Exceptions {
		e := &site.Exceptions[i]
		if !poolException(site, e, pg.Pool) {
			continue
		}
		if e.End.After(q.Now) {
			upcoming = append(upcoming, e)
		} else {
			past = append(past, e)
		}
	}
	sort.SliceStable(upcoming, func(i, j int) bool { return upcoming[i].Start.Before(upcoming[j].Start) })
	sort.SliceStable(past, func(i, j int) bool { return past[i].Start.After(past[j].Start) })
	if len(past) > 20 {
		past = past[:20]
	}
	group := func(list []*model.Exception) []ExcDay {
		var days []ExcDay
		for _, e := range list {
			s, t := e.Start.In(loc), e.End.In(loc)
			date := s.Format("Mon 2006-01-02")
			when := s.Format("15:04") + "–" + t.Format("15:04")
			if t.Format("2006-01-02") != s.Format("2006-01-02") {
				when = s.Format("15:04") + " – " + t.Format("Mon 2006-01-02 15:04")
			}
			var targets []string
			for _, tg := range e.Targets {
				if tg.Pool != "" {
					targets = append(targets, "pool "+tg.Pool)
				} else {
					targets = append(targets, tg.Host)
				}
			}
			v := ExcView{Name: e.Name, Kind: string(e.Kind), Description: e.Description, Mode: e.Mode, When: when,
				Targets: strings.Join(targets, ", "), Owner: e.Owner, Allow: strings.Join(e.Allow, " "), Current: !e.Start.After(q.Now) && e.End.After(q.Now),
				CanDelete: q.P.CheckDelete(site, model.EntityException, e.Name) == nil}
			if len(days) == 0 || days[len(days)-1].Date != date {
				days = append(days, ExcDay{Date: date})
			}
			days[len(days)-1].List = append(days[len(days)-1].List, v)
		}
		return days
	}
	pg.Exceptions, pg.Past = group(upcoming), group(past)
}

// excField is the form field an error from adding an exception is about ("" the form).
func excField(msg string) string {
	switch {
	case strings.Contains(msg, ": allow"):
		// Before "kind" and "host": an allow entry's message names both.
		return "allow"
	case strings.Contains(msg, "overlap"):
		return "start"
	case strings.Contains(msg, "duplicate exception") || strings.Contains(msg, "exception name") || strings.Contains(msg, "invalid name"):
		return "name"
	case strings.Contains(msg, " start "):
		return "start"
	case strings.Contains(msg, " end "):
		return "end"
	case strings.Contains(msg, "unknown mode") || strings.Contains(msg, " mode "):
		return "mode"
	case strings.Contains(msg, "kind"):
		return "kind"
	case strings.Contains(msg, "description"):
		return "description"
	case strings.Contains(msg, "host"):
		return "hosts"
	}
	return ""
}

// listField splits a form field of entries separated by spaces, commas or newlines.
func listField(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })
}

func (u *UI) exceptionAdd(q *Req) {
	poolName := q.PathValue("pool")
	pool, ok := u.lookupTarget(q, "pool", poolName)
	if !ok {
		return
	}
	loc := q.Snap.Engine.Location()
	f := ExcForm{Name: strings.TrimSpace(q.PostFormValue("name")), Kind: q.PostFormValue("kind"),
		Description: strings.TrimSpace(q.PostFormValue("description")), Start: q.PostFormValue("start"),
		End: q.PostFormValue("end"), Mode: q.PostFormValue("mode"), Hosts: strings.TrimSpace(q.PostFormValue("hosts")),
		Allow: strings.TrimSpace(q.PostFormValue("allow")), Err: map[string]string{}}
	again := func(status int) {
		w, _, _ := targetRules(q.Snap.Site, "pool", pool)
		g, _ := schedule.GridOf(*w)
		pg := u.editorPage(q, "pool", pool, g)
		pg.ExcForm = f
		if f.Kind == "" {
			pg.ExcForm.Kind = "lecture"
		}
		u.Render(q, status, "schedule", pg)
	}
	if !mayEdit(q, pool) {
		u.Fail(q, http.StatusForbidden, fmt.Sprintf("user %s may not add exceptions to pool %s", q.P.UID, pool))
		return
	}
	if f.Name == "" {
		f.Err["name"] = "give the exception a name (e.g. exam-2026-12-09)"
	} else if err := model.ValidName("exception", f.Name); err != nil {
		f.Err["name"] = err.Error()
	}
	start, err := parseLocal(f.Start, loc)
	if err != nil {
		f.Err["start"] = err.Error()
	}
	end, err := parseLocal(f.End, loc)
	if err != nil {
		f.Err["end"] = err.Error()
	}
	if f.Mode == "" {
		f.Err["mode"] = "choose the mode the hosts boot"
	}
	var targets []model.Target
	for _, h := range listField(f.Hosts) {
		if hh := q.Snap.Site.Host(h); hh == nil || hh.Pool != pool {
			f.Err["hosts"] = fmt.Sprintf("pool %s has no host %q", pool, h)
			break
		}
		targets = append(targets, model.Target{Host: h})
	}
	if len(targets) == 0 {
		targets = []model.Target{{Pool: pool}}
	}
	if len(f.Err) > 0 {
		again(http.StatusBadRequest)
		return
	}
	e := model.Exception{Name: f.Name, Kind: model.ExceptionKind(f.Kind), Description: f.Description, Start: start, End: end,
		Mode: f.Mode, Targets: targets, Allow: listField(f.Allow)}
	changes, err := u.svc.Bookings.AddException(q.Context(), q.P, e)
	if _, err := u.wrote(false, changes, err); err != nil {
		status, msg := ErrorStatus(err)
		if fld := excField(msg); fld != "" && status != http.StatusForbidden {
			f.Err[fld] = msg
		} else {
			f.General = msg
		}
		if strings.Contains(msg, "already") {
			delete(f.Err, "start")
			f.Err["name"] = msg
		}
		again(status)
		return
	}
	u.Done(q, Prefix+"schedule/pools/"+pool+"#exceptions", "added exception "+e.Name)
}

func (u *UI) exceptionDelete(q *Req) {
	pool, ok := u.lookupTarget(q, "pool", q.PathValue("pool"))
	if !ok {
		return
	}
	name := q.PathValue("name")
	e := q.Snap.Site.Exception(name)
	if e == nil || !poolException(q.Snap.Site, e, pool) {
		u.Fail(q, http.StatusNotFound, fmt.Sprintf("pool %s has no exception %q", pool, name))
		return
	}
	if !mayEdit(q, pool) {
		u.Fail(q, http.StatusForbidden, fmt.Sprintf("user %s may not delete exceptions of pool %s", q.P.UID, pool))
		return
	}
	changes, err := u.svc.Bookings.RemoveException(q.Context(), q.P, false, name)
	if _, err := u.wrote(false, changes, err); err != nil {
		status, msg := ErrorStatus(err)
		w, _, _ := targetRules(q.Snap.Site, "pool", pool)
		g, _ := schedule.GridOf(*w)
		pg := u.editorPage(q, "pool", pool, g)
		pg.ExcForm.General = "deleting " + name + ": " + msg
		u.Render(q, status, "schedule", pg)
		return
	}
	u.Done(q, Prefix+"schedule/pools/"+pool+"#exceptions", "deleted exception "+name)
}
