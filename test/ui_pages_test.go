package test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/browser"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestUIBrowserPages: the pages of the web UI in headless Chromium against a real site
// manager with the example site, each change checked in the directory itself: the
// schedule grid edited by mouse drag and by keyboard alone (Check writes nothing, Save
// writes the rules the engine then evaluates), the CSV import's preview and apply, a
// lecturer's course-VM booking, and a pool admin kept out of another pool, forged
// requests included. OVERTIME_SCREENSHOTS=1 refreshes the pages' screenshots in
// docs/screenshots/.
//
// The example's users: alice is pool admin of lab-a, carol lecturer of lab-a, admin the
// site admin (testenv.ApplyExample creates them with password "<uid>-secret").
func TestUIBrowserPages(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)

	t.Run("schedule by drag", func(t *testing.T) {
		before := uiDirSite(t, e)
		weekBefore := uiPoolWeek(t, before, "lab-a")
		b := browser.New(t, e.HTTP.URL)
		b.Login("alice", "alice-secret")
		if code := b.Go("/ui/schedule/pools/lab-a"); code != http.StatusOK {
			t.Fatalf("editor: status %d", code)
		}
		if n := uiCellCount(b, "", "maintenance"); n != 0 {
			t.Fatalf("lab-a has %d maintenance cells before the test", n)
		}
		// Tue 18:00 to Thu 19:50: days 1-3, slots 108-119.
		b.Drag(uiCell(1, 108), uiCell(3, 119))
		if n := b.Count(`#grid td[aria-selected="true"]`); n != 3*12 {
			t.Fatalf("the drag selected %d cells, want 36", n)
		}
		if got := b.Text("#grid-status"); !strings.Contains(got, "Tue-Thu 18:00-20:00") {
			t.Errorf("status after the drag: %q", got)
		}
		b.SetValue("#assign-mode", "maintenance")
		b.Click("#assign")
		if n, in := uiCellCount(b, "", "maintenance"), uiCellCount(b, uiRect(1, 3, 108, 119), "maintenance"); n != 36 || in != 36 {
			t.Fatalf("after Assign: %d maintenance cells, %d of them in the selection; want 36 and 36", n, in)
		}
		// The form's field (day rows of slots, each a mode's index) carries the change.
		var field string
		b.Eval(`(() => {
			const modes = document.getElementById("grid").dataset.modes.split(","), i = String(modes.indexOf("maintenance"));
			return document.getElementById("grid-value").value.split("|").map(row => row.split(",").map(m => m === i ? "M" : ".").join("")).join("|");
		})()`, &field)
		if want := strings.Repeat(".", 108) + strings.Repeat("M", 12) + strings.Repeat(".", 24); field != strings.Join([]string{strings.Repeat(".", 144), want, want, want, strings.Repeat(".", 144), strings.Repeat(".", 144), strings.Repeat(".", 144)}, "|") {
			t.Errorf("the form's grid field, maintenance slots marked M:\n%s", strings.ReplaceAll(field, "|", "\n"))
		}
		b.Screenshot("schedule")

		// Check: the preview names the new rule; nothing is written.
		if code := b.Submit("#check"); code != http.StatusOK {
			t.Fatalf("check: status %d: %s", code, b.Text("main"))
		}
		b.WaitVisible("#preview")
		if !b.Exists("#check-ok") {
			t.Fatalf("check found a problem: %s", b.Text("#preview"))
		}
		want := uiCanonical(t, "tue-thu 18:00-20:00 maintenance")
		if got := b.Texts("#check-rules li"); !slices.Contains(got, want) {
			t.Errorf("rules after saving %q lack %q", got, want)
		}
		if got := strings.Join(b.Texts("#check-changes li"), "\n"); !strings.Contains(got, "lab-a") {
			t.Errorf("changes %q do not name pool lab-a", got)
		}
		if got := e.Svc.Snapshot().Site.Pool("lab-a").Weekly; !slices.Equal(got, before.Pool("lab-a").Weekly) {
			t.Fatalf("Check wrote the rules: %q", got)
		}
		if got := uiDirSite(t, e).Pool("lab-a").Weekly; !slices.Equal(got, before.Pool("lab-a").Weekly) {
			t.Fatalf("Check wrote the directory: %q", got)
		}
		// The checked grid comes back: the cells are still assigned.
		if n := uiCellCount(b, uiRect(1, 3, 108, 119), "maintenance"); n != 36 {
			t.Fatalf("the preview page shows %d of the 36 assigned cells", n)
		}
		b.Screenshot("schedule-check")

		if code := b.Submit("#save"); code != http.StatusOK {
			t.Fatalf("save: status %d: %s", code, b.Text("main"))
		}
		if got := b.Text("main p.flash"); got != "saved the schedule of pool lab-a" {
			t.Errorf("after Save: %q", got)
		}
		uiCheckWeek(t, weekBefore, uiPoolWeek(t, uiDirSite(t, e), "lab-a"), 1, 3, 108, 119, "maintenance")
		if d := b.Dialogs(); len(d) != 0 {
			t.Errorf("dialogs opened: %q", d)
		}
	})

	t.Run("schedule by keyboard", func(t *testing.T) {
		before := uiDirSite(t, e)
		weekBefore := uiPoolWeek(t, before, "lab-a")
		b := browser.New(t, e.HTTP.URL)
		b.Login("alice", "alice-secret")
		b.Go("/ui/schedule/pools/lab-a")
		// The grid's one tab stop is Monday 08:00; from there: four days down to Friday,
		// Shift+Right five times and Shift+Down once: Fri-Sat 08:00-09:00.
		b.Eval(`document.querySelector('#grid td[tabindex="0"]').focus()`, nil)
		if got := uiActiveCell(b); got != "0/48" {
			t.Fatalf("focused cell %s, want 0/48 (Mon 08:00)", got)
		}
		b.Key(strings.Repeat(kb.ArrowDown, 4))
		uiKey(t, b, strings.Repeat(kb.ArrowRight, 5), chromedp.ModifierShift)
		uiKey(t, b, kb.ArrowDown, chromedp.ModifierShift)
		if got := uiActiveCell(b); got != "5/53" {
			t.Fatalf("focused cell %s, want 5/53 (Sat 08:50)", got)
		}
		if n, in := b.Count(`#grid td[aria-selected="true"]`), uiCellCount(b, uiRect(4, 5, 48, 53), ""); n != 12 || in != 12 {
			t.Fatalf("selected %d cells, want the 12 of Fri-Sat 08:00-09:00 (%d of them)", n, in)
		}
		if got := b.Text("#grid-status"); !strings.Contains(got, "Fri-Sat 08:00-09:00") {
			t.Errorf("status: %q", got)
		}
		// Tab to the mode select, type-ahead "l" (local-disk), Shift+Tab back to the grid,
		// A assigns.
		b.Key(kb.Tab)
		if got := uiActiveID(b); got != "assign-mode" {
			t.Fatalf("Tab from the grid went to %q, want the mode select", got)
		}
		b.Key("l")
		if got := b.Value("#assign-mode"); got != "local-disk" {
			t.Fatalf("the mode select holds %q after typing l", got)
		}
		uiKey(t, b, kb.Tab, chromedp.ModifierShift)
		if got := uiActiveCell(b); got != "5/53" {
			t.Fatalf("Shift+Tab went to %q, want the grid's cell 5/53", got)
		}
		b.Key("a")
		if n, in := uiCellCount(b, "", "local-disk"), uiCellCount(b, uiRect(4, 5, 48, 53), "local-disk"); n != 12 || in != 12 {
			t.Fatalf("after A: %d local-disk cells, %d in the selection; want 12 and 12", n, in)
		}
		// Tab on to Save (the time field has several stops) and press Enter.
		for i := 0; uiActiveID(b) != "save"; i++ {
			if i == 15 {
				t.Fatalf("Tab did not reach the Save button (at %q)", uiActiveID(b))
			}
			b.Key(kb.Tab)
		}
		if code := uiKeyNavigate(t, b, kb.Enter); code != http.StatusOK {
			t.Fatalf("save by Enter: status %d: %s", code, b.Text("main"))
		}
		if got := b.Text("main p.flash"); got != "saved the schedule of pool lab-a" {
			t.Errorf("after Save: %q", got)
		}
		uiCheckWeek(t, weekBefore, uiPoolWeek(t, uiDirSite(t, e), "lab-a"), 4, 5, 48, 53, "local-disk")
		if d := b.Dialogs(); len(d) != 0 {
			t.Errorf("dialogs opened: %q", d)
		}
	})

	t.Run("csv import with preview", func(t *testing.T) {
		b := browser.New(t, e.HTTP.URL)
		b.Login("alice", "alice-secret")
		b.Go("/ui/pools/lab-a")
		if code := b.Submit(`a[href$="/pools/lab-a/import"]`); code != http.StatusOK || b.Path() != "/ui/pools/lab-a/import" {
			t.Fatalf("import link: status %d at %s", code, b.Path())
		}
		// One new host, and pc-a03 with another IP.
		const csv = "name,mac,ip,pool\n" +
			"pc-a06,52:54:00:0a:00:06,10.20.0.16,lab-a\n" +
			"pc-a03,52:54:00:0a:00:03,10.20.0.33,lab-a\n"
		b.SetValue("#csv", csv)
		if code := b.Submit(`form[enctype="multipart/form-data"] button[type=submit]`); code != http.StatusOK {
			t.Fatalf("preview: status %d: %s", code, b.Text("main"))
		}
		if got := b.Texts(".preview li.op-add"); !slices.Equal(got, []string{"+ pc-a06"}) {
			t.Errorf("preview: added %q", got)
		}
		if got := b.Texts(".preview li.op-mod"); len(got) != 1 || !strings.Contains(got[0], "pc-a03") || !strings.Contains(strings.ToLower(got[0]), "ip") {
			t.Errorf("preview: changed %q, want pc-a03's IP", got)
		}
		if n := b.Count(".preview li.op-del"); n != 0 {
			t.Errorf("preview: %d hosts removed", n)
		}
		site := uiDirSite(t, e)
		if site.Host("pc-a06") != nil || site.Host("pc-a03").IP != "10.20.0.13" {
			t.Fatalf("the preview wrote the directory: pc-a06 %v, pc-a03 %s", site.Host("pc-a06") != nil, site.Host("pc-a03").IP)
		}
		b.Screenshot("import-preview")
		if code := b.Submit(".preview button.primary"); code != http.StatusOK || b.Path() != "/ui/pools/lab-a?done=CSV+imported%3A+1+hosts+added%2C+1+changed" {
			t.Fatalf("apply: status %d at %s: %s", code, b.Path(), b.Text("main"))
		}
		if got := b.Texts("table.hosts tbody th a"); !slices.Contains(got, "pc-a06") {
			t.Errorf("the pool page lists %q without pc-a06", got)
		}
		site = uiDirSite(t, e)
		if h := site.Host("pc-a06"); h == nil || h.Pool != "lab-a" || h.MAC != "52:54:00:0a:00:06" || h.IP != "10.20.0.16" {
			t.Errorf("pc-a06 in the directory: %+v", h)
		}
		if h := site.Host("pc-a03"); h == nil || h.IP != "10.20.0.33" || h.MAC != "52:54:00:0a:00:03" || h.Pool != "lab-a" {
			t.Errorf("pc-a03 in the directory: %+v", h)
		}
	})

	t.Run("lecturer books a course VM", func(t *testing.T) {
		b := browser.New(t, e.HTTP.URL)
		b.Login("carol", "carol-secret")
		b.Go("/ui/courses")
		// Only her pool and its course mode are offered.
		if got := b.Texts("#b-pool option"); !slices.Equal(got, []string{"lab-a"}) {
			t.Errorf("pools offered %q, want only lab-a", got)
		}
		if b.Exists(`#b-pool option[value="lab-b"]`) || b.Count("#b-mode option") != 1 || b.Value("#b-mode") != "course-bio101" {
			t.Errorf("modes offered: %q", b.Texts("#b-mode option"))
		}
		if got := b.Text("table.bookings tbody"); !strings.Contains(got, "You have no bookings") {
			t.Errorf("bookings before: %q", got)
		}
		before := uiDirSite(t, e)
		b.SetValue("#b-mode", "course-bio101")
		b.SetValue("#b-pool", "lab-a")
		b.SetValue("#b-days", "sat")
		b.SetValue("#b-from", "10:00")
		b.SetValue("#b-to", "12:00")
		if code := b.Submit("form.book button.primary"); code != http.StatusOK {
			t.Fatalf("book: status %d: %s", code, b.Text("main"))
		}
		if got := b.Text("main p.flash"); got != `booked "sat 10:00-12:00 course-bio101" in pool lab-a` {
			t.Errorf("after booking: %q", got)
		}
		rows := b.Texts("table.bookings tbody tr")
		if len(rows) != 1 {
			t.Fatalf("bookings: %q", rows)
		}
		// Every PC of lab-a but pc-a05 (its own rule keeps it a desktop) starts the VM on
		// Saturday (the site's clock is Wed 2026-12-02 10:30).
		n := 0
		for _, h := range before.Hosts {
			if h.Pool == "lab-a" {
				n++
			}
		}
		wantLive := fmt.Sprintf("next Sat 2026-12-05 10:00 until 12:00 on %d of %d PCs of pool lab-a", n-1, n)
		if got := b.Text("table.bookings tbody td.live"); got != wantLive {
			t.Errorf("live: %q, want %q", got, wantLive)
		}
		for _, s := range []string{"course-bio101", "pool lab-a", "every week: sat 10:00-12:00"} {
			if !strings.Contains(rows[0], s) {
				t.Errorf("booking row %q lacks %q", rows[0], s)
			}
		}
		if got, want := b.Text("#upload + p + pre code"), "overtime image import my-vm.ova --image bio101-vm --pool lab-a --version 2026-12-02-1"; got != want {
			t.Errorf("upload command %q, want %q", got, want)
		}
		b.Screenshot("courses")
		site := uiDirSite(t, e)
		const rule = "sat 10:00-12:00 course-bio101"
		p := site.Pool("lab-a")
		if !slices.Contains(p.Weekly, rule) || p.RuleOwners[rule] != "carol" {
			t.Fatalf("lab-a in the directory: %q owners %v", p.Weekly, p.RuleOwners)
		}
		if got := uiPoolWeek(t, site, "lab-a")[5][63]; got != "course-bio101" {
			t.Errorf("the engine gives lab-a %s on Saturday 10:30", got)
		}
		if got := site.Pool("lab-a").Weekly; len(got) != len(before.Pool("lab-a").Weekly)+1 {
			t.Errorf("lab-a's rules went from %q to %q", before.Pool("lab-a").Weekly, got)
		}

		// A forged booking for lab-b with her session and token: refused by the server.
		csrf := b.Value(`form.book input[name=csrf]`)
		status, body := uiFetch(t, b, "/ui/courses/book", map[string]string{"csrf": csrf, "pool": "lab-b", "mode": "course-bio101",
			"type": "weekly", "days": "sun", "from": "10:00", "to": "12:00"})
		if status != http.StatusForbidden || strings.Contains(body, "CSRF") || !strings.Contains(body, "lab-b") {
			t.Errorf("forged booking for lab-b: status %d: %s", status, uiMain(body))
		}
		after := uiDirSite(t, e)
		if !slices.Equal(after.Pool("lab-b").Weekly, before.Pool("lab-b").Weekly) || !slices.Equal(after.Pool("lab-a").Weekly, site.Pool("lab-a").Weekly) {
			t.Errorf("the forged booking changed the rules: lab-b %q", after.Pool("lab-b").Weekly)
		}
	})

	t.Run("pool admin confined", func(t *testing.T) {
		b := browser.New(t, e.HTTP.URL)
		b.Login("alice", "alice-secret")
		for _, path := range []string{"/ui/pools/lab-b", "/ui/hosts/pc-b01", "/ui/pools/lab-b/import", "/ui/schedule/pools/lab-b"} {
			code := b.Go(path)
			want := http.StatusForbidden
			if strings.HasPrefix(path, "/ui/schedule/") {
				want = http.StatusNotFound // the editor does not tell which pools exist
			}
			if code != want {
				t.Errorf("%s: status %d, want %d", path, code, want)
			}
			if got := b.Text("main p.error"); !strings.Contains(got, "alice") && !strings.Contains(got, "that you may see") {
				t.Errorf("%s: error %q", path, got)
			}
			if b.Exists("main table") || b.Exists("main form") {
				t.Errorf("%s: the error page shows a table or form", path)
			}
		}
		b.Go("/ui/")
		hosts := b.Texts("table.hosts tbody th a")
		if len(hosts) == 0 {
			t.Fatalf("no hosts on alice's overview")
		}
		for _, h := range hosts {
			if !strings.HasPrefix(h, "pc-a") {
				t.Errorf("alice's overview lists host %s", h)
			}
		}
		if got := b.Text("main"); strings.Contains(got, "pc-b0") || strings.Contains(got, "lab-b") {
			t.Errorf("alice's overview mentions lab-b or its hosts")
		}
		// A forged add-host form for lab-b, with her session and a valid token.
		before := uiDirSite(t, e)
		b.Go("/ui/pools/lab-a")
		csrf := b.Value(`form.hostform input[name=csrf]`)
		status, body := uiFetch(t, b, "/ui/pools/lab-b/hosts", map[string]string{"csrf": csrf, "name": "pc-b09", "mac": "52:54:00:0b:00:09"})
		if status != http.StatusForbidden || strings.Contains(body, "CSRF") || !strings.Contains(body, "may not") {
			t.Errorf("forged add host in lab-b: status %d: %s", status, uiMain(body))
		}
		// And an edit of a lab-b host, moving it to her pool.
		status, body = uiFetch(t, b, "/ui/hosts/pc-b01", map[string]string{"csrf": csrf, "mac": "52:54:00:0b:00:01", "pool": "lab-a"})
		if status != http.StatusForbidden || strings.Contains(body, "CSRF") {
			t.Errorf("forged edit of pc-b01: status %d: %s", status, uiMain(body))
		}
		after := uiDirSite(t, e)
		if after.Host("pc-b09") != nil || after.Host("pc-b01").Pool != "lab-b" || len(after.Hosts) != len(before.Hosts) {
			t.Errorf("a forged request changed the hosts: pc-b09 %v, pc-b01 in %s", after.Host("pc-b09") != nil, after.Host("pc-b01").Pool)
		}
		// The same request for her own pool is accepted: the refusals were authorisation,
		// not a broken request.
		status, body = uiFetch(t, b, "/ui/pools/lab-a/hosts", map[string]string{"csrf": csrf, "name": "pc-a09", "mac": "52:54:00:0a:00:09"})
		if status != http.StatusOK || uiDirSite(t, e).Host("pc-a09") == nil {
			t.Errorf("adding pc-a09 to lab-a: status %d: %s", status, uiMain(body))
		}
	})

	t.Run("audit log", func(t *testing.T) {
		b := browser.New(t, e.HTTP.URL)
		b.Login("alice", "alice-secret")
		// Filtered by another user, the page is still alice's: her name, the navigation
		// and the logout form in the header.
		if code := b.Go("/ui/audit?user=carol"); code != http.StatusOK {
			t.Fatalf("audit: status %d", code)
		}
		if got := b.Text("form.who span"); got != "alice" || b.Count("header nav a") != 8 {
			t.Errorf("audit page header: user %q, %d navigation links", got, b.Count("header nav a"))
		}
		if got := b.Value("#a-user"); got != "carol" {
			t.Errorf("user filter field %q", got)
		}
		users := b.Texts("table.audit tbody th.user")
		if len(users) == 0 || slices.ContainsFunc(users, func(u string) bool { return u != "carol" }) {
			t.Errorf("entries by %q, want carol's booking only", users)
		}
		// Times in the site's zone, as the footer's clock (the site manager's clock is
		// Wed 2026-12-02 10:30 Berlin; the entries are stored in UTC).
		if got := b.Text("table.audit tbody td"); got != "2026-12-02 10:30" {
			t.Errorf("entry time %q, want site time 2026-12-02 10:30", got)
		}
		if got := b.Text("footer"); got != "Site time 2026-12-02 10:30" {
			t.Errorf("footer %q", got)
		}
	})

	// Every other page in a real browser (no JavaScript error or CSP violation, 200),
	// with its screenshot (into docs/screenshots/ with OVERTIME_SCREENSHOTS=1).
	t.Run("screenshots", func(t *testing.T) {
		b := browser.New(t, e.HTTP.URL)
		b.Login("admin", testenv.AdminPassword)
		for _, p := range []struct{ path, name string }{
			{"/ui/pools/lab-a", "pool"},
			{"/ui/hosts/pc-a01", "host"},
			{"/ui/images", "images"},
			{"/ui/images/bio101-vm", "image"},
			{"/ui/harvest?pool=lab-a", "harvest"},
			{"/ui/audit", "audit"},
		} {
			if code := b.Go(p.path); code != http.StatusOK {
				t.Fatalf("%s: status %d", p.path, code)
			}
			b.Screenshot(p.name)
		}
	})
}

