package ldapstore

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/sitemgmt/hostcred"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// rootConn is a plain LDAP connection as the rootdn, for looking at (and tampering with)
// raw entries behind the store's back.
func rootConn(t *testing.T, srv *slapdenv.Server) *ldap.Conn {
	t.Helper()
	c, err := ldap.DialURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Bind(srv.RootDN, srv.RootPW); err != nil {
		t.Fatal(err)
	}
	return c
}

// rawAttr reads one attribute of one entry ("" when absent).
func rawAttr(t *testing.T, c *ldap.Conn, dn, attr string) string {
	t.Helper()
	res, err := c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{attr}, nil))
	if err != nil {
		t.Fatal(err)
	}
	return res.Entries[0].GetAttributeValue(attr)
}

// Policy and guest are one JSON value each, written, read back and changed like any field.
func TestAgentFieldsRoundTrip(t *testing.T) {
	st, srv := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	cur := mustLoad(t, st)
	assertSameSite(t, cur, exampleSite())
	root := rootConn(t, srv)
	pol := rawAttr(t, root, st.dn.pool("lab-a"), aPolicy)
	if pol != `{"actions":{"owner-active":"freeze"},"idleAfter":"10m0s","freezePressure":12.5,"thawPressure":2.5,"remoteActive":false}` {
		t.Fatalf("stored policy %s", pol)
	}
	if g := rawAttr(t, root, st.dn.mode("desktop"), aGuest); g != `{"image":"compute","memoryMB":4096}` {
		t.Fatalf("stored guest %s", g)
	}
	if g := rawAttr(t, root, st.dn.mode("local-disk"), aGuest); g != "" {
		t.Fatalf("mode without guest stores %q", g)
	}

	next := cur.Clone()
	next.Pool("lab-a").Policy.ThrottleCPU = 33
	next.Pool("lab-b").Policy = &model.Policy{Hold: model.Duration(0), GuestMemory: 25}
	next.Mode("cluster").Guest = nil
	next.Mode("desktop").Guest.Version = "1.0"
	ch := mustApply(t, st, cur, next)
	want := []string{"~ mode cluster (guest)", "~ mode desktop (guest)", "~ pool lab-a (policy)", "~ pool lab-b (policy)"}
	if got := changeStrings(ch); !slices.Equal(got, want) {
		t.Fatalf("changes %q, want %q", got, want)
	}
	got := mustLoad(t, st)
	assertSameSite(t, got, next)
	if g := rawAttr(t, root, st.dn.mode("cluster"), aGuest); g != "" {
		t.Fatalf("removed guest still stored: %q", g)
	}
	// An empty policy is the default policy: nothing is stored for it.
	next2 := got.Clone()
	next2.Pool("lab-a").Policy = &model.Policy{}
	mustApply(t, st, got, next2)
	if p := rawAttr(t, root, st.dn.pool("lab-a"), aPolicy); p != "" {
		t.Fatalf("empty policy stored as %q", p)
	}
	if p := mustLoad(t, st).Pool("lab-a").Policy; p != nil {
		t.Fatalf("empty policy loads as %+v", p)
	}
}

// A policy or guest edited by hand into something the model refuses (an unknown field, a
// value out of range, not JSON) makes Load fail with the entry and the reason, instead of
// being half understood.
func TestLoadRefusesBadAgentJSON(t *testing.T) {
	st, srv := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	root := rootConn(t, srv)
	for _, tc := range []struct {
		dn, attr, value, msg string
	}{
		{st.dn.pool("lab-a"), aPolicy, `{"idleAftr":"5m"}`, `unknown field "idleAftr"`},
		{st.dn.pool("lab-a"), aPolicy, `{"throttleCPU":250}`, "throttleCPU 250 out of range"},
		{st.dn.pool("lab-a"), aPolicy, `throttle please`, "policy: invalid character"},
		{st.dn.mode("desktop"), aGuest, `{"image":"compute","networks":"nat"}`, `unknown field "networks"`},
		{st.dn.mode("desktop"), aGuest, `{"image":"compute","backend":"bhyve"}`, `unknown backend "bhyve"`},
	} {
		old := rawAttr(t, root, tc.dn, tc.attr)
		mod := ldap.NewModifyRequest(tc.dn, nil)
		mod.Replace(tc.attr, []string{tc.value})
		if err := root.Modify(mod); err != nil {
			t.Fatal(err)
		}
		_, err := st.Load(bg)
		if err == nil || !strings.Contains(err.Error(), tc.dn) || !strings.Contains(err.Error(), tc.attr) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s %s=%s: Load: %v, want an error naming the entry and %q", tc.dn, tc.attr, tc.value, err, tc.msg)
		}
		mod = ldap.NewModifyRequest(tc.dn, nil)
		mod.Replace(tc.attr, []string{old})
		if err := root.Modify(mod); err != nil {
			t.Fatal(err)
		}
	}
	assertSameSite(t, mustLoad(t, st), exampleSite())
}

