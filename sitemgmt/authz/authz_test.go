package authz

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func baseSite() *model.Site {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s := &model.Site{Name: "s", Timezone: "Europe/Berlin", DefaultMode: "cluster",
		Images: []model.Image{
			{Name: "desk", Kind: model.ImageDesktop, Versions: []model.ImageVersion{{Version: "1", SHA256: sha, Path: "desk/1", Created: created}}},
			{Name: "bio", Kind: model.ImageCourseVM, Pool: "a"},
			{Name: "chem", Kind: model.ImageCourseVM, Pool: "b"},
			{Name: "bio2", Kind: model.ImageCourseVM, Pool: "a"},
		},
		Modes: []model.Mode{
			{Name: "cluster", Kind: model.KindCluster, Image: "desk"},
			{Name: "desktop", Kind: model.KindDesktop, Image: "desk"},
			{Name: "course-bio", Kind: model.KindCourseVM, Image: "desk", VM: "bio"},
			{Name: "course-chem", Kind: model.KindCourseVM, Image: "desk", VM: "chem"},
		},
		Pools: []model.Pool{{Name: "a", Weekly: []string{"mon-fri 08:00-18:00 desktop"}}, {Name: "b"}},
		Hosts: []model.Host{{Name: "a1", MAC: "52:54:00:00:00:01", Pool: "a"}, {Name: "b1", MAC: "52:54:00:00:00:02", Pool: "b"}},
		Exceptions: []model.Exception{{Name: "exam", Kind: "exam", Mode: "desktop",
			Start: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
			Targets: []model.Target{{Pool: "a"}}}},
		Roles: []model.RoleGrant{
			{Name: "admins", Role: model.RoleSiteAdmin, Members: []string{"root"}},
			{Name: "a-admins", Role: model.RolePoolAdmin, Pool: "a", Members: []string{"alice"}},
			{Name: "a-lect", Role: model.RoleLecturer, Pool: "a", Members: []string{"carol"}},
			{Name: "b-lect", Role: model.RoleLecturer, Pool: "b", Members: []string{"frank"}},
			{Name: "view", Role: model.RoleViewer, Members: []string{"dave"}},
		},
	}
	s.Sort()
	return s
}

const sha = "0000000000000000000000000000000000000000000000000000000000000001"

func TestRoles(t *testing.T) {
	s := baseSite()
	for uid, want := range map[string]bool{"root": true, "alice": true, "carol": true, "dave": true, "eve": false} {
		if got := For(s, uid).CanRead(); got != want {
			t.Errorf("%s CanRead = %v, want %v", uid, got, want)
		}
	}
	if r := For(s, "alice").Roles(); len(r) != 1 || r[0] != "pool-admin:a" {
		t.Errorf("alice roles %v", r)
	}
}

