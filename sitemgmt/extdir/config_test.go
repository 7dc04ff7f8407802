package extdir

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
)

func repoFile(t *testing.T, rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", rel)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The documented examples load and pass every check once their files exist.
func TestExampleConfigs(t *testing.T) {
	for _, ex := range []string{"docs/examples/identity-ad.yaml", "docs/examples/identity-openldap.yaml"} {
		c, err := LoadConfig(repoFile(t, ex))
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		dir := t.TempDir()
		c.TLS.CAFile = unidir.NewCA(t, dir, "ca").CertPEM
		c.Bind.PasswordFile = writeFile(t, dir, "pw", "secret\n")
		d, err := New(c)
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		if d.s.bindPW != "secret" || len(d.s.roles) != 3 || d.Plaintext() {
			t.Fatalf("%s: read as %+v", ex, d.s)
		}
	}
}

func TestConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	pw := writeFile(t, dir, "pw", "secret")
	empty := writeFile(t, dir, "empty", "\n")
	good := func() Config {
		return Config{
			URLs:  []string{"ldap://ldap.uni.example"},
			Bind:  BindConfig{DN: "cn=svc,dc=uni", PasswordFile: pw},
			Users: UserConfig{Base: "ou=people,dc=uni"},
			Roles: []RoleMapping{{Group: "cn=g,dc=uni", Roles: []string{"viewer"}}},
		}
	}
	if _, err := New(good()); err != nil {
		t.Fatalf("the good configuration: %v", err)
	}
	for _, tc := range []struct {
		want string
		edit func(c *Config)
	}{
		{"at least one", func(c *Config) { c.URLs = nil }},
		{"want ldap://", func(c *Config) { c.URLs = []string{"http://x"} }},
		{"same scheme", func(c *Config) { c.URLs = append(c.URLs, "ldaps://y") }},
		{"does not go with", func(c *Config) { c.TLS.Mode = "ldaps" }},
		{"does not go with", func(c *Config) { c.URLs, c.TLS.Mode = []string{"ldaps://x"}, "starttls" }},
		{"use ldaps, starttls or plain", func(c *Config) { c.TLS.Mode = "insecure" }},
		{"did you mean starttls", func(c *Config) { c.TLS.Mode, c.TLS.CAFile = "plain", pw }},
		{"no PEM certificate", func(c *Config) { c.TLS.CAFile = pw }},
		{"users base", func(c *Config) { c.Users.Base = "" }},
		{"users filter", func(c *Config) { c.Users.Filter = "objectClass=person)(uid=*" }},
		{"not an attribute name", func(c *Config) { c.Users.LoginAttribute = "uid)(x" }},
		{"is empty", func(c *Config) { c.Bind.PasswordFile = empty }},
		{"needs the service account", func(c *Config) { c.Bind.DN = "" }},
		{"exactly one %s", func(c *Config) { c.Bind = BindConfig{Method: "template", Template: "uid=x,ou=people,dc=uni"} }},
		{"not under the users base", func(c *Config) { c.Bind = BindConfig{Method: "template", Template: "uid=%s,ou=guests,dc=uni"} }},
		{"use memberOf or search", func(c *Config) { c.Group.Source = "nested" }},
		{"a DN is required", func(c *Config) { c.Group.Source = "search" }},
		{"not a DN", func(c *Config) { c.Roles[0].Group = "staff" }},
		{"needs a pool", func(c *Config) { c.Roles[0].Roles = []string{"pool-admin"} }},
		{"takes no pool", func(c *Config) { c.Roles[0].Roles = []string{"site-admin:lab-a"} }},
		{"invalid pool name", func(c *Config) { c.Roles[0].Roles = []string{"lecturer:Lab A"} }},
		{"use site-admin", func(c *Config) { c.Roles[0].Roles = []string{"root"} }},
	} {
		c := good()
		tc.edit(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error containing %q, got %v", tc.want, err)
		}
	}
	// Unknown keys and a second document are refused; relative files are relative to
	// the configuration file.
	if _, err := LoadConfig(writeFile(t, dir, "typo.yaml", "urls: [ldap://x]\nusers: {base: dc=x, loginAtribute: uid}\n")); err == nil || !strings.Contains(err.Error(), "loginAtribute") {
		t.Errorf("misspelt key: %v", err)
	}
	if _, err := LoadConfig(writeFile(t, dir, "two.yaml", "urls: [ldap://x]\n---\nurls: [ldap://y]\n")); err == nil {
		t.Error("second document accepted")
	}
	c, err := LoadConfig(writeFile(t, dir, "rel.yaml", "bind: {passwordFile: pw}\n"))
	if err != nil || c.Bind.PasswordFile != pw {
		t.Errorf("relative passwordFile: %q %v, want %q", c.Bind.PasswordFile, err, pw)
	}
}