// uiDirSite reads the site from the directory itself (not the service's snapshot).
func uiDirSite(t *testing.T, e *testenv.Env) *model.Site {
	t.Helper()
	site, err := e.Store.Load(t.Context())
	if err != nil {
		t.Fatalf("read the directory: %v", err)
	}
	return site
}

// uiPoolWeek is the mode the schedule engine compiled from site gives a PC of pool
// without rules of its own in each 10-minute slot of a week without exceptions (the
// week of Monday 2027-01-11, no DST change).
func uiPoolWeek(t *testing.T, site *model.Site, pool string) (w [7][144]string) {
	t.Helper()
	s := site.Clone()
	s.Exceptions = nil
	probe := model.Host{Name: "probe-week", MAC: "52:54:00:ff:ff:fe", Pool: pool}
	s.Hosts = append(s.Hosts, probe)
	eng, err := schedule.Compile(s)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	for d := range 7 {
		for sl := range 144 {
			at := time.Date(2027, 1, 11+d, 0, sl*10, 0, 0, eng.Location())
			w[d][sl] = eng.AtHost(&probe, at).Mode
		}
	}
	return w
}

// uiCheckWeek: after is before with days d0-d1, slots s0-s1 in mode.
func uiCheckWeek(t *testing.T, before, after [7][144]string, d0, d1, s0, s1 int, mode string) {
	t.Helper()
	bad := 0
	for d := range 7 {
		for s := range 144 {
			want := before[d][s]
			if d >= d0 && d <= d1 && s >= s0 && s <= s1 {
				want = mode
			}
			if after[d][s] != want && bad < 10 {
				bad++
				t.Errorf("day %d %02d:%02d: the engine gives %s, want %s", d, s/6, s%6*10, after[d][s], want)
			}
		}
	}
}