// TestCheck: each change is judged by who makes it; the same change passes for one role
// and fails for another.
func TestCheck(t *testing.T) {
	cases := []struct {
		name   string
		change func(s *model.Site)
		allow  []string
		refuse []string
	}{
		{"add host to pool a", func(s *model.Site) {
			s.Hosts = append(s.Hosts, model.Host{Name: "a2", MAC: "52:54:00:00:00:03", Pool: "a"})
		}, []string{"root", "alice"}, []string{"carol", "dave", "eve"}},
		{"move host from a to b", func(s *model.Site) { s.Host("a1").Pool = "b" }, []string{"root"}, []string{"alice", "carol"}},
		{"change pool a room", func(s *model.Site) { s.Pool("a").Room = "R1" }, []string{"root", "alice"}, []string{"carol", "dave"}},
		// A pool's home server is the site admin's, like its desktop login (it gets the
		// passwords of the pool's users): not even the pool's own admin's.
		{"set pool a homes", func(s *model.Site) {
			s.Pool("a").Homes = &model.Homes{Type: model.HomesNFS, Server: "files", Path: "/h/%(USER)"}
		}, []string{"root"}, []string{"alice", "carol", "dave", "eve"}},
		{"set the site's homes", func(s *model.Site) {
			s.Homes = &model.Homes{Type: model.HomesNFS, Server: "files", Path: "/h/%(USER)"}
		}, []string{"root"}, []string{"alice", "carol", "dave"}},
		{"assign pool a a boot server", func(s *model.Site) { s.Pool("a").BootServer = "x" }, []string{"root"}, []string{"alice"}},
		{"add course rule to pool a", func(s *model.Site) { bookPool(s, "a", "sat 10:00-12:00 course-bio", "carol") },
			[]string{"root", "alice", "carol"}, []string{"dave", "frank"}},
		{"add desktop rule to pool a", func(s *model.Site) { bookPool(s, "a", "sat 10:00-12:00 desktop", "carol") },
			[]string{"root", "alice"}, []string{"carol"}},
		{"remove the desktop rule", func(s *model.Site) { s.Pool("a").Weekly = nil }, []string{"root", "alice"}, []string{"carol"}},
		{"host course rule", func(s *model.Site) { bookHost(s, "a1", "sun 10:00-12:00 course-bio", "carol") }, []string{"root", "alice", "carol"}, []string{"dave"}},
		{"course exception in a", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "lab", Kind: "lecture", Mode: "course-bio", Owner: "carol",
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Host: "a1"}}})
		}, []string{"root", "alice", "carol"}, []string{"dave"}},
		{"exception spanning pools a and b", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "hol", Kind: "holiday", Mode: "cluster",
				Start: time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 27, 0, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: "a"}, {Pool: "b"}}})
		}, []string{"root"}, []string{"alice", "carol"}},
		{"course image version of pool a", func(s *model.Site) {
			s.Image("bio").Versions = []model.ImageVersion{{Version: "2", SHA256: sha, Path: "bio/2", Created: time.Now().UTC().Truncate(time.Second)}}
		}, []string{"root", "alice", "carol"}, []string{"dave"}},
		{"course image of pool b", func(s *model.Site) {
			s.Image("chem").Versions = []model.ImageVersion{{Version: "2", SHA256: sha, Path: "chem/2", Created: time.Now().UTC().Truncate(time.Second)}}
		}, []string{"root"}, []string{"alice", "carol"}},
		{"desktop image version", func(s *model.Site) {
			s.Image("desk").Versions = append(s.Image("desk").Versions, model.ImageVersion{Version: "2", SHA256: sha, Path: "desk/2", Created: time.Now().UTC().Truncate(time.Second)})
		}, []string{"root"}, []string{"alice", "carol"}},
		{"course mode for pool a's VM", func(s *model.Site) {
			s.Modes = append(s.Modes, model.Mode{Name: "course-bio2", Kind: model.KindCourseVM, Image: "desk", VM: "bio"})
		}, []string{"root", "alice", "carol"}, []string{"dave"}},
		{"change the desktop mode", func(s *model.Site) { s.Mode("desktop").KernelArgs = "quiet" }, []string{"root"}, []string{"alice", "carol"}},
		{"site settings", func(s *model.Site) { s.DefaultMode = "desktop" }, []string{"root"}, []string{"alice"}},
		{"grant roles", func(s *model.Site) { s.Role("a-admins").Members = append(s.Role("a-admins").Members, "mallory") }, []string{"root"}, []string{"alice"}},
		{"set pool a's sharing policy", func(s *model.Site) { s.Pool("a").Policy = &model.Policy{ThrottleCPU: 10} },
			[]string{"root", "alice"}, []string{"carol", "dave", "eve"}},
		{"policy and a course rule at once", func(s *model.Site) {
			s.Pool("a").Policy = &model.Policy{ThrottleCPU: 10}
			s.Pool("a").Weekly = append(s.Pool("a").Weekly, "sat 10:00-12:00 course-bio")
		}, []string{"root", "alice"}, []string{"carol"}},
		{"give the desktop mode a guest", func(s *model.Site) { s.Mode("desktop").Guest = &model.Guest{Image: "bio"} },
			[]string{"root"}, []string{"alice", "carol"}},

		// What the kernel runs is the site admin's, also for the modes a lecturer manages.
		{"kernel arguments of a course mode", func(s *model.Site) { s.Mode("course-bio").KernelArgs = "init=/bin/sh" },
			[]string{"root"}, []string{"alice", "carol"}},
		{"second root on a course mode", func(s *model.Site) { s.Mode("course-bio").KernelArgs = "overtime.root=evil/1" },
			[]string{"root"}, []string{"alice", "carol"}},
		{"desktop image of a course mode", func(s *model.Site) { s.Mode("course-bio").Image = "other" },
			[]string{"root"}, []string{"alice", "carol"}},
		{"version pin of a course mode", func(s *model.Site) { s.Mode("course-bio").ImageVersion = "1" },
			[]string{"root"}, []string{"alice", "carol"}},
		{"kernel and initrd of a course mode", func(s *model.Site) {
			s.Mode("course-bio").Kernel, s.Mode("course-bio").Initrd = "x/vmlinuz", "x/initrd"
		},
			[]string{"root"}, []string{"alice", "carol"}},
		{"kind of a course mode", func(s *model.Site) { s.Mode("course-bio").Kind = model.KindMaintenance },
			[]string{"root"}, []string{"alice", "carol"}},
		{"course mode and its kernel arguments at once", func(s *model.Site) {
			s.Mode("course-bio").Description = "BIO"
			s.Mode("course-bio").KernelArgs = "init=/bin/sh"
		}, []string{"root"}, []string{"alice", "carol"}},
		{"add a course mode with kernel arguments", func(s *model.Site) {
			s.Modes = append(s.Modes, model.Mode{Name: "course-bio3", Kind: model.KindCourseVM, Image: "desk", VM: "bio2", KernelArgs: "init=/bin/sh"})
		}, []string{"root"}, []string{"alice", "carol"}},
		{"add a course mode booting another desktop image", func(s *model.Site) {
			s.Modes = append(s.Modes, model.Mode{Name: "course-bio3", Kind: model.KindCourseVM, Image: "maint", VM: "bio2"})
		}, []string{"root"}, []string{"alice", "carol"}},
		{"describe a course mode", func(s *model.Site) { s.Mode("course-bio").Description = "BIO101" },
			[]string{"root", "alice", "carol"}, []string{"dave", "frank"}},
		{"course mode starts another VM of its pool", func(s *model.Site) { s.Mode("course-bio").VM = "bio2" },
			[]string{"root", "alice", "carol"}, []string{"dave", "frank"}},
		{"course mode starts another pool's VM", func(s *model.Site) { s.Mode("course-bio").VM = "chem" },
			[]string{"root"}, []string{"alice", "carol", "frank"}},
		{"describe a course image", func(s *model.Site) { s.Image("bio").Description = "BIO101 VM" },
			[]string{"root", "alice", "carol"}, []string{"frank"}},
		{"move a course image to another pool", func(s *model.Site) { s.Image("bio").Pool = "b" },
			[]string{"root"}, []string{"alice", "carol", "frank"}},
		{"make a course image a desktop image", func(s *model.Site) { s.Image("bio").Kind = model.ImageDesktop },
			[]string{"root"}, []string{"alice", "carol"}},
		{"describe pool a", func(s *model.Site) { s.Pool("a").Description = "teaching" },
			[]string{"root", "alice"}, []string{"carol"}},

		// A course-vm mode belongs to the pool of its VM image; lecturers book only their
		// pools' course modes, in their pools.
		{"pool b's course mode in pool a's rules", func(s *model.Site) { bookPool(s, "a", "sat 10:00-12:00 course-chem", "carol") },
			[]string{"root", "alice"}, []string{"carol", "frank"}},
		{"pool a's course mode in pool b's rules", func(s *model.Site) { bookPool(s, "b", "sat 10:00-12:00 course-bio", "frank") },
			[]string{"root"}, []string{"alice", "carol", "frank"}},
		{"pool b's course mode in pool b's rules", func(s *model.Site) { bookPool(s, "b", "sat 10:00-12:00 course-chem", "frank") },
			[]string{"root", "frank"}, []string{"alice", "carol"}},
		{"pool b's course mode on a host of pool a", func(s *model.Site) { bookHost(s, "a1", "sun 10:00-12:00 course-chem", "carol") },
			[]string{"root", "alice"}, []string{"carol", "frank"}},
		{"pool b's course mode in an exception of pool a", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "lab", Kind: "lecture", Mode: "course-chem", Owner: "carol",
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: "a"}}})
		}, []string{"root", "alice"}, []string{"carol", "frank"}},
		{"exception booked for someone else", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "lab", Kind: "lecture", Mode: "course-bio", Owner: "bob",
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: "a"}}})
		}, []string{"root", "alice"}, []string{"carol"}},
		{"exception booked for oneself", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "lab", Kind: "lecture", Mode: "course-bio", Owner: "carol",
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: "a"}}})
		}, []string{"root", "alice", "carol"}, []string{"frank"}},
		{"booking handed to someone else", func(s *model.Site) { s.Exception("exam").Owner = "carol" },
			[]string{"root", "alice"}, []string{"carol"}},
		{"lecturer edits the exam", func(s *model.Site) { s.Exception("exam").Description = "moved" },
			[]string{"root", "alice"}, []string{"carol"}},

		// A maintenance exception opens the maintenance boot entry (a root shell at the
		// PC): a pool admin's right in their pool, never a lecturer's, whatever its mode.
		{"open maintenance in pool a", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "patch", Kind: model.ExceptionMaintenance, Mode: "course-bio", Owner: "carol",
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: "a"}}})
		}, []string{"root", "alice"}, []string{"carol", "frank"}},
		{"open maintenance in pool b", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "patch", Kind: model.ExceptionMaintenance, Mode: "course-chem",
				Start: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: "b"}}})
		}, []string{"root"}, []string{"alice", "carol", "frank"}},

		// Boot servers are the site admin's.
		{"host boot server", func(s *model.Site) { s.Host("a1").BootServer = "x" }, []string{"root"}, []string{"alice", "carol"}},
		{"add a host with a boot server", func(s *model.Site) {
			s.Hosts = append(s.Hosts, model.Host{Name: "a2", MAC: "52:54:00:00:00:03", Pool: "a", BootServer: "x"})
		}, []string{"root"}, []string{"alice"}},
		{"add a host with a course rule", func(s *model.Site) {
			s.Hosts = append(s.Hosts, model.Host{Name: "a2", MAC: "52:54:00:00:00:03", Pool: "a", Weekly: []string{"sun 10:00-12:00 course-bio"}})
		}, []string{"root", "alice"}, []string{"carol"}},
	}
	for _, tc := range cases {
		cur := baseSite()
		next := cur.Clone()
		tc.change(next)
		next.Sort()
		changes := model.Diff(cur, next)
		if len(changes) == 0 {
			t.Fatalf("%s: no changes", tc.name)
		}
		for _, uid := range tc.allow {
			if err := For(cur, uid).Check(cur, next, changes); err != nil {
				t.Errorf("%s: %s refused: %v", tc.name, uid, err)
			}
		}
		for _, uid := range tc.refuse {
			err := For(cur, uid).Check(cur, next, changes)
			var f *Forbidden
			if !errors.As(err, &f) {
				t.Errorf("%s: %s allowed (err %v)", tc.name, uid, err)
			}
		}
	}
}

