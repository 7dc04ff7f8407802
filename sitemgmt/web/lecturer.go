package web

// Course VMs for lecturers (docs/lecturer-guide.md): the course-vm images of the user's
// pools and the course-vm modes that start them, booking a mode for a pool as a weekly
// rule (`overtime schedule add --pool P "wed 10:00-12:00 MODE"`: service.Bookings.BookRule
// adds it to the pool's Weekly, booked by the user in RuleOwners) or as a one-off
// exception (`overtime exception add`: Bookings.AddException, Owner is the user), the
// user's bookings with when and where they will be live (walked through the schedule
// engine), and cancelling one's own booking (Bookings.CancelRule, CancelException). Every
// change is one of these operations as the user: authz allows a lecturer only course-vm
// modes of their pool, and the schedule compiler refuses overlapping rules.
//
// Uploading a course VM is `overtime image import` (it converts the VM with qemu-img on
// the lecturer's machine and streams the result with PUT .../files/{file}); the page
// shows the command rather than a browser upload.

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func (u *UI) lecturerRoutes() {
	m := u.mux
	m.HandleFunc("GET "+Prefix+"courses", u.page(u.courses))
	m.HandleFunc("POST "+Prefix+"courses/book", u.page(u.courseBook))
	m.HandleFunc("POST "+Prefix+"courses/cancel", u.page(u.courseCancel))
}

// CourseImage is a course-vm image with the modes that start it.
type CourseImage struct {
	Name, Description, Pool, Current string
	Versions                         int
	Modes                            []string
}

// CourseMode is a mode the booking form offers.
type CourseMode struct{ Name, VM, Pool string }

// Booking is one of the user's bookings.
type Booking struct {
	Kind       string // "weekly" or "once"
	Pool, Host string // where (Host set: a host's rule)
	Rule       string // weekly: the rule as stored
	Exception  string // once: the exception's name
	Mode       string
	When       string // the slot: the rule's days and times, or the exception's span
	Live       string // when and where it will be live next
}

type bookForm struct {
	Pool, Mode, Type, Days, From, To, Start, End, Name, Description string
}

type coursesPage struct {
	Page
	Pools    []string
	Images   []CourseImage
	Modes    []CourseMode
	Bookings []Booking
	Form     bookForm
	FormErr  string
	Upload   string // the import command for the first image
}