// uiCanonical is a rule as the editor writes it.
func uiCanonical(t *testing.T, rule string) string {
	t.Helper()
	r, err := schedule.ParseRule(rule)
	if err != nil {
		t.Fatal(err)
	}
	return r.Text
}

func uiCell(day, slot int) string {
	return fmt.Sprintf(`#grid td[data-day="%d"][data-slot="%d"]`, day, slot)
}

// uiRect is a JavaScript condition on a cell (c) for days d0-d1, slots s0-s1.
func uiRect(d0, d1, s0, s1 int) string {
	return fmt.Sprintf("(+c.dataset.day >= %d && +c.dataset.day <= %d && +c.dataset.slot >= %d && +c.dataset.slot <= %d)", d0, d1, s0, s1)
}

// uiCellCount counts grid cells meeting cond (a uiRect; "" any) in mode ("" the
// selected ones).
func uiCellCount(b *browser.Browser, cond, mode string) int {
	if cond == "" {
		cond = "true"
	}
	test := fmt.Sprintf("c.dataset.mode === %q", mode)
	if mode == "" {
		test = `c.getAttribute("aria-selected") === "true"`
	}
	var n int
	b.Eval(fmt.Sprintf(`Array.from(document.querySelectorAll("#grid td[data-day]")).filter(c => %s && %s).length`, cond, test), &n)
	return n
}