// TestLecturerCannotOpenMaintenance: a lecturer's own booking may not become a
// maintenance exception (which would open the maintenance entry in pool a's menus), nor
// may a lecturer close one an admin opened; the pool admin may do both.
func TestLecturerCannotOpenMaintenance(t *testing.T) {
	cur := baseSite()
	cur.Exceptions = append(cur.Exceptions, model.Exception{Name: "lab", Kind: "lecture", Mode: "course-bio", Owner: "carol",
		Start: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		Targets: []model.Target{{Pool: "a"}}})
	cur.Sort()
	open := cur.Clone()
	open.Exception("lab").Kind = model.ExceptionMaintenance
	for _, tc := range []struct {
		name     string
		from, to *model.Site
	}{{"open", cur, open}, {"close", open, cur}} {
		changes := model.Diff(tc.from, tc.to)
		if err := For(tc.from, "alice").Check(tc.from, tc.to, changes); err != nil {
			t.Errorf("%s: pool admin refused: %v", tc.name, err)
		}
		err := For(tc.from, "carol").Check(tc.from, tc.to, changes)
		var f *Forbidden
		if !errors.As(err, &f) || !strings.Contains(err.Error(), "kind maintenance") {
			t.Errorf("%s: lecturer: err %v, want a refusal naming kind maintenance", tc.name, err)
		}
	}
}

