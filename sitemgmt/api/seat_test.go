package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// A desktop's login stack: the site admin alone sets where desktops authenticate (a pool
// admin may not, neither for the site nor for their pool); each PC gets its files with its
// own credential only, its own keytab and the bind password, and nobody else gets them;
// without a configuration, or without a secret it needs, the answer says why in words.
func TestSeatConfig(t *testing.T) {
	runSeatSuite(t, testenv.Options{})
}

// runSeatSuite is TestSeatConfig on an environment made with opt (TestOpenAPICoverage
// passes its spec checker).
func runSeatSuite(t *testing.T, opt testenv.Options) {
	secrets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "keytabs"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"bind-password": "pc-reader-pw\n", "keytabs/pc-a01.keytab": "KT-A01", "keytabs/pc-b01.keytab": "KT-B01"} {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opt.API.DesktopSecrets = secrets
	opt.TLS = true
	env := testenv.New(t, opt)
	env.ApplyExample(t)
	admin := env.Admin()
	pcA := hostClient(env, issue(t, admin, "pc-a01"))

	// Nothing configured: the PC is told so, in words for its login screen. (pc-a01 is
	// in its course slot: the only files are its sessions, TestSeatSessions.)
	got, err := pcA.SeatConfig(ctx)
	if err != nil || len(got.Files) != 2 || got.Files[0].Path != wire.SeatCourseVMSession || !strings.Contains(got.Unavailable, "No university directory is configured") {
		t.Fatalf("unconfigured: %v %+v", err, got)
	}
	if _, err := admin.Get("/api/v1/site/desktop-login", nil, &model.DesktopLogin{}); status(err) != http.StatusNotFound {
		t.Fatalf("GET without a configuration: %v, want 404", err)
	}

	login := model.DesktopLogin{Provider: model.LoginKerberos, URIs: []string{"ldap://ldap.uni.example"}, SearchBase: "dc=uni,dc=example",
		BindDN: "cn=pc-reader,dc=uni,dc=example", Realm: "UNI.EXAMPLE", KDCs: []string{"kdc.uni.example"}}
	// Refused with the field named; a pool admin may not set it at all.
	bad := login
	bad.Realm = "uni.example"
	if err := admin.Send("PUT", "/api/v1/site/desktop-login", nil, bad, nil); status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "desktopLogin.realm") {
		t.Fatalf("invalid realm: %v, want 400 naming desktopLogin.realm", err)
	}
	alice := env.Client("alice", "alice-secret")
	if err := alice.Send("PUT", "/api/v1/site/desktop-login", nil, login, nil); status(err) != http.StatusForbidden {
		t.Fatalf("pool admin sets the site's desktop login: %v, want 403", err)
	}
	var pool model.Pool
	if _, err := alice.Get("/api/v1/pools/lab-a", nil, &pool); err != nil {
		t.Fatal(err)
	}
	pool.DesktopLogin = &login
	if err := alice.Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); status(err) != http.StatusForbidden || !strings.Contains(err.Error(), "desktopLogin") {
		t.Fatalf("pool admin sets the pool's desktop login: %v, want 403 naming desktopLogin", err)
	}
	if err := admin.Send("PUT", "/api/v1/site/desktop-login", nil, login, nil); err != nil {
		t.Fatal(err)
	}
	var back model.DesktopLogin
	if _, err := env.Client("dave", "dave-secret").Get("/api/v1/site/desktop-login", nil, &back); err != nil || !model.SameDesktopLogin(&back, &login) {
		t.Fatalf("viewer reads %+v %v, want what was set", back, err)
	}

	files := func(sl *wire.SeatConfig) map[string]string {
		m := map[string]string{}
		for _, f := range sl.Files {
			m[f.Path] = string(f.Content)
		}
		return m
	}
	got, err = pcA.SeatConfig(ctx)
	if err != nil || got.Unavailable != "" {
		t.Fatalf("configured: %v %+v", err, got)
	}
	f := files(got)
	if f[wire.SeatKeytab] != "KT-A01" || !strings.Contains(f[wire.SeatSSSDConf], "ldap_default_authtok = pc-reader-pw\n") ||
		!strings.Contains(f[wire.SeatSSSDConf], "krb5_validate = true") || !strings.Contains(f[wire.SeatKrb5Conf], "kdc = kdc.uni.example") {
		t.Fatalf("pc-a01's files: %q", f)
	}
	// Another PC gets its own keytab, one without a keytab none (and no validation).
	if f := files(must(pcSeat(t, env, admin, "pc-b01"))); f[wire.SeatKeytab] != "KT-B01" {
		t.Errorf("pc-b01 keytab %q", f[wire.SeatKeytab])
	}
	if f := files(must(pcSeat(t, env, admin, "pc-a02"))); f[wire.SeatKeytab] != "" || !strings.Contains(f[wire.SeatSSSDConf], "krb5_validate = false") {
		t.Errorf("pc-a02 (no keytab): %q", f)
	}
	// Users never, whatever their role; nor anyone without a credential.
	if _, err := admin.SeatConfig(ctx); status(err) != http.StatusForbidden {
		t.Fatalf("site admin got a seat login: %v", err)
	}
	if _, err := env.Client("", "").SeatConfig(ctx); status(err) != http.StatusUnauthorized {
		t.Fatalf("anonymous: %v", err)
	}
	// A pool of another faculty: its own directory, set by the site admin.
	if _, err := admin.Get("/api/v1/pools/lab-b", nil, &pool); err != nil {
		t.Fatal(err)
	}
	pool.DesktopLogin = &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://ldap.physics.example"}, SearchBase: "dc=physics,dc=example"}
	if err := admin.Send("PUT", "/api/v1/pools/lab-b", nil, pool, nil); err != nil {
		t.Fatal(err)
	}
	if f := files(must(pcSeat(t, env, admin, "pc-b02"))); !strings.Contains(f[wire.SeatSSSDConf], "ldap_uri = ldaps://ldap.physics.example\n") || f[wire.SeatKrb5Conf] != "" {
		t.Errorf("lab-b's own directory: %q", f)
	}
	// Without its password the bind DN cannot work: the PC is told.
	if err := os.Remove(filepath.Join(secrets, "bind-password")); err != nil {
		t.Fatal(err)
	}
	if got, err := pcA.SeatConfig(ctx); err != nil || !strings.Contains(got.Unavailable, "no password for the directory account") {
		t.Fatalf("no bind password: %v %+v", err, got)
	}
	if err := admin.Send("DELETE", "/api/v1/site/desktop-login", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := pcA.SeatConfig(ctx); err != nil || !strings.Contains(got.Unavailable, "No university directory") {
		t.Fatalf("after DELETE: %v %+v", err, got)
	}
}

