package ldapstore

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestInitOnEmptyDirectory(t *testing.T) {
	st, _ := newStore(t)
	if _, err := st.Load(bg); !errors.Is(err, ErrNotInitialised) || err.Error() != "directory not initialised: run overtime ldap init" {
		t.Fatalf("Load before Init: %v", err)
	}
	opts := InitOptions{SiteName: "uni", Timezone: "Europe/Berlin", AdminUID: "admin", AdminPassword: adminPW}
	if err := st.Init(bg, opts); err != nil {
		t.Fatal(err)
	}
	want := &model.Site{
		Name: "uni", Timezone: "Europe/Berlin", DefaultMode: InitMode,
		Modes: []model.Mode{{Name: InitMode, Kind: model.KindLocalDisk, Description: "boot the local disk"}},
		Roles: []model.RoleGrant{{Name: InitAdminRole, Role: model.RoleSiteAdmin, Members: []string{"admin"}}},
	}
	got := mustLoad(t, st)
	assertSameSite(t, got, want)
	if err := got.Validate(); err != nil {
		t.Fatalf("site after Init does not validate: %v", err)
	}
	if err := st.Authenticate(bg, "admin", adminPW); err != nil {
		t.Fatalf("admin cannot log in: %v", err)
	}

	// Idempotent: a second Init (even with other settings) changes nothing, and the
	// admin keeps their password.
	opts2 := InitOptions{SiteName: "other", Timezone: "UTC", AdminUID: "admin", AdminPassword: "new-password"}
	if err := st.Init(bg, opts2); err != nil {
		t.Fatalf("second Init: %v", err)
	}
	if err := st.Init(bg, opts); err != nil {
		t.Fatalf("third Init: %v", err)
	}
	assertSameSite(t, mustLoad(t, st), want)
	if err := st.Authenticate(bg, "admin", adminPW); err != nil {
		t.Fatalf("admin password changed by a second Init: %v", err)
	}
	if err := st.Authenticate(bg, "admin", "new-password"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("second Init set a password: %v", err)
	}

	// Init recreates what is missing: a deleted admin grant comes back.
	cur := mustLoad(t, st)
	next := cur.Clone()
	next.Roles = nil
	mustApply(t, st, cur, next)
	if err := st.Init(bg, opts); err != nil {
		t.Fatal(err)
	}
	assertSameSite(t, mustLoad(t, st), want)
}

func TestInitChecksInput(t *testing.T) {
	st, _ := newStore(t)
	for _, o := range []InitOptions{
		{SiteName: "Bad Name", Timezone: "UTC", AdminUID: "admin", AdminPassword: "x"},
		{SiteName: "uni", Timezone: "Mars/Olympus", AdminUID: "admin", AdminPassword: "x"},
		{SiteName: "uni", Timezone: "UTC", AdminUID: "*", AdminPassword: "x"},
		{SiteName: "uni", Timezone: "UTC", AdminUID: "admin", AdminPassword: ""},
	} {
		var inv *model.InvalidError
		if err := st.Init(bg, o); !errors.As(err, &inv) {
			t.Errorf("Init(%+v): %v, want an InvalidError", o, err)
		}
	}
	if _, err := st.Load(bg); !errors.Is(err, ErrNotInitialised) {
		t.Fatalf("rejected Init wrote something: %v", err)
	}
}

func TestInitWithoutSchema(t *testing.T) {
	srv := slapdtest.StartTWith(t, slapdenv.Options{OmitOvertimeSchema: true})
	st, err := Open(Config{URL: srv.URL, BaseDN: srv.BaseDN, BindDN: srv.ServiceDN, BindPassword: srv.ServicePW})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Init(bg, InitOptions{SiteName: "uni", Timezone: "UTC", AdminUID: "admin", AdminPassword: "x"})
	if !errors.Is(err, ErrSchemaNotLoaded) || err.Error() != "schema not loaded: add sitemgmt/ldap/overtime.schema to slapd" {
		t.Fatalf("got %v", err)
	}
}