func TestHostPrincipal(t *testing.T) {
	s := baseSite()
	host := ForHost("a1")
	if host.CanRead() || len(host.Roles()) != 0 || !host.IsHost() || host.UID != "host:a1" {
		t.Fatalf("host principal %+v reads or has roles", host)
	}
	// A host changes nothing, not even in its own pool.
	next := s.Clone()
	next.Host("a1").Weekly = []string{"sun 10:00-12:00 desktop"}
	var f *Forbidden
	if err := host.Check(s, next, model.Diff(s, next)); !errors.As(err, &f) {
		t.Fatalf("host changed itself: %v", err)
	}
	// A user named like a host's principal gets nothing from it.
	if For(s, "host:a1").IsHost() {
		t.Fatal("a uid made a host principal")
	}
	for _, tc := range []struct {
		name      string
		p         Principal
		requested string
		post      bool
		want      string // host acted for; "" with err
		err       bool
	}{
		{"host, implicit", host, "", false, "a1", false},
		{"host, itself", host, "a1", true, "a1", false},
		{"host, another host's config", host, "b1", false, "", true},
		{"host, another host's heartbeat", host, "b1", true, "", true},
		{"viewer reads any config", For(s, "dave"), "b1", false, "b1", false},
		{"pool admin reads a config", For(s, "alice"), "b1", false, "b1", false},
		{"user without role", For(s, "eve"), "a1", false, "", true},
		{"admin posts a heartbeat", For(s, "root"), "a1", true, "", true},
	} {
		got, err := tc.p.AgentHost(tc.requested, tc.post)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s: %q, %v", tc.name, got, err)
		}
		if err != nil && !errors.As(err, &f) {
			t.Errorf("%s: %T is not Forbidden", tc.name, err)
		}
	}
}

func TestCheckHostCredential(t *testing.T) {
	s := baseSite()
	for _, tc := range []struct {
		p     Principal
		host  string
		allow bool
	}{
		{For(s, "root"), "a1", true},
		{For(s, "root"), "b1", true},
		{For(s, "alice"), "a1", true},
		{For(s, "alice"), "b1", false},
		{For(s, "carol"), "a1", false},
		{For(s, "dave"), "a1", false},
		{For(s, "eve"), "a1", false},
		{ForHost("a1"), "a1", false},
	} {
		err := tc.p.CheckHostCredential(s.Host(tc.host))
		if (err == nil) != tc.allow {
			t.Errorf("%s on %s: %v, allow %v", tc.p.UID, tc.host, err, tc.allow)
		}
	}
}

