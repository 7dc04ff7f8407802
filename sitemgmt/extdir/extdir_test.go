package extdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	"github.com/overtime-hpc/overtime/vocab/model"
)

var bg = context.Background()

// uni is the university directory of these tests: AD-style and OpenLDAP-style people,
// groups kept in memberOf by the overlay.
type uni struct {
	*unidir.Dir
	labA, staff, labBLect string
}

func startUni(t *testing.T) uni {
	t.Helper()
	d := unidir.Start(t)
	ada := "cn=Ada Lovelace," + unidir.People
	olga := "uid=olga," + unidir.People
	d.AddUser(t, unidir.User{DN: ada, SAM: "ada", UPN: "ada@uni.example", Password: "ada-secret"})
	d.AddUser(t, unidir.User{DN: olga, UID: "olga", Password: "olga-secret"})
	d.AddUser(t, unidir.User{DN: "cn=Bob Plain," + unidir.People, SAM: "bob", Password: "bob-secret"})
	d.AddUser(t, unidir.User{DN: "cn=Twin One," + unidir.People, SAM: "twin", Password: "twin-secret"})
	d.AddUser(t, unidir.User{DN: "cn=Twin Two," + unidir.People, SAM: "twin", Password: "twin-secret"})
	d.AddUser(t, unidir.User{DN: "cn=Eve Guest," + unidir.Guests, SAM: "eve", Password: "eve-secret"})
	return uni{
		Dir:      d,
		labA:     d.AddGroup(t, "Lab-A Admins", ada),
		staff:    d.AddGroup(t, "staff", ada, olga),
		labBLect: d.AddGroup(t, "lab-b-lecturers", olga),
	}
}

// adConfig looks users up by sAMAccountName and reads memberOf, over StartTLS; the
// mapping is written in AD's capitals to check that DNs compare case-insensitively.
func (u uni) adConfig() Config {
	return Config{
		URLs:  []string{u.URL},
		TLS:   TLSConfig{Mode: "starttls", CAFile: u.CA.CertPEM},
		Bind:  BindConfig{Method: "search", DN: u.ServiceDN, PasswordFile: u.ServicePassword},
		Users: UserConfig{Base: unidir.People, Filter: "(objectClass=adStyleAccount)", LoginAttribute: "sAMAccountName"},
		Group: GroupConfig{Source: "memberOf"},
		Roles: []RoleMapping{
			{Group: "CN=LAB-A ADMINS,OU=Groups,DC=uni,DC=example", Roles: []string{"pool-admin:lab-a"}},
			{Group: u.staff, Roles: []string{"viewer"}},
		},
	}
}

// openLDAPConfig: uid, a group search on member, ldaps.
func (u uni) openLDAPConfig() Config {
	return Config{
		URLs:  []string{u.LDAPSURL},
		TLS:   TLSConfig{CAFile: u.CA.CertPEM},
		Bind:  BindConfig{DN: u.ServiceDN, PasswordFile: u.ServicePassword},
		Users: UserConfig{Base: unidir.People, Filter: "(objectClass=inetOrgPerson)"},
		Group: GroupConfig{Source: "search", Base: unidir.Groups, MemberAttribute: "member"},
		Roles: []RoleMapping{{Group: u.labBLect, Roles: []string{"lecturer:lab-b", "viewer"}}},
	}
}

