package test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/cupstest"
	"github.com/overtime-hpc/overtime/internal/testenv/kdctest"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/sssdtest"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	nodeseat "github.com/overtime-hpc/overtime/node-agent/seat"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// A student logs in at a desktop with their university account, configured from the site:
// the site admin sets the site's desktopLogin through the API, the PC's real
// `overtime-agent seat-config` fetches its login stack with its host credential and
// writes it, and a real sssd (in a private mount namespace, reading exactly those files)
// resolves the student, uid 1234567 and their group, from a second slapd playing the
// university (TLS with its CA, searched as a service account whose password only the site
// manager holds) and checks their password — by an LDAP bind, and then by a real MIT KDC
// with this PC's own keytab. Wrong passwords are refused; with no configuration the PC
// writes no login files and its login prompt says why. The pool's print server, set by
// its pool admin, gets the student's page sent with plain lp.
func TestSeatStudentLogin(t *testing.T) {
	uni := unidir.Start(t)
	uni.AddPosixUser(t, unidir.PosixUser{UID: "student", UIDNumber: 1234567, GIDNumber: 1234500, CN: "Stu Dent", Password: "ldap-pw"})
	uni.AddPosixGroup(t, "students", 1234500, "student")
	ca := uni.CA.PEM(t)
	// The account the PCs search with has a password with what sssd.conf's parser might
	// take for a comment or a separator: it must arrive whole.
	const bindPW = "s3cret # not; a comment = really"
	uniRoot := ldapRoot(t, uni)
	mod := ldap.NewModifyRequest(uni.ServiceDN, nil)
	mod.Replace("userPassword", []string{slapdenv.SSHA(bindPW)})
	if err := uniRoot.Modify(mod); err != nil {
		t.Fatal(err)
	}
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "bind-password"), []byte(bindPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Options{TLS: true, API: api.Options{DesktopSecrets: secrets}})
	env.ApplyExample(t)
	admin := env.Admin()
	// Lab A prints on its room's server (a pool admin's setting).
	cups := cupstest.Start(t, "room-101")
	var pool model.Pool
	if _, err := admin.Get("/api/v1/pools/lab-a", nil, &pool); err != nil {
		t.Fatal(err)
	}
	pool.Printing = &model.Printing{Server: cups.Addr, DefaultPrinter: "room-101"}
	if err := env.Client("alice", "alice-secret").Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); err != nil {
		t.Fatalf("pool admin sets the pool's print server: %v", err)
	}
	cred, err := admin.CreateHostCredential(context.Background(), "pc-a01")
	if err != nil {
		t.Fatal(err)
	}
	// The credential file as `overtime host credential --out` writes it: the token and
	// the pin of the site manager's CA (the environment serves TLS).
	if cred.CAPin == "" || cred.CAPin != env.CAPin {
		t.Fatalf("the credential pins %q, want the site's CA %s", cred.CAPin, env.CAPin)
	}
	tokenFile := filepath.Join(t.TempDir(), "agent.token")
	if err := os.WriteFile(tokenFile, []byte(client.Credential{Token: cred.Token, CAPin: cred.CAPin}.File()), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := bootlab.AgentBinary(t)
	// The pinned credential never goes over plain HTTP, whatever URL the PC was given.
	plain := "http://" + strings.TrimPrefix(env.HTTP.URL, "https://")
	if out, err := exec.Command(agent, "seat-config", "--server", plain, "--token-file", tokenFile, "--root", t.TempDir(), "--wait", "5s").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "refusing plain HTTP") {
		t.Fatalf("seat-config with a pinned credential and an http URL: %v\n%s", err, out)
	}
	// A PC whose credential pins another CA does not talk to this server (another
	// site's server, or an impostor's, to such a PC).
	otherPin := filepath.Join(t.TempDir(), "agent.token")
	if err := os.WriteFile(otherPin, []byte(client.Credential{Token: cred.Token, CAPin: "sha256:" + strings.Repeat("0", 64)}.File()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(agent, "seat-config", "--server", env.HTTP.URL, "--token-file", otherPin, "--root", t.TempDir(), "--wait", "3s").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "does not come with the site's CA") {
		t.Fatalf("seat-config pinned to another CA: %v\n%s", err, out)
	}
	// seatLogin runs the PC's boot step into a fresh root and returns it.
	seatLogin := func() string {
		t.Helper()
		root := t.TempDir()
		out, err := exec.Command(agent, "seat-config", "--server", env.HTTP.URL, "--token-file", tokenFile, "--root", root, "--wait", "20s").CombinedOutput()
		if err != nil {
			t.Fatalf("overtime-agent seat-config: %v\n%s", err, out)
		}
		t.Logf("overtime-agent seat-config: %s", strings.TrimSpace(string(out)))
		return root
	}

	// No logins configured yet: no login files (printing only), and the console's
	// prompt says why.
	pcRoot := seatLogin()
	if _, err := os.Stat(filepath.Join(pcRoot, "etc/sssd/sssd.conf")); !os.IsNotExist(err) {
		t.Fatalf("unconfigured: sssd.conf written (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(pcRoot, "etc/cups/client.conf")); !strings.Contains(string(b), "ServerName "+cups.Addr+"\n") {
		t.Fatalf("client.conf: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(pcRoot, nodeseat.Issue)); !strings.Contains(string(b), "No university directory is configured") {
		t.Fatalf("unconfigured: login prompt says %q", b)
	}

	// LDAP: ldaps with the university's CA, searched as the service account.
	login := model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{uni.LDAPSURL}, SearchBase: unidir.BaseDN,
		CACert: ca, BindDN: uni.ServiceDN}
	if err := admin.Send("PUT", "/api/v1/site/desktop-login", nil, login, nil); err != nil {
		t.Fatal(err)
	}
	pcRoot = seatLogin()
	if fi, err := os.Stat(filepath.Join(pcRoot, "etc/sssd/sssd.conf")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("sssd.conf: %v %v, want mode 0600", fi, err)
	}
	seat := sssdtest.Start(t, filepath.Join(pcRoot, "etc"))
	pw, err := seat.Getent("passwd", "student")
	if err != nil || !strings.HasPrefix(pw, "student:*:1234567:1234500:Stu Dent:/home/student:") {
		t.Fatalf("getent passwd student: %q %v\n%s", pw, err, seat.Logs())
	}
	if id, err := seat.ID("student"); err != nil || !strings.Contains(id, "1234500(students)") {
		t.Fatalf("id student: %q %v", id, err)
	}
	if err := seat.Authenticate("student", "ldap-pw"); err != nil {
		t.Fatalf("student's password refused: %v\n%s", err, seat.Logs())
	}
	if err := seat.Authenticate("student", "wrong"); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	// The room's print server, from the site: the student prints a page with plain lp
	// (client.conf names the server, lpoptions the default queue) and it arrives there,
	// as theirs.
	jobs := cups.Jobs(t)
	if out, err := seat.Run(context.Background(), "Exercise sheet 3\n", "runuser", "-u", "student", "--", "lp"); err != nil {
		t.Fatalf("the student's lp: %v\n%s", err, out)
	}
	poll.Until(t, "the student's page at the print server", 20*time.Second, func() bool { return len(cups.Jobs(t)) > len(jobs) })
	if got := cups.Jobs(t); got[len(got)-1].User != "student" || got[len(got)-1].Data != "Exercise sheet 3\n" {
		t.Fatalf("the print server got %+v, want the student's page", got[len(got)-1])
	}

	// Kerberos: passwords checked by the realm's KDC, the ticket validated with this PC's
	// keytab (handed to pc-a01 only); users from LDAP over StartTLS.
	kdc := kdctest.Start(t, "UNI.EXAMPLE")
	kdc.AddPrincipal(t, "student", "krb-pw")
	kdc.AddRandKey(t, "host/pc-a01.uni.example")
	if err := os.MkdirAll(filepath.Join(secrets, "keytabs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "keytabs", "pc-a01.keytab"), kdc.Keytab(t, "host/pc-a01.uni.example"), 0o600); err != nil {
		t.Fatal(err)
	}
	login = model.DesktopLogin{Provider: model.LoginKerberos, URIs: []string{uni.URL}, SearchBase: unidir.BaseDN,
		CACert: ca, BindDN: uni.ServiceDN, Realm: "UNI.EXAMPLE", KDCs: []string{kdc.Addr}}
	if err := admin.Send("PUT", "/api/v1/site/desktop-login", nil, login, nil); err != nil {
		t.Fatal(err)
	}
	pcRoot = seatLogin()
	for path, mode := range map[string]os.FileMode{"etc/sssd/overtime.keytab": 0o600, "etc/krb5.conf": 0o644} {
		if fi, err := os.Stat(filepath.Join(pcRoot, path)); err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %v %v, want mode %o", path, fi, err, mode)
		}
	}
	krb := sssdtest.Start(t, filepath.Join(pcRoot, "etc"))
	if err := krb.Authenticate("student", "krb-pw"); err != nil {
		t.Fatalf("student's Kerberos password refused: %v\n%s\nKDC:\n%s", err, krb.Logs(), kdc.Logs())
	}
	if err := krb.Authenticate("student", "ldap-pw"); err == nil {
		t.Fatal("the LDAP password was accepted where the KDC decides")
	}
	if !strings.Contains(krb.Logs(), "TGT verified using key for") {
		t.Errorf("sssd did not validate the ticket with the PC's keytab:\n%s", krb.Logs())
	}

	// The directory down (its servers closed): the PC still gets its files, its prompt says
	// the directory cannot be reached, and a login fails at once instead of hanging.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	closed.Close()
	login = model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://" + dead}, SearchBase: unidir.BaseDN, CACert: ca, BindDN: uni.ServiceDN}
	if err := admin.Send("PUT", "/api/v1/site/desktop-login", nil, login, nil); err != nil {
		t.Fatal(err)
	}
	pcRoot = seatLogin()
	if b, _ := os.ReadFile(filepath.Join(pcRoot, nodeseat.Issue)); !strings.Contains(string(b), "The university directory ("+dead+") cannot be reached from this PC") {
		t.Fatalf("directory down: login prompt says %q", b)
	}
	down := sssdtest.Start(t, filepath.Join(pcRoot, "etc"))
	started := time.Now()
	if err := down.Authenticate("student", "ldap-pw"); err == nil {
		t.Fatal("a login succeeded with the directory down")
	}
	if _, err := down.Getent("passwd", "student"); err == nil {
		t.Fatal("the student resolved with the directory down")
	}
	t.Logf("with the directory down, a login and a look-up failed in %v", time.Since(started).Round(time.Millisecond))
}

// ldapRoot is a connection to the university directory as its rootdn.
func ldapRoot(t *testing.T, uni *unidir.Dir) *ldap.Conn {
	t.Helper()
	c, err := ldap.DialURL(uni.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Bind(uni.RootDN, uni.RootPW); err != nil {
		t.Fatal(err)
	}
	return c
}
