package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/extdir"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// uniEnv is a site manager with the example site and its local users, and a second
// slapd playing the university's directory (AD-style and OpenLDAP-style people, groups
// kept in memberOf by the overlay).
type uniEnv struct {
	*testenv.Env
	uni               *unidir.Dir
	labA, labB, lectB string
}

func startUniEnv(t *testing.T) uniEnv {
	t.Helper()
	chk := newSpecChecker(t)
	env := testenv.New(t, testenv.Options{Wrap: chk.wrap})
	env.ApplyExample(t)
	u := unidir.Start(t)
	ada := "cn=Ada Lovelace," + unidir.People
	olga := "uid=olga," + unidir.People
	// The university's alice is not Overtime's local alice (pool admin of lab-a).
	uniAlice := "cn=Alice Other," + unidir.People
	u.AddUser(t, unidir.User{DN: ada, SAM: "ada", UID: "ada", Password: "ada-uni-pw"})
	u.AddUser(t, unidir.User{DN: olga, UID: "olga", Password: "olga-uni-pw"}) // no AD-style account
	u.AddUser(t, unidir.User{DN: uniAlice, SAM: "alice", UID: "alice", Password: "alice-uni-pw"})
	return uniEnv{Env: env, uni: u,
		labA:  u.AddGroup(t, "Lab-A Admins", ada),
		labB:  u.AddGroup(t, "Lab-B Admins", uniAlice),
		lectB: u.AddGroup(t, "lab-b-lecturers", olga),
	}
}

// adConfig: sAMAccountName, memberOf, StartTLS with the test CA.
func (e uniEnv) adConfig() extdir.Config {
	return extdir.Config{
		URLs:  []string{e.uni.URL},
		TLS:   extdir.TLSConfig{Mode: "starttls", CAFile: e.uni.CA.CertPEM},
		Bind:  extdir.BindConfig{Method: "search", DN: e.uni.ServiceDN, PasswordFile: e.uni.ServicePassword},
		Users: extdir.UserConfig{Base: unidir.People, Filter: "(objectClass=adStyleAccount)", LoginAttribute: "sAMAccountName"},
		Group: extdir.GroupConfig{Source: "memberOf"},
		Roles: []extdir.RoleMapping{
			{Group: "CN=Lab-A Admins,OU=Groups,DC=uni,DC=example", Roles: []string{"pool-admin:lab-a"}},
			{Group: e.labB, Roles: []string{"pool-admin:lab-b"}},
		},
	}
}

func (e uniEnv) use(t *testing.T, c extdir.Config) {
	t.Helper()
	d, err := extdir.New(c)
	if err != nil {
		t.Fatal(err)
	}
	e.Svc.Accounts.SetExternal(d)
}

func (e uniEnv) whoami(t *testing.T, user, pw string) []string {
	t.Helper()
	var who struct {
		UID   string   `json:"uid"`
		Roles []string `json:"roles"`
	}
	if _, err := e.Client(user, pw).Get("/api/v1/whoami", nil, &who); err != nil {
		t.Fatalf("whoami as %s: %v", user, err)
	}
	return who.Roles
}