// Init as the rootdn on a directory without even the base entry creates it.
func TestInitCreatesBaseEntry(t *testing.T) {
	srv := slapdtest.StartT(t)
	root, err := ldap.DialURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Bind(srv.RootDN, srv.RootPW); err != nil {
		t.Fatal(err)
	}
	for _, dn := range []string{srv.ServiceDN, srv.ReplicatorDN, srv.BaseDN} {
		if err := root.Del(ldap.NewDelRequest(dn, nil)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Open(Config{URL: srv.URL, BaseDN: srv.BaseDN, BindDN: srv.RootDN, BindPassword: srv.RootPW})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Init(bg, InitOptions{SiteName: "uni", Timezone: "UTC", AdminUID: "admin", AdminPassword: "x"}); err != nil {
		t.Fatal(err)
	}
	if s := mustLoad(t, st); s.Name != "uni" || s.DefaultMode != InitMode {
		t.Fatalf("%+v", s)
	}
}

func TestApplyExampleRoundTrip(t *testing.T) {
	st, _ := initStore(t)
	cur := mustLoad(t, st)
	next := exampleSite()
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	changes := mustApply(t, st, cur, next)
	if !reflect.DeepEqual(changes, model.Diff(cur, next)) {
		t.Fatalf("Apply returned %v, Diff says %v", changes, model.Diff(cur, next))
	}
	got := mustLoad(t, st)
	assertSameSite(t, got, next)
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	// Explicitly: instants are equal and come back in UTC.
	v := got.Image("desktop").Version("2026.11.21-1")
	if !v.Created.Equal(next.Image("desktop").Version("2026.11.21-1").Created) || v.Created.Location() != time.UTC {
		t.Fatalf("created %v", v.Created)
	}
	e := got.Exception("exam-stats")
	if !e.Start.Equal(next.Exceptions[0].Start) || !e.End.Equal(next.Exceptions[0].End) {
		t.Fatalf("exception times %v %v", e.Start, e.End)
	}
	// Nothing left to do (a nil cur means: load it).
	if ch := mustApply(t, st, nil, next); len(ch) != 0 {
		t.Fatalf("Apply(nil, next) wrote %v", ch)
	}
	if d := model.Diff(got, next); len(d) != 0 {
		t.Fatalf("Diff after round trip: %v", d)
	}
	if ch := mustApply(t, st, got, next); len(ch) != 0 {
		t.Fatalf("second Apply wrote %v", ch)
	}
}

func TestApplyModifiedSite(t *testing.T) {
	st, _ := initStore(t)
	cur := exampleSite()
	mustApply(t, st, mustLoad(t, st), cur)
	cur = mustLoad(t, st)

	next := cur.Clone()
	next.Pool("lab-b").Room = "E.202"                                                                 // changed room
	next.Hosts = slices.DeleteFunc(next.Hosts, func(h model.Host) bool { return h.Name == "pc-a04" }) // removed host
	next.Host("pc-a01").IP = ""                                                                       // address dropped
	next.Host("pc-b01").IP = "10.0.0.21"                                                              // address added
	exc := model.Exception{Name: "holiday-xmas", Kind: "holiday", Mode: "local-disk",
		Start: cur.Exceptions[0].Start.AddDate(0, 0, 14), End: cur.Exceptions[0].Start.AddDate(0, 0, 28),
		Targets: []model.Target{{Pool: "lab-a"}, {Pool: "lab-b"}}}
	next.Exceptions = append(next.Exceptions, exc) // added exception
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}

	changes := mustApply(t, st, cur, next)
	want := []string{
		"~ pool lab-b (room)",
		"~ host pc-a01 (ip)",
		"~ host pc-b01 (ip)",
		"+ exception holiday-xmas",
		"- host pc-a04",
	}
	if got := changeStrings(changes); !slices.Equal(got, want) {
		t.Fatalf("changes %q, want %q", got, want)
	}
	got := mustLoad(t, st)
	assertSameSite(t, got, next)
	if got.Host("pc-a04") != nil || got.Pool("lab-b").Room != "E.202" || got.Exception("holiday-xmas") == nil {
		t.Fatalf("directory state wrong: %+v", got)
	}
	if h := got.Host("pc-b01"); h.IP != "10.0.0.21" {
		t.Fatalf("pc-b01 %+v", h)
	}
}

// A MAC moving from a removed host to a new one (a PC renamed) works in one Apply even
// with the unique overlay, and a swap of MACs is refused before anything is written.
func TestApplyAddressMoves(t *testing.T) {
	st, _ := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	cur := mustLoad(t, st)

	next := cur.Clone()
	next.Host("pc-a02").Name = "pc-a02-new"
	changes := mustApply(t, st, cur, next)
	if got := changeStrings(changes); !slices.Equal(got, []string{"- host pc-a02", "+ host pc-a02-new"}) {
		t.Fatalf("%q", got)
	}
	cur = mustLoad(t, st)
	assertSameSite(t, cur, next)

	swap := cur.Clone()
	a, b := swap.Host("pc-a01"), swap.Host("pc-a03")
	a.MAC, b.MAC = b.MAC, a.MAC
	_, err := st.Apply(bg, cur, swap)
	var inv *model.InvalidError
	if !errors.As(err, &inv) || !inv.Conflict {
		t.Fatalf("swap: %v", err)
	}
	assertSameSite(t, mustLoad(t, st), cur)

	// Renaming a host that an exception names (and retargeting the exception) cannot be
	// ordered without a duplicate MAC: refused up front, to be done in two steps.
	rename := cur.Clone()
	rename.Host("pc-b01").Name = "pc-b01-new"
	for i, tg := range rename.Exceptions[0].Targets {
		if tg.Host == "pc-b01" {
			rename.Exceptions[0].Targets[i].Host = "pc-b01-new"
		}
	}
	if _, err := st.Apply(bg, cur, rename); !errors.As(err, &inv) || !inv.Conflict {
		t.Fatalf("rename of a named host: %v", err)
	}
	assertSameSite(t, mustLoad(t, st), cur)
	// Step 1: drop the host from the exception. Step 2: rename and retarget.
	step1 := cur.Clone()
	step1.Exceptions[0].Targets = slices.DeleteFunc(step1.Exceptions[0].Targets, func(tg model.Target) bool { return tg.Host == "pc-b01" })
	mustApply(t, st, cur, step1)
	mustApply(t, st, mustLoad(t, st), rename)
	assertSameSite(t, mustLoad(t, st), rename)
}

func TestApplyRejectsBeforeWriting(t *testing.T) {
	st, _ := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	cur := mustLoad(t, st)

	for name, tc := range map[string]struct {
		edit func(s *model.Site)
		msg  string
	}{
		"immutable version": {func(s *model.Site) {
			s.Pool("lab-a").Room = "X" // an allowed change first: must not be written either
			s.Image("desktop").Versions[0].SHA256 = sha('e')
		}, "image desktop version 2026.11.01-1 is immutable"},
		"invalid site": {func(s *model.Site) {
			s.Pool("lab-a").Room = "X"
			s.Host("pc-a01").Pool = "nope"
		}, `host pc-a01: unknown pool "nope"`},
		"duplicate weekly rule": {func(s *model.Site) {
			p := s.Pool("lab-b")
			p.Weekly = append(p.Weekly, p.Weekly[0])
		}, `pool lab-b: duplicate weekly "mon-fri 08:00-20:00 desktop"`},
		"duplicate member": {func(s *model.Site) {
			r := s.Role("lab-a-admins")
			r.Members = append(r.Members, "alice")
		}, "duplicate members"},
		"host name with filter characters": {func(s *model.Site) {
			s.Hosts = append(s.Hosts, model.Host{Name: "pc*)(cn=*", MAC: "52:54:00:ff:00:01", Pool: "lab-a"})
		}, "invalid hostname"},
	} {
		t.Run(name, func(t *testing.T) {
			next := cur.Clone()
			tc.edit(next)
			written, err := st.Apply(bg, cur, next)
			var inv *model.InvalidError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want an InvalidError with %q", err, tc.msg)
			}
			if len(written) != 0 {
				t.Fatalf("wrote %v", written)
			}
			assertSameSite(t, mustLoad(t, st), cur)
		})
	}
}