func mustNew(t *testing.T, c Config) *Directory {
	t.Helper()
	d, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func roles(gs []model.RoleGrant) []string {
	var out []string
	for _, g := range gs {
		r := string(g.Role)
		if g.Pool != "" {
			r += ":" + g.Pool
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func TestActiveDirectoryStyle(t *testing.T) {
	u := startUni(t)
	d := mustNew(t, u.adConfig())
	got, err := d.Authenticate(bg, "ada", "ada-secret")
	if err != nil {
		t.Fatalf("ada: %v", err)
	}
	if want := []string{"pool-admin:lab-a", "viewer"}; !slices.Equal(roles(got), want) {
		t.Fatalf("ada's roles = %v, want %v", roles(got), want)
	}
	// A user in no mapped group logs in with no roles (the API then gives 403).
	if got, err := d.Authenticate(bg, "bob", "bob-secret"); err != nil || len(got) != 0 {
		t.Fatalf("bob: %v %v", got, err)
	}
	for _, tc := range []struct{ login, pw, why string }{
		{"ada", "wrong", "wrong password"},
		{"ada", "", "empty password (would be an unauthenticated bind)"},
		{"nobody", "x", "no such user"},
		{"twin", "twin-secret", "two entries carry the login"},
		{"eve", "eve-secret", "outside the people base"},
		{"olga", "olga-secret", "not matched by the people filter (no AD-style class)"},
		{"Ada", "ada-secret", "not in Overtime's uid alphabet"},
	} {
		if _, err := d.Authenticate(bg, tc.login, tc.pw); !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("%s (%s): err = %v, want invalid credentials", tc.login, tc.why, err)
		}
	}
	if ok, err := d.Exists(bg, "ada"); !ok || err != nil {
		t.Errorf("Exists(ada) = %v, %v", ok, err)
	}
	for _, login := range []string{"nobody", "twin", "eve", "*"} {
		if ok, err := d.Exists(bg, login); ok || err != nil {
			t.Errorf("Exists(%s) = %v, %v; want false", login, ok, err)
		}
	}
}

func TestUserPrincipalName(t *testing.T) {
	u := startUni(t)
	c := u.adConfig()
	c.Users.LoginAttribute, c.Users.LoginSuffix = "userPrincipalName", "@uni.example"
	d := mustNew(t, c)
	if got, err := d.Authenticate(bg, "ada", "ada-secret"); err != nil || len(got) != 2 {
		t.Fatalf("ada by UPN: %v %v", roles(got), err)
	}
	if _, err := d.Authenticate(bg, "bob", "bob-secret"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("bob has no UPN: %v", err)
	}
}

func TestOpenLDAPGroupSearchOverLDAPS(t *testing.T) {
	u := startUni(t)
	d := mustNew(t, u.openLDAPConfig())
	got, err := d.Authenticate(bg, "olga", "olga-secret")
	if err != nil {
		t.Fatalf("olga: %v", err)
	}
	if want := []string{"lecturer:lab-b", "viewer"}; !slices.Equal(roles(got), want) {
		t.Fatalf("olga's roles = %v, want %v", roles(got), want)
	}
	if _, err := d.Authenticate(bg, "olga", "ada-secret"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("olga with ada's password: %v", err)
	}
}

func TestTemplateBind(t *testing.T) {
	u := startUni(t)
	c := u.adConfig()
	c.Bind = BindConfig{Method: "template", Template: "uid=%s," + unidir.People}
	c.Users = UserConfig{Base: unidir.People, Filter: "(objectClass=inetOrgPerson)"}
	c.Roles = []RoleMapping{{Group: u.labBLect, Roles: []string{"lecturer:lab-b"}}}
	d := mustNew(t, c)
	// memberOf is read bound as the user (no service account).
	if got, err := d.Authenticate(bg, "olga", "olga-secret"); err != nil || !slices.Equal(roles(got), []string{"lecturer:lab-b"}) {
		t.Fatalf("olga: %v %v", roles(got), err)
	}
	if _, err := d.Authenticate(bg, "olga", "wrong"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := d.Exists(bg, "olga"); err == nil || !strings.Contains(err.Error(), "without a service account") {
		t.Fatalf("Exists without a service account: %v", err)
	}
}

// Filter syntax in a login changes nothing: the alphabet refuses it before the
// directory is asked, and the filter escapes it anyway (checked here below the alphabet).
// The server's log proves that no user was bound.
func TestFilterInjection(t *testing.T) {
	u := startUni(t)
	d := mustNew(t, u.adConfig())
	logins := []string{"*", ")(sAMAccountName=*", `\2a`, "ada)(|(sAMAccountName=*", "a*", "*)(objectClass=*"}
	for _, l := range logins {
		if _, err := d.Authenticate(bg, l, "ada-secret"); !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("login %q: %v, want invalid credentials", l, err)
		}
		c, err := d.connect(bg)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.bindService(c); err != nil {
			t.Fatal(err)
		}
		if e, err := d.findUser(c, d.s.baseStr, d.s.scope, l); !errors.Is(err, errNoUser) {
			t.Errorf("search for %q (filter %s) found %v, %v; want no user", l, d.userFilter(l), e, err)
		}
		c.Close()
	}
	log, err := os.ReadFile(filepath.Join(u.Dir.Dir, "slapd.log"))
	if err != nil {
		t.Fatal(err)
	}
	binds := regexp.MustCompile(`BIND dn="([^"]*)"`).FindAllStringSubmatch(string(log), -1)
	for _, b := range binds {
		if dn := b[1]; !strings.EqualFold(dn, u.ServiceDN) && !strings.EqualFold(dn, u.RootDN) {
			t.Errorf("slapd saw a bind as %s", dn)
		}
	}
	if len(binds) == 0 {
		t.Fatal("slapd.log has no BIND lines: the check above checks nothing")
	}
}

func TestTLS(t *testing.T) {
	u := startUni(t)
	other := unidir.NewCA(t, t.TempDir(), "other-ca")
	for _, tc := range []struct {
		name string
		edit func(c *Config)
	}{
		{"starttls", func(c *Config) { c.TLS.CAFile = other.CertPEM }},
		{"ldaps", func(c *Config) { c.URLs, c.TLS.Mode, c.TLS.CAFile = []string{u.LDAPSURL}, "ldaps", other.CertPEM }},
		{"wrong name", func(c *Config) { c.TLS.ServerName = "ldap.uni.example" }},
	} {
		c := u.adConfig()
		tc.edit(&c)
		d := mustNew(t, c)
		_, err := d.Authenticate(bg, "ada", "ada-secret")
		var ue *UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: a certificate the configuration does not trust: err = %v, want unavailable (certificate)", tc.name, err)
		}
	}
	// Plain LDAP only when the configuration says so; then it works.
	c := u.adConfig()
	c.TLS = TLSConfig{Mode: "plain"}
	if _, err := mustNew(t, c).Authenticate(bg, "ada", "ada-secret"); err != nil {
		t.Fatalf("plain, explicitly allowed: %v", err)
	}
}

func TestOutage(t *testing.T) {
	u := startUni(t)
	d := mustNew(t, u.adConfig())
	if err := d.Check(bg); err != nil {
		t.Fatal(err)
	}
	if err := u.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() error{
		func() error { _, err := d.Authenticate(bg, "ada", "ada-secret"); return err },
		func() error { _, err := d.Exists(bg, "ada"); return err },
		func() error { return d.Check(bg) },
	} {
		var ue *UnavailableError
		if err := f(); !errors.As(err, &ue) || errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("directory stopped: err = %v, want *UnavailableError", err)
		}
	}
	// The service account refused is the configuration's fault, not the user's.
	if err := u.Restart(); err != nil {
		t.Fatal(err)
	}
	c := u.adConfig()
	bad := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(bad, []byte("not-the-password"), 0o600)
	c.Bind.PasswordFile = bad
	var ue *UnavailableError
	if _, err := mustNew(t, c).Authenticate(bg, "ada", "ada-secret"); !errors.As(err, &ue) {
		t.Errorf("service account refused: err = %v, want *UnavailableError", err)
	}
	// A second URL is used when the first cannot be reached.
	c = u.adConfig()
	c.URLs = []string{"ldap://127.0.0.1:1", u.URL}
	if _, err := mustNew(t, c).Authenticate(bg, "ada", "ada-secret"); err != nil {
		t.Errorf("second URL: %v", err)
	}
}