// pcSeat is what host's agent gets, with a credential issued for it now.
func pcSeat(t *testing.T, env *testenv.Env, admin *client.Client, host string) (*wire.SeatConfig, error) {
	t.Helper()
	return hostClient(env, issue(t, admin, host)).SeatConfig(ctx)
}

func must(sl *wire.SeatConfig, err error) *wire.SeatConfig {
	if err != nil {
		panic(err)
	}
	return sl
}

// The greeter's sessions: a host whose mode now is a course-vm mode gets the course VM as
// an X session and as LightDM's default; a host in a desktop mode gets neither, and
// neither does the same host once its course slot is over (service.Hosts.SeatConfig at
// another instant), nor in its slot when the course VM has no version to run.
func TestSeatSessions(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	admin := env.Admin()
	files := func(sl *wire.SeatConfig) map[string]string {
		m := map[string]string{}
		for _, f := range sl.Files {
			if f.Mode != 0o644 {
				t.Errorf("%s mode %o", f.Path, f.Mode)
			}
			m[f.Path] = string(f.Content)
		}
		return m
	}
	// Wednesday 10:30: pc-a01 is in course-bio101 (course VM bio101-vm), pc-b01 at a desktop.
	f := files(must(pcSeat(t, env, admin, "pc-a01")))
	if !strings.Contains(f[wire.SeatCourseVMSession], "\nName=Course VM: BIO101 practical (read-only course VM)\n") ||
		!strings.Contains(f[wire.SeatCourseVMSession], "\nExec=/usr/lib/overtime/course-vm-session\n") ||
		!strings.Contains(f[wire.SeatDefaultSession], "[Seat:*]\nuser-session=overtime-course-vm\n") {
		t.Fatalf("pc-a01 in its course slot: %q", f)
	}
	if f := files(must(pcSeat(t, env, admin, "pc-b01"))); f[wire.SeatCourseVMSession] != "" || f[wire.SeatDefaultSession] != "" {
		t.Errorf("pc-b01 at a desktop got sessions: %q", f)
	}
	at := func(host string, tm time.Time) map[string]string {
		t.Helper()
		sl, err := env.Svc.Hosts.SeatConfig(host, service.AgentRequest{At: tm}, "")
		if err != nil {
			t.Fatal(err)
		}
		return files(sl)
	}
	if f := at("pc-a01", env.Now.Add(2*time.Hour)); f[wire.SeatCourseVMSession] != "" || f[wire.SeatDefaultSession] != "" {
		t.Errorf("pc-a01 after its course slot (desktop) got sessions: %q", f)
	}
	if f := at("pc-a01", env.Now); f[wire.SeatCourseVMSession] == "" || f[wire.SeatExamXorg] != "" || f[wire.SeatExamLightDM] != "" {
		t.Errorf("pc-a01 in its course slot, asked of the service: %q", f)
	}
	// In the exam of 2026-12-09 (Lab A, a desktop mode): the locked seat, no course VM.
	exam := time.Date(2026, 12, 9, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	if f := at("pc-a01", exam); f[wire.SeatCourseVMSession] != "" ||
		!strings.Contains(f[wire.SeatExamXorg], "Option \"DontVTSwitch\" \"true\"") ||
		!strings.Contains(f[wire.SeatExamLightDM], "[Seat:*]\nallow-user-switching=false\n") {
		t.Errorf("pc-a01 in the exam: %q", f)
	}
	if f := at("pc-b01", exam); f[wire.SeatExamXorg] != "" || f[wire.SeatExamLightDM] != "" {
		t.Errorf("pc-b01 (Lab B, no exam) got the exam's lockdown: %q", f)
	}
	// A course VM image without a published version cannot run: no session offered.
	if err := admin.Send("PUT", "/api/v1/images/empty-vm", nil, model.Image{Name: "empty-vm", Kind: model.ImageCourseVM, Pool: "lab-a"}, nil); err != nil {
		t.Fatal(err)
	}
	var mode model.Mode
	if _, err := admin.Get("/api/v1/modes/course-bio101", nil, &mode); err != nil {
		t.Fatal(err)
	}
	mode.VM = "empty-vm"
	if err := admin.Send("PUT", "/api/v1/modes/course-bio101", nil, mode, nil); err != nil {
		t.Fatal(err)
	}
	if f := at("pc-a01", env.Now); f[wire.SeatCourseVMSession] != "" || f[wire.SeatDefaultSession] != "" {
		t.Errorf("a course VM without a version is offered: %q", f)
	}
}
