package service_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// memBackend is a store in memory: the bookings need nothing of the directory but the
// site, so their tests run without slapd.
type memBackend struct {
	mu   sync.Mutex
	site *model.Site
}

func (m *memBackend) Load(context.Context) (*model.Site, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.site.Clone(), nil
}

func (m *memBackend) Apply(_ context.Context, cur, next *model.Site) ([]model.Change, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.site = next.Clone()
	return model.Diff(cur, next), nil
}

func (m *memBackend) Authenticate(context.Context, string, string) error { return nil }
func (m *memBackend) PutUser(context.Context, string, string, string) error {
	return nil
}
func (m *memBackend) Users(context.Context) ([]model.User, error)            { return nil, nil }
func (m *memBackend) DeleteUser(context.Context, string) error               { return nil }
func (m *memBackend) SetPassword(context.Context, string, string) error      { return nil }
func (m *memBackend) HostCredential(context.Context, string) (string, error) { return "", nil }
func (m *memBackend) SetHostCredential(context.Context, string, string) error {
	return nil
}

// bookingService is a service over the example site in memory.
func bookingService(t *testing.T) *service.Service {
	t.Helper()
	svc, err := service.New(context.Background(), &memBackend{site: testenv.ExampleSite(t)}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// The example site's users: the site admin, lab-a's pool admin, lab-a's lecturers
// (carol; eve as a second lecturer).
var (
	admin = authz.Principal{UID: "admin", SiteAdmin: true}
	alice = authz.Principal{UID: "alice", PoolAdmin: map[string]bool{"lab-a": true}}
	carol = authz.Principal{UID: "carol", Lecturer: map[string]bool{"lab-a": true}}
	eve   = authz.Principal{UID: "eve", Lecturer: map[string]bool{"lab-a": true}}
)

var labA = model.Target{Pool: "lab-a"}

// wantStatus fails unless err has the HTTP status want (200: no error) and says each of
// says.
func wantStatus(t *testing.T, what string, err error, want int, says ...string) {
	t.Helper()
	got := http.StatusOK
	if err != nil {
		got, _, _ = errstatus.Of(err)
	}
	if got != want {
		t.Errorf("%s: status %d (%v), want %d", what, got, err, want)
		return
	}
	for _, s := range says {
		if s != "" && (err == nil || !strings.Contains(err.Error(), s)) {
			t.Errorf("%s: %v does not say %q", what, err, s)
		}
	}
}

// TestBookRule: a booked rule is stored canonical and owned by whoever booked it; what
// authz, the parser or the compiler refuses is not written.
func TestBookRule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      authz.Principal
		target model.Target
		rule   string
		status int
		says   string
		stored string // the rule as stored, when booked
	}{
		{"lecturer's course slot", carol, labA, "Sat 10:00-12:00 course-bio101", 200, "", "sat 10:00-12:00 course-bio101"},
		{"pool admin's host rule", alice, model.Target{Host: "pc-a01"}, "sun 08:00-09:00 local-disk", 200, "", "sun 08:00-09:00 local-disk"},
		{"lecturer in another pool", carol, model.Target{Pool: "lab-b"}, "sun 10:00-12:00 course-bio101", 403, "lab-b", ""},
		{"lecturer's desktop rule", carol, labA, "sat 10:00-12:00 desktop", 403, "course-vm", ""},
		{"overlap", carol, labA, "thu 10:00-12:00 course-bio101", 409, "overlap", ""},
		{"the site file's rule again", alice, labA, "wed 10:00-12:00 course-bio101", 409, `rule "wed 10:00-12:00 course-bio101" already exists on pool lab-a`, ""},
		{"not a rule", carol, labA, "saturday morning", 400, "invalid weekly rule", ""},
		{"no such pool", admin, model.Target{Pool: "lab-z"}, "sat 10:00-12:00 desktop", 404, "lab-z", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := bookingService(t)
			before := svc.Snapshot().Site
			stored, changes, err := svc.Bookings.BookRule(context.Background(), tc.p, tc.target, tc.rule)
			wantStatus(t, tc.name, err, tc.status, tc.says)
			if tc.status != 200 {
				if svc.Snapshot().Site != before {
					t.Errorf("refused booking wrote %v", changes)
				}
				return
			}
			if stored != tc.stored || len(changes) != 1 {
				t.Errorf("stored %q with changes %v, want %q", stored, changes, tc.stored)
			}
			w, o := rulesOf(svc, tc.target)
			if !slices.Contains(w, tc.stored) || o[tc.stored] != tc.p.UID || len(o) != 1 {
				t.Errorf("rules %q owners %v", w, o)
			}
		})
	}
}

