package web_test

import (
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// bookingsUI is the example site with a second lecturer of lab-a (eve) and bookings of
// the course mode in lab-a made through the API: admin's lecture bio-lecture, eve's
// eve-lab and eve's weekly "sat 10:00-12:00 course-bio101". lab-a's
// "wed 10:00-12:00 course-bio101" is the site file's.
func bookingsUI(t *testing.T) *testenv.Env {
	t.Helper()
	e := exampleUI(t)
	admin, eve := e.Admin(), e.Client("eve", "eve-secret")
	if err := admin.Send("PUT", "/api/v1/roles/lab-a-lecturers", nil, model.RoleGrant{Name: "lab-a-lecturers",
		Role: model.RoleLecturer, Pool: "lab-a", Members: []string{"carol", "eve"}}, nil); err != nil {
		t.Fatal(err)
	}
	lecture := func(name string, day int) model.Exception {
		return model.Exception{Name: name, Kind: "lecture", Mode: "course-bio101", Targets: []model.Target{{Pool: "lab-a"}},
			Start: time.Date(2026, 12, day, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, day, 15, 0, 0, 0, time.UTC)}
	}
	if err := admin.Send("PUT", "/api/v1/exceptions/bio-lecture", nil, lecture("bio-lecture", 3), nil); err != nil {
		t.Fatal(err)
	}
	if err := eve.Send("PUT", "/api/v1/exceptions/eve-lab", nil, lecture("eve-lab", 4), nil); err != nil {
		t.Fatal(err)
	}
	p := *e.Svc.Snapshot().Site.Pool("lab-a")
	p.Weekly = append(slices.Clone(p.Weekly), "sat 10:00-12:00 course-bio101")
	if err := eve.Send("PUT", "/api/v1/pools/lab-a", nil, p, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// mustLack fails when body contains any of unwanted.
func mustLack(t *testing.T, what, body string, unwanted ...string) {
	t.Helper()
	for _, u := range unwanted {
		if strings.Contains(body, u) {
			t.Errorf("%s contains %q", what, u)
		}
	}
}

// TestLecturerScheduleOwnBookings: on the schedule page a lecturer sees the schedule
// read-only but for their own bookings (no grid editing, no add form, Delete and Cancel
// only at their own bookings), and the forms posted by hand are refused for anything
// else: deleting an administrator's or another lecturer's exception, dropping the site
// file's or another lecturer's rule by saving the grid. Their own bookings they create,
// change and cancel through the web forms; the pool admin keeps every control.
func TestLecturerScheduleOwnBookings(t *testing.T) {
	e := bookingsUI(t)
	carol := loginAs(t, e, "carol")
	const page = "/ui/schedule/pools/lab-a"
	code, body := carol.get(page)
	if code != http.StatusOK {
		t.Fatalf("schedule page: %d", code)
	}
	mustContain(t, "carol's schedule page", body, `id="read-only-but-bookings"`, "bio-lecture", "eve-lab", `id="grid"`)
	mustLack(t, "carol's schedule page", body, `id="save"`, `id="assign"`, `data-editable`, `id="exc-form"`,
		"exceptions/bio-lecture/delete", "exceptions/eve-lab/delete", "exceptions/exam-2026-12-09/delete", `aria-label="Cancel booking`)

	// Forms posted by hand: refused, naming the booking and its owner; nothing changes.
	before := e.Svc.Snapshot().Site
	tok := carol.csrf(page)
	for _, tc := range []struct{ name, owner string }{{"bio-lecture", "booked by admin"}, {"eve-lab", "booked by eve"}} {
		code, body := carol.post(page+"/exceptions/"+tc.name+"/delete", url.Values{"csrf": {tok}})
		if code != http.StatusForbidden {
			t.Errorf("carol deleting %s: %d, want 403", tc.name, code)
		}
		mustContain(t, "refusal to delete "+tc.name, html.UnescapeString(body), "exception "+tc.name+" is "+tc.owner)
		if e.Svc.Snapshot().Site.Exception(tc.name) == nil {
			t.Fatalf("carol deleted %s", tc.name)
		}
	}
	for _, tc := range []struct {
		name      string
		day, from int // the cells cleared: day, from hour for 2 hours
		msg       string
	}{
		{"the site file's course rule", 2, 10, `rule "wed 10:00-12:00 course-bio101" is the site file's`},
		{"eve's rule", 5, 10, `rule "sat 10:00-12:00 course-bio101" is booked by eve`},
	} {
		f := loadEditor(t, carol, page)
		for s := tc.from * 6; s < (tc.from+2)*6; s++ {
			if f.grid[tc.day][s] != "course-bio101" {
				t.Fatalf("test premise: day %d slot %d is %q", tc.day, s, f.grid[tc.day][s])
			}
			f.grid[tc.day][s] = ""
		}
		code, body := carol.post(page, f.values())
		if code != http.StatusForbidden {
			t.Errorf("carol's save dropping %s: %d, want 403", tc.name, code)
		}
		mustContain(t, "refused save dropping "+tc.name, html.UnescapeString(body), "Not saved", tc.msg)
	}
	after := e.Svc.Snapshot().Site
	if !slices.Equal(after.Pool("lab-a").Weekly, before.Pool("lab-a").Weekly) || len(after.Exceptions) != len(before.Exceptions) {
		t.Fatalf("refused posts changed the site: %q", after.Pool("lab-a").Weekly)
	}

	// Her own bookings: a one-off slot and a weekly slot booked on the Course VMs page.
	ctok := carol.csrf("/ui/courses")
	if code, body := carol.post("/ui/courses/book", url.Values{"csrf": {ctok}, "pool": {"lab-a"}, "mode": {"course-bio101"},
		"type": {"once"}, "start": {"2026-12-10T14:00"}, "end": {"2026-12-10T16:00"}, "name": {"carol-lab"}}); code != http.StatusOK {
		t.Fatalf("booking carol-lab: %d\n%s", code, body)
	}
	if code, body := carol.post("/ui/courses/book", url.Values{"csrf": {ctok}, "pool": {"lab-a"}, "mode": {"course-bio101"},
		"type": {"weekly"}, "days": {"sun"}, "from": {"10:00"}, "to": {"12:00"}}); code != http.StatusOK {
		t.Fatalf("booking a weekly slot: %d\n%s", code, body)
	}
	// The schedule page now offers Delete and Cancel at them, and only there.
	_, body = carol.get(page)
	mustContain(t, "carol's page with her bookings", body, "exceptions/carol-lab/delete", `aria-label="Cancel booking sun 10:00-12:00 course-bio101"`)
	mustLack(t, "carol's page with her bookings", body, "exceptions/bio-lecture/delete", "exceptions/eve-lab/delete",
		`aria-label="Cancel booking sat 10:00-12:00 course-bio101"`, `aria-label="Cancel booking wed 10:00-12:00 course-bio101"`, `id="save"`)
	// Changing her weekly booking with the grid (a form posted by hand: the page offers
	// the Course VMs page) keeps every other rule as written and her as the owner.
	f := loadEditor(t, carol, page)
	for s := 10 * 6; s < 12*6; s++ {
		f.grid[6][s] = ""
		f.grid[6][s+4*6] = "course-bio101" // Sunday 14-16 instead of 10-12
	}
	if code, body := carol.post(page, f.values()); code != http.StatusOK || !strings.Contains(body, "saved the schedule") {
		t.Fatalf("carol moving her own rule with the grid: %d\n%s", code, body)
	}
	p := e.Svc.Snapshot().Site.Pool("lab-a")
	if p.RuleOwners["sun 14:00-16:00 course-bio101"] != "carol" || p.RuleOwners["sat 10:00-12:00 course-bio101"] != "eve" ||
		slices.Contains(p.Weekly, "sun 10:00-12:00 course-bio101") || !sameRules(without(p.Weekly, "sun 14:00-16:00 course-bio101"), before.Pool("lab-a").Weekly) {
		t.Fatalf("after moving her rule: %q %v", p.Weekly, p.RuleOwners)
	}
	// Cancel and Delete from the schedule page.
	tok = carol.csrf(page)
	code, body = carol.post("/ui/courses/cancel", url.Values{"csrf": {tok}, "pool": {"lab-a"}, "rule": {"sun 14:00-16:00 course-bio101"}, "return": {"schedule"}})
	if code != http.StatusOK || !strings.Contains(body, "Weekly schedule of pool lab-a") || slices.Contains(e.Svc.Snapshot().Site.Pool("lab-a").Weekly, "sun 14:00-16:00 course-bio101") {
		t.Fatalf("cancelling her rule from the schedule page: %d\n%s", code, body)
	}
	if code, _ := carol.post(page+"/exceptions/carol-lab/delete", url.Values{"csrf": {tok}}); code != http.StatusOK || e.Svc.Snapshot().Site.Exception("carol-lab") != nil {
		t.Fatalf("deleting her own exception: %d", code)
	}

	// The pool admin keeps every control, at everybody's bookings.
	alice := loginAs(t, e, "alice")
	_, body = alice.get(page)
	mustContain(t, "alice's schedule page", body, `id="save"`, `id="assign"`, `id="exc-form"`,
		"exceptions/bio-lecture/delete", "exceptions/eve-lab/delete", "exceptions/exam-2026-12-09/delete")
	mustLack(t, "alice's schedule page", body, `id="read-only-but-bookings"`)
}

// without is rules less drop.
func without(rules []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == drop })
}
