package slapdenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

func dial(t *testing.T, url, dn, pw string) *ldap.Conn {
	t.Helper()
	c, err := ldap.DialURL(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if dn != "" {
		if err := c.Bind(dn, pw); err != nil {
			t.Fatalf("bind %s: %v", dn, err)
		}
	}
	return c
}

func search(c *ldap.Conn, base string, scope int, filter string, attrs ...string) (*ldap.SearchResult, error) {
	return c.Search(ldap.NewSearchRequest(base, scope, ldap.NeverDerefAliases, 0, 0, false, filter, attrs, nil))
}

// startT is internal/testenv/slapdtest.StartT, which this package's own tests cannot
// import (it imports slapdenv).
func startT(t *testing.T) *Server {
	t.Helper()
	needs.Servers(t, "slapd")
	s, err := Start(t.TempDir(), Options{Attached: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("slapd.log (end):\n%s", s.LogTail(30))
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestStartServesAndStops(t *testing.T) {
	s := startT(t)
	if !strings.HasPrefix(s.URL, "ldap://127.0.0.1:") || s.PID <= 0 || s.BaseDN != "dc=example,dc=org" {
		t.Fatalf("server %+v", s)
	}
	if pid, err := ReadPID(s.Dir); err != nil || pid != s.PID {
		t.Fatalf("pidfile: %d %v, want %d", pid, err, s.PID)
	}

	// The service account exists, can write, and cannot read passwords.
	svc := dial(t, s.URL, s.ServiceDN, s.ServicePW)
	add := ldap.NewAddRequest("ou=scratch,"+s.BaseDN, nil)
	add.Attribute("objectClass", []string{"organizationalUnit"})
	add.Attribute("ou", []string{"scratch"})
	if err := svc.Add(add); err != nil {
		t.Fatalf("service add: %v", err)
	}
	res, err := search(svc, s.ServiceDN, ldap.ScopeBaseObject, "(objectClass=*)", "userPassword", "cn")
	if err != nil || len(res.Entries) != 1 {
		t.Fatalf("service reads itself: %v", err)
	}
	if v := res.Entries[0].GetAttributeValues("userPassword"); len(v) != 0 {
		t.Errorf("service can read userPassword: %v", v)
	}

	// Anonymous: root DSE and subschema yes, data no.
	anon := dial(t, s.URL, "", "")
	if _, err := search(anon, "", ldap.ScopeBaseObject, "(objectClass=*)", "namingContexts"); err != nil {
		t.Errorf("anonymous root DSE: %v", err)
	}
	res, err = search(anon, "cn=Subschema", ldap.ScopeBaseObject, "(objectClass=subschema)", "objectClasses")
	if err != nil || !strings.Contains(strings.Join(res.Entries[0].GetAttributeValues("objectClasses"), "\n"), "'otHost'") {
		t.Errorf("subschema lacks otHost: %v", err)
	}
	res, err = search(anon, s.BaseDN, ldap.ScopeWholeSubtree, "(objectClass=*)")
	if err == nil && len(res.Entries) > 0 {
		t.Errorf("anonymous reads %d entries", len(res.Entries))
	}

	// Restart keeps the data and the port.
	url := s.URL
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.URL != url {
		t.Fatalf("URL changed %s -> %s", url, s.URL)
	}
	svc = dial(t, s.URL, s.ServiceDN, s.ServicePW)
	if res, err := search(svc, "ou=scratch,"+s.BaseDN, ldap.ScopeBaseObject, "(objectClass=*)"); err != nil || len(res.Entries) != 1 {
		t.Fatalf("data lost over restart: %v", err)
	}

	pid := s.PID
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("slapd %d still running after Stop", pid)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "db")); err != nil {
		t.Errorf("Stop removed the database: %v", err)
	}
}

// The unique overlay rejects a second host with the same MAC even when written behind
// the store's back.
func TestUniqueOverlay(t *testing.T) {
	needs.Servers(t, "slapd")
	if !UniqueOverlay() {
		t.Fatal("unique overlay module missing from " + ModuleDir)
	}
	s := startT(t)
	c := dial(t, s.URL, s.RootDN, s.RootPW)
	for _, dn := range []string{"ou=overtime,", "ou=hosts,ou=overtime,"} {
		a := ldap.NewAddRequest(dn+s.BaseDN, nil)
		a.Attribute("objectClass", []string{"organizationalUnit"})
		a.Attribute("ou", []string{strings.TrimPrefix(strings.SplitN(dn, ",", 2)[0], "ou=")})
		if err := c.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	host := func(name, mac string) error {
		a := ldap.NewAddRequest("cn="+name+",ou=hosts,ou=overtime,"+s.BaseDN, nil)
		a.Attribute("objectClass", []string{"device", "ieee802Device", "otHost"})
		a.Attribute("cn", []string{name})
		a.Attribute("macAddress", []string{mac})
		a.Attribute("otPoolName", []string{"p"})
		return c.Add(a)
	}
	if err := host("pc1", "52:54:00:00:00:01"); err != nil {
		t.Fatal(err)
	}
	if err := host("pc2", "52:54:00:00:00:01"); !ldap.IsErrorWithCode(err, ldap.LDAPResultConstraintViolation) {
		t.Fatalf("duplicate MAC: got %v, want constraint violation", err)
	}
}

// overtime.ldif (the cn=config form) loads into a slapd.d built with slapadd -n0, and the
// server then lists otHost in its subschema.
func TestConfigLDIFLoads(t *testing.T) {
	needs.Servers(t, "slapd")
	schemaDir, err := FindSchemaDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	confDir := filepath.Join(dir, "slapd.d")
	for _, d := range []string{confDir, filepath.Join(dir, "db")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: %s
olcArgsFile: %s

dn: cn=module{0},cn=config
objectClass: olcModuleList
cn: module{0}
olcModulePath: %s
olcModuleLoad: back_mdb

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

`, filepath.Join(dir, "slapd.pid"), filepath.Join(dir, "slapd.args"), ModuleDir)
	for _, f := range []string{
		filepath.Join(SystemSchemaDir, "core.ldif"), filepath.Join(SystemSchemaDir, "cosine.ldif"),
		filepath.Join(SystemSchemaDir, "nis.ldif"), filepath.Join(SystemSchemaDir, "inetorgperson.ldif"),
		filepath.Join(schemaDir, "overtime.ldif"),
	} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, `dn: olcDatabase={0}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {0}config
olcAccess: {0}to * by * none

dn: olcDatabase={1}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {1}mdb
olcSuffix: dc=example,dc=org
olcRootDN: cn=admin,dc=example,dc=org
olcRootPW: %s
olcDbDirectory: %s
olcDbIndex: objectClass eq
`, SSHA("secret"), filepath.Join(dir, "db"))
	ldif := filepath.Join(dir, "config.ldif")
	if err := os.WriteFile(ldif, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(SlapaddPath, "-n0", "-F", confDir, "-l", ldif).CombinedOutput(); err != nil {
		t.Fatalf("slapadd -n0: %v\n%s", err, out)
	}
	s := &Server{Port: 0, BaseDN: "dc=example,dc=org", Dir: dir, opts: Options{Attached: true, LogLevel: "stats"}}
	if s.Port, err = freePort(); err != nil {
		t.Fatal(err)
	}
	s.URL = fmt.Sprintf("ldap://127.0.0.1:%d", s.Port)
	if err := s.launch([]string{"-F", confDir}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })

	c := dial(t, s.URL, "cn=admin,dc=example,dc=org", "secret")
	res, err := search(c, "cn=Subschema", ldap.ScopeBaseObject, "(objectClass=subschema)", "objectClasses", "attributeTypes")
	if err != nil {
		t.Fatal(err)
	}
	classes := strings.Join(res.Entries[0].GetAttributeValues("objectClasses"), "\n")
	for _, want := range []string{"NAME 'otHost'", "NAME 'otSite'", "NAME 'otRole'", "2.25.319062224030099775469089792051342665301.2.3 "} {
		if !strings.Contains(classes, want) {
			t.Errorf("subschema objectClasses lack %q", want)
		}
	}
	// And the schema works: a host entry with its standard classes can be added.
	for _, a := range []*ldap.AddRequest{
		addReq("dc=example,dc=org", "objectClass", "domain", "dc", "example"),
		addReq("cn=pc1,dc=example,dc=org", "objectClass", "device", "objectClass", "ieee802Device", "objectClass", "ipHost",
			"objectClass", "otHost", "cn", "pc1", "macAddress", "52:54:00:00:00:01", "ipHostNumber", "10.0.0.1", "otPoolName", "lab-a"),
	} {
		if err := c.Add(a); err != nil {
			t.Fatalf("add %s: %v", a.DN, err)
		}
	}
}

func addReq(dn string, kv ...string) *ldap.AddRequest {
	a := ldap.NewAddRequest(dn, nil)
	m := map[string][]string{}
	var order []string
	for i := 0; i < len(kv); i += 2 {
		if _, ok := m[kv[i]]; !ok {
			order = append(order, kv[i])
		}
		m[kv[i]] = append(m[kv[i]], kv[i+1])
	}
	for _, k := range order {
		a.Attribute(k, m[k])
	}
	return a
}

// Without Attached, slapd runs in a session of its own (it outlives the caller, as
// `overtime-dev slapd` needs) and can be stopped through its pidfile from elsewhere.
func TestDetachedStopDir(t *testing.T) {
	needs.Servers(t, "slapd")
	dir := t.TempDir()
	s, err := Start(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	if sid, err := sessionOf(s.PID); err != nil || sid != s.PID {
		t.Errorf("detached slapd %d has session %d (%v), want its own", s.PID, sid, err)
	}
	if !rootDSEAnswers(s.URL) {
		t.Fatal("not answering")
	}
	if err := StopDir(dir); err != nil {
		t.Fatal(err)
	}
	if alive(s.PID) || rootDSEAnswers(s.URL) {
		t.Fatalf("slapd %d still running after StopDir", s.PID)
	}
}

// sessionOf reads the session id of pid from /proc (field 6 of stat).
func sessionOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return strconv.Atoi(f[3]) // state ppid pgrp session
}

// startReplicatedT is slapdtest.StartReplicatedT, which this package cannot import.
func startReplicatedT(t *testing.T, n int) []*Server {
	t.Helper()
	needs.Servers(t, "slapd")
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	servers, err := StartReplicated(dirs, Options{Attached: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if t.Failed() {
				t.Logf("slapd.log of serverID %d (end):\n%s", s.ServerID, s.LogTail(30))
			}
			s.Stop()
		}
	})
	return servers
}

// exists reports whether dn is visible to the service account on s (reads as the
// service, not as rootdn, so the replicated ACL-relevant entries count too).
func exists(t *testing.T, s *Server, dn string) bool {
	c, err := ldap.DialURL(s.URL)
	if err != nil {
		return false
	}
	defer c.Close()
	if c.Bind(s.ServiceDN, s.ServicePW) != nil {
		return false
	}
	res, err := search(c, dn, ldap.ScopeBaseObject, "(objectClass=*)", "ou")
	return err == nil && len(res.Entries) == 1
}

// Two providers replicate both ways: an entry the service writes on one appears on the
// other, in either direction; the service account (and its password) came to the second
// server by replication only; a user's password replicates, so a bind works on either;
// a provider that was down catches up with what was written meanwhile; and the unique
// overlay still refuses a duplicate MAC on a replicated server.
func TestReplicatedPair(t *testing.T) {
	needs.Servers(t, "slapd")
	if !SyncprovOverlay() {
		t.Fatal("syncprov overlay module missing from " + ModuleDir)
	}
	s := startReplicatedT(t, 2)
	a, b := s[0], s[1]
	if a.ServerID != 1 || b.ServerID != 2 || a.URL == b.URL {
		t.Fatalf("servers %+v %+v", a, b)
	}
	ou := func(srv *Server, name string) {
		t.Helper()
		c := dial(t, srv.URL, srv.ServiceDN, srv.ServicePW)
		if err := c.Add(addReq("ou="+name+","+srv.BaseDN, "objectClass", "organizationalUnit", "ou", name)); err != nil {
			t.Fatalf("add ou=%s on serverID %d: %v", name, srv.ServerID, err)
		}
	}
	ou(a, "from-a")
	poll.Until(t, "ou=from-a on server 2", 10*time.Second, func() bool { return exists(t, b, "ou=from-a,"+b.BaseDN) })
	ou(b, "from-b")
	poll.Until(t, "ou=from-b on server 1", 10*time.Second, func() bool { return exists(t, a, "ou=from-b,"+a.BaseDN) })

	// A user with a password written on 1 authenticates on 2.
	c := dial(t, a.URL, a.RootDN, a.RootPW)
	user := addReq("uid=u1,"+a.BaseDN, "objectClass", "inetOrgPerson", "uid", "u1", "cn", "u1", "sn", "u1", "userPassword", SSHA("u1-secret"))
	if err := c.Add(user); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "u1 binds on server 2", 10*time.Second, func() bool {
		c, err := ldap.DialURL(b.URL)
		if err != nil {
			return false
		}
		defer c.Close()
		return c.Bind("uid=u1,"+b.BaseDN, "u1-secret") == nil
	})

	// Server 2 down; written on 1 meanwhile; 2 catches up after its restart.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	ou(a, "during-outage")
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "server 2 catches up", 15*time.Second, func() bool { return exists(t, b, "ou=during-outage,"+b.BaseDN) })
	if err := CheckReplication(s, 15*time.Second); err != nil {
		t.Fatalf("after the restart: %v", err)
	}

	// unique still refuses a duplicate MAC written on the other provider after the first
	// host has replicated there.
	rc := dial(t, a.URL, a.RootDN, a.RootPW)
	for _, dn := range []string{"ou=overtime,", "ou=hosts,ou=overtime,"} {
		name := strings.TrimPrefix(strings.SplitN(dn, ",", 2)[0], "ou=")
		if err := rc.Add(addReq(dn+a.BaseDN, "objectClass", "organizationalUnit", "ou", name)); err != nil {
			t.Fatal(err)
		}
	}
	host := func(c *ldap.Conn, name string) error {
		return c.Add(addReq("cn="+name+",ou=hosts,ou=overtime,"+a.BaseDN, "objectClass", "device", "objectClass", "ieee802Device",
			"objectClass", "otHost", "cn", name, "macAddress", "52:54:00:00:00:01", "otPoolName", "p"))
	}
	if err := host(rc, "pc1"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "pc1 on server 2", 10*time.Second, func() bool { return exists(t, b, "cn=pc1,ou=hosts,ou=overtime,"+b.BaseDN) })
	if err := host(dial(t, b.URL, b.RootDN, b.RootPW), "pc2"); !ldap.IsErrorWithCode(err, ldap.LDAPResultConstraintViolation) {
		t.Fatalf("duplicate MAC on server 2: got %v, want constraint violation", err)
	}
}

// A single server carries the syncprov overlay too: an RFC 4533 sync search (what a
// state watcher runs) is answered, not refused as unsupported.
func TestSingleServerSyncprov(t *testing.T) {
	s := startT(t)
	c := dial(t, s.URL, s.ServiceDN, s.ServicePW)
	req := ldap.NewSearchRequest(s.BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"dn"}, []ldap.Control{ldap.NewControlSyncRequest(ldap.SyncRequestModeRefreshOnly, nil, false)})
	res, err := c.Search(req)
	if err != nil {
		t.Fatalf("sync search on a single server: %v", err)
	}
	if ldap.FindControl(res.Controls, ldap.ControlTypeSyncDone) == nil {
		t.Fatalf("no sync done control in the answer: the syncprov overlay is not there (controls %v)", res.Controls)
	}
	conf, err := os.ReadFile(filepath.Join(s.Dir, "slapd.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// Overlays run in reverse order of configuration: unique must come after syncprov
	// so that it refuses a duplicate before syncprov sees the write.
	if i, j := strings.Index(string(conf), "overlay syncprov"), strings.Index(string(conf), "overlay unique"); i < 0 || j < i {
		t.Errorf("slapd.conf: overlay syncprov at %d, unique at %d; want syncprov configured first", i, j)
	}
}