// rulesOf is the weekly rules and owners of the pool or host t names.
func rulesOf(svc *service.Service, t model.Target) ([]string, model.RuleOwners) {
	site := svc.Snapshot().Site
	if t.Host != "" {
		h := site.Host(t.Host)
		return h.Weekly, h.RuleOwners
	}
	p := site.Pool(t.Pool)
	return p.Weekly, p.RuleOwners
}

// TestChangeAndCancelRule: a lecturer moves and cancels their own booking; the site
// file's rule and another lecturer's booking are not theirs.
func TestChangeAndCancelRule(t *testing.T) {
	ctx := context.Background()
	svc := bookingService(t)
	mustBook := func(p authz.Principal, rule string) {
		t.Helper()
		if _, _, err := svc.Bookings.BookRule(ctx, p, labA, rule); err != nil {
			t.Fatal(err)
		}
	}
	mustBook(carol, "sat 10:00-12:00 course-bio101")
	mustBook(eve, "sun 10:00-12:00 course-bio101")

	stored, _, err := svc.Bookings.ChangeRule(ctx, carol, labA, "sat 10:00-12:00 course-bio101", "sat 13:00-15:00 course-bio101")
	wantStatus(t, "moving her booking", err, 200)
	if w, o := rulesOf(svc, labA); stored != "sat 13:00-15:00 course-bio101" || slices.Contains(w, "sat 10:00-12:00 course-bio101") ||
		o[stored] != "carol" || o["sun 10:00-12:00 course-bio101"] != "eve" || len(o) != 2 {
		t.Errorf("after the move: %q %v", w, o)
	}
	for _, tc := range []struct {
		name   string
		do     func() error
		status int
		says   string
	}{
		{"moving the site file's rule", func() error {
			_, _, err := svc.Bookings.ChangeRule(ctx, carol, labA, "wed 10:00-12:00 course-bio101", "sat 16:00-18:00 course-bio101")
			return err
		}, 403, "the site file's"},
		{"moving eve's booking", func() error {
			_, _, err := svc.Bookings.ChangeRule(ctx, carol, labA, "sun 10:00-12:00 course-bio101", "sun 13:00-15:00 course-bio101")
			return err
		}, 403, "booked by eve"},
		{"moving a rule that is not there", func() error {
			_, _, err := svc.Bookings.ChangeRule(ctx, carol, labA, "fri 10:00-12:00 course-bio101", "sat 16:00-18:00 course-bio101")
			return err
		}, 404, "fri 10:00-12:00"},
		{"cancelling the site file's rule", func() error {
			_, err := svc.Bookings.CancelRule(ctx, carol, labA, "wed 10:00-12:00 course-bio101")
			return err
		}, 403, "only your own bookings"},
		{"cancelling eve's booking", func() error {
			_, err := svc.Bookings.CancelRule(ctx, carol, labA, "sun 10:00-12:00 course-bio101")
			return err
		}, 403, "only your own bookings"},
		{"the site admin cancelling eve's booking (not theirs: a PUT removes it)", func() error {
			_, err := svc.Bookings.CancelRule(ctx, admin, labA, "sun 10:00-12:00 course-bio101")
			return err
		}, 403, "only your own bookings"},
	} {
		before := svc.Snapshot().Site
		wantStatus(t, tc.name, tc.do(), tc.status, tc.says)
		if svc.Snapshot().Site != before {
			t.Errorf("%s: refused, but written", tc.name)
		}
	}
	if _, err := svc.Bookings.CancelRule(ctx, carol, labA, "sat 13:00-15:00 course-bio101"); err != nil {
		t.Fatalf("cancelling her booking: %v", err)
	}
	if w, o := rulesOf(svc, labA); slices.Contains(w, "sat 13:00-15:00 course-bio101") || len(o) != 1 || o["sun 10:00-12:00 course-bio101"] != "eve" {
		t.Errorf("after cancelling: %q %v", w, o)
	}
}