// Bookings round-trip: an exception's owner in otOwner, booked rules in otBookedRule
// ("OWNER RULE") next to the managed ones in otWeeklyRule; adding, re-owning and
// removing a booking are modifies of the "weekly" field.
func TestApplyBookingsRoundTrip(t *testing.T) {
	st, srv := initStore(t)
	cur := mustLoad(t, st)
	next := exampleSite()
	next.Exceptions[0].Owner = "carol"
	p := &next.Pools[1]
	p.Weekly = append(p.Weekly, "sat 10:00-12:00 desktop", "sun 10:00-12:00 desktop")
	p.RuleOwners = model.RuleOwners{"sat 10:00-12:00 desktop": "carol", "sun 10:00-12:00 desktop": "alice"}
	next.Sort()
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, st, cur, next)
	got := mustLoad(t, st)
	assertSameSite(t, got, next)
	if d := model.Diff(got, next); len(d) != 0 {
		t.Fatalf("Diff after round trip: %v", d)
	}
	c, err := ldap.DialURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bind(srv.RootDN, srv.RootPW); err != nil {
		t.Fatal(err)
	}
	res, err := c.Search(ldap.NewSearchRequest("cn="+p.Name+",ou=pools,ou=overtime,"+srv.BaseDN, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{aWeekly, aBookedRule}, nil))
	if err != nil || len(res.Entries) != 1 {
		t.Fatalf("pool entry: %v %v", res, err)
	}
	e := res.Entries[0]
	if booked := e.GetAttributeValues(aBookedRule); !slices.Equal(booked, []string{"carol sat 10:00-12:00 desktop", "alice sun 10:00-12:00 desktop"}) {
		t.Fatalf("otBookedRule %q, otWeeklyRule %q", booked, e.GetAttributeValues(aWeekly))
	}
	if managed := e.GetAttributeValues(aWeekly); !slices.Equal(managed, []string{"mon-fri 08:00-20:00 desktop"}) {
		t.Fatalf("otWeeklyRule %q", managed)
	}

	// The file takes the Saturday rule over, the Sunday booking is removed.
	after := got.Clone()
	ap := after.Pool(p.Name)
	ap.Weekly = slices.DeleteFunc(ap.Weekly, func(r string) bool { return r == "sun 10:00-12:00 desktop" })
	ap.RuleOwners = nil
	after.Sort()
	if ch := changeStrings(mustApply(t, st, got, after)); !slices.Equal(ch, []string{"~ pool " + p.Name + " (weekly)"}) {
		t.Fatalf("changes %v", ch)
	}
	assertSameSite(t, mustLoad(t, st), after)
}