func TestExternalDirectoryLogins(t *testing.T) {
	e := startUniEnv(t)
	e.use(t, e.adConfig())
	ada := e.Client("ada", "ada-uni-pw")

	t.Run("AD login by sAMAccountName, roles from memberOf", func(t *testing.T) {
		if got := e.whoami(t, "ada", "ada-uni-pw"); !slices.Equal(got, []string{"pool-admin:lab-a"}) {
			t.Fatalf("ada's roles = %v", got)
		}
		inA := model.Host{Name: "pc-a09", MAC: "52:54:00:0a:00:09", IP: "10.20.0.19", Pool: "lab-a"}
		if err := ada.Send("PUT", "/api/v1/hosts/pc-a09", nil, inA, nil); err != nil {
			t.Fatalf("pool admin of lab-a writes a lab-a host: %v", err)
		}
		inB := model.Host{Name: "pc-b09", MAC: "52:54:00:0b:00:09", IP: "10.20.0.29", Pool: "lab-b"}
		if err := ada.Send("PUT", "/api/v1/hosts/pc-b09", nil, inB, nil); status(err) != http.StatusForbidden {
			t.Fatalf("pool admin of lab-a writes a lab-b host: %v, want 403", err)
		}
	})

	t.Run("refusals are 401", func(t *testing.T) {
		for _, c := range []struct{ user, pw string }{
			{"ada", "wrong"}, {"olga", "olga-uni-pw"} /* not an AD-style account */, {"nobody", "x"},
			{"*", "ada-uni-pw"}, {")(uid=*", "ada-uni-pw"}, {`\2a`, "ada-uni-pw"}, {"ada)(|(sAMAccountName=*", "ada-uni-pw"},
		} {
			if _, err := e.Client(c.user, c.pw).Get("/api/v1/whoami", nil, nil); status(err) != http.StatusUnauthorized {
				t.Errorf("%q/%q: %v, want 401", c.user, c.pw, err)
			}
		}
	})

	t.Run("site grants and group roles add up", func(t *testing.T) {
		var viewers model.RoleGrant
		if _, err := e.Admin().Get("/api/v1/roles/viewers", nil, &viewers); err != nil {
			t.Fatal(err)
		}
		viewers.Members = append(viewers.Members, "ada")
		if err := e.Admin().Send("PUT", "/api/v1/roles/viewers", nil, viewers, nil); err != nil {
			t.Fatal(err)
		}
		if got := e.whoami(t, "ada", "ada-uni-pw"); !slices.Equal(got, []string{"pool-admin:lab-a", "viewer"}) {
			t.Fatalf("ada's roles = %v", got)
		}
	})

	t.Run("a local uid never merges with the external one", func(t *testing.T) {
		// Local first: the university's alice cannot log in as Overtime's alice, and
		// Overtime's alice gets none of the university alice's groups.
		if _, err := e.Client("alice", "alice-uni-pw").Get("/api/v1/whoami", nil, nil); status(err) != http.StatusUnauthorized {
			t.Fatalf("alice with the university's password: %v, want 401", err)
		}
		if got := e.whoami(t, "alice", "alice-secret"); !slices.Equal(got, []string{"pool-admin:lab-a"}) {
			t.Fatalf("local alice's roles = %v, want only the site's grant", got)
		}
	})

	t.Run("site-admin grants take existing external users", func(t *testing.T) {
		var admins model.RoleGrant
		if _, err := e.Admin().Get("/api/v1/roles/site-admins", nil, &admins); err != nil {
			t.Fatal(err)
		}
		bad := admins
		bad.Members = append(slices.Clone(admins.Members), "nobody")
		if err := e.Admin().Send("PUT", "/api/v1/roles/site-admins", nil, bad, nil); status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "nobody") {
			t.Fatalf("site-admin for a uid neither directory has: %v, want 400 naming it", err)
		}
		admins.Members = append(admins.Members, "ada")
		if err := e.Admin().Send("PUT", "/api/v1/roles/site-admins", nil, admins, nil); err != nil {
			t.Fatalf("site-admin for an external user: %v", err)
		}
		if got := e.whoami(t, "ada", "ada-uni-pw"); !slices.Contains(got, "site-admin") {
			t.Fatalf("ada's roles = %v", got)
		}
	})

	t.Run("external users change their password at the university", func(t *testing.T) {
		err := ada.Send("PUT", "/api/v1/users/ada/password", nil, api.PasswordRequest{OldPassword: "ada-uni-pw", Password: "new-password"}, nil)
		if status(err) != http.StatusConflict {
			t.Fatalf("%v, want 409", err)
		}
	})

	t.Run("OpenLDAP style: uid, group search", func(t *testing.T) {
		c := e.adConfig()
		c.URLs, c.TLS = []string{e.uni.LDAPSURL}, extdir.TLSConfig{Mode: "ldaps", CAFile: e.uni.CA.CertPEM}
		c.Users = extdir.UserConfig{Base: unidir.People, Filter: "(objectClass=inetOrgPerson)", LoginAttribute: "uid"}
		c.Group = extdir.GroupConfig{Source: "search", Base: unidir.Groups, MemberAttribute: "member"}
		c.Roles = []extdir.RoleMapping{{Group: e.lectB, Roles: []string{"lecturer:lab-b"}}}
		e.use(t, c)
		if got := e.whoami(t, "olga", "olga-uni-pw"); !slices.Equal(got, []string{"lecturer:lab-b"}) {
			t.Fatalf("olga's roles = %v", got)
		}
		if _, err := e.Client("olga", "wrong").Get("/api/v1/whoami", nil, nil); status(err) != http.StatusUnauthorized {
			t.Fatalf("olga, wrong password: %v, want 401", err)
		}
	})
}