// gridWith is the grid of rules with mode set from hour from to hour to on day (Monday 0).
func gridWith(t *testing.T, rules []string, day, from, to int, mode string) schedule.WeekGrid {
	t.Helper()
	g, err := schedule.GridOf(rules)
	if err != nil {
		t.Fatal(err)
	}
	for s := from * 6; s < to*6; s++ {
		g[day][s] = mode
	}
	return g
}

// TestApplyGrid: the schedule editor's save books what it adds, keeps the owners of what
// it keeps, previews without writing and refuses a page that is out of date.
func TestApplyGrid(t *testing.T) {
	ctx := context.Background()
	svc := bookingService(t)
	w, _ := rulesOf(svc, labA)
	rev := service.RulesRev(w)

	// A lecturer's course slot on Saturday: dry run, preview, then saved.
	g := gridWith(t, w, 5, 10, 12, "course-bio101")
	changes, err := svc.Bookings.ApplyGrid(ctx, carol, true, labA, g, rev)
	if err != nil || len(changes) != 1 {
		t.Fatalf("dry run: %v %v", changes, err)
	}
	if got, _ := rulesOf(svc, labA); !slices.Equal(got, w) {
		t.Fatalf("dry run wrote %q", got)
	}
	cand, err := svc.Bookings.PreviewGrid(carol, labA, g)
	if err != nil || cand.Pool("lab-a").RuleOwners["sat 10:00-12:00 course-bio101"] != "carol" {
		t.Fatalf("preview: %v %+v", err, cand.Pool("lab-a"))
	}
	if _, err := svc.Bookings.ApplyGrid(ctx, carol, false, labA, g, rev); err != nil {
		t.Fatal(err)
	}
	w2, o := rulesOf(svc, labA)
	if !slices.Contains(w2, "sat 10:00-12:00 course-bio101") || o["sat 10:00-12:00 course-bio101"] != "carol" || len(o) != 1 {
		t.Fatalf("after the lecturer's save: %q %v", w2, o)
	}

	// A save from the page loaded before it is refused.
	_, err = svc.Bookings.ApplyGrid(ctx, alice, false, labA, gridWith(t, w, 6, 0, 1, "local-disk"), rev)
	wantStatus(t, "stale page", err, 409, "were changed since this page was loaded")

	// The pool admin's edit books what it adds and keeps carol's booking as written.
	if _, err := svc.Bookings.ApplyGrid(ctx, alice, false, labA, gridWith(t, w2, 6, 0, 1, "local-disk"), service.RulesRev(w2)); err != nil {
		t.Fatal(err)
	}
	w3, o := rulesOf(svc, labA)
	if o["sat 10:00-12:00 course-bio101"] != "carol" || o["sun 00:00-01:00 local-disk"] != "alice" || len(o) != 2 || !slices.Contains(w3, "sat 10:00-12:00 course-bio101") {
		t.Fatalf("after the pool admin's save: %q %v", w3, o)
	}

	// A lecturer's grid may not take desktop hours; nothing is written.
	before := svc.Snapshot().Site
	_, err = svc.Bookings.ApplyGrid(ctx, carol, false, labA, gridWith(t, w3, 0, 10, 12, "course-bio101"), "")
	wantStatus(t, "lecturer taking desktop hours", err, 403)
	if svc.Snapshot().Site != before {
		t.Error("refused save written")
	}
}

