package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/nfsenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/smbtest"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The university's home server of the desktop test: nfs-ganesha in a namespace of its own
// (its rpcbind and port 2049 would collide with the boot server's in the lab's), on the
// lab's bridge at homeServerIP, exporting a read-write directory as /export/homes with
// the student's home (uid 1234567, mode 0700) in it. The same directory is the share
// "users" of an SMB 3 server there (smbd, encryption required), as an Active Directory
// site's file server would serve it: the student's home over CIFS (cifsHomes), with
// their login password.
const (
	homeServerIP = "10.20.0.5"
	homeShare    = "users"
)

type homeServer struct {
	*nfsenv.Server
	smb *smbtest.Server
	dir string // the exported directory on this machine
}

func startHomeServer(t testing.TB, l *bootlab.Lab) *homeServer {
	t.Helper()
	ns, err := netns.New("homes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	if err := l.NS.AddVeth("vhomes", bootlab.Bridge, ns, "eth0", homeServerIP+"/24"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	// smbd enters the share as the student.
	os.Chmod(filepath.Dir(dir), 0o711)
	home := filepath.Join(dir, "student")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 1234567, 1234500); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	s := nfsenv.StartT(t, nfsenv.Config{NS: ns, Addr: homeServerIP, Export: dir, Pseudo: "/export/homes", ReadWrite: true, Dir: work})
	smb := smbtest.StartT(t, smbtest.Options{Addr: homeServerIP, Share: homeShare, Dir: dir, Command: ns.Command,
		Users: []smbtest.User{{Name: "student", UID: 1234567, GID: 1234500, Group: "students", Password: "ldap-pw"}}})
	return &homeServer{Server: s, smb: smb, dir: dir}
}

// cifsHomes: the site admin moves the homes to the SMB server (site export, edit,
// apply), with SMB 3.1.1 and encryption (seal): the student's files and the NTLMSSP
// exchange of their password never cross the network in clear. PCs take it at their
// next boot.
func cifsHomes(t *testing.T, l *bootlab.Lab) {
	t.Helper()
	editSite(t, l, func(site *model.Site) {
		site.Homes = &model.Homes{Type: model.HomesCIFS, Server: homeServerIP, Path: homeShare + "/" + model.HomesUser, Options: "vers=3.1.1,seal"}
	})
}