// A boot server's DNS servers keep their order through the directory (the first is the
// PCs' first resolver), and each DNS field is changed and removed on its own.
func TestBootServerDNSRoundTrip(t *testing.T) {
	st, _ := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	cur := mustLoad(t, st)
	if b := cur.BootServer("rbs1"); !slices.Equal(b.DNSServers, []string{"192.0.2.53", "10.0.0.53"}) || b.Domain != "lab.example.org" {
		t.Fatalf("loaded DNS servers %q, domain %q", b.DNSServers, b.Domain)
	}
	for _, tc := range []struct {
		edit   func(b *model.BootServer)
		change string
	}{
		{func(b *model.BootServer) { b.DNSServers = []string{"10.0.0.53", "192.0.2.53", "198.51.100.53"} }, "~ bootserver rbs1 (dnsServers)"},
		{func(b *model.BootServer) { b.DNSServers = []string{"198.51.100.53", "10.0.0.53"} }, "~ bootserver rbs1 (dnsServers)"},
		{func(b *model.BootServer) { b.Domain = "cs.example.org" }, "~ bootserver rbs1 (domain)"},
		{func(b *model.BootServer) { b.DNSServers, b.Domain = nil, "" }, "~ bootserver rbs1 (dnsServers, domain)"},
		{func(b *model.BootServer) { b.DNSServers = []string{"10.0.0.53"} }, "~ bootserver rbs1 (dnsServers)"},
	} {
		next := cur.Clone()
		tc.edit(next.BootServer("rbs1"))
		if err := next.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := changeStrings(mustApply(t, st, cur, next)); !slices.Equal(got, []string{tc.change}) {
			t.Fatalf("changes %q, want %q", got, tc.change)
		}
		cur = mustLoad(t, st)
		assertSameSite(t, cur, next)
	}
}