// TestExceptionBookings: an exception belongs to whoever created it, whatever the body
// says; a change keeps its owner; only one's own is cancelled, any (as authz allows)
// removed.
func TestExceptionBookings(t *testing.T) {
	ctx := context.Background()
	svc := bookingService(t)
	lecture := func(name string, day int) model.Exception {
		return model.Exception{Name: name, Kind: "lecture", Mode: "course-bio101", Targets: []model.Target{labA}, Owner: "admin",
			Start: time.Date(2026, 12, day, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, day, 15, 0, 0, 0, time.UTC)}
	}
	owner := func(name string) string {
		if e := svc.Snapshot().Site.Exception(name); e != nil {
			return e.Owner
		}
		return "(none)"
	}
	if _, err := svc.Bookings.AddException(ctx, carol, lecture("carol-lab", 3)); err != nil || owner("carol-lab") != "carol" {
		t.Fatalf("add: %v, owner %q", err, owner("carol-lab"))
	}
	created, _, err := svc.Bookings.PutException(ctx, eve, false, lecture("eve-lab", 4))
	if err != nil || !created || owner("eve-lab") != "eve" {
		t.Fatalf("put (create): %v %v, owner %q", created, err, owner("eve-lab"))
	}
	moved := lecture("eve-lab", 5)
	created, _, err = svc.Bookings.PutException(ctx, alice, false, moved)
	if err != nil || created || owner("eve-lab") != "eve" || !svc.Snapshot().Site.Exception("eve-lab").Start.Equal(moved.Start) {
		t.Fatalf("put (replace) by the pool admin: %v %v, owner %q", created, err, owner("eve-lab"))
	}

	for _, tc := range []struct {
		name   string
		do     func() error
		status int
		says   string
	}{
		{"adding a name taken", func() error {
			_, err := svc.Bookings.AddException(ctx, alice, lecture("eve-lab", 7))
			return err
		}, 409, `a booking or exception named "eve-lab" exists already`},
		{"cancelling eve's booking", func() error { _, err := svc.Bookings.CancelException(ctx, carol, "eve-lab"); return err }, 403, "only your own bookings"},
		{"cancelling the site's exam", func() error { _, err := svc.Bookings.CancelException(ctx, alice, "exam-2026-12-09"); return err }, 403, "only your own bookings"},
		{"removing eve's booking as a lecturer", func() error {
			_, err := svc.Bookings.RemoveException(ctx, carol, false, "eve-lab")
			return err
		}, 403, "booked by eve"},
		{"removing what is not there", func() error {
			_, err := svc.Bookings.RemoveException(ctx, alice, false, "nope")
			return err
		}, 404, "nope"},
		{"a dry run of a removal", func() error {
			_, err := svc.Bookings.RemoveException(ctx, alice, true, "eve-lab")
			return err
		}, 200, ""},
	} {
		before := svc.Snapshot().Site
		wantStatus(t, tc.name, tc.do(), tc.status, tc.says)
		if svc.Snapshot().Site != before {
			t.Errorf("%s: written", tc.name)
		}
	}
	if _, err := svc.Bookings.CancelException(ctx, carol, "carol-lab"); err != nil || owner("carol-lab") != "(none)" {
		t.Errorf("cancelling her own: %v", err)
	}
	if _, err := svc.Bookings.RemoveException(ctx, alice, false, "eve-lab"); err != nil || owner("eve-lab") != "(none)" {
		t.Errorf("the pool admin removing eve's: %v", err)
	}
}