// checkCIFSHome: in the student's console session after cifsHomes, their home is their
// directory of the SMB share, mounted with their login password over an encrypted SMB
// 3.1.1 session; what they saved over NFS before is there, and what they save now arrives
// on the server as theirs.
func checkCIFSHome(t *testing.T, vm *vmtest.VM, hs *homeServer) {
	t.Helper()
	if src, want := homeSource(t, vm), "//"+homeServerIP+"/"+homeShare+"/student"; src != want {
		t.Fatalf("the student's home is mounted from %q, want %s\n%s", src, want, hs.smb.Logs())
	}
	out, err := vm.Console.Run(`awk '$2 == "/home/student" {print "OPTS", $3, $4}' /proc/mounts; cat ~/saved.txt; echo 'saved over smb' > ~/smb.txt`, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^OPTS cifs (\S+)\r?$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(","+m[1]+",", ",vers=3.1.1,") || !strings.Contains(","+m[1]+",", ",seal,") ||
		!strings.Contains(","+m[1]+",", ",username=student,") || !strings.Contains(","+m[1]+",", ",uid=1234567,") ||
		!strings.Contains(","+m[1]+",", ",file_mode=0600,") || !strings.Contains(","+m[1]+",", ",dir_mode=0700,") {
		t.Fatalf("the home's mount: want cifs with vers=3.1.1, seal, username=student, uid=1234567, file_mode=0600, dir_mode=0700:\n%s", out)
	}
	if !strings.Contains(out, "saved by student") {
		t.Fatalf("the file saved over NFS, read over SMB: %q", out)
	}
	f := filepath.Join(hs.dir, "student", "smb.txt")
	if !poll.Wait(10*time.Second, func() bool { b, _ := os.ReadFile(f); return string(b) == "saved over smb\n" }) {
		b, err := os.ReadFile(f)
		t.Fatalf("smb.txt on the server: %q %v", b, err)
	}
	fi, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	if uid, gid := owner(fi); uid != 1234567 || gid != 1234500 {
		t.Errorf("smb.txt on the server is owned by %d:%d, want the student's 1234567:1234500", uid, gid)
	}
	// The server's view: the student's session from desk1, encrypted.
	sess, err := hs.smb.Sessions()
	if err != nil || !regexp.MustCompile(`(?m)\bstudent\b.*10\.20\.0\.21.*SMB3_11.*AES-`).MatchString(sess) {
		t.Errorf("smbstatus: no encrypted SMB 3.1.1 session of student from desk1: %v\n%s", err, sess)
	}
}

// homesSite is the site file's homes: the student's home from the home server over NFS.
func homesSite() string {
	return fmt.Sprintf("homes: {type: nfs, server: %s, path: \"/export/homes/%%(USER)\"}\n", homeServerIP)
}

// homeSource is the source of /home/student in the console session's view ("" when it
// is not a mount point).
func homeSource(t *testing.T, vm *vmtest.VM) string {
	t.Helper()
	out, err := vm.Console.Run(`awk '$5 == "/home/student" {print "MOUNT", $(NF-1)}' /proc/self/mountinfo`, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MOUNT (\S+)\r?$`).FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return m[1]
}

// checkServerHome: in the student's console session, their home is the server's
// directory, and what they save there arrives on the server as theirs.
func checkServerHome(t *testing.T, vm *vmtest.VM, hs *homeServer) {
	t.Helper()
	src := homeSource(t, vm)
	if want := homeServerIP + ":/export/homes/student"; src != want {
		t.Fatalf("the student's home is mounted from %q, want %s", src, want)
	}
	if _, err := vm.Console.Run("echo 'saved by student' > ~/saved.txt", time.Minute); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(hs.dir, "student", "saved.txt"))
	if err != nil {
		t.Fatalf("the file the student saved is not on the home server: %v", err)
	}
	if uid, gid := owner(fi); uid != 1234567 || gid != 1234500 {
		t.Errorf("saved.txt on the server is owned by %d:%d, want the student's 1234567:1234500", uid, gid)
	}
	if b, _ := os.ReadFile(filepath.Join(hs.dir, "student", "saved.txt")); string(b) != "saved by student\n" {
		t.Errorf("saved.txt on the server holds %q", b)
	}
}

// consoleLogin logs the student in with password at the serial console's next prompt.
func consoleLogin(t testing.TB, vm *vmtest.VM, expect func(string, time.Duration), password string) {
	t.Helper()
	expect(`login: `, 2*time.Minute)
	loginAtPrompt(t, vm, expect, password)
}

// loginAtPrompt logs the student in with password at a login prompt already on the
// console.
func loginAtPrompt(t testing.TB, vm *vmtest.VM, expect func(string, time.Duration), password string) {
	t.Helper()
	if err := vm.Console.Send("student"); err != nil {
		t.Fatal(err)
	}
	expect(`Password:`, 2*time.Minute)
	if err := vm.Console.Send(password); err != nil {
		t.Fatal(err)
	}
	// The shell's prompt: what is typed before it would go to login, not to the session.
	expect(`student@desk1:~\$ `, 2*time.Minute)
}

// homeAge is how long ago the NFS client mounted /home/student (the age in
// /proc/self/mountstats), -1 when it is not an NFS mount.
func homeAge(t *testing.T, vm *vmtest.VM) time.Duration {
	t.Helper()
	out, err := vm.Console.Run(`awk '$1 == "device" {m = ($5 == "/home/student")} m && $1 == "age:" {print "AGE", $2; exit}' /proc/self/mountstats`, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^AGE (\d+)\r?$`).FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	s, _ := strconv.Atoi(m[1])
	return time.Duration(s) * time.Second
}

// checkHomeLifecycle, after every session of the student ended: a new login mounts the
// home afresh (its NFS mount is younger than the logout: the last logout unmounted it);
// with the home server down, a login still succeeds, into a temporary home that says so.
// Leaves the student logged out at the prompt and the server running.
func checkHomeLifecycle(t *testing.T, vm *vmtest.VM, hs *homeServer, expect func(string, time.Duration)) {
	t.Helper()
	// The last logout ends the session, then logind stops the user's systemd manager, the
	// home's last user (pam_mount counts it): the unmount follows within moments, so a
	// login may still find the old mount; it logs out and tries again, for a minute.
	expect(`login: `, 2*time.Minute)
	loggedOut := time.Now()
	for {
		loginAtPrompt(t, vm, expect, "ldap-pw")
		age := homeAge(t, vm)
		if age < 0 {
			t.Fatal("after logging in again, /home/student is not an NFS mount")
		}
		if age <= time.Since(loggedOut)+2*time.Second {
			t.Logf("a fresh home mount %v after the last logout", time.Since(loggedOut).Round(time.Second))
			break
		}
		if time.Since(loggedOut) > time.Minute {
			t.Fatalf("a minute after the student logged out everywhere, the home's NFS mount is %v old: the last logout did not unmount it", age)
		}
		if err := vm.Console.Send("exit"); err != nil {
			t.Fatal(err)
		}
		expect(`login: `, 2*time.Minute)
	}
	if out, err := vm.Console.Run("cat ~/saved.txt", time.Minute); err != nil || !strings.Contains(out, "saved by student") {
		t.Fatalf("the saved file after logging in again: %v %q", err, out)
	}
	if err := vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	// The server goes down once the logout is complete (the prompt is back): the test is
	// of a login while it is down, not of a logout racing its shutdown.
	expect(`login: `, 2*time.Minute)
	hs.Stop()
	start := time.Now()
	loginAtPrompt(t, vm, expect, "ldap-pw")
	t.Logf("login with the home server down: %s", time.Since(start).Round(100*time.Millisecond))
	if age := homeAge(t, vm); age >= 0 {
		t.Fatalf("with the home server down, /home/student is an NFS mount (%v old)", age)
	}
	out, err := vm.Console.Run("cat ~/HOME-NOT-SAVED.txt", time.Minute)
	if err != nil || !strings.Contains(out, homeServerIP) {
		t.Fatalf("the temporary home's notice: %v %q", err, out)
	}
	if err := vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	if err := hs.Start(); err != nil {
		t.Fatal(err)
	}
}

// owner is a file's numeric owner and group.
func owner(fi os.FileInfo) (uid, gid uint32) {
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}
