package extdir

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"
	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Config is the identity configuration file (`overtime serve --identity-config FILE`,
// docs/identity.md has an Active Directory and an OpenLDAP example).
type Config struct {
	// URLs are tried in order; the next one only when a server cannot be reached (a
	// refusal from one server is the answer).
	URLs  []string    `yaml:"urls"`
	TLS   TLSConfig   `yaml:"tls"`
	Bind  BindConfig  `yaml:"bind"`
	Users UserConfig  `yaml:"users"`
	Group GroupConfig `yaml:"groups"`
	// Roles map a group's DN (compared as DNs, case-insensitively) to Overtime roles:
	// site-admin, viewer, pool-admin:POOL, lecturer:POOL.
	Roles []RoleMapping `yaml:"roles"`
	// Timeout bounds dialling and each request; default 10 s.
	Timeout time.Duration `yaml:"timeout"`
}

// TLSConfig: how the connection is protected. There is no "skip verification": a
// certificate the CA does not vouch for is refused.
type TLSConfig struct {
	// Mode is ldaps (TLS from the first byte; ldaps:// URLs), starttls (ldap:// URLs,
	// StartTLS before the first bind; the default for ldap://) or plain (no TLS:
	// passwords cross the network readable; only when written here).
	Mode string `yaml:"mode"`
	// CAFile holds the PEM certificates of the CAs that sign the directory's
	// certificate; empty: the system's roots.
	CAFile string `yaml:"caFile"`
	// ServerName is the name the certificate must carry; default: the URL's host.
	ServerName string `yaml:"serverName"`
}

// BindConfig: how a login is checked.
type BindConfig struct {
	// Method is search (bind as the service account DN, search the user, bind as the
	// user's DN: the usual way for AD and OpenLDAP) or template (bind as
	// fmt.Sprintf(Template, login); no service account, so users cannot be looked up).
	Method string `yaml:"method"`
	// DN and PasswordFile: the service account (search).
	DN           string `yaml:"dn"`
	PasswordFile string `yaml:"passwordFile"`
	// Template: the user's DN with one %s for the login (template), e.g.
	// uid=%s,ou=people,dc=uni,dc=example.
	Template string `yaml:"template"`
}

// UserConfig: where users are and how a login names one.
type UserConfig struct {
	Base  string `yaml:"base"`  // people base; a user's DN must lie under it
	Scope string `yaml:"scope"` // sub (default) or one
	// Filter selects people, e.g. (objectClass=inetOrgPerson) or
	// (&(objectClass=user)(!(userAccountControl:1.2.840.113556.1.4.803:=2))) for
	// enabled AD accounts; default (objectClass=*).
	Filter string `yaml:"filter"`
	// LoginAttribute holds the login: uid (OpenLDAP, the default), sAMAccountName or
	// userPrincipalName (AD).
	LoginAttribute string `yaml:"loginAttribute"`
	// LoginSuffix is appended to the login before searching, for userPrincipalName
	// ("@ad.uni.example"): Overtime's uids cannot hold an @.
	LoginSuffix string `yaml:"loginSuffix"`
}

// GroupConfig: where a user's groups come from.
type GroupConfig struct {
	// Source is memberOf (the attribute on the user entry: AD, OpenLDAP's memberof
	// overlay; the default) or search (groups under Base whose MemberAttribute names the
	// user).
	Source    string `yaml:"source"`
	Attribute string `yaml:"attribute"` // memberOf source: the attribute, default memberOf
	Base      string `yaml:"base"`
	Scope     string `yaml:"scope"`  // sub (default) or one
	Filter    string `yaml:"filter"` // default (|(objectClass=groupOfNames)(objectClass=groupOfUniqueNames))
	// MemberAttribute is member (default) or uniqueMember (values are the user's DN) or
	// memberUid (values are the login).
	MemberAttribute string `yaml:"memberAttribute"`
}

// RoleMapping gives the members of one group roles.
type RoleMapping struct {
	Group string   `yaml:"group"`
	Roles []string `yaml:"roles"`
}

// LoadConfig reads a configuration file strictly: unknown keys are errors (a misspelt
// key would silently weaken the configuration), and so is a second YAML document.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("identity config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("identity config %s: %w", path, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("identity config %s: only one YAML document is allowed", path)
	}
	// Relative files are relative to the configuration file, not to wherever the server
	// happens to be started.
	dir := filepath.Dir(path)
	for _, p := range []*string{&c.TLS.CAFile, &c.Bind.PasswordFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

// settings is a checked Config, ready to use.
type settings struct {
	urls       []*url.URL
	tlsMode    string
	rootCAs    *x509.CertPool // nil: system roots
	serverName string
	method     string
	bindDN     string
	bindPW     string
	template   string
	base       *ldap.DN
	baseStr    string
	scope      int
	userFilter string
	loginAttr  string
	suffix     string
	groupSrc   string
	groupAttr  string
	groupBase  string
	groupScope int
	groupFlt   string
	memberAttr string
	roles      []mapping
	timeout    time.Duration
}

type mapping struct {
	group  *ldap.DN
	grants []model.RoleGrant
}

// attrRE-like check without regexp: an attribute description as LDAP writes it.
func validAttr(a string) bool {
	if a == "" || len(a) > 64 {
		return false
	}
	for i, r := range a {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || (i > 0 && (r >= '0' && r <= '9' || r == '-'))
		if !ok {
			return false
		}
	}
	return true
}

func parseScope(s, what string) (int, error) {
	switch s {
	case "", "sub":
		return ldap.ScopeWholeSubtree, nil
	case "one":
		return ldap.ScopeSingleLevel, nil
	}
	return 0, fmt.Errorf("%s scope %q: use sub or one", what, s)
}

// checkFilter makes sure a configured filter is one parenthesised LDAP filter, so that
// it cannot change the structure of the filter it is combined with.
func checkFilter(f, what string) error {
	if _, err := ldap.CompileFilter(f); err != nil {
		return fmt.Errorf("%s filter %q: %w", what, f, err)
	}
	return nil
}

// parseRole turns site-admin, viewer, pool-admin:POOL or lecturer:POOL into a grant.
func parseRole(s string) (model.RoleGrant, error) {
	kind, pool, scoped := strings.Cut(s, ":")
	k := model.RoleKind(kind)
	switch {
	case k == model.RoleSiteAdmin || k == model.RoleViewer:
		if scoped {
			return model.RoleGrant{}, fmt.Errorf("role %q: %s takes no pool", s, kind)
		}
	case k.PoolScoped():
		if !scoped {
			return model.RoleGrant{}, fmt.Errorf("role %q: %s needs a pool (%s:POOL)", s, kind, kind)
		}
		if err := names.Name("pool", pool); err != nil {
			return model.RoleGrant{}, fmt.Errorf("role %q: %w", s, err)
		}
	default:
		return model.RoleGrant{}, fmt.Errorf("role %q: use site-admin, viewer, pool-admin:POOL or lecturer:POOL", s)
	}
	return model.RoleGrant{Role: k, Pool: pool}, nil
}

// check validates a Config and reads the files it names.
func (c Config) check() (*settings, error) {
	s := &settings{timeout: c.Timeout}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	if len(c.URLs) == 0 {
		return nil, errors.New("urls: at least one ldap:// or ldaps:// URL is required")
	}
	scheme := ""
	for _, raw := range c.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("url %q: want ldap://HOST[:PORT] or ldaps://HOST[:PORT]", raw)
		}
		if scheme != "" && u.Scheme != scheme {
			return nil, errors.New("urls: all URLs must use the same scheme (one TLS mode)")
		}
		scheme = u.Scheme
		s.urls = append(s.urls, u)
	}
	s.tlsMode = c.TLS.Mode
	if s.tlsMode == "" {
		s.tlsMode = map[string]string{"ldaps": "ldaps", "ldap": "starttls"}[scheme]
	}
	switch {
	case s.tlsMode == "ldaps" && scheme == "ldaps", s.tlsMode == "starttls" && scheme == "ldap", s.tlsMode == "plain" && scheme == "ldap":
	case s.tlsMode == "ldaps" || s.tlsMode == "starttls" || s.tlsMode == "plain":
		return nil, fmt.Errorf("tls mode %s does not go with %s:// URLs (ldaps needs ldaps://, starttls and plain ldap://)", s.tlsMode, scheme)
	default:
		return nil, fmt.Errorf("tls mode %q: use ldaps, starttls or plain", c.TLS.Mode)
	}
	if c.TLS.CAFile != "" {
		if s.tlsMode == "plain" {
			return nil, errors.New("tls: a caFile with mode plain: did you mean starttls?")
		}
		pem, err := os.ReadFile(c.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls caFile: %w", err)
		}
		s.rootCAs = x509.NewCertPool()
		if !s.rootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls caFile %s: no PEM certificate in it", c.TLS.CAFile)
		}
	}
	s.serverName = c.TLS.ServerName

	u := c.Users
	if u.Base == "" {
		return nil, errors.New("users base: required (the people base, e.g. ou=people,dc=uni,dc=example)")
	}
	base, err := ldap.ParseDN(u.Base)
	if err != nil {
		return nil, fmt.Errorf("users base %q: %w", u.Base, err)
	}
	s.base, s.baseStr = base, u.Base
	if s.scope, err = parseScope(u.Scope, "users"); err != nil {
		return nil, err
	}
	s.userFilter = u.Filter
	if s.userFilter == "" {
		s.userFilter = "(objectClass=*)"
	}
	if err := checkFilter(s.userFilter, "users"); err != nil {
		return nil, err
	}
	s.loginAttr = u.LoginAttribute
	if s.loginAttr == "" {
		s.loginAttr = "uid"
	}
	if !validAttr(s.loginAttr) {
		return nil, fmt.Errorf("users loginAttribute %q: not an attribute name", s.loginAttr)
	}
	s.suffix = u.LoginSuffix

	b := c.Bind
	s.method = b.Method
	if s.method == "" {
		s.method = "search"
	}
	switch s.method {
	case "search":
		if b.DN == "" || b.PasswordFile == "" {
			return nil, errors.New("bind: method search needs the service account's dn and passwordFile")
		}
		if _, err := ldap.ParseDN(b.DN); err != nil {
			return nil, fmt.Errorf("bind dn %q: %w", b.DN, err)
		}
		pw, err := os.ReadFile(b.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("bind passwordFile: %w", err)
		}
		s.bindDN, s.bindPW = b.DN, strings.TrimRight(string(pw), "\r\n")
		if s.bindPW == "" {
			// An empty password is an unauthenticated bind (RFC 4513 5.1.2): it would
			// "succeed" anonymously and every search would then find nothing.
			return nil, fmt.Errorf("bind passwordFile %s is empty", b.PasswordFile)
		}
	case "template":
		if b.DN != "" || b.PasswordFile != "" {
			return nil, errors.New("bind: method template uses no service account; remove dn and passwordFile")
		}
		if strings.Count(b.Template, "%s") != 1 || strings.Count(b.Template, "%") != 1 {
			return nil, fmt.Errorf("bind template %q: needs exactly one %%s for the login", b.Template)
		}
		dn, err := ldap.ParseDN(fmt.Sprintf(b.Template, "x"))
		if err != nil {
			return nil, fmt.Errorf("bind template %q: %w", b.Template, err)
		}
		if !base.AncestorOfFold(dn) {
			return nil, fmt.Errorf("bind template %q: its DNs are not under the users base %s", b.Template, u.Base)
		}
		s.template = b.Template
	default:
		return nil, fmt.Errorf("bind method %q: use search or template", b.Method)
	}

	g := c.Group
	s.groupSrc = g.Source
	if s.groupSrc == "" {
		s.groupSrc = "memberOf"
	}
	switch s.groupSrc {
	case "memberOf":
		s.groupAttr = g.Attribute
		if s.groupAttr == "" {
			s.groupAttr = "memberOf"
		}
		if !validAttr(s.groupAttr) {
			return nil, fmt.Errorf("groups attribute %q: not an attribute name", s.groupAttr)
		}
	case "search":
		if _, err := ldap.ParseDN(g.Base); err != nil || g.Base == "" {
			return nil, fmt.Errorf("groups base %q: a DN is required with source search", g.Base)
		}
		s.groupBase = g.Base
		if s.groupScope, err = parseScope(g.Scope, "groups"); err != nil {
			return nil, err
		}
		s.groupFlt = g.Filter
		if s.groupFlt == "" {
			s.groupFlt = "(|(objectClass=groupOfNames)(objectClass=groupOfUniqueNames))"
		}
		if err := checkFilter(s.groupFlt, "groups"); err != nil {
			return nil, err
		}
		s.memberAttr = g.MemberAttribute
		if s.memberAttr == "" {
			s.memberAttr = "member"
		}
		if !validAttr(s.memberAttr) {
			return nil, fmt.Errorf("groups memberAttribute %q: not an attribute name", s.memberAttr)
		}
	default:
		return nil, fmt.Errorf("groups source %q: use memberOf or search", g.Source)
	}

	for i, r := range c.Roles {
		dn, err := ldap.ParseDN(r.Group)
		if err != nil || r.Group == "" {
			return nil, fmt.Errorf("roles[%d] group %q: not a DN", i, r.Group)
		}
		if len(r.Roles) == 0 {
			return nil, fmt.Errorf("roles[%d] (%s): no roles", i, r.Group)
		}
		m := mapping{group: dn}
		for _, rs := range r.Roles {
			gr, err := parseRole(rs)
			if err != nil {
				return nil, fmt.Errorf("roles[%d] (%s): %w", i, r.Group, err)
			}
			gr.Name = r.Group
			m.grants = append(m.grants, gr)
		}
		s.roles = append(s.roles, m)
	}
	return s, nil
}

// tlsConfig for a server host: verification always on, TLS 1.2 at least.
func (s *settings) tlsConfig(host string) *tls.Config {
	name := s.serverName
	if name == "" {
		name = host
	}
	return &tls.Config{RootCAs: s.rootCAs, ServerName: name, MinVersion: tls.VersionTLS12}
}
