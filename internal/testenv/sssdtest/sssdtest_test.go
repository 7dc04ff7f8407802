package sssdtest_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/kdctest"
	"github.com/overtime-hpc/overtime/internal/testenv/sssdtest"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
)

const (
	user      = "jdoe"
	uidNumber = 1234567
	ldapPW    = "ldap-secret"
	krbPW     = "kerberos-secret"
	realm     = "UNI.EXAMPLE"
)

// directory starts the university directory with jdoe (uid 1234567), its primary group
// physics and a second group hpc-users.
func directory(t *testing.T) *unidir.Dir {
	d := unidir.Start(t)
	d.AddPosixUser(t, unidir.PosixUser{UID: user, UIDNumber: uidNumber, GIDNumber: 1234500, CN: "Jane Doe", Password: ldapPW})
	d.AddPosixGroup(t, "physics", 1234500)
	d.AddPosixGroup(t, "hpc-users", 1234501, user)
	return d
}

// etc writes a PC's /etc as a node agent would: sssd/sssd.conf (0600), the directory's
// CA as sssd/uni-ca.pem, the given extra files under sssd/ (0600), and krb5.conf (0644)
// when given.
func etc(t *testing.T, sssdConf, krb5Conf string, d *unidir.Dir, extra map[string][]byte) string {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sssd"), 0o711); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"sssd/sssd.conf": []byte(sssdConf)}
	if d != nil {
		ca, err := os.ReadFile(d.CA.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		files["sssd/uni-ca.pem"] = ca
	}
	for name, b := range extra {
		files["sssd/"+name] = b
	}
	if krb5Conf != "" {
		files["krb5.conf"] = []byte(krb5Conf)
	}
	for name, b := range files {
		mode := os.FileMode(0o600)
		if name == "krb5.conf" {
			mode = 0o644 // krb5_child reads it as the user
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// domain is the part of every sssd.conf below that names the directory: ldaps (or
// StartTLS on the plain port) verified against the test's CA, bound as the service
// account because the directory allows no anonymous search, RFC 2307 (memberUid).
func domain(d *unidir.Dir, startTLS bool) string {
	uri := d.LDAPSURL
	if startTLS {
		uri = d.URL + "\nldap_id_use_start_tls = true"
	}
	return fmt.Sprintf(`id_provider = ldap
ldap_uri = %s
ldap_schema = rfc2307
ldap_search_base = %s
ldap_default_bind_dn = %s
ldap_default_authtok_type = password
ldap_default_authtok = %s
ldap_tls_reqcert = demand
ldap_tls_cacert = /etc/sssd/uni-ca.pem
ldap_network_timeout = 3
ldap_opt_timeout = 5
ldap_search_timeout = 5
cache_credentials = false
`, uri, unidir.BaseDN, d.ServiceDN, d.ServicePW)
}

const head = `[sssd]
config_file_version = 2
services = nss, pam
domains = uni

[nss]
filter_users = root
filter_groups = root

[pam]

[domain/uni]
`

// checkIdentity: getent and id show the POSIX account with its large uid and its groups.
func checkIdentity(t *testing.T, s *sssdtest.Seat) {
	t.Helper()
	pw, err := s.Getent("passwd", user)
	if err != nil {
		t.Fatal(err)
	}
	if want := "jdoe:*:1234567:1234500:Jane Doe:/home/jdoe:/bin/bash"; pw != want {
		t.Errorf("getent passwd jdoe = %q, want %q", pw, want)
	}
	if pw, err := s.Getent("passwd", "1234567"); err != nil || !strings.HasPrefix(pw, "jdoe:") {
		t.Errorf("getent passwd 1234567 = %q, %v", pw, err)
	}
	id, err := s.ID(user)
	if err != nil {
		t.Fatal(err)
	}
	if want := "uid=1234567(jdoe) gid=1234500(physics) groups=1234500(physics),1234501(hpc-users)"; id != want {
		t.Errorf("id jdoe = %q, want %q", id, want)
	}
}

// noneLeft fails t if a process of sssd's group (the seat's PID) remains.
func noneLeft(t *testing.T, pid int) {
	t.Helper()
	if pid == 0 { // the seat was skipped (-short) or never started
		return
	}
	if out, err := exec.Command("pgrep", "-g", fmt.Sprint(pid)).CombinedOutput(); err == nil {
		t.Errorf("processes of the seat's sssd (group %d) left behind:\n%s", pid, out)
	}
}

// LDAP: sssd resolves the POSIX user over ldaps and authenticates with an LDAP bind.
func TestLDAP(t *testing.T) {
	d := directory(t)
	conf := head + domain(d, false) + "auth_provider = ldap\n"
	var pid int
	t.Run("seat", func(t *testing.T) {
		start := time.Now()
		s := sssdtest.Start(t, etc(t, conf, "", d, nil))
		pid = s.PID
		t.Logf("sssd answered after %v", time.Since(start).Round(time.Millisecond))
		checkIdentity(t, s)
		if err := s.Authenticate(user, ldapPW); err != nil {
			t.Errorf("right password: %v", err)
		}
		if err := s.Authenticate(user, "wrong"); err == nil {
			t.Error("a wrong password authenticated")
		}
		if _, err := s.Getent("passwd", "nosuchuser"); err == nil {
			t.Error("getent found nosuchuser")
		}
	})
	noneLeft(t, pid)
}

// Kerberos: identity from the directory (StartTLS), authentication by the KDC with a
// password other than the LDAP one, the ticket validated with the PC's host keytab.
func TestKerberos(t *testing.T) {
	d := directory(t)
	k := kdctest.Start(t, realm)
	k.AddPrincipal(t, user, krbPW)
	k.AddRandKey(t, "host/pc1.uni.example")
	keytab := k.Keytab(t, "host/pc1.uni.example")
	conf := head + domain(d, true) + fmt.Sprintf(`auth_provider = krb5
krb5_server = %s
krb5_realm = %s
krb5_validate = true
krb5_keytab = /etc/sssd/krb5.keytab
krb5_ccachedir = /tmp
krb5_ccname_template = FILE:%%d/krb5cc_%%U_XXXXXX
krb5_auth_timeout = 10
`, k.Addr, realm)
	var pid int
	t.Run("seat", func(t *testing.T) {
		s := sssdtest.Start(t, etc(t, conf, k.Krb5Conf(), d, map[string][]byte{"krb5.keytab": keytab}))
		pid = s.PID
		checkIdentity(t, s)
		if err := s.Authenticate(user, krbPW); err != nil {
			t.Errorf("Kerberos password: %v", err)
		}
		if err := s.Authenticate(user, ldapPW); err == nil {
			t.Error("the LDAP password authenticated against the KDC")
		}
		// krb5_child left the user's ticket in the namespace's /tmp.
		caches, _ := filepath.Glob(filepath.Join(s.Dir, "tmp", fmt.Sprintf("krb5cc_%d_*", uidNumber)))
		if len(caches) == 0 {
			t.Error("no ccache for the user under the seat's /tmp")
		}
	})
	noneLeft(t, pid)
}

// Unreachable directory: nothing is resolved and nobody authenticates, within the
// timeouts of sssd.conf rather than a hang.
func TestDirectoryUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	conf := head + fmt.Sprintf(`id_provider = ldap
auth_provider = ldap
ldap_uri = ldap://%s
ldap_schema = rfc2307
ldap_search_base = %s
ldap_network_timeout = 2
ldap_opt_timeout = 3
ldap_search_timeout = 3
cache_credentials = false
`, closed, unidir.BaseDN)
	var pid int
	t.Run("seat", func(t *testing.T) {
		s := sssdtest.Start(t, etc(t, conf, "", nil, nil))
		pid = s.PID
		start := time.Now()
		if pw, err := s.Getent("passwd", user); err == nil {
			t.Errorf("getent passwd jdoe = %q with the directory down", pw)
		}
		if err := s.Authenticate(user, ldapPW); err == nil {
			t.Error("authenticated with the directory down")
		} else {
			t.Logf("with the directory down: %v", err)
		}
		if !strings.Contains(s.Logs(), "Back end is offline") {
			t.Error("sssd's backend did not go offline (see its logs)")
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("getent and authenticate took %v with the directory down", d)
		} else {
			t.Logf("getent and authenticate failed within %v", d.Round(time.Millisecond))
		}
	})
	noneLeft(t, pid)
}
