// Package smbtest runs a throwaway SMB file server (Debian's smbd, Samba as a standalone
// server) for the tests of CIFS homes: one share, served on one address of a network
// namespace, to users who exist only for the server. Stopped when the test ends.
//
// A file server of an Active Directory site authenticates its users against the domain;
// this one keeps their SMB passwords itself (tdbsam), which is what a client sees alike:
// NTLMSSP with the user's login password. Samba maps an SMB user to a Unix account and
// writes files as its uid, so the users must be in the server's passwd: smbd (and the
// pdbedit that adds their passwords) run in a private mount namespace whose /etc/passwd
// and /etc/group are the host's plus the test's users, leaving the host's untouched.
// Encryption is required (SMB 3, `smb encrypt = required`): files and the session never
// cross the network in clear, which is what the site's guide asks of a home server.
package smbtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/syncbuf"
)

// Paths of the Debian packages samba (smbd, and pdbedit from samba-common-bin) and
// smbclient.
var (
	SmbdPath      = "/usr/sbin/smbd"
	PdbeditPath   = "/usr/bin/pdbedit"
	SmbclientPath = "/usr/bin/smbclient"
)

// User is an account of the server: an SMB password, and the Unix uid and gid its files
// are written as.
type User struct {
	Name     string
	UID, GID int
	Group    string // the name of GID
	Password string
}

// Options place the server.
type Options struct {
	// Addr is the IPv4 address smbd listens on (port 445); it must be configured in the
	// namespace Command runs in.
	Addr string
	// Share is the name of the one share, e.g. "users"; a client mounts
	// //Addr/Share/NAME for the directory NAME in it.
	Share string
	// Dir is the share's directory (required; its subdirectories are the users' homes).
	Dir string
	// Users the server knows (at least one).
	Users []User
	// Command runs smbd and the test's smbclient (e.g. a network namespace's Command);
	// nil: exec.Command.
	Command func(name string, args ...string) *exec.Cmd
}

// Server is a running smbd.
type Server struct {
	opt  Options
	work string // configuration, databases, logs
	out  syncbuf.Buffer
	cmd  *exec.Cmd
	done chan struct{}
}

func (o *Options) check() error {
	switch {
	case net.ParseIP(o.Addr).To4() == nil:
		return fmt.Errorf("smbtest: Addr %q is not an IPv4 address", o.Addr)
	case o.Share == "" || strings.ContainsAny(o.Share, "[]/\\ \n"):
		return fmt.Errorf("smbtest: Share %q: want a plain share name", o.Share)
	case o.Dir == "":
		return errors.New("smbtest: Dir is required")
	case len(o.Users) == 0:
		return errors.New("smbtest: no Users")
	}
	// smbd enters the share as the user: every directory above it must let others pass
	// (t.TempDir()'s parent is 0700).
	for d := o.Dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("smbtest: Dir: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("smbtest: %s has mode %v: the share's users cannot pass it; chmod o+x", d, st.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, u := range o.Users {
		if u.Name == "" || strings.ContainsAny(u.Name, ":\n ") || u.Group == "" || strings.ContainsAny(u.Group, ":\n ") || strings.Contains(u.Password, "\n") {
			return fmt.Errorf("smbtest: user %+v: want a name, a group and a one-line password", u)
		}
	}
	return nil
}

// StartT starts smbd for a test and stops it when the test ends; it returns once the
// share answers a logged-in client.
func StartT(t testing.TB, opt Options) *Server {
	t.Helper()
	needs.Servers(t, "root (mount namespaces)", "smbd, pdbedit, smbclient (Debian packages samba, smbclient)")
	if err := opt.check(); err != nil {
		t.Fatal(err)
	}
	if opt.Command == nil {
		opt.Command = exec.Command
	}
	s := &Server{opt: opt, work: t.TempDir(), done: make(chan struct{})}
	script, err := s.prepare()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = opt.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-euc", script)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	// smbd's children are in its process group; SIGKILL when the test binary dies.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("smbd: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	u := opt.Users[0]
	var last error
	if !poll.Wait(30*time.Second, func() bool {
		select {
		case <-s.done:
			return true
		default:
		}
		_, last = s.Client(u.Name, u.Password, "ls")
		return last == nil
	}) || s.exited() {
		t.Fatalf("smbd did not serve //%s/%s: %v\n%s", opt.Addr, opt.Share, last, s.Logs())
	}
	return s
}