// TestFieldRightsTable: the table names every field model.Diff reports for its kinds
// (also the ones only a site admin may change, so a reader sees each decision), and
// nothing else (a misspelt field would leave the real one closed and the intended right
// lost).
func TestFieldRightsTable(t *testing.T) {
	entities := map[string]any{
		model.EntityPool:         model.Pool{},
		model.EntityHost:         model.Host{},
		model.EntityException:    model.Exception{},
		model.EntityMode:         model.Mode{},
		model.EntityImage:        model.Image{},
		model.EntityImageVersion: model.ImageVersion{},
	}
	// Fields Diff does not report as fields: names identify, rule owners are part of
	// "weekly", versions are entities of their own.
	notFields := map[string]bool{"name": true, "version": true, "ruleOwners": true, "versions": true}
	if len(entities) != len(fieldRights) {
		t.Errorf("table has %d kinds, test knows %d", len(fieldRights), len(entities))
	}
	for kind, v := range entities {
		rights, ok := fieldRights[kind]
		if !ok {
			t.Errorf("%s: not in the table", kind)
			continue
		}
		want := map[string]bool{}
		typ := reflect.TypeOf(v)
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name != "" && !notFields[name] {
				want[name] = true
			}
		}
		for f := range want {
			if _, ok := rights.fields[f]; !ok {
				t.Errorf("%s: field %s is not in the table", kind, f)
			}
		}
		for f := range rights.fields {
			if !want[f] {
				t.Errorf("%s: the table names %s, which %T has not", kind, f, v)
			}
		}
	}
	// The boot fields of a mode are the site admin's, whoever else manages the mode.
	for _, f := range []string{"kind", "image", "imageVersion", "kernel", "initrd", "kernelArgs", "guest"} {
		if r := fieldRights[model.EntityMode].fields[f]; r.poolAdmin != never || r.lecturer != never {
			t.Errorf("mode %s is open to %+v", f, r)
		}
	}
}

// TestRefusalNamesTheField: a refusal says what may not be changed and by whom.
func TestRefusalNamesTheField(t *testing.T) {
	cur := baseSite()
	next := cur.Clone()
	next.Mode("course-bio").Description = "BIO"
	next.Mode("course-bio").KernelArgs = "init=/bin/sh"
	err := For(cur, "carol").Check(cur, next, model.Diff(cur, next))
	want := "user carol may not modify mode course-bio: a lecturer of pool a may not change its kernelArgs: only a site admin may"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// Extra grants (an external user's mapped groups) add to the site's grants for the uid;
// their Members are not looked at, and they give nothing to other uids.
func TestForExtraGrants(t *testing.T) {
	site := &model.Site{Roles: []model.RoleGrant{
		{Name: "viewers", Role: model.RoleViewer, Members: []string{"ada"}},
		{Name: "lab-b-admins", Role: model.RolePoolAdmin, Pool: "lab-b", Members: []string{"bob"}},
	}}
	p := For(site, "ada", model.RoleGrant{Role: model.RolePoolAdmin, Pool: "lab-a"}, model.RoleGrant{Role: model.RoleLecturer, Pool: "lab-c", Members: []string{"someone-else"}})
	if got, want := strings.Join(p.Roles(), " "), "lecturer:lab-c pool-admin:lab-a viewer"; got != want {
		t.Fatalf("roles = %q, want %q", got, want)
	}
	if got := For(site, "ada").Roles(); len(got) != 1 || got[0] != "viewer" {
		t.Fatalf("without extra grants: %v", got)
	}
}

// TestCheckUpload: who may upload versions of which image, decided from the image alone.
func TestCheckUpload(t *testing.T) {
	course := &model.Image{Name: "bio", Kind: model.ImageCourseVM, Pool: "lab-a"}
	desk := &model.Image{Name: "desk", Kind: model.ImageDesktop}
	for _, c := range []struct {
		p     Principal
		im    *model.Image
		allow bool
	}{
		{Principal{UID: "admin", SiteAdmin: true}, desk, true},
		{Principal{UID: "admin", SiteAdmin: true}, course, true},
		{Principal{UID: "carol", Lecturer: map[string]bool{"lab-a": true}}, course, true},
		{Principal{UID: "alice", PoolAdmin: map[string]bool{"lab-a": true}}, course, true},
		{Principal{UID: "carol", Lecturer: map[string]bool{"lab-a": true}}, desk, false},
		{Principal{UID: "alice", PoolAdmin: map[string]bool{"lab-a": true}}, desk, false},
		{Principal{UID: "eve", Lecturer: map[string]bool{"lab-b": true}}, course, false},
		{Principal{UID: "dave", Viewer: true}, course, false},
		{ForHost("pc-a01"), course, false},
	} {
		err := c.p.CheckUpload(c.im)
		if (err == nil) != c.allow {
			t.Errorf("%s uploading to %s: %v, want allowed=%v", c.p.UID, c.im.Name, err, c.allow)
		}
	}
}

// TestCheckPower: reboot, power-off and wake are for site admins and the admins of the
// host's pool; a lecturer of the pool, a viewer, another pool's admin and a host are refused.
func TestCheckPower(t *testing.T) {
	s := baseSite()
	for _, tc := range []struct {
		who  Principal
		host string
		ok   bool
		why  string
	}{
		{For(s, "root"), "a1", true, ""},
		{For(s, "root"), "b1", true, ""},
		{For(s, "alice"), "a1", true, ""},
		{For(s, "alice"), "b1", false, "user alice may not reboot host b1: only a site admin or an admin of pool b may"},
		{For(s, "carol"), "a1", false, "never changes how a PC boots"},
		{For(s, "frank"), "a1", false, "only a site admin or an admin of pool a may"},
		{For(s, "dave"), "a1", false, "user dave may not reboot"},
		{For(s, "eve"), "a1", false, "user eve may not reboot"},
		{ForHost("a1"), "a1", false, "may not reboot host a1"},
	} {
		err := tc.who.CheckPower(s.Host(tc.host), "reboot")
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), tc.why)) {
			t.Errorf("%s rebooting %s: %v, want ok=%v %q", tc.who.UID, tc.host, err, tc.ok, tc.why)
		}
		var f *Forbidden
		if err != nil && !errors.As(err, &f) {
			t.Errorf("%s: %T is not *Forbidden", tc.who.UID, err)
		}
	}
}

