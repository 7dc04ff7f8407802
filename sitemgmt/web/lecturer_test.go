package web_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestLecturerBooksCourseVM(t *testing.T) {
	e := exampleUI(t)
	carol := loginAs(t, e, "carol") // lecturer of lab-a
	code, body := carol.get("/ui/courses")
	if code != http.StatusOK {
		t.Fatalf("courses: %d", code)
	}
	mustContain(t, "courses page", body, ">bio101-vm<", "course-bio101", "You have no bookings", "overtime image import")
	tok := carol.csrf("/ui/courses")
	book := func(v url.Values) (int, string) {
		v.Set("csrf", tok)
		return carol.post("/ui/courses/book", v)
	}
	weekly := func(pool, mode, days, from, to string) url.Values {
		return url.Values{"pool": {pool}, "mode": {mode}, "type": {"weekly"}, "days": {days}, "from": {from}, "to": {to}}
	}
	site := func() string {
		s := e.Svc.Snapshot().Site
		return strings.Join(s.Pool("lab-a").Weekly, "|") + "#" + strings.Join(s.Pool("lab-b").Weekly, "|") + "#" + s.Mode("desktop").Image
	}
	before := site()

	// Refused: another pool, a mode that is not a course VM of the pool (how lab-a's PCs
	// boot is not the lecturer's), an overlap with the pool's rules. Nothing is written
	// and the reason is shown next to the form.
	code, body = book(weekly("lab-b", "course-bio101", "sun", "10:00", "12:00"))
	if code != http.StatusForbidden {
		t.Fatalf("booking in lab-b: %d, want 403\n%s", code, body)
	}
	mustContain(t, "refusal in lab-b", body, `class="fielderr"`, "lab-b")
	code, body = book(weekly("lab-a", "desktop", "sat", "10:00", "12:00"))
	if code != http.StatusForbidden {
		t.Fatalf("booking desktop mode: %d, want 403\n%s", code, body)
	}
	mustContain(t, "refusal of a desktop rule", body, `class="fielderr"`, "course-vm")
	code, body = book(weekly("lab-a", "course-bio101", "thu", "10:00", "12:00"))
	if code != http.StatusConflict {
		t.Fatalf("overlapping booking: %d, want 409\n%s", code, body)
	}
	mustContain(t, "overlap refusal", body, `class="fielderr"`, "overlap")
	// A boot setting is not the lecturer's either: the desktop image's current version.
	if code, _ := carol.post("/ui/images/debian-desktop/current", url.Values{"csrf": {tok}, "version": {"2026.11.20-1"}}); code != http.StatusForbidden {
		t.Fatalf("lecturer switching the desktop image: %d, want 403", code)
	}
	if after := site(); after != before || e.Svc.Snapshot().Site.Image("debian-desktop").Current != "" {
		t.Fatalf("refused bookings changed the site:\n%s\n%s", before, after)
	}

	// A weekly slot on Saturday: live next Saturday on lab-a's PCs but pc-a05, whose own
	// rule keeps it a desktop.
	code, body = book(weekly("lab-a", "course-bio101", "sat", "10:00", "12:00"))
	if code != http.StatusOK {
		t.Fatalf("booking: %d\n%s", code, body)
	}
	mustContain(t, "after booking", body, `booked &#34;sat 10:00-12:00 course-bio101&#34; in pool lab-a`,
		"every week: sat 10:00-12:00", "next Sat 2026-12-05 10:00 until 12:00 on 4 of 5 PCs of pool lab-a")
	p := e.Svc.Snapshot().Site.Pool("lab-a")
	if !slices.Contains(p.Weekly, "sat 10:00-12:00 course-bio101") || p.RuleOwners["sat 10:00-12:00 course-bio101"] != "carol" {
		t.Fatalf("lab-a after booking: %v %v", p.Weekly, p.RuleOwners)
	}
	// A one-off slot.
	code, body = book(url.Values{"pool": {"lab-a"}, "mode": {"course-bio101"}, "type": {"once"},
		"start": {"2026-12-10T14:00"}, "end": {"2026-12-10T16:00"}, "name": {"bio-extra"}})
	if code != http.StatusOK {
		t.Fatalf("one-off booking: %d\n%s", code, body)
	}
	mustContain(t, "after the one-off booking", body, "bio-extra", "next Thu 2026-12-10 14:00 until 16:00 on 5 of 5 PCs of pool lab-a")
	if x := e.Svc.Snapshot().Site.Exception("bio-extra"); x == nil || x.Owner != "carol" || x.Mode != "course-bio101" {
		t.Fatalf("exception after booking: %+v", x)
	}

	// Cancelling: not the site file's rule, but her own booking.
	code, _ = carol.post("/ui/courses/cancel", url.Values{"csrf": {tok}, "pool": {"lab-a"}, "rule": {"wed 10:00-12:00 course-bio101"}})
	if code != http.StatusForbidden {
		t.Fatalf("cancelling the site file's rule: %d, want 403", code)
	}
	code, body = carol.post("/ui/courses/cancel", url.Values{"csrf": {tok}, "pool": {"lab-a"}, "rule": {"sat 10:00-12:00 course-bio101"}})
	if code != http.StatusOK || !strings.Contains(body, "cancelled") {
		t.Fatalf("cancel: %d\n%s", code, body)
	}
	p = e.Svc.Snapshot().Site.Pool("lab-a")
	if slices.Contains(p.Weekly, "sat 10:00-12:00 course-bio101") || !slices.Contains(p.Weekly, "wed 10:00-12:00 course-bio101") {
		t.Fatalf("lab-a after cancelling: %v", p.Weekly)
	}
	code, _ = carol.post("/ui/courses/cancel", url.Values{"csrf": {tok}, "exception": {"bio-extra"}})
	if code != http.StatusOK || e.Svc.Snapshot().Site.Exception("bio-extra") != nil {
		t.Fatalf("cancel the one-off booking: %d", code)
	}
	// Someone else's booking is not hers to cancel.
	code, _ = carol.post("/ui/courses/cancel", url.Values{"csrf": {tok}, "exception": {"exam-2026-12-09"}})
	if code != http.StatusForbidden || e.Svc.Snapshot().Site.Exception("exam-2026-12-09") == nil {
		t.Fatalf("cancelling the site's exam: %d, want 403", code)
	}
	// A viewer has nothing to book.
	dave := loginAs(t, e, "dave")
	if _, body := dave.get("/ui/courses"); !strings.Contains(body, "nothing to book") {
		t.Errorf("viewer's courses page:\n%s", body)
	}
}