// bookPools are the pools q's user may book course VMs in (the server decides each
// booking): all for site admins, else those where they are pool admin or lecturer.
func bookPools(q *Req) []string {
	var out []string
	for _, p := range q.Snap.Site.Pools {
		if q.P.SiteAdmin || q.P.PoolAdmin[p.Name] || q.P.Lecturer[p.Name] {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// courseModePool is the pool a course-vm mode belongs to: the pool of the course-vm
// image it starts ("" for other modes), as authz judges it.
func courseModePool(site *model.Site, m *model.Mode) string {
	if m.Kind != model.KindCourseVM {
		return ""
	}
	if im := site.Image(m.VM); im != nil && im.Kind == model.ImageCourseVM {
		return im.Pool
	}
	return ""
}

func (u *UI) courses(q *Req) {
	u.renderCourses(q, http.StatusOK, bookForm{Type: "weekly"}, "")
}

func (u *UI) renderCourses(q *Req, status int, f bookForm, formErr string) {
	site := q.Snap.Site
	pg := coursesPage{Page: u.Base(q, "Course VMs", "courses"), Pools: bookPools(q), Form: f, FormErr: formErr}
	mine := map[string]bool{}
	for _, p := range pg.Pools {
		mine[p] = true
	}
	for i := range site.Images {
		im := &site.Images[i]
		if im.Kind != model.ImageCourseVM || !mine[im.Pool] {
			continue
		}
		ci := CourseImage{Name: im.Name, Description: im.Description, Pool: im.Pool, Versions: len(im.Versions)}
		if v := im.Version(""); v != nil {
			ci.Current = v.Version
		}
		for j := range site.Modes {
			if m := &site.Modes[j]; m.Kind == model.KindCourseVM && m.VM == im.Name {
				ci.Modes = append(ci.Modes, m.Name)
			}
		}
		pg.Images = append(pg.Images, ci)
	}
	for j := range site.Modes {
		m := &site.Modes[j]
		if pool := courseModePool(site, m); pool != "" && mine[pool] {
			pg.Modes = append(pg.Modes, CourseMode{Name: m.Name, VM: m.VM, Pool: pool})
		}
	}
	pool, image := "POOL", "my-course-vm"
	if len(pg.Pools) > 0 {
		pool = pg.Pools[0]
	}
	if len(pg.Images) > 0 {
		pool, image = pg.Images[0].Pool, pg.Images[0].Name
	}
	pg.Upload = fmt.Sprintf("overtime image import my-vm.ova --image %s --pool %s --version %s", image, pool, q.Now.In(q.Snap.Engine.Location()).Format("2006-01-02")+"-1")
	pg.Bookings = u.bookings(q)
	u.Render(q, status, "courses", pg)
}

// bookings lists q's user's bookings: owned weekly rules of pools and hosts, owned
// exceptions; each with when it is live next.
func (u *UI) bookings(q *Req) []Booking {
	site, uid := q.Snap.Site, q.P.UID
	loc := q.Snap.Engine.Location()
	var out []Booking
	for _, p := range site.Pools {
		for _, r := range p.Weekly {
			if p.RuleOwners[r] != uid {
				continue
			}
			b := Booking{Kind: "weekly", Pool: p.Name, Rule: r, When: r}
			if pr, err := schedule.ParseRule(r); err == nil {
				b.Mode = pr.Mode
				b.When = strings.TrimSuffix(pr.Text, " "+pr.Mode)
				b.Live = u.liveText(q, poolHosts(site, p.Name), "pool "+p.Name, pr.Mode, weeklyMatch("pool "+p.Name, pr.Text))
			}
			out = append(out, b)
		}
	}
	for i := range site.Hosts {
		h := &site.Hosts[i]
		for _, r := range h.Weekly {
			if h.RuleOwners[r] != uid {
				continue
			}
			b := Booking{Kind: "weekly", Pool: h.Pool, Host: h.Name, Rule: r, When: r}
			if pr, err := schedule.ParseRule(r); err == nil {
				b.Mode = pr.Mode
				b.When = strings.TrimSuffix(pr.Text, " "+pr.Mode)
				b.Live = u.liveText(q, []*model.Host{h}, "host "+h.Name, pr.Mode, weeklyMatch("host "+h.Name, pr.Text))
			}
			out = append(out, b)
		}
	}
	for i := range site.Exceptions {
		e := &site.Exceptions[i]
		if e.Owner != uid {
			continue
		}
		b := Booking{Kind: "once", Exception: e.Name, Mode: e.Mode,
			When: e.Start.In(loc).Format("Mon 2006-01-02 15:04") + " – " + e.End.In(loc).Format("Mon 2006-01-02 15:04")}
		var hosts []*model.Host
		var where []string
		for _, t := range e.Targets {
			if t.Pool != "" {
				hosts = append(hosts, poolHosts(site, t.Pool)...)
				where = append(where, "pool "+t.Pool)
				b.Pool = t.Pool
			} else if h := site.Host(t.Host); h != nil {
				hosts = append(hosts, h)
				where = append(where, "host "+t.Host)
				b.Host = t.Host
			}
		}
		name := e.Name
		b.Live = u.liveText(q, hosts, strings.Join(where, ", "), e.Mode, func(d schedule.Decision) bool {
			return d.Mode == e.Mode && strings.Contains(d.Rule, fmt.Sprintf(" exception %q", name))
		})
		out = append(out, b)
	}
	return out
}

func poolHosts(site *model.Site, pool string) []*model.Host {
	var out []*model.Host
	for i := range site.Hosts {
		if site.Hosts[i].Pool == pool {
			out = append(out, &site.Hosts[i])
		}
	}
	return out
}

// weeklyMatch: the engine decided by owner's weekly rule text (canonical), as
// schedule.Compile names it in Decision.Rule.
func weeklyMatch(owner, text string) func(schedule.Decision) bool {
	want := fmt.Sprintf("%s weekly %q", owner, text)
	return func(d schedule.Decision) bool { return d.Rule == want }
}

// liveHorizon is how far ahead the next occurrence of a booking is looked for.
const liveHorizon = 370 * 24 * time.Hour

// nextLive walks h's schedule from from, segment by segment (Decision.Next), to the
// first segment the booking decides: its start (from itself when it is live now) and end.
func nextLive(q *Req, h *model.Host, from time.Time, match func(schedule.Decision) bool) (start, end time.Time, ok bool) {
	t := from
	for i := 0; i < 5000; i++ {
		d := q.Snap.Engine.AtHost(h, t)
		if match(d) {
			return t, d.Next, true
		}
		if d.Next.IsZero() || !d.Next.After(t) || d.Next.Sub(from) > liveHorizon {
			break
		}
		t = d.Next
	}
	return time.Time{}, time.Time{}, false
}

// liveText says when a booking is live next and on how many of hosts, e.g. "live now
// until Wed 12:00 on 4 of 5 PCs of pool lab-a", computed through the engine: an exam
// or a host's own rule that overrides the booking shows here.
func (u *UI) liveText(q *Req, hosts []*model.Host, where, mode string, match func(schedule.Decision) bool) string {
	if len(hosts) == 0 {
		return "not live: " + where + " has no PCs"
	}
	loc := q.Snap.Engine.Location()
	var first, firstEnd time.Time
	starts := make([]time.Time, len(hosts))
	for i, h := range hosts {
		s, e, ok := nextLive(q, h, q.Now, match)
		if !ok {
			continue
		}
		starts[i] = s
		if first.IsZero() || s.Before(first) {
			first, firstEnd = s, e
		}
	}
	if first.IsZero() {
		return fmt.Sprintf("not live on any of the %d PCs of %s within a year (overridden by other rules or exceptions, or over)", len(hosts), where)
	}
	n := 0
	for i, h := range hosts {
		if starts[i].Equal(first) || match(q.Snap.Engine.AtHost(h, first)) {
			n++
		}
	}
	when := "next " + first.In(loc).Format("Mon 2006-01-02 15:04")
	if first.Equal(q.Now) {
		when = "live now"
	}
	if !firstEnd.IsZero() {
		until := firstEnd.In(loc).Format("15:04")
		if firstEnd.In(loc).Format("2006-01-02") != first.In(loc).Format("2006-01-02") {
			until = firstEnd.In(loc).Format("Mon 2006-01-02 15:04")
		}
		when += " until " + until
	}
	return fmt.Sprintf("%s on %d of %d PCs of %s", when, n, len(hosts), where)
}

func (u *UI) courseBook(q *Req) {
	f := bookForm{Pool: q.PostFormValue("pool"), Mode: q.PostFormValue("mode"), Type: q.PostFormValue("type"),
		Days: strings.TrimSpace(q.PostFormValue("days")), From: q.PostFormValue("from"), To: q.PostFormValue("to"),
		Start: q.PostFormValue("start"), End: q.PostFormValue("end"), Name: strings.TrimSpace(q.PostFormValue("name")),
		Description: strings.TrimSpace(q.PostFormValue("description"))}
	bad := func(status int, msg string) { u.renderCourses(q, status, f, msg) }
	site := q.Snap.Site
	if site.Pool(f.Pool) == nil {
		bad(http.StatusBadRequest, "choose a pool")
		return
	}
	if site.Mode(f.Mode) == nil {
		bad(http.StatusBadRequest, "choose a course-vm mode")
		return
	}
	var done string
	var changes []model.Change
	var err error
	switch f.Type {
	case "weekly":
		var rule string
		rule, changes, err = u.svc.Bookings.BookRule(q.Context(), q.P, model.Target{Pool: f.Pool}, fmt.Sprintf("%s %s-%s %s", f.Days, f.From, f.To, f.Mode))
		done = fmt.Sprintf("booked %q in pool %s", rule, f.Pool)
	case "once":
		loc := q.Snap.Engine.Location()
		start, perr := parseLocal(f.Start, loc)
		if perr != nil {
			bad(http.StatusBadRequest, "start: "+perr.Error())
			return
		}
		end, perr := parseLocal(f.End, loc)
		if perr != nil {
			bad(http.StatusBadRequest, "end: "+perr.Error())
			return
		}
		if !end.After(start) {
			bad(http.StatusBadRequest, "the end must be after the start")
			return
		}
		name := f.Name
		if name == "" {
			name = f.Mode + "-" + start.Format("20060102-1504")
		}
		if verr := model.ValidName("exception", name); verr != nil {
			bad(http.StatusBadRequest, verr.Error())
			return
		}
		changes, err = u.svc.Bookings.AddException(q.Context(), q.P, model.Exception{Name: name, Kind: "lecture",
			Description: f.Description, Start: start, End: end, Mode: f.Mode, Targets: []model.Target{{Pool: f.Pool}}})
		done = fmt.Sprintf("booked %s (%s, %s – %s) in pool %s", name, f.Mode, start.Format("2006-01-02 15:04"), end.Format("2006-01-02 15:04"), f.Pool)
	default:
		bad(http.StatusBadRequest, "choose weekly or once")
		return
	}
	if _, err := u.wrote(false, changes, err); err != nil {
		status, msg := ErrorStatus(err)
		bad(status, msg)
		return
	}
	u.Done(q, Prefix+"courses", done)
}

func (u *UI) courseCancel(q *Req) {
	pool, host, rule, exc := q.PostFormValue("pool"), q.PostFormValue("host"), q.PostFormValue("rule"), q.PostFormValue("exception")
	var changes []model.Change
	var err error
	var done string
	switch {
	case exc != "":
		changes, err = u.svc.Bookings.CancelException(q.Context(), q.P, exc)
		done = "cancelled " + exc
	case rule != "":
		t := model.Target{Pool: pool}
		if host != "" {
			t = model.Target{Host: host}
		}
		changes, err = u.svc.Bookings.CancelRule(q.Context(), q.P, t, rule)
		done = fmt.Sprintf("cancelled %q", rule)
	default:
		u.renderCourses(q, http.StatusBadRequest, bookForm{Type: "weekly"}, "nothing to cancel")
		return
	}
	if _, err := u.wrote(false, changes, err); err != nil {
		status, msg := ErrorStatus(err)
		u.renderCourses(q, status, bookForm{Type: "weekly"}, msg)
		return
	}
	// The schedule page's Cancel buttons (a lecturer's own rules) return there.
	if rule != "" && q.PostFormValue("return") == "schedule" {
		if host != "" {
			u.Done(q, Prefix+"schedule/hosts/"+host, done)
		} else {
			u.Done(q, Prefix+"schedule/pools/"+pool, done)
		}
		return
	}
	u.Done(q, Prefix+"courses", done)
}
