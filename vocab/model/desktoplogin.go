package model

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/names"
)

// DesktopLogin is how the desktops of a site, or of one pool where it differs, look up
// and authenticate the people who log in at the seat: the university's directory as
// sssd's identity and authentication providers (docs/desktop.md "Logins"). The site
// manager renders it into sssd.conf and krb5.conf for each PC (sitemgmt/seatconf); the
// secrets it needs (a bind password, a PC's keytab) are not part of it: they stay in
// files on the site manager and go to one PC each (overtime serve --desktop-secrets).
type DesktopLogin struct {
	Provider LoginProvider `json:"provider" yaml:"provider"`
	// URIs of the directory's LDAP servers, tried in order: ldaps://, or ldap:// which
	// the desktops then use with StartTLS only (a password never crosses in clear).
	// Required for ldap and krb5; ad: optional (found by DNS otherwise).
	URIs []string `json:"uris,omitempty" yaml:"uris,omitempty"`
	// SearchBase is the DN below which users and groups are searched (ldap, krb5;
	// ad: optional, default the domain's).
	SearchBase string `json:"searchBase,omitempty" yaml:"searchBase,omitempty"`
	// CACert holds the PEM certificate(s) of the CA that signed the directory's (and the
	// AD domain controllers') TLS certificates; empty: the image's system CAs.
	CACert string `json:"caCert,omitempty" yaml:"caCert,omitempty"`
	// BindDN is the account the desktops search the directory with; its password is the
	// server's desktop secret bind-password. Empty: anonymous search (ad: the PC's
	// machine account from its keytab).
	BindDN string `json:"bindDN,omitempty" yaml:"bindDN,omitempty"`
	// Realm is the Kerberos realm (krb5, ad), upper case as Kerberos writes it.
	Realm string `json:"realm,omitempty" yaml:"realm,omitempty"`
	// KDCs are the realm's KDCs, host or host:port (krb5: at least one; ad: optional,
	// found by DNS otherwise).
	KDCs []string `json:"kdcs,omitempty" yaml:"kdcs,omitempty"`
	// Domain is the Active Directory DNS domain (ad; default: the realm in lower case).
	Domain string `json:"domain,omitempty" yaml:"domain,omitempty"`
}

// LoginProvider names how a desktop looks users up and checks their passwords.
type LoginProvider string

const (
	// LoginLDAP: users and groups from an LDAP directory (RFC 2307 posixAccount and
	// posixGroup), passwords checked by an LDAP bind as the user.
	LoginLDAP LoginProvider = "ldap"
	// LoginKerberos: users and groups from LDAP, passwords checked by the realm's KDC
	// (the user gets a Kerberos ticket at login).
	LoginKerberos LoginProvider = "krb5"
	// LoginAD: an Active Directory domain (sssd's ad provider): users, groups and
	// passwords from the domain controllers; each PC needs its machine keytab.
	LoginAD LoginProvider = "ad"
)

// LoginProviders lists the providers, in documentation order.
var LoginProviders = []LoginProvider{LoginLDAP, LoginKerberos, LoginAD}

// MaxCACert bounds DesktopLogin.CACert: a few CA certificates, not a system bundle.
const MaxCACert = 12 << 10

// Clone copies the login configuration (nil stays nil).
func (d *DesktopLogin) Clone() *DesktopLogin {
	if d == nil {
		return nil
	}
	c := *d
	c.URIs = append([]string(nil), d.URIs...)
	c.KDCs = append([]string(nil), d.KDCs...)
	return &c
}

// SameDesktopLogin compares two (possibly nil) login configurations by content.
func SameDesktopLogin(a, b *DesktopLogin) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq := func(x, y []string) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return a.Provider == b.Provider && eq(a.URIs, b.URIs) && a.SearchBase == b.SearchBase &&
		a.CACert == b.CACert && a.BindDN == b.BindDN && a.Realm == b.Realm && eq(a.KDCs, b.KDCs) && a.Domain == b.Domain
}

// ADDomain is the AD DNS domain: Domain, or the realm in lower case.
func (d *DesktopLogin) ADDomain() string {
	if d.Domain != "" {
		return d.Domain
	}
	return strings.ToLower(d.Realm)
}

// DesktopLoginFor is the login configuration of a pool's desktops: the pool's own, else
// the site's; nil when neither has one.
func (s *Site) DesktopLoginFor(pool string) *DesktopLogin {
	if p := s.Pool(pool); p != nil && p.DesktopLogin != nil {
		return p.DesktopLogin
	}
	return s.DesktopLogin
}