// uiActiveCell is the focused grid cell as "day/slot".
func uiActiveCell(b *browser.Browser) string {
	var s string
	b.Eval(`(() => { const c = document.activeElement; return c && c.dataset && c.dataset.day !== undefined ? c.dataset.day + "/" + c.dataset.slot : String(c && (c.id || c.tagName)); })()`, &s)
	return s
}

func uiActiveID(b *browser.Browser) string {
	var s string
	b.Eval(`document.activeElement ? document.activeElement.id : ""`, &s)
	return s
}

// uiKey types keys into the focused element with modifiers held.
func uiKey(t *testing.T, b *browser.Browser, keys string, mods ...chromedp.Modifier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), b.ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.KeyEvent(keys, chromedp.KeyModifiers(mods...))); err != nil {
		t.Fatalf("key %q: %v", keys, err)
	}
}

// uiKeyNavigate types key and waits for the page it loads; it returns its status.
func uiKeyNavigate(t *testing.T, b *browser.Browser, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), b.ActionTimeout)
	defer cancel()
	res, err := chromedp.RunResponse(ctx, chromedp.KeyEvent(key))
	if err != nil {
		t.Fatalf("key %q and wait for the next page: %v", key, err)
	}
	if res == nil {
		return 0
	}
	return int(res.Status)
}

// uiFetch posts form as the page's script could (fetch with the browser's session
// cookie, same origin) and returns the status and body of the answer.
func uiFetch(t *testing.T, b *browser.Browser, path string, form map[string]string) (int, string) {
	t.Helper()
	var args []string
	for k, v := range form {
		args = append(args, fmt.Sprintf("%q: %q", k, v))
	}
	js := fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams({%s})}).then(async r => ({status: r.status, body: await r.text()}))`,
		path, strings.Join(args, ", "))
	ctx, cancel := context.WithTimeout(b.Context(), b.ActionTimeout)
	defer cancel()
	res, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetch %s: %v", path, err)
	}
	return res.Status, res.Body
}

// uiMain is the error or flash text of a page's markup, for messages.
func uiMain(html string) string {
	for _, marker := range []string{`<p class="error" role="alert">`, `<span class="fielderr" role="alert">`, `<p class="flash" role="status">`} {
		if i := strings.Index(html, marker); i >= 0 {
			s := html[i+len(marker):]
			if j := strings.Index(s, "<"); j >= 0 {
				s = s[:j]
			}
			return s
		}
	}
	if len(html) > 300 {
		html = html[:300] + "…"
	}
	return html
}