func TestHostCredential(t *testing.T) {
	st, srv := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	root := rootConn(t, srv)

	if h, err := st.HostCredential(bg, "pc-a01"); err != nil || h != "" {
		t.Fatalf("no credential yet: %q %v", h, err)
	}
	tok, _ := hostcred.New("pc-a01")
	if err := st.SetHostCredential(bg, "pc-a01", hostcred.Hash(tok)); err != nil {
		t.Fatal(err)
	}
	h, err := st.HostCredential(bg, "pc-a01")
	if err != nil || !hostcred.Verify(tok, h) {
		t.Fatalf("stored credential %q %v does not verify", h, err)
	}
	// Only the hash is in the directory.
	if raw := rawAttr(t, root, st.dn.host("pc-a01"), aTokenHash); raw != hostcred.Hash(tok) || strings.Contains(raw, tok[len("ot1.pc-a01."):]) {
		t.Fatalf("raw attribute %q", raw)
	}
	// The credential is not part of the site: Load, Diff and exports never see it, and
	// an Apply that modifies the host keeps it.
	cur := mustLoad(t, st)
	assertSameSite(t, cur, exampleSite())
	next := cur.Clone()
	next.Host("pc-a01").IP = "10.0.0.99"
	next.Host("pc-a01").Weekly = nil
	mustApply(t, st, cur, next)
	if h, _ := st.HostCredential(bg, "pc-a01"); !hostcred.Verify(tok, h) {
		t.Fatal("modifying the host dropped its credential")
	}
	// A new credential replaces the old one.
	tok2, _ := hostcred.New("pc-a01")
	if err := st.SetHostCredential(bg, "pc-a01", hostcred.Hash(tok2)); err != nil {
		t.Fatal(err)
	}
	if h, _ := st.HostCredential(bg, "pc-a01"); hostcred.Verify(tok, h) || !hostcred.Verify(tok2, h) {
		t.Fatal("rotation did not replace the credential")
	}
	// Revocation removes it; revoking again is harmless.
	for range 2 {
		if err := st.SetHostCredential(bg, "pc-a01", ""); err != nil {
			t.Fatal(err)
		}
		if h, err := st.HostCredential(bg, "pc-a01"); err != nil || h != "" {
			t.Fatalf("after revocation: %q %v", h, err)
		}
	}
	// A host that is deleted and added again (a rename back) has no credential.
	if err := st.SetHostCredential(bg, "pc-a02", hostcred.Hash(tok2)); err != nil {
		t.Fatal(err)
	}
	cur = mustLoad(t, st)
	gone := cur.Clone()
	gone.Hosts = slices.DeleteFunc(gone.Hosts, func(h model.Host) bool { return h.Name == "pc-a02" })
	mustApply(t, st, cur, gone)
	if _, err := st.HostCredential(bg, "pc-a02"); !errors.Is(err, ErrUnknownHost) {
		t.Fatalf("credential of a deleted host: %v", err)
	}
	if err := st.SetHostCredential(bg, "pc-a02", hostcred.Hash(tok2)); !errors.Is(err, ErrUnknownHost) {
		t.Fatalf("credential for a deleted host: %v", err)
	}
	mustApply(t, st, gone, cur)
	if h, err := st.HostCredential(bg, "pc-a02"); err != nil || h != "" {
		t.Fatalf("re-added host inherited a credential: %q %v", h, err)
	}
	// A hand-edited value of the wrong form is no credential at all.
	mod := ldap.NewModifyRequest(st.dn.host("pc-a03"), nil)
	mod.Replace(aTokenHash, []string{"plaintext-token"})
	if err := root.Modify(mod); err != nil {
		t.Fatal(err)
	}
	if h, err := st.HostCredential(bg, "pc-a03"); err != nil || h != "" {
		t.Fatalf("malformed stored hash: %q %v", h, err)
	}
	if err := st.SetHostCredential(bg, "pc-a03", "plaintext-token"); err == nil {
		t.Fatal("a value that is not a hash was stored")
	}
}

// Host names from bearer tokens reach the store: nothing in them can widen a search or
// point into another subtree. Every name that is not a host name is an unknown host,
// whatever hosts exist, and the directory is never asked.
func TestHostCredentialInjection(t *testing.T) {
	st, _ := initStore(t)
	mustApply(t, st, mustLoad(t, st), exampleSite())
	tok, _ := hostcred.New("pc-a01")
	for _, h := range []string{"pc-a01", "pc-a02", "pc-b01"} {
		if err := st.SetHostCredential(bg, h, hostcred.Hash(tok)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{
		"*", "pc-a0*", "pc-a01)(objectClass=*", "*)(|(cn=*", "pc-a01)(otAgentTokenHash=*",
		"pc-a01,ou=hosts", "cn=pc-a01", "uid=admin,ou=people", "pc-a01\x00", "", "PC-A01", "pc-a01 ",
		`pc-a01\2a`, "..", "pc-a01/../pc-a02",
	} {
		if h, err := st.HostCredential(bg, name); !errors.Is(err, ErrUnknownHost) || h != "" {
			t.Errorf("HostCredential(%q) = %q, %v; want ErrUnknownHost", name, h, err)
		}
		if err := st.SetHostCredential(bg, name, ""); !errors.Is(err, ErrUnknownHost) {
			t.Errorf("SetHostCredential(%q): %v; want ErrUnknownHost", name, err)
		}
	}
	// The real hosts kept their credentials.
	for _, h := range []string{"pc-a01", "pc-a02", "pc-b01"} {
		if v, err := st.HostCredential(bg, h); err != nil || v != hostcred.Hash(tok) {
			t.Fatalf("%s: %q %v", h, v, err)
		}
	}
	// An unknown but well-formed name is unknown, too.
	if _, err := st.HostCredential(bg, "pc-z99"); !errors.Is(err, ErrUnknownHost) {
		t.Fatalf("unknown host: %v", err)
	}
}
