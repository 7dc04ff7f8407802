// Package unidir starts a second slapd playing a university's directory for the tests of
// the external identity source (sitemgmt/extdir): no Overtime schema, a small schema with
// Active Directory's login attributes (sAMAccountName, userPrincipalName), the memberof
// overlay so that memberOf is maintained by the server as AD and OpenLDAP sites have it,
// and TLS (StartTLS and ldaps) with a certificate from a CA made for the test.
//
// It also carries RFC 2307 POSIX accounts (posixAccount people, posixGroup groups with
// memberUid; the nis schema, which slapdenv loads with core, cosine and inetorgperson),
// so that tests of a desktop's login configuration can point a real sssd at it
// (internal/testenv/sssdtest). Anonymous search is not allowed (slapdenv's ACLs): a
// client binds as the service account (Server.ServiceDN, ServicePassword), which reads
// everything but userPassword; people bind as themselves to authenticate.
package unidir

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
)

// BaseDN of the university directory; People and Groups are its two branches, Guests a
// branch outside the people base.
const (
	BaseDN = "dc=uni,dc=example"
	People = "ou=people," + BaseDN
	Groups = "ou=groups," + BaseDN
	Guests = "ou=guests," + BaseDN
)

// adSchema defines the AD attributes a login can be looked up by (with AD's own OIDs, as
// Samba's schema does) and an auxiliary class to put them on inetOrgPersons.
const adSchema = `# AD-style login attributes for the university directory of the tests.
attributetype ( 1.2.840.113556.1.4.221 NAME 'sAMAccountName'
	EQUALITY caseIgnoreMatch SUBSTR caseIgnoreSubstringsMatch
	SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
attributetype ( 1.2.840.113556.1.4.656 NAME 'userPrincipalName'
	EQUALITY caseIgnoreMatch SUBSTR caseIgnoreSubstringsMatch
	SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
objectclass ( 2.25.193099785092235366122081260564934294262.1 NAME 'adStyleAccount'
	AUXILIARY MAY ( sAMAccountName $ userPrincipalName ) )
`

// CA is a certificate authority made for one test.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM string // file holding Cert
}

// NewCA makes a CA and writes its certificate to dir/name.pem.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, Key: key, CertPEM: filepath.Join(dir, name+".pem")}
	writePEM(t, ca.CertPEM, "CERTIFICATE", der)
	return ca
}

// PEM is the CA's certificate as PEM text (what a site's desktopLogin.caCert holds).
func (ca *CA) PEM(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Issue writes a server certificate for 127.0.0.1, localhost and the extra addresses
// signed by ca, and its key, to dir/name.pem and dir/name.key.
func (ca *CA) Issue(t testing.TB, dir, name string, extra ...net.IP) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1)}, extra...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Dir is the running university directory.
type Dir struct {
	*slapdenv.Server
	CA              *CA    // signed the server's certificate
	ServicePassword string // file with the service account's password (Server.ServiceDN)
	conn            *ldap.Conn
}

// Start starts the directory with TLS and the memberof overlay, and the people, groups
// and guests branches. It is stopped when the test ends.
func Start(t testing.TB) *Dir {
	t.Helper()
	return StartFor(t)
}

