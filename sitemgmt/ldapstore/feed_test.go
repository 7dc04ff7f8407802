package ldapstore

import (
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Which entry is which entity, from its DN alone (what a deletion brings).
func TestEntityOf(t *testing.T) {
	l := newLayout("dc=example,dc=org")
	for _, c := range []struct {
		dn, kind, name string
	}{
		{"cn=pc001,ou=hosts,ou=overtime,dc=example,dc=org", model.EntityHost, "pc001"},
		{"CN=pc001,OU=Hosts,ou=overtime,DC=example,dc=org", model.EntityHost, "pc001"},
		{"cn=lab-a,ou=pools,ou=overtime,dc=example,dc=org", model.EntityPool, "lab-a"},
		{"cn=bs1,ou=bootservers,ou=overtime,dc=example,dc=org", model.EntityBootServer, "bs1"},
		{"cn=desktop,ou=modes,ou=overtime,dc=example,dc=org", model.EntityMode, "desktop"},
		{"cn=deb,ou=images,ou=overtime,dc=example,dc=org", model.EntityImage, "deb"},
		{"otVersion=2026.1,cn=deb,ou=images,ou=overtime,dc=example,dc=org", model.EntityImageVersion, "deb/2026.1"},
		{"cn=exam-1,ou=exceptions,ou=overtime,dc=example,dc=org", model.EntityException, "exam-1"},
		{"cn=admins,ou=roles,ou=overtime,dc=example,dc=org", model.EntityRole, "admins"},
		{"ou=hosts,ou=overtime,dc=example,dc=org", "", ""},
		{"uid=alice,ou=people,ou=overtime,dc=example,dc=org", "", ""},
		{"cn=pc001,ou=heartbeat,ou=state,ou=overtime,dc=example,dc=org", "", ""},
		{"cn=pc001,ou=hosts,ou=overtime,dc=other,dc=org", "", ""},
		{"otVersion=1,cn=x,ou=modes,ou=overtime,dc=example,dc=org", "", ""},
		{"not a dn", "", ""},
	} {
		kind, name, ok := l.entityOf(c.dn)
		if kind != c.kind || name != c.name || ok != (c.kind != "") {
			t.Errorf("%s: got %q %q %v, want %q %q", c.dn, kind, name, ok, c.kind, c.name)
		}
	}
}

// A changed entry decoded by the codec Load uses, applied to a site: inserted in name
// order, replaced in place, applied twice to the same effect; deletions of what is not
// there are no error; an image keeps its versions, which are entries of their own.
func TestFeedPatch(t *testing.T) {
	s := &Store{dn: newLayout("dc=example,dc=org")}
	site := &model.Site{
		Hosts:  []model.Host{{Name: "a"}, {Name: "c"}},
		Images: []model.Image{{Name: "deb", Versions: []model.ImageVersion{{Version: "1"}}}},
	}
	apply := func(e *ldap.Entry) {
		t.Helper()
		frag, versions := &model.Site{}, []version(nil)
		isSite, err := s.decodeEntry(frag, &versions, e)
		if err != nil {
			t.Fatal(err)
		}
		_, fn := patchOf(frag, isSite, versions)
		if fn == nil {
			t.Fatalf("%s: no patch", e.DN)
		}
		for range 2 {
			if err := fn(site); err != nil {
				t.Fatal(err)
			}
		}
	}
	host := func(name, ip string) *ldap.Entry {
		return ldap.NewEntry("cn="+name+",ou=hosts,ou=overtime,dc=example,dc=org", map[string][]string{
			"objectClass": {ocHost}, "cn": {name}, aMAC: {"52:54:00:00:00:01"}, aIP: {ip}, aPoolName: {"p"}})
	}
	apply(host("b", "10.0.0.1"))
	apply(host("c", "10.0.0.2"))
	apply(ldap.NewEntry("cn=deb,ou=images,ou=overtime,dc=example,dc=org", map[string][]string{
		"objectClass": {ocImage}, "cn": {"deb"}, aImageKind: {"desktop"}, aDescription: {"new"}}))
	var names []string
	for _, h := range site.Hosts {
		names = append(names, h.Name)
	}
	if len(names) != 3 || names[0] != "a" || names[1] != "b" || names[2] != "c" || site.Host("c").IP != "10.0.0.2" {
		t.Fatalf("hosts after the patches: %+v", site.Hosts)
	}
	if im := site.Image("deb"); im.Description != "new" || len(im.Versions) != 1 {
		t.Fatalf("image after its patch: %+v", im)
	}
	for range 2 {
		if err := deleteEntity(site, model.EntityHost, "b"); err != nil {
			t.Fatal(err)
		}
		if err := deleteEntity(site, model.EntityImageVersion, "deb/1"); err != nil {
			t.Fatal(err)
		}
	}
	if site.Host("b") != nil || len(site.Hosts) != 2 || site.Image("deb").Versions != nil {
		t.Fatalf("after the deletions: %+v %+v", site.Hosts, site.Images)
	}
	if err := deleteEntity(site, model.EntitySite, ""); err == nil {
		t.Fatal("deleting the site entry applied incrementally")
	}
}
