package test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/kdctest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The university's Kerberos realm at the booted desktop: a real MIT KDC (krb5kdc) the PC
// reaches at the lab's server address on TCP port 88, the student's principal with a
// password of its own (krb-pw: not their LDAP one, so a login that works went through
// the KDC), and desk1's host key, which the site manager holds as desk1's keytab and
// hands to desk1 alone.

const (
	studentRealm = "UNI.EXAMPLE"
	studentKrbPW = "krb-pw"
	desk1Host    = "host/desk1.uni.example"
)

func startStudentKDC(t *testing.T, pc *desktopPC) *kdctest.KDC {
	t.Helper()
	kdc := kdctest.Start(t, studentRealm)
	kdc.AddPrincipal(t, "student", studentKrbPW)
	kdc.AddRandKey(t, desk1Host)
	if err := os.MkdirAll(filepath.Join(pc.secrets, "keytabs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pc.secrets, "keytabs", "desk1.keytab"), kdc.Keytab(t, desk1Host), 0o600); err != nil {
		t.Fatal(err)
	}
	pc.l.Expose(t, bootlab.ServerIP+":88", kdc.Addr)
	return kdc
}

// kerberosLogin: the site admin moves the site's desktop logins to the realm as a site
// admin does it with the site file: export, edit, apply. PCs take it at their next boot.
func kerberosLogin(t *testing.T, l *bootlab.Lab) {
	t.Helper()
	editSite(t, l, func(site *model.Site) {
		if site.DesktopLogin == nil {
			t.Fatal("site export: no desktopLogin")
		}
		site.DesktopLogin.Provider = model.LoginKerberos
		site.DesktopLogin.Realm = studentRealm
		site.DesktopLogin.KDCs = []string{bootlab.ServerIP + ":88"}
	})
}

// editSite changes the lab's site as a site admin does with the site file: export, edit,
// apply.
func editSite(t *testing.T, l *bootlab.Lab, edit func(*model.Site)) {
	t.Helper()
	var site model.Site
	if err := yaml.Unmarshal([]byte(l.MustRun("site", "export")), &site); err != nil {
		t.Fatalf("site export: %v", err)
	}
	edit(&site)
	b, err := yaml.Marshal(&site)
	if err != nil {
		t.Fatal(err)
	}
	l.Apply(string(b))
}

// checkKerberosSession: the student's console session got its ticket from the realm's
// KDC at login: the KDC issued student a ticket-granting ticket, and sssd's krb5 provider
// keeps it in the session's credential cache (KRB5CCNAME, the student's own file). The
// desktop has no klist: the cache's bytes are read, where a principal's components are
// counted strings each ("krbtgt", then the realm), never "krbtgt/REALM" in one piece.
func checkKerberosSession(t *testing.T, pc *desktopPC, kdc *kdctest.KDC) {
	t.Helper()
	if logs := kdc.Logs(); !regexp.MustCompile(`AS_REQ[^\n]*ISSUE[^\n]*student@` + studentRealm + ` for krbtgt/`).MatchString(logs) {
		t.Fatalf("the KDC issued student no ticket:\n%s", logs)
	}
	out, err := pc.vm.Console.Run(`f=${KRB5CCNAME#FILE:}; echo "CCACHE $KRB5CCNAME $(stat -c %u:%a "$f") $(grep -a -c krbtgt "$f")"`, time.Minute)
	if err != nil || !regexp.MustCompile(`CCACHE FILE:/tmp/krb5cc_1234567_\S+ 1234567:600 [1-9]`).MatchString(out) {
		t.Fatalf("the student's credential cache: %v\n%s", err, out)
	}
}
