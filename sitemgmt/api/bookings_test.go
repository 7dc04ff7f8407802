package api_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// bookingSite is the example site with a second lecturer of lab-a (eve) and three
// bookings with the course mode in lab-a: admin's lecture, eve's lab (an exception) and
// eve's weekly Saturday slot. lab-a's "wed 10:00-12:00 course-bio101" is the site file's.
func bookingSite(t *testing.T) *testenv.Env {
	t.Helper()
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	admin := env.Admin()
	if err := admin.Send("PUT", "/api/v1/roles/lab-a-lecturers", nil, model.RoleGrant{Name: "lab-a-lecturers",
		Role: model.RoleLecturer, Pool: "lab-a", Members: []string{"carol", "eve"}}, nil); err != nil {
		t.Fatal(err)
	}
	eve := env.Client("eve", "eve-secret")
	if err := admin.Send("PUT", "/api/v1/exceptions/bio-lecture", nil, courseException("bio-lecture", 3), nil); err != nil {
		t.Fatal(err)
	}
	if err := eve.Send("PUT", "/api/v1/exceptions/eve-lab", nil, courseException("eve-lab", 4), nil); err != nil {
		t.Fatal(err)
	}
	p := getPool(t, env, "lab-a")
	p.Weekly = append(p.Weekly, "sat 10:00-12:00 course-bio101")
	if err := eve.Send("PUT", "/api/v1/pools/lab-a", nil, p, nil); err != nil {
		t.Fatal(err)
	}
	s := mustSite(t, env)
	if s.Exception("bio-lecture").Owner != "admin" || s.Exception("eve-lab").Owner != "eve" || s.Pool("lab-a").RuleOwners["sat 10:00-12:00 course-bio101"] != "eve" {
		t.Fatalf("test premise: owners %q %q %v", s.Exception("bio-lecture").Owner, s.Exception("eve-lab").Owner, s.Pool("lab-a").RuleOwners)
	}
	return env
}

// courseException is a lecture with lab-a's course mode on December day, 13:00-15:00 UTC.
func courseException(name string, day int) model.Exception {
	return model.Exception{Name: name, Kind: "lecture", Mode: "course-bio101", Targets: []model.Target{{Pool: "lab-a"}},
		Start: time.Date(2026, 12, day, 13, 0, 0, 0, time.UTC), End: time.Date(2026, 12, day, 15, 0, 0, 0, time.UTC)}
}

