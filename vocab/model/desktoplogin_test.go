package model

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func testCAPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Uni CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// Every field of a desktop login ends up in sssd.conf or krb5.conf, which have no
// quoting: what validation accepts must be one inert value, and a refusal names the field.
func TestDesktopLoginValidate(t *testing.T) {
	ca := testCAPEM(t)
	ldapOK := DesktopLogin{Provider: LoginLDAP, URIs: []string{"ldap://ldap.uni.example", "ldap://10.0.0.9:389"}, SearchBase: "dc=uni,dc=example", CACert: ca}
	krbOK := DesktopLogin{Provider: LoginKerberos, URIs: []string{"ldaps://ldap.uni.example"}, SearchBase: "dc=uni,dc=example", Realm: "UNI.EXAMPLE", KDCs: []string{"kdc1.uni.example", "10.0.0.8:88"}}
	adOK := DesktopLogin{Provider: LoginAD, Realm: "AD.UNI.EXAMPLE"}
	with := func(d DesktopLogin, f func(*DesktopLogin)) DesktopLogin { d = *d.Clone(); f(&d); return d }
	for _, tc := range []struct {
		name string
		d    DesktopLogin
		want string // "" = valid; else a substring of the error
	}{
		{"ldap", ldapOK, ""},
		{"krb5", krbOK, ""},
		{"ad", adOK, ""},
		{"ad with servers and domain", with(adOK, func(d *DesktopLogin) {
			d.URIs, d.Domain, d.KDCs = []string{"ldap://dc1.ad.uni.example"}, "ad.uni.example", []string{"dc1.ad.uni.example"}
		}), ""},
		{"no provider", with(ldapOK, func(d *DesktopLogin) { d.Provider = "" }), "desktopLogin.provider: missing"},
		{"unknown provider", with(ldapOK, func(d *DesktopLogin) { d.Provider = "nis" }), `desktopLogin.provider: unknown provider "nis"`},
		{"ldap without URI", with(ldapOK, func(d *DesktopLogin) { d.URIs = nil }), "desktopLogin.uris: the ldap provider needs"},
		{"http URI", with(ldapOK, func(d *DesktopLogin) { d.URIs = []string{"http://ldap"} }), "desktopLogin.uris: invalid LDAP URI"},
		{"URI list in one", with(ldapOK, func(d *DesktopLogin) { d.URIs = []string{"ldap://a,ldap://b"} }), "desktopLogin.uris: invalid LDAP URI"},
		{"URI with newline", with(ldapOK, func(d *DesktopLogin) { d.URIs = []string{"ldap://a\nldap_tls_reqcert = never"} }), "desktopLogin.uris"},
		{"URI with a DN", with(ldapOK, func(d *DesktopLogin) { d.URIs = []string{"ldap://a/dc=x??sub"} }), "desktopLogin.uris"},
		{"mixed schemes", with(ldapOK, func(d *DesktopLogin) { d.URIs = []string{"ldap://a", "ldaps://b"} }), "use one scheme"},
		{"ad with bind DN", with(adOK, func(d *DesktopLogin) { d.BindDN = "cn=x,dc=y" }), "desktopLogin.bindDN: the ad provider"},
		{"URI twice", with(ldapOK, func(d *DesktopLogin) { d.URIs = []string{"ldap://a", "ldap://a"} }), "given twice"},
		{"no search base", with(ldapOK, func(d *DesktopLogin) { d.SearchBase = "" }), "desktopLogin.searchBase: missing"},
		{"search base injection", with(ldapOK, func(d *DesktopLogin) { d.SearchBase = "dc=x\n[domain/evil]" }), "desktopLogin.searchBase: invalid DN"},
		{"search base not a DN", with(ldapOK, func(d *DesktopLogin) { d.SearchBase = "uni" }), "desktopLogin.searchBase: invalid DN"},
		{"bind DN", with(ldapOK, func(d *DesktopLogin) { d.BindDN = "cn=pc-reader,ou=services,dc=uni,dc=example" }), ""},
		{"bind DN broken", with(ldapOK, func(d *DesktopLogin) { d.BindDN = "cn=a,,dc=b" }), "desktopLogin.bindDN"},
		{"CA not PEM", with(ldapOK, func(d *DesktopLogin) { d.CACert = "hello" }), "desktopLogin.caCert: not a PEM certificate"},
		{"CA corrupt", with(ldapOK, func(d *DesktopLogin) {
			d.CACert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
		}), "desktopLogin.caCert: certificate 1 does not parse"},
		{"CA is a key", with(ldapOK, func(d *DesktopLogin) {
			d.CACert = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))
		}), `desktopLogin.caCert: a PEM "PRIVATE KEY" block`},
		{"CA with trailer", with(ldapOK, func(d *DesktopLogin) { d.CACert = ca + "\nldap_tls_reqcert = never\n" }), "text after the last certificate"},
		{"CA chain", with(ldapOK, func(d *DesktopLogin) { d.CACert = ca + testCAPEM(t) }), ""},
		{"CA too large", with(ldapOK, func(d *DesktopLogin) { d.CACert = strings.Repeat(ca, 40) }), "too large"},
		{"ldap with realm", with(ldapOK, func(d *DesktopLogin) { d.Realm = "UNI.EXAMPLE" }), "realm, kdcs and domain are for"},
		{"krb5 without realm", with(krbOK, func(d *DesktopLogin) { d.Realm = "" }), "desktopLogin.realm: missing"},
		{"krb5 lower-case realm", with(krbOK, func(d *DesktopLogin) { d.Realm = "uni.example" }), "desktopLogin.realm: invalid realm"},
		{"realm injection", with(krbOK, func(d *DesktopLogin) { d.Realm = "UNI = {\n kdc = evil" }), "desktopLogin.realm: invalid realm"},
		{"krb5 without KDC", with(krbOK, func(d *DesktopLogin) { d.KDCs = nil }), "desktopLogin.kdcs: the krb5 provider needs"},
		{"KDC with space", with(krbOK, func(d *DesktopLogin) { d.KDCs = []string{"kdc1 kdc2"} }), "desktopLogin.kdcs: invalid host"},
		{"KDC bad port", with(krbOK, func(d *DesktopLogin) { d.KDCs = []string{"kdc1:99999"} }), "desktopLogin.kdcs: invalid port"},
		{"krb5 with domain", with(krbOK, func(d *DesktopLogin) { d.Domain = "uni.example" }), "only the ad provider"},
		{"ad bad domain", with(adOK, func(d *DesktopLogin) { d.Domain = "AD UNI" }), "desktopLogin.domain"},
	} {
		err := tc.d.Validate("desktopLogin")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// A pool's login configuration overrides the site's; the site validates both, naming
// the pool.
func TestDesktopLoginFor(t *testing.T) {
	site := &Site{DesktopLogin: &DesktopLogin{Provider: LoginLDAP, URIs: []string{"ldaps://a"}, SearchBase: "dc=a"},
		Pools: []Pool{{Name: "lab-a"}, {Name: "lab-b", DesktopLogin: &DesktopLogin{Provider: LoginLDAP, URIs: []string{"ldaps://b"}, SearchBase: "dc=b"}}}}
	if got := site.DesktopLoginFor("lab-a").URIs[0]; got != "ldaps://a" {
		t.Errorf("lab-a: %s, want the site's", got)
	}
	if got := site.DesktopLoginFor("lab-b").URIs[0]; got != "ldaps://b" {
		t.Errorf("lab-b: %s, want its own", got)
	}
	if (&Site{}).DesktopLoginFor("x") != nil {
		t.Error("no configuration: want nil")
	}
	c := site.Clone()
	c.Pools[1].DesktopLogin.URIs[0] = "ldaps://changed"
	if site.Pools[1].DesktopLogin.URIs[0] != "ldaps://b" || !SameDesktopLogin(site.DesktopLogin, c.DesktopLogin) {
		t.Error("Clone shares the login configuration")
	}
	if got := Diff(site, c); len(got) != 1 || got[0].Kind != EntityPool || got[0].Fields[0] != "desktopLogin" {
		t.Errorf("diff %+v, want pool lab-b desktopLogin", got)
	}
}

// The print server is one host[:port] and the default queue one inert word; a pool's
// replaces the site's.
func TestPrintingValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Printing
		want string
	}{
		{Printing{Server: "print.uni.example"}, ""},
		{Printing{Server: "10.0.0.5:631", DefaultPrinter: "room-101_a.b"}, ""},
		{Printing{}, "printing.server: missing"},
		{Printing{Server: "ipp://print.uni.example/printers/x"}, "give the host (and :port), not a URL"},
		{Printing{Server: "print uni"}, "printing.server: invalid host"},
		{Printing{Server: "print:70000"}, "printing.server: invalid port"},
		{Printing{Server: "print", DefaultPrinter: "a b"}, "printing.defaultPrinter: invalid queue name"},
		{Printing{Server: "print", DefaultPrinter: "a\nServerName evil"}, "printing.defaultPrinter"},
	} {
		err := tc.p.Validate("printing")
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
	site := &Site{Printing: &Printing{Server: "print"}, Pools: []Pool{{Name: "a"}, {Name: "b", Printing: &Printing{Server: "room-b"}}}}
	if site.PrintingFor("a").Server != "print" || site.PrintingFor("b").Server != "room-b" {
		t.Error("PrintingFor: want the pool's own, else the site's")
	}
}
