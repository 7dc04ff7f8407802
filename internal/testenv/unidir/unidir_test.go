package unidir_test

import (
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
)

// A POSIX user with a uidNumber beyond 16 bits and its group are found by the service
// account, and the user binds with the password.
func TestPosixAccounts(t *testing.T) {
	d := unidir.Start(t)
	dn := d.AddPosixUser(t, unidir.PosixUser{UID: "jdoe", UIDNumber: 1234567, GIDNumber: 1234500, Password: "ldap-pw"})
	gdn := d.AddPosixGroup(t, "physics", 1234500, "jdoe")
	if gdn != "cn=physics,"+unidir.Groups || dn != "uid=jdoe,"+unidir.People {
		t.Fatalf("DNs %s, %s", dn, gdn)
	}
	c, err := ldap.DialURL(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Bind(d.ServiceDN, d.ServicePW); err != nil {
		t.Fatal(err)
	}
	res, err := c.Search(ldap.NewSearchRequest(unidir.BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false,
		"(|(&(objectClass=posixAccount)(uidNumber=1234567))(&(objectClass=posixGroup)(memberUid=jdoe)))",
		[]string{"uid", "homeDirectory", "loginShell", "gidNumber"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 2 {
		t.Fatalf("want user and group, got %d entries", len(res.Entries))
	}
	for _, e := range res.Entries {
		if e.DN == dn && (e.GetAttributeValue("homeDirectory") != "/home/jdoe" || e.GetAttributeValue("loginShell") != "/bin/bash") {
			t.Errorf("defaults: %+v", e.Attributes)
		}
		if e.GetAttributeValue("gidNumber") != "1234500" {
			t.Errorf("%s: gidNumber %q", e.DN, e.GetAttributeValue("gidNumber"))
		}
	}
	if err := c.Bind(dn, "ldap-pw"); err != nil {
		t.Errorf("user bind: %v", err)
	}
	if err := c.Bind(dn, "wrong"); err == nil {
		t.Error("user bind with a wrong password succeeded")
	}
}
