package ldapstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// bigChange touches every kind of entity with adds, modifies and deletes whose references
// cross: pool lab-b is replaced by lab-c on a new boot server, its hosts move, an image
// is replaced, the site's default and unknown-host modes move to new modes and the old
// ones go, an exception and roles move to the new pool, a host is renamed keeping its
// MAC.
func bigChange(cur *model.Site) *model.Site {
	next := cur.Clone()
	created := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	next.BootServers = append(next.BootServers, model.BootServer{Name: "rbs2", IP: "10.0.1.1", HTTPURL: "http://10.0.1.1:8080", DHCP: model.DHCPProxy, Subnet: "10.0.1.0/24"})
	next.Images = slices.DeleteFunc(next.Images, func(im model.Image) bool { return im.Name == "compute" })
	next.Images = append(next.Images, model.Image{Name: "desktop2", Kind: model.ImageDesktop, Versions: []model.ImageVersion{
		{Version: "1", SHA256: sha('1'), Path: "desktop2/1", Created: created}}})
	// The compute guest moves to a new image with the one it ran on gone.
	next.Images = append(next.Images, model.Image{Name: "compute2", Kind: model.ImageCompute, Versions: []model.ImageVersion{
		{Version: "2", SHA256: sha('2'), Path: "compute2/2", Created: created}}})
	next.Mode("desktop").Guest = &model.Guest{Image: "compute2", Version: "2"}
	next.Mode("cluster").Guest = nil
	next.Image("desktop").Versions = next.Image("desktop").Versions[1:] // drop the oldest...
	next.Mode("cluster").ImageVersion = ""                              // ...which cluster pinned
	next.Mode("desktop").Image = "desktop2"
	next.Modes = slices.DeleteFunc(next.Modes, func(m model.Mode) bool { return m.Name == "maintenance" || m.Name == "local-disk" })
	next.Modes = append(next.Modes,
		model.Mode{Name: "local", Kind: model.KindLocalDisk},
		model.Mode{Name: "maint2", Kind: model.KindMaintenance, Image: "desktop2"})
	next.DefaultMode, next.UnknownMode = "local", "maint2"
	next.Pools = slices.DeleteFunc(next.Pools, func(p model.Pool) bool { return p.Name == "lab-b" })
	next.Pools = append(next.Pools, model.Pool{Name: "lab-c", Room: "F.001", BootServer: "rbs2", Weekly: []string{"mon-fri 07:00-19:00 desktop", "sat 00:00-00:00 maint2"},
		Policy: &model.Policy{ThrottleCPU: 10}})
	next.Pool("lab-a").Policy = nil
	next.Pool("lab-a").Weekly = []string{"mon-fri 08:00-18:00 desktop", "mon-fri 18:00-08:00 local"}
	for i := range next.Hosts {
		h := &next.Hosts[i]
		if h.Pool == "lab-b" {
			h.Pool, h.BootServer = "lab-c", "rbs2"
		}
	}
	next.Hosts = slices.DeleteFunc(next.Hosts, func(h model.Host) bool { return h.Name == "pc-b04" })
	next.Host("pc-a03").Name = "pc-a03-new" // same MAC and IP, new name
	next.Hosts = append(next.Hosts, model.Host{Name: "pc-c09", MAC: "52:54:00:0c:00:09", IP: "10.0.1.9", Pool: "lab-c", Weekly: []string{"sun 10:00-12:00 maint2"}})
	next.Exceptions = []model.Exception{{
		Name: "exam-2", Kind: "exam", Mode: "course-vm", Start: cur.Exceptions[0].Start.AddDate(0, 0, 7), End: cur.Exceptions[0].End.AddDate(0, 0, 7),
		Targets: []model.Target{{Pool: "lab-c"}, {Host: "pc-c09"}, {Host: "pc-a01"}},
	}}
	next.Role("lab-a-admins").Members = []string{"bob"}
	next.Roles = slices.DeleteFunc(next.Roles, func(r model.RoleGrant) bool { return r.Name == "stats-lecturers" })
	next.Roles = append(next.Roles, model.RoleGrant{Name: "lab-c-admins", Role: model.RolePoolAdmin, Pool: "lab-c", Members: []string{"dave"}})
	return next
}