// Only a site admin or a viewer (the sync daemon's accounts) report the controller's
// Slurm version: it decides whether guests start in every pool.
func TestCheckSlurmReport(t *testing.T) {
	s := baseSite()
	for _, tc := range []struct {
		who Principal
		ok  bool
	}{
		{For(s, "root"), true}, {For(s, "dave"), true},
		{For(s, "alice"), false}, {For(s, "carol"), false}, {For(s, "eve"), false}, {ForHost("a1"), false},
	} {
		err := tc.who.CheckSlurmReport()
		var f *Forbidden
		if (err == nil) != tc.ok || err != nil && (!errors.As(err, &f) || !strings.Contains(err.Error(), "user "+tc.who.UID+" may not report")) {
			t.Errorf("%s: %v, want ok=%v (a *Forbidden naming the user)", tc.who.UID, err, tc.ok)
		}
	}
}

// bookPool adds rule to pool's weekly rules as a booking of uid (as the API records it).
func bookPool(s *model.Site, pool, rule, uid string) {
	p := s.Pool(pool)
	p.Weekly = append(p.Weekly, rule)
	if p.RuleOwners == nil {
		p.RuleOwners = model.RuleOwners{}
	}
	p.RuleOwners[rule] = uid
}

// bookHost adds rule to host's weekly rules as a booking of uid.
func bookHost(s *model.Site, host, rule, uid string) {
	h := s.Host(host)
	h.Weekly = append(h.Weekly, rule)
	if h.RuleOwners == nil {
		h.RuleOwners = model.RuleOwners{}
	}
	h.RuleOwners[rule] = uid
}

// dropRule removes rule (and its owner) from the pool's or host's weekly rules.
func dropRule(rules *[]string, owners model.RuleOwners, rule string) {
	out := (*rules)[:0:0]
	for _, r := range *rules {
		if r != rule {
			out = append(out, r)
		}
	}
	*rules = out
	delete(owners, rule)
}

// bookingsSite is baseSite with a second lecturer of pool a (mia) and bookings of the
// course mode in pool a: the site file's Wednesday rule and "filed" exception, and the
// bookings of root (an exception), carol and mia (a rule of pool a, a rule of host a1 and
// an exception each).
func bookingsSite() *model.Site {
	s := baseSite()
	s.Roles = append(s.Roles, model.RoleGrant{Name: "a-lect-2", Role: model.RoleLecturer, Pool: "a", Members: []string{"mia"}})
	s.Pool("a").Weekly = append(s.Pool("a").Weekly, "wed 18:00-20:00 course-bio")
	bookPool(s, "a", "sat 10:00-12:00 course-bio", "carol")
	bookPool(s, "a", "sun 10:00-12:00 course-bio", "mia")
	bookHost(s, "a1", "sat 14:00-16:00 course-bio", "carol")
	bookHost(s, "a1", "sun 14:00-16:00 course-bio", "mia")
	for i, o := range []string{"root", "carol", "mia", ""} {
		name := map[string]string{"root": "adm", "carol": "carols", "mia": "mias", "": "filed"}[o]
		s.Exceptions = append(s.Exceptions, model.Exception{Name: name, Kind: "lecture", Mode: "course-bio", Owner: o,
			Start: time.Date(2026, 12, 7+i, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 7+i, 10, 0, 0, 0, time.UTC),
			Targets: []model.Target{{Pool: "a"}}})
	}
	s.Sort()
	return s
}

