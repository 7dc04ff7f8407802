package authz

import (
	"errors"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
)

func baseSite() *model.Site {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s := &model.Site{Name: "s", Timezone: "Europe/Berlin", DefaultMode: "cluster",
		Images: []model.Image{
			{Name: "desk", Kind: model.ImageDesktop, Versions: []model.ImageVersion{{Version: "1", SHA256: sha, Path: "desk/1", Created: created}}},
			{Name: "bio", Kind: model.ImageCourseVM, Pool: "a"},
			{Name: "chem", Kind: model.ImageCourseVM, Pool: "b"},
		},
		Modes: []model.Mode{
			{Name: "cluster", Kind: model.KindCluster, Image: "desk"},
			{Name: "desktop", Kind: model.KindDesktop, Image: "desk"},
			{Name: "course-bio", Kind: model.KindCourseVM, Image: "desk", VM: "bio"},
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
		{"assign pool a a boot server", func(s *model.Site) { s.Pool("a").BootServer = "x" }, []string{"root"}, []string{"alice"}},
		{"add course rule to pool a", func(s *model.Site) {
			s.Pool("a").Weekly = append(s.Pool("a").Weekly, "sat 10:00-12:00 course-bio")
		}, []string{"root", "alice", "carol"}, []string{"dave"}},
		{"add desktop rule to pool a", func(s *model.Site) {
			s.Pool("a").Weekly = append(s.Pool("a").Weekly, "sat 10:00-12:00 desktop")
		}, []string{"root", "alice"}, []string{"carol"}},
		{"remove the desktop rule", func(s *model.Site) { s.Pool("a").Weekly = nil }, []string{"root", "alice"}, []string{"carol"}},
		{"host course rule", func(s *model.Site) { s.Host("a1").Weekly = []string{"sun 10:00-12:00 course-bio"} }, []string{"root", "alice", "carol"}, []string{"dave"}},
		{"course exception in a", func(s *model.Site) {
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "lab", Kind: "lecture", Mode: "course-bio",
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