// prepare writes smb.conf, passwd and group, and returns the script that binds the two
// over the host's, adds the users' SMB passwords and becomes smbd.
func (s *Server) prepare() (string, error) {
	for _, d := range []string{"private", "lock", "state", "cache", "run", "ncalrpc", "log"} {
		if err := os.MkdirAll(filepath.Join(s.work, d), 0o700); err != nil {
			return "", err
		}
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return "", err
	}
	group, err := os.ReadFile("/etc/group")
	if err != nil {
		return "", err
	}
	seen := map[int]bool{}
	for _, u := range s.opt.Users {
		passwd = fmt.Appendf(passwd, "%s:x:%d:%d::/nonexistent:/usr/sbin/nologin\n", u.Name, u.UID, u.GID)
		if !seen[u.GID] {
			group = fmt.Appendf(group, "%s:x:%d:%s\n", u.Group, u.GID, u.Name)
			seen[u.GID] = true
		}
	}
	conf := filepath.Join(s.work, "smb.conf")
	files := map[string][]byte{
		"passwd": passwd,
		"group":  group,
		"smb.conf": fmt.Appendf(nil, `# Written by internal/testenv/smbtest for a test; not a production configuration.
[global]
	server role = standalone server
	workgroup = UNI
	netbios name = HOMES
	disable netbios = yes
	smb ports = 445
	interfaces = %[1]s
	bind interfaces only = yes
	server min protocol = SMB3
	smb encrypt = required
	map to guest = never
	restrict anonymous = 2
	passdb backend = tdbsam:%[2]s/private/passdb.tdb
	private dir = %[2]s/private
	lock directory = %[2]s/lock
	state directory = %[2]s/state
	cache directory = %[2]s/cache
	pid directory = %[2]s/run
	ncalrpc dir = %[2]s/ncalrpc
	log file = %[2]s/log/smbd.log
	log level = 1 auth_audit:3
	load printers = no
	printcap name = /dev/null
	disable spoolss = yes
	obey pam restrictions = no

[%[3]s]
	path = %[4]s
	read only = no
	browseable = no
	create mask = 0600
	directory mask = 0700
`, s.opt.Addr, s.work, s.opt.Share, s.opt.Dir),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(s.work, name), b, 0o644); err != nil {
			return "", err
		}
	}
	var script strings.Builder
	fmt.Fprintf(&script, "mount --bind %s /etc/passwd\nmount --bind %s /etc/group\n",
		shq(filepath.Join(s.work, "passwd")), shq(filepath.Join(s.work, "group")))
	for _, u := range s.opt.Users {
		fmt.Fprintf(&script, "printf '%%s\\n%%s\\n' %[1]s %[1]s | %[2]s -s %[3]s -t -a -u %[4]s >/dev/null\n",
			shq(u.Password), PdbeditPath, shq(conf), shq(u.Name))
	}
	fmt.Fprintf(&script, "exec %s --foreground --no-process-group --debug-stdout -s %s\n", SmbdPath, shq(conf))
	return script.String(), nil
}

// Client runs smbclient's command (e.g. "ls", "get f -") on the share as user with
// password, and returns its output.
func (s *Server) Client(user, password, command string) (string, error) {
	cmd := s.opt.Command(SmbclientPath, "//"+s.opt.Addr+"/"+s.opt.Share, "-m", "SMB3", "--client-protection=encrypt",
		"-U", user, "-c", command)
	// The password in the environment, not on a command line other processes read.
	cmd.Env = append(os.Environ(), "PASSWD="+password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("smbclient %s as %s: %v: %s", command, user, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Sessions is smbstatus's list of the sessions open now (user and client address).
func (s *Server) Sessions() (string, error) {
	out, err := s.opt.Command("nsenter", "--mount", "--target", fmt.Sprint(s.cmd.Process.Pid),
		"smbstatus", "-s", filepath.Join(s.work, "smb.conf"), "-b").CombinedOutput()
	return string(out), err
}

// Logs is smbd's output and log, for failure messages.
func (s *Server) Logs() string {
	b, _ := os.ReadFile(filepath.Join(s.work, "log", "smbd.log"))
	return s.out.String() + string(b)
}

func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Server) stop() {
	if s.exited() {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