// TestLecturerOwnBookingsOnly: a lecturer creates, changes and cancels only their own
// bookings (exceptions and weekly rules recorded with their uid, with a course-vm mode
// of their pool); an administrator's, another lecturer's or the site file's booking with
// the same course mode in the same pool is read-only to them, and the refusal names the
// booking and its owner. The pool admin may do all of it.
func TestLecturerOwnBookingsOnly(t *testing.T) {
	exc := func(name string, mod func(e *model.Exception)) func(s *model.Site) {
		return func(s *model.Site) { mod(s.Exception(name)) }
	}
	del := func(name string) func(s *model.Site) {
		return func(s *model.Site) {
			for i := range s.Exceptions {
				if s.Exceptions[i].Name == name {
					s.Exceptions = append(s.Exceptions[:i], s.Exceptions[i+1:]...)
					return
				}
			}
		}
	}
	add := func(owner string) func(s *model.Site) {
		return func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "new", Kind: "lecture", Mode: "course-bio", Owner: owner,
				Start: time.Date(2026, 12, 20, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 20, 10, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: "a"}}})
		}
	}
	poolRule := func(rule string) func(s *model.Site) {
		return func(s *model.Site) { dropRule(&s.Pool("a").Weekly, s.Pool("a").RuleOwners, rule) }
	}
	hostRule := func(rule string) func(s *model.Site) {
		return func(s *model.Site) { dropRule(&s.Host("a1").Weekly, s.Host("a1").RuleOwners, rule) }
	}
	cases := []struct {
		name   string
		change func(s *model.Site)
		ok     bool
		msg    string // in carol's refusal
	}{
		{"delete root's lecture", del("adm"), false, "user carol may not delete exception adm: a lecturer of pool a books, changes and cancels only their own bookings, and exception adm is booked by root"},
		{"delete mia's booking", del("mias"), false, "exception mias is booked by mia"},
		{"delete the site file's exception", del("filed"), false, "exception filed is the site file's (it has no owner)"},
		{"change mia's booking", exc("mias", func(e *model.Exception) { e.Description = "mine" }), false, "may not modify exception mias"},
		{"take mia's booking over", exc("mias", func(e *model.Exception) { e.Owner = "carol" }), false, "booked by mia"},
		{"hand her booking to mia", exc("carols", func(e *model.Exception) { e.Owner = "mia" }), false, "may not change its owner"},
		{"change her booking", exc("carols", func(e *model.Exception) {
			e.Description, e.Start, e.End = "moved", e.Start.Add(2*time.Hour), e.End.Add(2*time.Hour)
		}), true, ""},
		{"her booking to the desktop mode", exc("carols", func(e *model.Exception) { e.Mode = "desktop" }), false, "desktop is not one of pool a"},
		{"cancel her booking", del("carols"), true, ""},
		{"book as herself", add("carol"), true, ""},
		{"book for the site file", add(""), false, "exception new is the site file's"},
		{"book for mia", add("mia"), false, "exception new is booked by mia"},

		{"drop the site file's course rule", poolRule("wed 18:00-20:00 course-bio"), false,
			`user carol may not modify pool a: a lecturer of pool a may not change its weekly except their own bookings with course-vm modes of the pool: rule "wed 18:00-20:00 course-bio" is the site file's (it has no owner)`},
		{"drop the site file's desktop rule", poolRule("mon-fri 08:00-18:00 desktop"), false, `rule "mon-fri 08:00-18:00 desktop" is the site file's`},
		{"drop mia's rule", poolRule("sun 10:00-12:00 course-bio"), false, `rule "sun 10:00-12:00 course-bio" is booked by mia`},
		{"take mia's rule over", func(s *model.Site) { s.Pool("a").RuleOwners["sun 10:00-12:00 course-bio"] = "carol" }, false,
			`rule "sun 10:00-12:00 course-bio" is booked by mia`},
		{"hand her rule to mia", func(s *model.Site) { s.Pool("a").RuleOwners["sat 10:00-12:00 course-bio"] = "mia" }, false,
			`rule "sat 10:00-12:00 course-bio" is booked by mia`},
		{"make the site file's rule hers", func(s *model.Site) { s.Pool("a").RuleOwners["wed 18:00-20:00 course-bio"] = "carol" }, false,
			`rule "wed 18:00-20:00 course-bio" is the site file's`},
		{"cancel her rule", poolRule("sat 10:00-12:00 course-bio"), true, ""},
		{"move her rule", func(s *model.Site) {
			poolRule("sat 10:00-12:00 course-bio")(s)
			bookPool(s, "a", "sat 12:00-14:00 course-bio", "carol")
		}, true, ""},
		{"book a rule", func(s *model.Site) { bookPool(s, "a", "fri 18:00-20:00 course-bio", "carol") }, true, ""},
		{"book a desktop rule", func(s *model.Site) { bookPool(s, "a", "fri 18:00-20:00 desktop", "carol") }, false,
			`rule "fri 18:00-20:00 desktop" has mode desktop, which is not a course-vm mode of pool a`},
		{"her rule and mia's rule at once", func(s *model.Site) {
			poolRule("sat 10:00-12:00 course-bio")(s)
			poolRule("sun 10:00-12:00 course-bio")(s)
		}, false, "booked by mia"},
		{"drop mia's rule on a host", hostRule("sun 14:00-16:00 course-bio"), false, `user carol may not modify host a1: a lecturer of pool a may not change its weekly except their own bookings with course-vm modes of the pool: rule "sun 14:00-16:00 course-bio" is booked by mia`},
		{"cancel her rule on a host", hostRule("sat 14:00-16:00 course-bio"), true, ""},
	}
	for _, tc := range cases {
		cur := bookingsSite()
		next := cur.Clone()
		tc.change(next)
		next.Sort()
		changes := model.Diff(cur, next)
		if len(changes) == 0 {
			t.Fatalf("%s: no changes", tc.name)
		}
		err := For(cur, "carol").Check(cur, next, changes)
		var f *Forbidden
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: carol refused: %v", tc.name, err)
		case !tc.ok && !errors.As(err, &f):
			t.Errorf("%s: carol allowed (err %v)", tc.name, err)
		case !tc.ok && !strings.Contains(err.Error(), tc.msg):
			t.Errorf("%s: carol's refusal\n %v\ndoes not say\n %s", tc.name, err, tc.msg)
		}
		// The pool's admins and the site admins keep their rights over every booking.
		for _, uid := range []string{"alice", "root"} {
			if err := For(cur, uid).Check(cur, next, changes); err != nil {
				t.Errorf("%s: %s refused: %v", tc.name, uid, err)
			}
		}
		// Those without a role in the pool get nothing.
		for _, uid := range []string{"dave", "frank"} {
			if err := For(cur, uid).Check(cur, next, changes); !errors.As(err, &f) {
				t.Errorf("%s: %s allowed (err %v)", tc.name, uid, err)
			}
		}
	}
}