// The university's directory goes away: its users get 503 (never "wrong password"),
// local users keep logging in, /healthz says degraded and /readyz stays ready.
func TestExternalDirectoryOutage(t *testing.T) {
	e := startUniEnv(t)
	e.use(t, e.adConfig())
	if got := e.whoami(t, "ada", "ada-uni-pw"); len(got) != 1 {
		t.Fatalf("ada before the outage: %v", got)
	}
	if err := e.uni.Stop(); err != nil {
		t.Fatal(err)
	}
	// ada's wrong password is not in the login cache: the directory must be asked.
	for _, c := range []struct{ user, pw string }{{"ada", "wrong"}, {"olga", "olga-uni-pw"}} {
		_, err := e.Client(c.user, c.pw).Get("/api/v1/whoami", nil, nil)
		if status(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "directory unavailable") {
			t.Errorf("%s during the outage: %v, want 503 directory unavailable", c.user, err)
		}
	}
	if got := e.whoami(t, "alice", "alice-secret"); !slices.Equal(got, []string{"pool-admin:lab-a"}) {
		t.Fatalf("a local user during the outage: %v", got)
	}
	code, body := health(t, e.HTTP.URL, "/healthz")
	if code != 200 || body["status"] != "degraded" || !strings.Contains(body["reason"].(string), "external directory unavailable") || body["external_directory_down_since"] == nil {
		t.Fatalf("/healthz during the outage: %d %v", code, body)
	}
	if code, body := health(t, e.HTTP.URL, "/readyz"); code != 200 {
		t.Fatalf("/readyz during an outage of the external directory only: %d %v", code, body)
	}
	var h map[string]any
	if _, err := e.Client("", "").Get("/healthz", nil, &h); err != nil { // through the spec checker
		t.Fatal(err)
	}
	if err := e.uni.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client("olga", "olga-uni-pw").Get("/api/v1/whoami", nil, nil); status(err) != http.StatusUnauthorized {
		t.Fatalf("olga after the outage: %v, want 401 (no AD-style account: the directory answers again)", err)
	}
	if _, body := health(t, e.HTTP.URL, "/healthz"); body["status"] != "ok" {
		t.Fatalf("/healthz after the outage: %v", body)
	}
}

// A server certificate the configured CA did not sign is refused: 503 (the password is
// never sent), and /healthz names the certificate.
func TestExternalDirectoryUntrustedCertificate(t *testing.T) {
	e := startUniEnv(t)
	c := e.adConfig()
	c.TLS.CAFile = unidir.NewCA(t, t.TempDir(), "not-the-uni-ca").CertPEM
	e.use(t, c)
	if _, err := e.Client("ada", "ada-uni-pw").Get("/api/v1/whoami", nil, nil); status(err) != http.StatusServiceUnavailable {
		t.Fatalf("untrusted certificate: %v, want 503", err)
	}
	_, body := health(t, e.HTTP.URL, "/healthz")
	if body["status"] != "degraded" || !strings.Contains(body["reason"].(string), "certificate") {
		t.Fatalf("/healthz: %v", body)
	}
	// The trusted CA again: the same login works and the state recovers.
	e.use(t, e.adConfig())
	if _, err := e.Client("ada", "ada-uni-pw").Get("/api/v1/whoami", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, body := health(t, e.HTTP.URL, "/healthz"); body["status"] != "ok" {
		t.Fatalf("/healthz after a good login: %v", body)
	}
}
