package seat

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

func read(t *testing.T, root, rel string) (string, os.FileMode) {
	t.Helper()
	p := filepath.Join(root, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", 0
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fi.Mode().Perm()
}

// Apply writes the allowed files with their modes, removes what it wrote before and an
// answer leaves out (never a file it did not write), and says why when logins cannot work.
func TestApply(t *testing.T) {
	root := t.TempDir()
	// A krb5.conf the image brought: not Apply's to remove.
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/krb5.conf"), []byte("image's"), 0o644); err != nil {
		t.Fatal(err)
	}
	krb := &wire.SeatConfig{Files: []wire.SeatFile{
		{Path: wire.SeatSSSDConf, Mode: 0o600, Content: []byte("[sssd]\n")},
		{Path: wire.SeatKeytab, Mode: 0o600, Content: []byte{5, 2}},
		{Path: wire.SeatKrb5Conf, Mode: 0o644, Content: []byte("[libdefaults]\n")},
	}}
	if err := Apply(root, krb); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{wire.SeatSSSDConf: 0o600, wire.SeatKeytab: 0o600, wire.SeatKrb5Conf: 0o644} {
		if _, mode := read(t, root, path); mode != want {
			t.Errorf("%s mode %o, want %o", path, mode, want)
		}
	}
	if s := ReadStatus(root); s != "ok" {
		t.Errorf("status %q", s)
	}
	// The site moves to plain LDAP: the keytab and krb5.conf Apply wrote go.
	if err := Apply(root, &wire.SeatConfig{Files: krb.Files[:1]}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{wire.SeatKeytab, wire.SeatKrb5Conf} {
		if _, err := os.Stat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
	// Unavailable: the reason, on one line, for the status and the console prompt.
	if err := Apply(root, &wire.SeatConfig{Unavailable: "No directory\nfor C:\\pool"}); err != nil {
		t.Fatal(err)
	}
	if s := ReadStatus(root); s != "No directory for C:\\pool" {
		t.Errorf("status %q", s)
	}
	if issue, _ := read(t, root, Issue); !strings.Contains(issue, "No directory for C:/pool") || strings.Contains(issue, `\`) {
		t.Errorf("issue %q: want the reason without agetty escapes", issue)
	}
	if notice, _ := read(t, root, Notice); notice != "No directory for C:\\pool\n" {
		t.Errorf("greeter notice %q", notice)
	}
	if _, err := os.Stat(filepath.Join(root, wire.SeatSSSDConf)); !os.IsNotExist(err) {
		t.Errorf("sssd.conf left behind when logins are unavailable: %v", err)
	}
	// Back to working: the prompt's notice goes.
	if err := Apply(root, krb); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{Issue, Notice} {
		if _, err := os.Stat(filepath.Join(root, f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
}

// A path outside the login files, or a mode other than 0600/0644, is refused before
// anything is written.
func TestApplyRefuses(t *testing.T) {
	for _, sl := range []*wire.SeatConfig{
		{Files: []wire.SeatFile{{Path: wire.SeatSSSDConf, Mode: 0o600}, {Path: "/etc/shadow", Mode: 0o600}}},
		{Files: []wire.SeatFile{{Path: wire.SeatSSSDConf, Mode: 0o600}, {Path: "/etc/sssd/../shadow", Mode: 0o600}}},
		{Files: []wire.SeatFile{{Path: wire.SeatSSSDConf, Mode: 0o666}}},
		{},
	} {
		root := t.TempDir()
		if err := Apply(root, sl); err == nil {
			t.Errorf("%+v accepted", sl)
		}
		if _, err := os.Stat(filepath.Join(root, wire.SeatSSSDConf)); !os.IsNotExist(err) {
			t.Errorf("%+v: sssd.conf written before the refusal", sl)
		}
	}
}

// Reachable: one listening server is enough; none answering is said in words.
func TestReachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	closed.Close()
	ctx := context.Background()
	if !Reachable(ctx, []string{dead, ln.Addr().String()}, 2*time.Second) {
		t.Error("one server listens: want reachable")
	}
	if Reachable(ctx, []string{dead}, 2*time.Second) {
		t.Error("nothing listens: want unreachable")
	}
	if !Reachable(ctx, nil, time.Second) {
		t.Error("no servers to check: want true")
	}
	root := t.TempDir()
	if err := DirectoryUnreachable(root, []string{dead}); err != nil {
		t.Fatal(err)
	}
	if s := ReadStatus(root); !strings.Contains(s, "The university directory ("+dead+") cannot be reached") {
		t.Errorf("status %q", s)
	}
}

// Recheck follows the directory while the PC runs: down after a good boot, the notice
// and the console's line say so; back, they are gone and the status is ok again. A
// reason that is not the directory's (nothing configured) is left alone, and so is a PC
// whose answer named no servers.
func TestRecheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	root := t.TempDir()
	ok := &wire.SeatConfig{Directory: []string{addr}, Files: []wire.SeatFile{{Path: wire.SeatSSSDConf, Content: []byte("[sssd]\n"), Mode: 0o600}}}
	if err := Apply(root, ok); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, root, Directory); got != addr+"\n" {
		t.Fatalf("%s: %q, want the directory's server", Directory, got)
	}
	ctx := context.Background()
	step := func(want string) {
		t.Helper()
		changed, err := Recheck(ctx, root, time.Second)
		if err != nil || changed != want {
			t.Fatalf("Recheck: %q %v, want %q", changed, err, want)
		}
	}
	step("") // up and ok: nothing to do
	ln.Close()
	step(directoryDown([]string{addr}))
	notice, _ := read(t, root, Notice)
	issue, _ := read(t, root, Issue)
	if !strings.Contains(notice, "cannot be reached") || !strings.Contains(issue, "cannot be reached") {
		t.Fatalf("directory down: notice %q, console %q", notice, issue)
	}
	step("") // still down: said once
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	defer ln.Close()
	step("ok")
	if ReadStatus(root) != "ok" {
		t.Fatalf("status %q after the directory came back", ReadStatus(root))
	}
	for _, f := range []string{Notice, Issue} {
		if _, err := os.Stat(filepath.Join(root, f)); !os.IsNotExist(err) {
			t.Errorf("%s left after the directory came back: %v", f, err)
		}
	}

	// Another reason stands, and nothing is asked: the answer said logins cannot work.
	if err := Apply(root, &wire.SeatConfig{Unavailable: "No directory for this pool"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, Directory)); !os.IsNotExist(err) {
		t.Errorf("%s kept by an answer without logins: %v", Directory, err)
	}
	step("")
	if ReadStatus(root) != "No directory for this pool" {
		t.Errorf("status %q, want the site manager's reason", ReadStatus(root))
	}
	// The site manager was unreachable at boot: its words stay though the directory answers.
	if err := Apply(root, ok); err != nil {
		t.Fatal(err)
	}
	if err := Unreachable(root, "https://site.example"); err != nil {
		t.Fatal(err)
	}
	step("")
	if !strings.Contains(ReadStatus(root), "site manager") {
		t.Errorf("status %q, want the boot's reason kept", ReadStatus(root))
	}
}

// The greeter's course-VM session (a course-vm mode) is written like the login files,
// beside an unavailable login, and removed by an answer without it.
func TestApplySessions(t *testing.T) {
	root := t.TempDir()
	course := &wire.SeatConfig{Unavailable: "No directory", Files: []wire.SeatFile{
		{Path: wire.SeatCourseVMSession, Mode: 0o644, Content: []byte("[Desktop Entry]\n")},
		{Path: wire.SeatDefaultSession, Mode: 0o644, Content: []byte("[Seat:*]\nuser-session=overtime-course-vm\n")},
	}}
	if err := Apply(root, course); err != nil {
		t.Fatal(err)
	}
	for _, f := range course.Files {
		if got, mode := read(t, root, f.Path); got != string(f.Content) || mode != 0o644 {
			t.Errorf("%s: %q mode %o", f.Path, got, mode)
		}
	}
	if err := Apply(root, &wire.SeatConfig{Unavailable: "No directory"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range course.Files {
		if _, err := os.Stat(filepath.Join(root, f.Path)); !os.IsNotExist(err) {
			t.Errorf("%s left behind outside the course-vm mode: %v", f.Path, err)
		}
	}
}