// StartFor is Start with a server certificate that is also valid for the addresses ips,
// for clients that reach the directory there (a test VM through a forwarded port).
func StartFor(t testing.TB, ips ...net.IP) *Dir {
	t.Helper()
	dir := t.TempDir()
	schema := filepath.Join(dir, "adstyle.schema")
	if err := os.WriteFile(schema, []byte(adSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	ca := NewCA(t, dir, "uni-ca")
	cert, key := ca.Issue(t, dir, "uni-server", ips...)
	sl := slapdtest.StartTWith(t, slapdenv.Options{
		BaseDN:             BaseDN,
		OmitOvertimeSchema: true,
		ExtraSchema:        []string{schema},
		Modules:            []string{"memberof"},
		DatabaseConfig:     []string{"index sAMAccountName,userPrincipalName eq", "index uidNumber,gidNumber,memberUid eq", "overlay memberof"},
		TLS:                &slapdenv.TLSOptions{CertFile: cert, KeyFile: key, CAFile: ca.CertPEM},
	})
	pwFile := filepath.Join(dir, "service.pw")
	if err := os.WriteFile(pwFile, []byte(sl.ServicePW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ldap.DialURL(sl.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Bind(sl.RootDN, sl.RootPW); err != nil {
		t.Fatal(err)
	}
	d := &Dir{Server: sl, CA: ca, ServicePassword: pwFile, conn: c}
	for _, ou := range []string{People, Groups, Guests} {
		req := ldap.NewAddRequest(ou, nil)
		req.Attribute("objectClass", []string{"organizationalUnit"})
		req.Attribute("ou", []string{ou[len("ou="):strings.Index(ou, ",")]})
		d.add(t, req)
	}
	return d
}

func (d *Dir) add(t testing.TB, req *ldap.AddRequest) {
	t.Helper()
	if err := d.conn.Add(req); err != nil {
		t.Fatalf("university directory: add %s: %v", req.DN, err)
	}
}

// User is a person of the university directory.
type User struct {
	DN       string // e.g. cn=Ada Lovelace,ou=people,dc=uni,dc=example
	UID      string // OpenLDAP-style login (optional)
	SAM      string // sAMAccountName (optional): adds the AD-style class
	UPN      string // userPrincipalName (optional)
	Password string
}

// AddUser adds an inetOrgPerson (with the AD-style attributes when given).
func (d *Dir) AddUser(t testing.TB, u User) {
	t.Helper()
	dn, err := ldap.ParseDN(u.DN)
	if err != nil {
		t.Fatal(err)
	}
	cn := dn.RDNs[0].Attributes[0].Value
	req := ldap.NewAddRequest(u.DN, nil)
	oc := []string{"inetOrgPerson"}
	if u.SAM != "" || u.UPN != "" {
		oc = append(oc, "adStyleAccount")
	}
	req.Attribute("objectClass", oc)
	if dn.RDNs[0].Attributes[0].Type == "cn" {
		req.Attribute("cn", []string{cn})
	} else {
		req.Attribute("cn", []string{u.UID})
	}
	req.Attribute("sn", []string{cn})
	for attr, v := range map[string]string{"uid": u.UID, "sAMAccountName": u.SAM, "userPrincipalName": u.UPN} {
		if v != "" {
			req.Attribute(attr, []string{v})
		}
	}
	req.Attribute("userPassword", []string{slapdenv.SSHA(u.Password)})
	d.add(t, req)
}

// AddGroup adds a groupOfNames under ou=groups with these member DNs and returns its DN;
// the memberof overlay then adds memberOf to the members.
func (d *Dir) AddGroup(t testing.TB, cn string, members ...string) string {
	t.Helper()
	dn := "cn=" + ldap.EscapeDN(cn) + "," + Groups
	req := ldap.NewAddRequest(dn, nil)
	req.Attribute("objectClass", []string{"groupOfNames"})
	req.Attribute("cn", []string{cn})
	req.Attribute("member", members)
	d.add(t, req)
	return dn
}

// PosixUser is a person of the university directory with an RFC 2307 POSIX account
// (inetOrgPerson + posixAccount under People), as sssd's ldap id provider reads it.
type PosixUser struct {
	UID       string // login and RDN: uid=UID,ou=people,...
	UIDNumber int    // e.g. 1234567: universities number beyond 16 bits
	GIDNumber int    // primary group
	Home      string // default /home/UID
	Shell     string // default /bin/bash
	CN        string // default UID
	Password  string // stored as {SSHA}
}

// AddPosixUser adds u under People and returns its DN.
func (d *Dir) AddPosixUser(t testing.TB, u PosixUser) string {
	t.Helper()
	if u.Home == "" {
		u.Home = "/home/" + u.UID
	}
	if u.Shell == "" {
		u.Shell = "/bin/bash"
	}
	if u.CN == "" {
		u.CN = u.UID
	}
	dn := "uid=" + ldap.EscapeDN(u.UID) + "," + People
	req := ldap.NewAddRequest(dn, nil)
	req.Attribute("objectClass", []string{"inetOrgPerson", "posixAccount"})
	req.Attribute("uid", []string{u.UID})
	req.Attribute("cn", []string{u.CN})
	req.Attribute("sn", []string{u.CN})
	req.Attribute("uidNumber", []string{strconv.Itoa(u.UIDNumber)})
	req.Attribute("gidNumber", []string{strconv.Itoa(u.GIDNumber)})
	req.Attribute("homeDirectory", []string{u.Home})
	req.Attribute("loginShell", []string{u.Shell})
	if u.Password != "" {
		req.Attribute("userPassword", []string{slapdenv.SSHA(u.Password)})
	}
	d.add(t, req)
	return dn
}

// AddPosixGroup adds a posixGroup under Groups with these member logins (memberUid, RFC
// 2307: names, not DNs) and returns its DN. It is a posixGroup alone because nis.schema
// makes both posixGroup and groupOfNames structural; the memberof overlay does not see
// memberUid.
func (d *Dir) AddPosixGroup(t testing.TB, cn string, gidNumber int, memberUIDs ...string) string {
	t.Helper()
	dn := "cn=" + ldap.EscapeDN(cn) + "," + Groups
	req := ldap.NewAddRequest(dn, nil)
	req.Attribute("objectClass", []string{"posixGroup"})
	req.Attribute("cn", []string{cn})
	req.Attribute("gidNumber", []string{strconv.Itoa(gidNumber)})
	if len(memberUIDs) > 0 {
		req.Attribute("memberUid", memberUIDs)
	}
	d.add(t, req)
	return dn
}