// TestPageQuestions: what a page offers (CheckDelete, CheckRemoveRule, MayChangeAll) is
// what Check allows for the same change.
func TestPageQuestions(t *testing.T) {
	cur := bookingsSite()
	users := []string{"root", "alice", "carol", "mia", "frank", "dave"}
	for _, uid := range users {
		p := For(cur, uid)
		for _, e := range cur.Exceptions {
			next := cur.Clone()
			for i := range next.Exceptions {
				if next.Exceptions[i].Name == e.Name {
					next.Exceptions = append(next.Exceptions[:i], next.Exceptions[i+1:]...)
					break
				}
			}
			want := p.Check(cur, next, model.Diff(cur, next))
			if got := p.CheckDelete(cur, model.EntityException, e.Name); (got == nil) != (want == nil) {
				t.Errorf("%s deleting exception %s: CheckDelete %v, Check %v", uid, e.Name, got, want)
			}
		}
		for _, target := range []struct{ kind, name string }{{model.EntityPool, "a"}, {model.EntityHost, "a1"}, {model.EntityPool, "b"}} {
			// rulesOf points at the target's rules and owners in site.
			rulesOf := func(site *model.Site) (*[]string, model.RuleOwners) {
				if target.kind == model.EntityHost {
					return &site.Host(target.name).Weekly, site.Host(target.name).RuleOwners
				}
				return &site.Pool(target.name).Weekly, site.Pool(target.name).RuleOwners
			}
			rules, _ := rulesOf(cur)
			for _, r := range *rules {
				next := cur.Clone()
				rs, os := rulesOf(next)
				dropRule(rs, os, r)
				want := p.Check(cur, next, model.Diff(cur, next))
				got := p.CheckRemoveRule(cur, target.kind, target.name, r)
				if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
					t.Errorf("%s removing %q of %s %s: CheckRemoveRule %v, Check %v", uid, r, target.kind, target.name, got, want)
				}
			}
		}
	}
	for _, tc := range []struct {
		uid, kind, name string
		want            bool
	}{
		{"root", model.EntityPool, "a", true}, {"alice", model.EntityPool, "a", true}, {"alice", model.EntityHost, "a1", true},
		{"alice", model.EntityPool, "b", false}, {"carol", model.EntityPool, "a", false}, {"carol", model.EntityHost, "a1", false},
		{"dave", model.EntityPool, "a", false}, {"frank", model.EntityPool, "b", false},
	} {
		if got := For(cur, tc.uid).MayChangeAll(cur, tc.kind, tc.name, "weekly"); got != tc.want {
			t.Errorf("%s MayChangeAll %s %s weekly = %v, want %v", tc.uid, tc.kind, tc.name, got, tc.want)
		}
	}
	if ForHost("a1").MayChangeAll(cur, model.EntityHost, "a1", "weekly") {
		t.Error("a host may change its own rules")
	}
}