// consistent checks what a half-applied change must never break: the site loads, and it
// validates (every host in an existing pool, every reference resolved, MACs unique).
func consistent(t *testing.T, st *Store, step string) *model.Site {
	t.Helper()
	s, err := st.Load(bg)
	if err != nil {
		t.Fatalf("%s: Load: %v", step, err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("%s: directory inconsistent: %v", step, err)
	}
	for _, h := range s.Hosts {
		if s.Pool(h.Pool) == nil {
			t.Fatalf("%s: host %s in missing pool %s", step, h.Name, h.Pool)
		}
	}
	return s
}

// Stop the Apply before each write in turn: every prefix of the write sequence leaves a
// consistent directory, and Applying from there reaches the target.
func TestApplyStoppedAtEveryWrite(t *testing.T) {
	st, _ := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	cur := mustLoad(t, st)
	next := bigChange(cur)
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	changes := model.Diff(cur, next)
	if len(changes) < 25 {
		t.Fatalf("scenario too small: %v", changes)
	}
	t.Logf("%d changes: %q", len(changes), changeStrings(changes))
	injected := errors.New("injected failure")
	for k := range changes {
		// Back to cur, from whatever the previous round left.
		mustApply(t, st, mustLoad(t, st), cur)
		assertSameSite(t, mustLoad(t, st), cur)

		st.beforeWrite = func(i int, _ model.Change) error {
			if i == k {
				return injected
			}
			return nil
		}
		written, err := st.Apply(bg, cur, next)
		st.beforeWrite = nil
		if !errors.Is(err, injected) || len(written) != k {
			t.Fatalf("stop at %d: wrote %d, err %v", k, len(written), err)
		}
		mid := consistent(t, st, fmt.Sprintf("after %d writes (next: %v)", k, changes[k]))

		// Recovery: Apply from what is there reaches next.
		if k == len(changes)/2 {
			mustApply(t, st, mid, next)
			assertSameSite(t, mustLoad(t, st), next)
		}
	}
}

// A real failure: slapd goes away in the middle of an Apply. The write fails, the
// directory (after a restart) is consistent, the store reconnects by itself, and a new
// Apply finishes the job.
func TestApplySlapdDiesHalfWay(t *testing.T) {
	st, srv := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	cur := mustLoad(t, st)
	next := bigChange(cur)
	changes := model.Diff(cur, next)
	k := len(changes) / 2
	st.beforeWrite = func(i int, _ model.Change) error {
		if i == k {
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	written, err := st.Apply(bg, cur, next)
	st.beforeWrite = nil
	if err == nil || len(written) != k {
		t.Fatalf("wrote %d of %d, err %v", len(written), len(changes), err)
	}
	t.Logf("Apply with slapd stopped at write %d: %v", k, err)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	mid := consistent(t, st, "after restart")
	if d := model.Diff(cur, mid); !slices.Equal(changeStrings(d), changeStrings(written)) {
		// Diff orders differently from the write order only for the site split; compare
		// as sets.
		a, b := changeStrings(d), changeStrings(written)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Fatalf("directory holds %v, written %v", d, written)
		}
	}
	mustApply(t, st, mid, next)
	assertSameSite(t, mustLoad(t, st), next)
}

// An entry the schema rejects, injected into a hand-built write sequence, stops the
// sequence there; what was written before stays consistent.
func TestSchemaViolationStopsWrites(t *testing.T) {
	st, _ := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	cur := mustLoad(t, st)

	next := cur.Clone()
	next.Pools = append(next.Pools, model.Pool{Name: "lab-z", Room: "Z"})
	next.Hosts = append(next.Hosts, model.Host{Name: "pc-z1", MAC: "52:54:00:0f:00:01", Pool: "lab-z"})
	changes := model.Diff(cur, next) // + pool lab-z, + host pc-z1
	ci, ni := newIndex(cur), newIndex(next)
	var ops []op
	for _, c := range changes {
		o, err := st.plan(ci, ni, c)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o)
	}
	// Between the pool and the host: a host entry without its required macAddress.
	bad := ldap.NewAddRequest(st.dn.host("pc-bad"), nil)
	bad.Attribute(aObjectClass, []string{"device", "ieee802Device", ocHost})
	bad.Attribute(aCN, []string{"pc-bad"})
	bad.Attribute(aPoolName, []string{"lab-z"})
	hand := []model.Change{changes[0], {Op: model.OpAdd, Kind: model.EntityHost, Name: "pc-bad"}, changes[1]}
	written, err := st.run(bg, hand, []op{ops[0], {add: bad}, ops[1]})
	if !ldap.IsErrorWithCode(err, ldap.LDAPResultObjectClassViolation) || len(written) != 1 {
		t.Fatalf("wrote %v, err %v", written, err)
	}
	got := consistent(t, st, "after schema violation")
	if got.Pool("lab-z") == nil || got.Host("pc-bad") != nil || got.Host("pc-z1") != nil {
		t.Fatalf("unexpected state: pools %v hosts %d", got.Pools, len(got.Hosts))
	}
}

// The service connection breaks (server restart) between calls: the next call
// reconnects without the caller noticing.
func TestReconnect(t *testing.T) {
	st, srv := initStore(t)
	before := mustLoad(t, st)
	for i := 0; i < 2; i++ {
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		assertSameSite(t, mustLoad(t, st), before)
		if err := st.Authenticate(bg, "admin", adminPW); err != nil {
			t.Fatal(err)
		}
	}
	// And while it is down, calls fail with an error instead of hanging.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(bg); err == nil || errors.Is(err, ErrNotInitialised) {
		t.Fatalf("Load with slapd down: %v", err)
	}
	if err := st.Authenticate(bg, "admin", adminPW); err == nil || errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("Authenticate with slapd down: %v (must not look like bad credentials)", err)
	}
}

