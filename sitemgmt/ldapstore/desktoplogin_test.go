package ldapstore

import (
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The desktops' login configuration round-trips on the site and on a pool (with its CA
// certificate), changes, and is removed again; a hand-edited value that does not
// validate is refused at load with the entry named.
func TestDesktopLoginRoundTrip(t *testing.T) {
	st, srv := initStore(t)
	pem := unidir.NewCA(t, t.TempDir(), "uni-ca").PEM(t)
	site := exampleSite()
	site.DesktopLogin = &model.DesktopLogin{Provider: model.LoginKerberos, URIs: []string{"ldaps://ldap.uni.example", "ldaps://10.0.0.9"},
		SearchBase: "ou=people,dc=uni,dc=example", CACert: pem, Realm: "UNI.EXAMPLE", KDCs: []string{"kdc.uni.example:88"}}
	site.Pools[0].DesktopLogin = &model.DesktopLogin{Provider: model.LoginAD, Realm: "AD.UNI.EXAMPLE"}
	site.Printing = &model.Printing{Server: "print.uni.example"}
	site.Pools[1].Printing = &model.Printing{Server: "print-b.uni.example:631", DefaultPrinter: "room-b"}
	mustApply(t, st, mustLoad(t, st), site)
	cur := mustLoad(t, st)
	assertSameSite(t, cur, site)

	next := cur.Clone()
	next.DesktopLogin.KDCs = append(next.DesktopLogin.KDCs, "kdc2.uni.example")
	next.Pools[0].DesktopLogin = nil
	next.Pools[1].Printing = nil
	if ch := mustApply(t, st, cur, next); len(ch) != 3 {
		t.Errorf("changes %+v, want the site's and pool 0's desktopLogin, pool 1's printing", ch)
	}
	cur = mustLoad(t, st)
	assertSameSite(t, cur, next)

	// A hand edit that does not validate (an unknown provider) is refused at load.
	c := rootConn(t, srv)
	mod := ldap.NewModifyRequest("ou=overtime,"+srv.BaseDN, nil)
	mod.Replace(aDesktopLogin, []string{`{"provider":"nis","uris":["ldap://x"],"searchBase":"dc=x"}`})
	if err := c.Modify(mod); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(bg); err == nil || !strings.Contains(err.Error(), `unknown provider "nis"`) || !strings.Contains(err.Error(), "ou=overtime") {
		t.Fatalf("Load of a hand-edited desktopLogin: %v, want refused naming the entry", err)
	}
}

// The desktops' homes round-trip on the site and on a pool, change and are removed; a
// hand-edited value that does not validate is refused at load naming the entry.
func TestHomesRoundTrip(t *testing.T) {
	st, srv := initStore(t)
	site := exampleSite()
	site.Homes = &model.Homes{Type: model.HomesNFS, Server: "files.uni.example", Path: "/export/homes/%(USER)", Options: "vers=4.2,sec=sys"}
	site.Pools[0].Homes = &model.Homes{Type: model.HomesCIFS, Server: "dc1.ad.uni.example", Path: "users$/%(USER)"}
	mustApply(t, st, mustLoad(t, st), site)
	cur := mustLoad(t, st)
	assertSameSite(t, cur, site)

	next := cur.Clone()
	next.Homes.Options = ""
	next.Pools[0].Homes = nil
	next.Pools[1].Homes = &model.Homes{Type: model.HomesNFS, Server: "10.0.0.7", Path: "/h/%(USER)"}
	if ch := mustApply(t, st, cur, next); len(ch) != 3 {
		t.Errorf("changes %+v, want the site's, pool 0's and pool 1's homes", ch)
	}
	cur = mustLoad(t, st)
	assertSameSite(t, cur, next)

	c := rootConn(t, srv)
	mod := ldap.NewModifyRequest("ou=overtime,"+srv.BaseDN, nil)
	mod.Replace(aHomes, []string{`{"type":"nfs","server":"files","path":"/export/homes"}`})
	if err := c.Modify(mod); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(bg); err == nil || !strings.Contains(err.Error(), "homes.path") || !strings.Contains(err.Error(), "ou=overtime") {
		t.Fatalf("Load of a hand-edited homes: %v, want refused naming the entry and field", err)
	}
}