// TestPutPoolOwners: a PUT of a pool's rules books the rules it adds, keeps the owners of
// those it keeps, ignores owners in the body and refuses a rule given twice.
func TestPutPoolOwners(t *testing.T) {
	ctx := context.Background()
	svc := bookingService(t)
	pool := func(add ...string) model.Pool {
		p := *svc.Snapshot().Site.Pool("lab-b")
		p.Weekly = append(slices.Clone(p.Weekly), add...)
		p.RuleOwners = model.RuleOwners{"sat 09:00-14:00 desktop": "mallory"}
		return p
	}
	if _, _, err := svc.Bookings.PutPool(ctx, admin, false, pool("sun 09:00-14:00 desktop")); err != nil {
		t.Fatal(err)
	}
	if o := svc.Snapshot().Site.Pool("lab-b").RuleOwners; len(o) != 1 || o["sun 09:00-14:00 desktop"] != "admin" {
		t.Fatalf("owners after the PUT: %v", o)
	}
	for _, tc := range []struct {
		rules []string
		says  string
	}{
		{[]string{"sat 09:00-14:00 desktop"}, `rule "sat 09:00-14:00 desktop" already exists on pool lab-b`},
		{[]string{"sun 15:00-16:00 desktop", "sun 15:00-16:00 desktop"}, `rule "sun 15:00-16:00 desktop" is given twice for pool lab-b`},
	} {
		_, _, err := svc.Bookings.PutPool(ctx, admin, false, pool(tc.rules...))
		wantStatus(t, strings.Join(tc.rules, ", "), err, 409, tc.says)
	}
	created, _, err := svc.Bookings.PutHost(ctx, admin, false, model.Host{Name: "pc-b09", MAC: "52:54:00:0b:00:09", Pool: "lab-b", Weekly: []string{"sun 08:00-09:00 local-disk"}})
	if err != nil || !created || svc.Snapshot().Site.Host("pc-b09").RuleOwners["sun 08:00-09:00 local-disk"] != "admin" {
		t.Fatalf("PUT of a new host: %v %v", created, err)
	}
}

// TestApplySiteFileKeepsBookings: bookings survive a site file that does not mention
// them (owned exceptions, power-save exceptions, owned rules); what the file names wins.
func TestApplySiteFileKeepsBookings(t *testing.T) {
	ctx := context.Background()
	svc := bookingService(t)
	if _, _, err := svc.Bookings.BookRule(ctx, carol, labA, "sat 10:00-12:00 course-bio101"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Bookings.AddException(ctx, carol, model.Exception{Name: "carols", Kind: "lecture", Mode: "course-bio101", Targets: []model.Target{labA},
		Start: time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Update(ctx, nil, false, func(s *model.Site) error {
		s.Exceptions = append(s.Exceptions, model.Exception{Name: "slurm-b1", Kind: model.ExceptionPowerSave, Mode: "cluster",
			Targets: []model.Target{{Host: "pc-b01"}}, Start: time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The file knows none of the bookings, and drops the exam.
	file := testenv.ExampleSite(t)
	file.Exceptions = nil
	if _, err := svc.Bookings.ApplySiteFile(ctx, admin, false, file); err != nil {
		t.Fatal(err)
	}
	site := svc.Snapshot().Site
	if site.Exception("carols") == nil || site.Exception("carols").Owner != "carol" || site.Exception("slurm-b1") == nil || site.Exception("exam-2026-12-09") != nil {
		t.Errorf("exceptions after the apply: %+v", site.Exceptions)
	}
	if o := site.Pool("lab-a").RuleOwners; o["sat 10:00-12:00 course-bio101"] != "carol" || !slices.Contains(site.Pool("lab-a").Weekly, "sat 10:00-12:00 course-bio101") {
		t.Errorf("lab-a after the apply: %+v", site.Pool("lab-a"))
	}

	// A file that declares the booked rule takes it over.
	file = testenv.ExampleSite(t)
	file.Pool("lab-a").Weekly = append(file.Pool("lab-a").Weekly, "sat 10:00-12:00 course-bio101")
	if _, err := svc.Bookings.ApplySiteFile(ctx, admin, false, file); err != nil {
		t.Fatal(err)
	}
	if p := svc.Snapshot().Site.Pool("lab-a"); !slices.Contains(p.Weekly, "sat 10:00-12:00 course-bio101") || p.RuleOwners != nil {
		t.Errorf("declared rule: %+v", p)
	}
}