// Validate checks a login configuration; what names it in messages ("desktopLogin",
// "pool lab-a desktopLogin"). Every field ends up in sssd.conf or krb5.conf, whose
// parsers have no quoting: a value is one line up to its end, and ',' separates list
// items, so the checks below are what keeps a value from adding options of its own.
func (d *DesktopLogin) Validate(what string) error {
	field := func(f string) string { return what + "." + f }
	switch d.Provider {
	case LoginLDAP, LoginKerberos, LoginAD:
	case "":
		return invalid("%s: missing (one of %s)", field("provider"), loginProviderList())
	default:
		return invalid("%s: unknown provider %q (one of %s)", field("provider"), d.Provider, loginProviderList())
	}
	if d.Provider != LoginAD && len(d.URIs) == 0 {
		return invalid("%s: the %s provider needs at least one ldaps:// or ldap:// URI", field("uris"), d.Provider)
	}
	seen := map[string]bool{}
	for _, u := range d.URIs {
		if err := validLDAPURI(u); err != nil {
			return invalid("%s: %v", field("uris"), err)
		}
		if seen[u] {
			return invalid("%s: %q given twice", field("uris"), u)
		}
		seen[u] = true
		if !strings.HasPrefix(u, strings.SplitN(d.URIs[0], ":", 2)[0]+"://") {
			// sssd has one StartTLS switch per domain: ldap:// needs it on, ldaps:// off.
			return invalid("%s: %q and %q: use one scheme, all ldaps:// or all ldap:// (then with StartTLS)", field("uris"), d.URIs[0], u)
		}
	}
	if d.SearchBase == "" && d.Provider != LoginAD {
		return invalid("%s: missing (the DN users and groups are searched below, e.g. dc=uni,dc=example)", field("searchBase"))
	}
	if d.SearchBase != "" {
		if err := validDN(d.SearchBase); err != nil {
			return invalid("%s: %v", field("searchBase"), err)
		}
	}
	if d.BindDN != "" {
		if d.Provider == LoginAD {
			return invalid("%s: the ad provider searches as the PC's machine account (its keytab), not as a bind DN", field("bindDN"))
		}
		if err := validDN(d.BindDN); err != nil {
			return invalid("%s: %v", field("bindDN"), err)
		}
	}
	if d.CACert != "" {
		if err := validCACert(d.CACert); err != nil {
			return invalid("%s: %v", field("caCert"), err)
		}
	}
	switch d.Provider {
	case LoginLDAP:
		if d.Realm != "" || len(d.KDCs) > 0 || d.Domain != "" {
			return invalid("%s: realm, kdcs and domain are for the krb5 and ad providers", what)
		}
	case LoginKerberos, LoginAD:
		if d.Realm == "" {
			return invalid("%s: missing (the Kerberos realm, e.g. UNI.EXAMPLE)", field("realm"))
		}
		if !realmRE.MatchString(d.Realm) {
			return invalid("%s: invalid realm %q: upper-case letters, digits, '.' and '-', like UNI.EXAMPLE", field("realm"), d.Realm)
		}
		if d.Provider == LoginKerberos && len(d.KDCs) == 0 {
			return invalid("%s: the krb5 provider needs at least one KDC (host or host:port)", field("kdcs"))
		}
		for _, k := range d.KDCs {
			if err := validHostPort(k); err != nil {
				return invalid("%s: %v", field("kdcs"), err)
			}
		}
		if d.Domain != "" {
			if d.Provider != LoginAD {
				return invalid("%s: only the ad provider has a domain", field("domain"))
			}
			if err := names.Domain(d.Domain); err != nil {
				return invalid("%s: %v", field("domain"), err)
			}
		} else if d.Provider == LoginAD {
			if err := names.Domain(d.ADDomain()); err != nil {
				return invalid("%s: the realm in lower case is not a DNS domain; set the domain (%v)", field("domain"), err)
			}
		}
	}
	return nil
}

func loginProviderList() string {
	s := make([]string, len(LoginProviders))
	for i, p := range LoginProviders {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// realmRE: a Kerberos realm as sites write it (upper-case DNS-like labels).
var realmRE = regexp.MustCompile(`^[A-Z0-9]([A-Z0-9-]{0,61}[A-Z0-9])?(\.[A-Z0-9]([A-Z0-9-]{0,61}[A-Z0-9])?)*$`)

// hostRE: a DNS name (either case) or IPv4 address, as in an LDAP URI or a KDC entry.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// validHostPort checks host or host:port (a KDC; IPv6 in brackets).
func validHostPort(s string) error {
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	if ip := net.ParseIP(host); ip == nil && (len(host) > 253 || !hostRE.MatchString(host)) {
		return fmt.Errorf("invalid host %q: expected a DNS name or IP address, optionally with :port", s)
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("invalid port in %q", s)
		}
	}
	return nil
}

// validLDAPURI checks an ldap:// or ldaps:// URI naming a server, without a DN, filter
// or extensions (sssd takes the server only).
func validLDAPURI(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, " ,\t\r\n\\") {
		return fmt.Errorf("invalid LDAP URI %q: expected ldaps://host[:port] or ldap://host[:port]", s)
	}
	return validHostPort(u.Host)
}

// validDN checks a distinguished name enough to keep it one inert value: attr=value
// pairs separated by ',', printable, one line. The directory itself judges the rest.
func validDN(s string) error {
	if len(s) > 512 {
		return fmt.Errorf("DN too long (%d bytes, at most 512)", len(s))
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("invalid DN %q: one line of printable text", s)
		}
	}
	for _, rdn := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(rdn), "=")
		if !ok || k == "" || v == "" || strings.ContainsAny(k, " \"#+;<>") {
			return fmt.Errorf("invalid DN %q: expected attr=value pairs separated by commas, like ou=people,dc=uni,dc=example", s)
		}
	}
	return nil
}

// validCACert checks that s is one or more PEM CERTIFICATE blocks that parse, and
// nothing else.
func validCACert(s string) error {
	if len(s) > MaxCACert {
		return fmt.Errorf("too large (%d bytes, at most %d: the CA certificates only, not a bundle)", len(s), MaxCACert)
	}
	rest := []byte(s)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("a PEM %q block: only CERTIFICATE blocks (never a private key)", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("certificate %d does not parse: %v", n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("not a PEM certificate (expected -----BEGIN CERTIFICATE-----)")
	}
	if strings.TrimSpace(string(rest)) != "" {
		return fmt.Errorf("text after the last certificate")
	}
	return nil
}