func getPool(t *testing.T, env *testenv.Env, name string) model.Pool {
	t.Helper()
	var p model.Pool
	if _, err := env.Admin().Get("/api/v1/pools/"+name, nil, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// without is rules less the rule drop (which must be there).
func without(t *testing.T, rules []string, drop string) []string {
	t.Helper()
	i := slices.Index(rules, drop)
	if i < 0 {
		t.Fatalf("test premise: no rule %q in %q", drop, rules)
	}
	return slices.Delete(slices.Clone(rules), i, i+1)
}

// TestLecturerOwnBookingsAPI: through the API a lecturer creates, changes and cancels
// their own bookings, and nothing else of the schedule: not an administrator's or another
// lecturer's exception with their course mode in their pool, not the site file's course
// rule of their pool nor another lecturer's booked rule (by PUTting the pool's rules).
func TestLecturerOwnBookingsAPI(t *testing.T) {
	env := bookingSite(t)
	carol := env.Client("carol", "carol-secret")

	refused := []struct {
		name, method, path string
		body               func() any
		msg                []string
	}{
		{"delete admin's lecture", "DELETE", "/api/v1/exceptions/bio-lecture", nil,
			[]string{"user carol may not delete exception bio-lecture", "booked by admin"}},
		{"delete eve's booking", "DELETE", "/api/v1/exceptions/eve-lab", nil,
			[]string{"may not delete exception eve-lab", "booked by eve"}},
		{"change eve's booking", "PUT", "/api/v1/exceptions/eve-lab", func() any {
			e := courseException("eve-lab", 4)
			e.Description = "mine now"
			return e
		}, []string{"may not modify exception eve-lab", "booked by eve"}},
		{"move admin's lecture", "PUT", "/api/v1/exceptions/bio-lecture", func() any { return courseException("bio-lecture", 5) },
			[]string{"may not modify exception bio-lecture", "booked by admin"}},
		{"drop the site file's course rule", "PUT", "/api/v1/pools/lab-a", func() any {
			p := getPool(t, env, "lab-a")
			p.Weekly = without(t, p.Weekly, "wed 10:00-12:00 course-bio101")
			return p
		}, []string{"may not modify pool lab-a", `rule "wed 10:00-12:00 course-bio101"`, "the site file's"}},
		{"drop eve's booked rule", "PUT", "/api/v1/pools/lab-a", func() any {
			p := getPool(t, env, "lab-a")
			p.Weekly = without(t, p.Weekly, "sat 10:00-12:00 course-bio101")
			return p
		}, []string{"may not modify pool lab-a", `rule "sat 10:00-12:00 course-bio101"`, "booked by eve"}},
		{"move eve's booked rule", "PUT", "/api/v1/pools/lab-a", func() any {
			p := getPool(t, env, "lab-a")
			p.Weekly = append(without(t, p.Weekly, "sat 10:00-12:00 course-bio101"), "sat 12:00-14:00 course-bio101")
			return p
		}, []string{`rule "sat 10:00-12:00 course-bio101"`, "booked by eve"}},
	}
	for _, tc := range refused {
		before := mustSite(t, env)
		var body any
		if tc.body != nil {
			body = tc.body()
		}
		err := carol.Send(tc.method, tc.path, nil, body, nil)
		if status(err) != 403 {
			t.Errorf("%s: status %d (%v), want 403", tc.name, status(err), err)
			continue
		}
		for _, m := range tc.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: %q does not say %q", tc.name, err, m)
			}
		}
		if !reflect.DeepEqual(before, mustSite(t, env)) {
			t.Fatalf("%s: refused, but the directory changed", tc.name)
		}
	}

	// Her own bookings: an exception created, changed and cancelled; a weekly rule booked,
	// moved and cancelled. The server records her as the owner whatever the body says.
	mine := courseException("carol-lab", 7)
	mine.Owner = "admin"
	if err := carol.Send("PUT", "/api/v1/exceptions/carol-lab", nil, mine, nil); err != nil {
		t.Fatalf("create own exception: %v", err)
	}
	if o := mustSite(t, env).Exception("carol-lab").Owner; o != "carol" {
		t.Fatalf("own exception's owner %q", o)
	}
	mine = courseException("carol-lab", 8)
	mine.Description = "moved to Tuesday"
	if err := carol.Send("PUT", "/api/v1/exceptions/carol-lab", nil, mine, nil); err != nil {
		t.Fatalf("change own exception: %v", err)
	}
	if e := mustSite(t, env).Exception("carol-lab"); e.Owner != "carol" || e.Description != mine.Description {
		t.Fatalf("own exception after the change: %+v", e)
	}
	if err := carol.Send("DELETE", "/api/v1/exceptions/carol-lab", nil, nil, nil); err != nil {
		t.Fatalf("cancel own exception: %v", err)
	}
	p := getPool(t, env, "lab-a")
	p.Weekly = append(p.Weekly, "sun 10:00-12:00 course-bio101")
	if err := carol.Send("PUT", "/api/v1/pools/lab-a", nil, p, nil); err != nil {
		t.Fatalf("book own rule: %v", err)
	}
	p = getPool(t, env, "lab-a")
	if p.RuleOwners["sun 10:00-12:00 course-bio101"] != "carol" {
		t.Fatalf("own rule's owners: %v", p.RuleOwners)
	}
	p.Weekly = append(without(t, p.Weekly, "sun 10:00-12:00 course-bio101"), "sun 13:00-15:00 course-bio101")
	if err := carol.Send("PUT", "/api/v1/pools/lab-a", nil, p, nil); err != nil {
		t.Fatalf("move own rule: %v", err)
	}
	p = getPool(t, env, "lab-a")
	if p.RuleOwners["sun 13:00-15:00 course-bio101"] != "carol" || p.RuleOwners["sat 10:00-12:00 course-bio101"] != "eve" ||
		!slices.Contains(p.Weekly, "wed 10:00-12:00 course-bio101") {
		t.Fatalf("after moving own rule: %q %v", p.Weekly, p.RuleOwners)
	}
	p.Weekly = without(t, p.Weekly, "sun 13:00-15:00 course-bio101")
	if err := carol.Send("PUT", "/api/v1/pools/lab-a", nil, p, nil); err != nil {
		t.Fatalf("cancel own rule: %v", err)
	}
	// Her own booking may still not use a mode that is not a course-vm mode of the pool.
	p = getPool(t, env, "lab-a")
	p.Weekly = append(p.Weekly, "sun 10:00-12:00 cluster")
	if err := carol.Send("PUT", "/api/v1/pools/lab-a", nil, p, nil); status(err) != 403 || !strings.Contains(err.Error(), "not a course-vm mode of pool lab-a") {
		t.Errorf("own cluster rule: %v, want 403 naming the mode", err)
	}

	// The administrators keep their rights over every booking, and a change keeps the
	// booking's owner.
	alice := env.Client("alice", "alice-secret")
	e := courseException("eve-lab", 4)
	e.Description = "room 0.13"
	if err := alice.Send("PUT", "/api/v1/exceptions/eve-lab", nil, e, nil); err != nil {
		t.Fatalf("pool admin changing eve's booking: %v", err)
	}
	if x := mustSite(t, env).Exception("eve-lab"); x.Owner != "eve" || x.Description != "room 0.13" {
		t.Fatalf("eve-lab after the pool admin's change: %+v", x)
	}
	var ch client.Changes
	if err := alice.Send("DELETE", "/api/v1/exceptions/bio-lecture", nil, nil, &ch); err != nil {
		t.Fatalf("pool admin deleting admin's lecture: %v", err)
	}
	p = getPool(t, env, "lab-a")
	p.Weekly = without(t, without(t, p.Weekly, "sat 10:00-12:00 course-bio101"), "wed 10:00-12:00 course-bio101")
	if err := alice.Send("PUT", "/api/v1/pools/lab-a", nil, p, nil); err != nil {
		t.Fatalf("pool admin dropping rules: %v", err)
	}
}