// The store is shared by the API's request handlers: concurrent loads, logins and writes
// on the one multiplexed connection (run with -race).
func TestConcurrentUse(t *testing.T) {
	st, _ := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	errs := make(chan error, 64)
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 20; i++ {
				if s, err := st.Load(bg); err != nil || len(s.Hosts) < 8 {
					errs <- fmt.Errorf("load: %v", err)
					return
				}
				if err := st.Authenticate(bg, "admin", adminPW); err != nil {
					errs <- fmt.Errorf("authenticate: %v", err)
					return
				}
			}
		}()
	}
	cur := mustLoad(t, st)
	go func() {
		defer func() { done <- struct{}{} }()
		for i := 0; i < 20; i++ {
			next := cur.Clone()
			next.Hosts = append(next.Hosts, model.Host{Name: fmt.Sprintf("pc-x%02d", i), MAC: fmt.Sprintf("52:54:00:0e:00:%02x", i), Pool: "lab-b"})
			if _, err := st.Apply(bg, cur, next); err != nil {
				errs <- err
				return
			}
			cur = next
		}
	}()
	for i := 0; i < 5; i++ {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := mustLoad(t, st); len(s.Hosts) != 28 {
		t.Fatalf("%d hosts", len(s.Hosts))
	}
}

// Authenticate tells "the directory said no" (ErrInvalidCredentials) from "the directory
// could not be asked" (*UnavailableError), which the API turns into 401 and 503.
func TestAuthenticateDirectoryDown(t *testing.T) {
	st, srv := initStore(t)
	if err := st.Authenticate(bg, "admin", "wrong"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("wrong password, directory up: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{adminPW, "wrong"} {
		err := st.Authenticate(bg, "admin", pw)
		var ue *UnavailableError
		if !errors.As(err, &ue) || errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("directory down, password %q: %v, want an *UnavailableError", pw, err)
		}
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := st.Authenticate(bg, "admin", adminPW); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
