package ldapstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestAuthenticate(t *testing.T) {
	st, _ := initStore(t)
	if err := st.PutUser(bg, "alice", "Alice Example", "alice-secret"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uid, pw string
		ok      bool
	}{
		{"admin", adminPW, true},
		{"alice", "alice-secret", true},
		{"alice", "wrong", false},
		{"alice", "", false}, // would be an unauthenticated (anonymous) bind
		{"alice", "ALICE-SECRET", false},
		{"nobody", "alice-secret", false},
		{"", "x", false},
	} {
		err := st.Authenticate(bg, tc.uid, tc.pw)
		if tc.ok && err != nil {
			t.Errorf("Authenticate(%q, %q): %v", tc.uid, tc.pw, err)
		}
		if !tc.ok && (!errors.Is(err, ErrInvalidCredentials) || err.Error() != "invalid credentials") {
			t.Errorf("Authenticate(%q, %q): %v, want exactly \"invalid credentials\"", tc.uid, tc.pw, err)
		}
	}
	// The service connection is not rebound by Authenticate: it can still write.
	cur := mustLoad(t, st)
	next := cur.Clone()
	next.Modes = append(next.Modes, model.Mode{Name: "maint", Kind: model.KindMaintenance})
	mustApply(t, st, cur, next)
}

// Filter metacharacters in a uid never match anything and never lead to a bind, whatever
// the password: ValidUID rejects them, and the filter is escaped besides.
func TestAuthenticateFilterInjection(t *testing.T) {
	st, srv := initStore(t)
	if err := st.PutUser(bg, "alice", "", "pw"); err != nil {
		t.Fatal(err)
	}
	// Another user with the same password: a filter that matched more than one entry, or
	// the wrong one, could bind as them.
	if err := st.PutUser(bg, "a", "", "pw"); err != nil {
		t.Fatal(err)
	}
	evil := []string{
		"*", "a*", "*)(uid=*", "admin)(uid=*", "admin)(|(uid=*", `\2a`, `a\2a`, "(uid=*)",
		"alice)(objectClass=*", "alice\x00", "uid=alice,ou=people",
		"alice,ou=people", "a)(!(uid=x)", "*alice*",
	}
	// uid matches case- and space-insensitively in LDAP, so these would find alice's entry:
	// ValidUID (lower case, no spaces) keeps the identity a login yields equal to the uid
	// that role grants name.
	equivalent := []string{"alice ", " alice", "ALICE", "Alice"}
	for _, uid := range append(evil, equivalent...) {
		for _, pw := range []string{"pw", adminPW, "*", ""} {
			if err := st.Authenticate(bg, uid, pw); !errors.Is(err, ErrInvalidCredentials) {
				t.Errorf("Authenticate(%q, %q): %v", uid, pw, err)
			}
		}
	}
	// Below the validation, the escaped filter matches the literal value only.
	for _, uid := range evil {
		if dn, err := st.findUser(bg, uid); !errors.Is(err, errNoUser) {
			t.Errorf("findUser(%q) = %q, %v", uid, dn, err)
		}
	}
	if dn, err := st.findUser(bg, "a"); err != nil || dn != st.dn.user("a") {
		t.Fatalf("findUser(a) = %q, %v", dn, err)
	}
	// slapd's stats log shows that none of these reached slapd as a bind at all.
	for _, line := range strings.Split(srv.LogTail(1<<20), "\n") {
		if strings.Contains(line, `BIND dn="uid=`) {
			t.Errorf("a user bind reached slapd: %s", line)
		}
	}
}

// Names from the model end up in DNs. Validation keeps DN and filter metacharacters out
// (a host name is one DNS label); escaping makes a name one RDN value regardless.
func TestNamesInDNs(t *testing.T) {
	for _, name := range []string{"pc*", "a,b", "a)(cn=*", "a=b", "pc 1", `a\b`, "pc+x"} {
		if model.ValidHostname(name) == nil {
			t.Errorf("ValidHostname(%q) accepted", name)
		}
		if model.ValidName("pool", name) == nil {
			t.Errorf("ValidName(%q) accepted", name)
		}
	}
	l := newLayout("dc=example,dc=org")
	for _, name := range []string{"a,b=c", "x+y", `back\slash`, "#hash", " lead", "trail ", `q"uote`, "semi;colon", "<>"} {
		dn, err := ldap.ParseDN(l.host(name))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if len(dn.RDNs) != 5 || dn.RDNs[0].Attributes[0].Type != "cn" || dn.RDNs[0].Attributes[0].Value != name {
			t.Errorf("host %q -> %q parses as %+v", name, l.host(name), dn.RDNs[0].Attributes)
		}
	}
}

func TestPutUser(t *testing.T) {
	st, srv := initStore(t)
	if err := st.PutUser(bg, "bob", "Bob B.", "first"); err != nil {
		t.Fatal(err)
	}
	if err := st.Authenticate(bg, "bob", "first"); err != nil {
		t.Fatal(err)
	}
	// Replace the password (and the display name).
	if err := st.PutUser(bg, "bob", "Bob Builder", "second"); err != nil {
		t.Fatal(err)
	}
	if err := st.Authenticate(bg, "bob", "first"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("old password still works: %v", err)
	}
	if err := st.Authenticate(bg, "bob", "second"); err != nil {
		t.Fatal(err)
	}
	// slapd stored a hash, not the clear text. Only the rootdn can read it.
	root, err := ldap.DialURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Bind(srv.RootDN, srv.RootPW); err != nil {
		t.Fatal(err)
	}
	res, err := root.Search(ldap.NewSearchRequest(st.dn.user("bob"), ldap.ScopeBaseObject, 0, 0, 0, false, "(objectClass=*)", []string{"userPassword", "displayName"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if pw := res.Entries[0].GetAttributeValue("userPassword"); !strings.HasPrefix(pw, "{SSHA}") {
		t.Fatalf("userPassword %q is not {SSHA}", pw)
	}
	if dn := res.Entries[0].GetAttributeValue("displayName"); dn != "Bob Builder" {
		t.Fatalf("displayName %q", dn)
	}
	// The service account cannot read it.
	st.do(bg, func(c *ldap.Conn) error {
		res, err := c.Search(ldap.NewSearchRequest(st.dn.user("bob"), ldap.ScopeBaseObject, 0, 0, 0, false, "(objectClass=*)", []string{"userPassword"}, nil))
		if err != nil || len(res.Entries[0].GetAttributeValues("userPassword")) != 0 {
			t.Errorf("service reads userPassword: %v %v", err, res)
		}
		return nil
	})
	// Malformed input is refused before anything is sent.
	for _, bad := range []struct{ uid, pw string }{{"Bob", "x"}, {"bob*", "x"}, {"bob", ""}} {
		var inv *model.InvalidError
		if err := st.PutUser(bg, bad.uid, "", bad.pw); !errors.As(err, &inv) {
			t.Errorf("PutUser(%q, %q): %v", bad.uid, bad.pw, err)
		}
	}
}

func TestPutUserBeforeInit(t *testing.T) {
	st, _ := newStore(t)
	if err := st.PutUser(bg, "bob", "", "pw"); !errors.Is(err, ErrNotInitialised) {
		t.Fatalf("got %v", err)
	}
	if err := st.Authenticate(bg, "bob", "pw"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("got %v", err)
	}
}
