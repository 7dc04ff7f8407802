package smbtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// The server a CIFS home needs: a user with their password reaches their directory over
// an encrypted session and what they write lands as their uid and gid; a wrong password
// and another user's directory are refused; the host's passwd does not learn the user.
func TestServer(t *testing.T) {
	needs.Servers(t, "root (network namespaces)", "smbd")
	ns, err := netns.New("ot-smbtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	if err := ns.AddBridge("br0", "10.77.0.1/24"); err != nil {
		t.Fatal(err)
	}
	share := t.TempDir()
	os.Chmod(share, 0o755)
	os.Chmod(filepath.Dir(share), 0o711)
	for _, u := range []struct {
		name     string
		uid, gid int
	}{{"student", 1234567, 1234500}, {"other", 1234568, 1234500}} {
		d := filepath.Join(share, u.name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
	s := StartT(t, Options{Addr: "10.77.0.1", Share: "users", Dir: share, Command: ns.Command, Users: []User{
		{Name: "student", UID: 1234567, GID: 1234500, Group: "students", Password: "ldap-pw"},
		{Name: "other", UID: 1234568, GID: 1234500, Group: "students", Password: "other-pw"},
	}})

	src := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(src, []byte("saved over smb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Client("student", "ldap-pw", "cd student; put "+src+" notes.txt"); err != nil {
		t.Fatalf("the student's put: %v\n%s\n%s", err, out, s.Logs())
	}
	fi, err := os.Stat(filepath.Join(share, "student", "notes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234567 || st.Gid != 1234500 || fi.Mode().Perm() != 0o600 {
		t.Errorf("notes.txt on the server: %d:%d %v, want 1234567:1234500 0600", st.Uid, st.Gid, fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(share, "student", "notes.txt")); string(b) != "saved over smb\n" {
		t.Errorf("notes.txt holds %q", b)
	}

	if out, err := s.Client("student", "wrong", "ls"); err == nil || !strings.Contains(out, "NT_STATUS_LOGON_FAILURE") {
		t.Errorf("a wrong password: %v\n%s", err, out)
	}
	if out, err := s.Client("other", "other-pw", "ls student/*"); err == nil || !strings.Contains(out, "NT_STATUS_ACCESS_DENIED") {
		t.Errorf("another user in the student's home: %v\n%s", err, out)
	}
	// SMB 2.1, which cannot encrypt, is refused (SMB 3 sessions are encrypted: the server
	// requires it of every client that speaks it).
	cmd := ns.Command(SmbclientPath, "//10.77.0.1/users", "-m", "SMB2_10", "-U", "student", "-c", "ls")
	cmd.Env = append(os.Environ(), "PASSWD=ldap-pw")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("an unencrypted session was served:\n%s", out)
	}
	// A session held open (smbclient reading commands from a pipe) is in the server's
	// list with its protocol and cipher; closed, it is gone.
	sc := ns.Command(SmbclientPath, "//10.77.0.1/users", "-m", "SMB3", "-U", "student")
	sc.Env = append(os.Environ(), "PASSWD=ldap-pw")
	in, err := sc.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^\S+\s+student\s+students\s+10\.77\.0\.1 .*SMB3_11\s+AES-`)
	var sess string
	if !poll.Wait(10*time.Second, func() bool { sess, _ = s.Sessions(); return line.MatchString(sess) }) {
		t.Errorf("smbstatus during the student's session:\n%s", sess)
	}
	in.Close()
	_ = sc.Wait()
	if !poll.Wait(10*time.Second, func() bool { sess, _ = s.Sessions(); return !strings.Contains(sess, "student") }) {
		t.Errorf("smbstatus after the session:\n%s", sess)
	}
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "student:x:1234567") {
		t.Error("the host's /etc/passwd has the server's user")
	}
}
