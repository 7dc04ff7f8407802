package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/sitemgmt/web"
)

var (
	gridValueRe = regexp.MustCompile(`id="grid-value" value="([^"]*)"`)
	modesRe     = regexp.MustCompile(`name="modes" value="([^"]*)"`)
	revRe       = regexp.MustCompile(`name="rev" value="([^"]*)"`)
)

// editorForm is the editor's form as the page gives it, with the grid decoded.
type editorForm struct {
	grid  schedule.WeekGrid
	modes []string
	rev   string
	csrf  string
}

func loadEditor(t *testing.T, b *browser, path string) editorForm {
	t.Helper()
	code, body := b.get(path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	for _, want := range []string{`id="grid"`, `role="grid"`, `data-day="6" data-slot="143"`, `aria-label="Mon 08:00-08:10 `} {
		if !strings.Contains(body, want) {
			t.Fatalf("editor %s lacks %s", path, want)
		}
	}
	f := editorForm{}
	for _, m := range []struct {
		re *regexp.Regexp
		to *string
	}{{gridValueRe, nil}, {modesRe, nil}, {revRe, &f.rev}, {csrfRe, &f.csrf}} {
		sm := m.re.FindStringSubmatch(body)
		if sm == nil {
			t.Fatalf("editor %s lacks %s", path, m.re)
		}
		if m.to != nil {
			*m.to = html.UnescapeString(sm[1])
		}
	}
	f.modes = strings.Split(html.UnescapeString(modesRe.FindStringSubmatch(body)[1]), ",")
	g, err := web.DecodeGrid(html.UnescapeString(gridValueRe.FindStringSubmatch(body)[1]), f.modes)
	if err != nil {
		t.Fatal(err)
	}
	f.grid = g
	return f
}

func (f editorForm) values(extra ...string) url.Values {
	v := url.Values{"csrf": {f.csrf}, "grid": {web.EncodeGrid(f.grid, f.modes)}, "modes": {strings.Join(f.modes, ",")}, "rev": {f.rev}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v
}

func weeklyOf(e *testenv.Env, pool string) []string {
	return slices.Clone(e.Svc.Snapshot().Site.Pool(pool).Weekly)
}

func TestScheduleEditorSavePreview(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	b := newBrowser(t, e)
	b.login("admin", testenv.AdminPassword)

	code, body := b.get("/ui/schedule")
	if code != http.StatusOK || !strings.Contains(body, `href="/ui/schedule/pools/lab-b"`) || !strings.Contains(body, "pc-a05") {
		t.Fatalf("schedule index: %d\n%s", code, body)
	}
	if _, body := b.get("/ui/schedule?host=pc-b0"); !strings.Contains(body, `href="/ui/schedule/hosts/pc-b02"`) {
		t.Errorf("host search does not find pc-b02")
	}
	before := weeklyOf(e, "lab-b")
	f := loadEditor(t, b, "/ui/schedule/pools/lab-b")
	// Saturday 14:00-16:00 becomes desktop: lab-b's "sat 09:00-14:00 desktop" grows.
	for s := 14 * 6; s < 16*6; s++ {
		f.grid[5][s] = "desktop"
	}

	// Check: a dry run that shows the new rules and what the hosts boot at T, and writes nothing.
	code, body = b.post("/ui/schedule/pools/lab-b", f.values("preview", "1", "at", "2026-12-05T15:00"))
	if code != http.StatusOK || !strings.Contains(body, `id="check-ok"`) {
		t.Fatalf("check: %d\n%s", code, body)
	}
	if !strings.Contains(body, "<code>sat 09:00-16:00 desktop</code>") || !strings.Contains(body, "<code>~ pool lab-b (weekly)</code>") {
		t.Errorf("check does not show the new rule and the change:\n%s", body)
	}
	if got := weeklyOf(e, "lab-b"); !slices.Equal(got, before) {
		t.Fatalf("check wrote the rules: %q, was %q", got, before)
	}
	// The boot-at-T table is the engine's answer for the candidate site.
	cand := e.Svc.Snapshot().Site.Clone()
	cand.Pool("lab-b").Weekly = []string{"mon-fri 08:00-18:00 desktop", "sat 09:00-16:00 desktop"}
	eng, err := schedule.Compile(cand)
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation("Europe/Berlin")
	at := time.Date(2026, 12, 5, 15, 0, 0, 0, loc)
	for _, h := range []string{"pc-b01", "pc-b03"} {
		d, _ := eng.At(h, at)
		now, _ := e.Svc.Snapshot().Engine.At(h, at)
		if d.Mode != "desktop" || now.Mode != "cluster" {
			t.Fatalf("test premise: %s at %v is %s with the new rules, %s now", h, at, d.Mode, now.Mode)
		}
		if want := `data-host="` + h + `">` + d.Mode + `<`; !strings.Contains(body, want) {
			t.Errorf("check: boot-at-T lacks %s", want)
		}
	}
	if strings.Contains(body, `data-host="pc-a01"`) {
		t.Errorf("check lists hosts of another pool")
	}

	// Save: the directory's rules change accordingly.
	code, body = b.post("/ui/schedule/pools/lab-b", f.values())
	if code != http.StatusOK || !strings.Contains(body, "saved the schedule of pool lab-b") {
		t.Fatalf("save: %d\n%s", code, body)
	}
	got := weeklyOf(e, "lab-b")
	if !sameRules(got, []string{"mon-fri 08:00-18:00 desktop", "sat 09:00-16:00 desktop"}) {
		t.Fatalf("after save lab-b has %q", got)
	}
	owners := e.Svc.Snapshot().Site.Pool("lab-b").RuleOwners
	if owners["sat 09:00-16:00 desktop"] != "admin" || owners["mon-fri 08:00-18:00 desktop"] != "" {
		t.Errorf("owners after save: %v (the new rule is admin's booking, the kept one the site file's)", owners)
	}
	// The same page again (stale rev) is refused: someone changed the rules meanwhile.
	code, body = b.post("/ui/schedule/pools/lab-b", f.values())
	if code != http.StatusConflict || !strings.Contains(body, "changed since this page was loaded") {
		t.Errorf("save from a stale page: %d", code)
	}

	// A host's editor: its own rules solid, the pool's inherited.
	if _, body := b.get("/ui/schedule/hosts/pc-a05"); !strings.Contains(body, `data-day="0" data-slot="0" data-mode="desktop"`) {
		t.Errorf("pc-a05's editor does not show its own daily desktop rule")
	}
	if _, body := b.get("/ui/schedule/hosts/pc-a01"); !strings.Contains(body, `data-day="2" data-slot="60" data-mode="" data-inherit="course-bio101"`) {
		t.Errorf("pc-a01's editor does not show the pool's Wednesday course as inherited")
	}
}

func sameRules(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestScheduleEditorRefusals(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)

	// A viewer sees the grid but may not save.
	v := newBrowser(t, e)
	v.login("dave", "dave-secret")
	f := loadEditor(t, v, "/ui/schedule/pools/lab-a")
	before := weeklyOf(e, "lab-a")
	for s := 0; s < 12; s++ {
		f.grid[6][s] = "desktop"
	}
	if code, _ := v.post("/ui/schedule/pools/lab-a", f.values()); code != http.StatusForbidden {
		t.Errorf("viewer's save: %d, want 403", code)
	}
	if code, _ := v.post("/ui/schedule/pools/lab-a/exceptions", url.Values{"csrf": {f.csrf}, "name": {"x"}, "kind": {"other"},
		"start": {"2026-12-20T08:00"}, "end": {"2026-12-20T09:00"}, "mode": {"desktop"}}); code != http.StatusForbidden {
		t.Errorf("viewer's exception: %d, want 403", code)
	}
	if got := weeklyOf(e, "lab-a"); !slices.Equal(got, before) || len(e.Svc.Snapshot().Site.Exceptions) != 1 {
		t.Fatalf("viewer's posts wrote something")
	}

	// A lecturer may book a course slot but not take desktop hours: authz says why.
	c := newBrowser(t, e)
	c.login("carol", "carol-secret")
	f = loadEditor(t, c, "/ui/schedule/pools/lab-a")
	for s := 10 * 6; s < 12*6; s++ {
		f.grid[0][s] = "course-bio101" // Monday 10-12: the pool's desktop hours
	}
	code, body := c.post("/ui/schedule/pools/lab-a", f.values())
	if code != http.StatusForbidden || !strings.Contains(body, "Not saved") {
		t.Errorf("lecturer taking desktop hours: %d\n%s", code, body)
	}
	if got := weeklyOf(e, "lab-a"); !slices.Equal(got, before) {
		t.Fatalf("refused save wrote %q", got)
	}
	f = loadEditor(t, c, "/ui/schedule/pools/lab-a")
	for s := 10 * 6; s < 12*6; s++ {
		f.grid[5][s] = "course-bio101" // Saturday 10-12: free
	}
	if code, body := c.post("/ui/schedule/pools/lab-a", f.values()); code != http.StatusOK || !strings.Contains(body, "saved the schedule") {
		t.Fatalf("lecturer's booking: %d\n%s", code, body)
	}
	site := e.Svc.Snapshot().Site
	if o := site.Pool("lab-a").RuleOwners; len(o) != 1 || o["sat 10:00-12:00 course-bio101"] != "carol" && o["wed,sat 10:00-12:00 course-bio101"] != "carol" {
		t.Errorf("lecturer's booking: rules %q owners %v", site.Pool("lab-a").Weekly, o)
	}
	// The booking survives the admin's unrelated edit, as written and owned.
	a := newBrowser(t, e)
	a.login("admin", testenv.AdminPassword)
	f = loadEditor(t, a, "/ui/schedule/pools/lab-a")
	f.grid[6][0] = "local-disk"
	if code, body := a.post("/ui/schedule/pools/lab-a", f.values()); code != http.StatusOK {
		t.Fatalf("admin's save: %d\n%s", code, body)
	}
	site = e.Svc.Snapshot().Site
	for r, o := range site.Pool("lab-a").RuleOwners {
		if o == "carol" && !slices.Contains(site.Pool("lab-a").Weekly, r) {
			t.Errorf("carol's booking %q lost", r)
		}
	}
	if !slices.Contains(site.Pool("lab-a").Weekly, "sun 00:00-00:10 local-disk") {
		t.Errorf("admin's edit missing: %q", site.Pool("lab-a").Weekly)
	}
}

func TestScheduleExceptions(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	b := newBrowser(t, e)
	b.login("alice", "alice-secret")
	code, body := b.get("/ui/schedule/pools/lab-a")
	if code != http.StatusOK || !strings.Contains(body, "exam-2026-12-09") || !strings.Contains(body, "Wed 2026-12-09") {
		t.Fatalf("pool page lacks the exam: %d\n%s", code, body)
	}
	if !strings.Contains(body, "network: exam.uni.example:443 10.20.5.0/24 and what the PCs need") {
		t.Errorf("pool page does not say what the exam's PCs may reach:\n%s", body)
	}
	tok := csrfRe.FindStringSubmatch(body)[1]
	post := func(kv ...string) (int, string) {
		v := url.Values{"csrf": {tok}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return b.post("/ui/schedule/pools/lab-a/exceptions", v)
	}
	n := len(e.Svc.Snapshot().Site.Exceptions)
	// Overlapping the exam on lab-a: a conflict shown at the start field.
	code, body = post("name", "lecture-x", "kind", "lecture", "start", "2026-12-09T12:00", "end", "2026-12-09T14:00", "mode", "course-bio101")
	if code != http.StatusConflict || !regexp.MustCompile(`id="exc-start"[^>]*>\s*<span class="fielderr" role="alert">[^<]*overlap`).MatchString(body) {
		t.Errorf("overlapping exception: %d\n%s", code, body)
	}
	// Invalid: end before start, and a time off the 10-minute grid.
	code, body = post("name", "lecture-y", "kind", "lecture", "start", "2026-12-10T12:00", "end", "2026-12-10T11:00", "mode", "desktop")
	if code != http.StatusBadRequest || !strings.Contains(body, "is not after start") {
		t.Errorf("end before start: %d", code)
	}
	code, body = post("name", "lecture-z", "kind", "lecture", "start", "2026-12-10T12:05", "end", "2026-12-10T13:00", "mode", "desktop")
	if code != http.StatusBadRequest || !strings.Contains(body, "10-minute grid") || !strings.Contains(body, `value="lecture-z"`) {
		t.Errorf("start off the grid: %d", code)
	}
	// An exam's network: an entry that is not an endpoint is shown at the allow field,
	// naming which; an allow list on a lecture too.
	code, body = post("name", "exam-y", "kind", "exam", "start", "2026-12-10T12:00", "end", "2026-12-10T13:00", "mode", "desktop",
		"allow", "exam.uni.example:443, 10.0.5.1/24")
	if code != http.StatusBadRequest || !regexp.MustCompile(`id="exc-allow"[^>]*>\s*<span class="fielderr" role="alert">[^<]*allow\[1\][^<]*host bits set`).MatchString(body) ||
		!strings.Contains(body, `value="exam.uni.example:443, 10.0.5.1/24"`) {
		t.Errorf("bad allow entry: %d\n%s", code, body)
	}
	code, body = post("name", "lecture-a", "kind", "lecture", "start", "2026-12-10T12:00", "end", "2026-12-10T13:00", "mode", "desktop",
		"allow", "exam.uni.example")
	if code != http.StatusBadRequest || !regexp.MustCompile(`id="exc-allow"[^>]*>\s*<span class="fielderr" role="alert">[^<]*only exceptions of kind exam`).MatchString(body) {
		t.Errorf("allow on a lecture: %d\n%s", code, body)
	}
	if got := len(e.Svc.Snapshot().Site.Exceptions); got != n {
		t.Fatalf("refused exceptions were written: %d, was %d", got, n)
	}
	// A valid exam keeps its allow list.
	code, body = post("name", "exam-z", "kind", "exam", "start", "2026-12-10T12:00", "end", "2026-12-10T13:00", "mode", "desktop",
		"allow", "exam.uni.example:443\n[2001:db8::1]:8443")
	if x := e.Svc.Snapshot().Site.Exception("exam-z"); code != http.StatusOK || x == nil || !slices.Equal(x.Allow, []string{"exam.uni.example:443", "[2001:db8::1]:8443"}) {
		t.Fatalf("add exam: %d %+v\n%s", code, x, body)
	}
	if code, _ := b.post("/ui/schedule/pools/lab-a/exceptions/exam-z/delete", url.Values{"csrf": {tok}}); code != http.StatusOK {
		t.Errorf("delete exam-z: %d", code)
	}
	// A valid one is added, owned by alice, listed, and deleted again.
	code, body = post("name", "repair-1", "kind", "maintenance", "start", "2026-12-10T07:00", "end", "2026-12-10T09:00", "mode", "maintenance", "hosts", "pc-a02")
	if code != http.StatusOK || !strings.Contains(body, "added exception repair-1") || !strings.Contains(body, "Thu 2026-12-10") {
		t.Fatalf("add: %d\n%s", code, body)
	}
	x := e.Svc.Snapshot().Site.Exception("repair-1")
	if x == nil || x.Owner != "alice" || len(x.Targets) != 1 || x.Targets[0].Host != "pc-a02" {
		t.Fatalf("added exception: %+v", x)
	}
	if code, _ := b.post("/ui/schedule/pools/lab-a/exceptions/repair-1/delete", url.Values{"csrf": {tok}}); code != http.StatusOK {
		t.Errorf("delete: %d", code)
	}
	if e.Svc.Snapshot().Site.Exception("repair-1") != nil {
		t.Errorf("exception not deleted")
	}
	// Bob (lab-b) may not delete lab-a's exam.
	bb := newBrowser(t, e)
	bb.login("bob", "bob-secret")
	tok2 := bb.csrf("/ui/schedule")
	if code, _ := bb.post("/ui/schedule/pools/lab-a/exceptions/exam-2026-12-09/delete", url.Values{"csrf": {tok2}}); code != http.StatusNotFound && code != http.StatusForbidden {
		t.Errorf("bob deleting lab-a's exam: %d", code)
	}
	if e.Svc.Snapshot().Site.Exception("exam-2026-12-09") == nil {
		t.Errorf("bob deleted the exam")
	}
}
