// Package slapdenv runs a throwaway OpenLDAP slapd with the Overtime schema: for the
// integration tests of the LDAP store (real slapd, no mocks; their testing.TB helpers are
// in internal/testenv/slapdtest) and for `overtime-dev slapd` in `make demo`. It does not
// import the testing package, so that the overtime-dev binary does not link it.
//
// Start writes a private slapd.conf into a directory, starts /usr/sbin/slapd listening on
// 127.0.0.1 only, waits (polling with a deadline) until the server answers an anonymous
// search of the root DSE, and then makes sure the base entry, a service account and a
// replicator account exist. StartReplicated starts N such servers as multi-provider
// (N-way multi-master) replicas of one another. Every database carries the syncprov
// overlay, also a single server's: LDAP Content Synchronization (RFC 4533) searches are
// how replicas and state watchers follow changes.
// Nothing here is meant for production: the database runs without fsync (dbnosync).
package slapdenv

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// Paths of the Debian slapd package; variables so that another layout can be used.
var (
	SlapdPath       = "/usr/sbin/slapd"
	SlapaddPath     = "/usr/sbin/slapadd"
	SystemSchemaDir = "/etc/ldap/schema" // core, cosine, nis, inetorgperson (.schema and .ldif)
	ModuleDir       = "/usr/lib/ldap"    // back_mdb, unique (Debian builds them as modules)
)

// StartTimeout bounds how long Start waits for slapd to answer.
var StartTimeout = 20 * time.Second

// Options configure Start. The zero value is usable.
type Options struct {
	Port      int    // TCP port on 127.0.0.1; 0 picks a free one
	BaseDN    string // suffix of the database; default dc=example,dc=org
	RootPW    string // password of RootDN; default: random
	ServicePW string // password of ServiceDN; default: random
	SchemaDir string // directory holding overtime.schema; default: sitemgmt/ldap of the repository

	// OmitOvertimeSchema starts slapd with the standard schemas only, so that a test can
	// check how the store reacts to a directory without the Overtime schema.
	OmitOvertimeSchema bool

	// The following let a test start a directory that is not Overtime's, e.g. a
	// university's OpenLDAP or a stand-in for Active Directory (sitemgmt/extdir).

	// ExtraSchema are schema files included after the standard ones.
	ExtraSchema []string
	// Modules are loaded from ModuleDir (e.g. "memberof").
	Modules []string
	// DatabaseConfig are lines appended to the database section (overlays, indexes).
	DatabaseConfig []string
	// TLS, when set, gives slapd a certificate: it then offers StartTLS on URL and also
	// listens for ldaps on LDAPSURL.
	TLS *TLSOptions
	// LDAPSPort is the ldaps port with TLS set; 0 picks a free one.
	LDAPSPort int

	// LogLevel is slapd's -d level, written to slapd.log in the directory; default
	// "stats" (one line per connection and operation). "0" logs only errors.
	LogLevel string

	// Replication (set by StartReplicated; a single server leaves them zero). ServerID
	// is this provider's serverID (1..4095), Peers the URLs of the other providers it
	// replicates from, as ReplicatorDN with ReplicatorPW. SyncRetry is slapd's syncrepl
	// retry= value; default "1 +" (every second, forever: a test's outage is short).
	ServerID     int
	Peers        []string
	ReplicatorPW string // password of ReplicatorDN; default: random (StartReplicated shares one)
	SyncRetry    string

	// replica: the data comes from the peers by replication, so bootstrap writes
	// nothing (two providers adding the same base entry independently would give two
	// entries of one DN with different entryUUIDs, a replication conflict).
	replica bool

	// Attached ties slapd's life to the calling process (Linux parent-death signal), so
	// that a test binary killed by a timeout leaves no slapd behind. slapdtest.StartT (internal/testenv/slapdtest) sets it.
	// Without it slapd runs in a session of its own and outlives the caller, as
	// `overtime-dev slapd` needs: stop it with Stop, StopDir or by the PID in slapd.pid.
	Attached bool
}

// TLSOptions are PEM files slapd reads (TLSCertificateFile, TLSCertificateKeyFile,
// TLSCACertificateFile).
type TLSOptions struct {
	CertFile, KeyFile, CAFile string
}

// Server is a running slapd.
type Server struct {
	URL       string // ldap://127.0.0.1:PORT
	Port      int
	LDAPSURL  string // ldaps://127.0.0.1:LDAPSPORT, with Options.TLS only
	LDAPSPort int
	BaseDN    string
	RootDN    string // cn=admin,BASE: the database's rootdn, bypasses all ACLs
	RootPW    string
	ServiceDN string // cn=overtime-service,BASE: the account the store binds as (write access, no password read)
	ServicePW string
	// ReplicatorDN is cn=overtime-replicator,BASE: the account providers bind as to
	// replicate from each other; it reads everything (including userPassword, or
	// passwords would not replicate) and writes nothing.
	ReplicatorDN string
	ReplicatorPW string
	ServerID     int    // 0 for a single server
	Dir          string // the caller's directory: slapd.conf, slapd.pid, slapd.log, db/
	PID          int

	opts     Options
	proc     *os.Process
	done     chan struct{} // closed when an attached slapd has exited (nil when detached)
	stopOnce sync.Once
	stopErr  error
}

// fillPasswords picks random passwords for the accounts the caller left without one.
func (o *Options) fillPasswords() {
	for _, pw := range []*string{&o.RootPW, &o.ServicePW, &o.ReplicatorPW} {
		if *pw == "" {
			*pw = randomPassword()
		}
	}
}

// Start runs slapd in dir (created if missing). An existing database in dir/db is reused,
// so Stop followed by Start on the same directory is a restart with the data kept.
func Start(dir string, opts Options) (*Server, error) {
	if opts.BaseDN == "" {
		opts.BaseDN = "dc=example,dc=org"
	}
	if _, err := ldap.ParseDN(opts.BaseDN); err != nil {
		return nil, fmt.Errorf("slapdenv: base DN %q: %w", opts.BaseDN, err)
	}
	opts.fillPasswords()
	if opts.SyncRetry == "" {
		opts.SyncRetry = "1 +"
	}
	if opts.ServerID < 0 || opts.ServerID > 4095 || (opts.ServerID == 0) != (len(opts.Peers) == 0) {
		return nil, fmt.Errorf("slapdenv: serverID %d with %d peers: a replicated server needs both, a single one neither", opts.ServerID, len(opts.Peers))
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "stats"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o700); err != nil {
		return nil, fmt.Errorf("slapdenv: %w", err)
	}
	schemaDir := opts.SchemaDir
	if schemaDir == "" && !opts.OmitOvertimeSchema {
		if schemaDir, err = FindSchemaDir(); err != nil {
			return nil, err
		}
	}
	s := &Server{
		BaseDN:    opts.BaseDN,
		RootDN:    "cn=admin," + opts.BaseDN,
		RootPW:    opts.RootPW,
		ServiceDN: "cn=overtime-service," + opts.BaseDN,
		ServicePW: opts.ServicePW,
		Dir:       dir,
		opts:      opts,

		ReplicatorDN: "cn=overtime-replicator," + opts.BaseDN,
		ReplicatorPW: opts.ReplicatorPW,
		ServerID:     opts.ServerID,
	}
	// With port 0 we pick a free port and hand it to slapd. Another process can take it
	// in between; then slapd fails to listen and exits, and we try another port.
	attempts := 1
	if opts.Port == 0 {
		attempts = 5
	}
	for i := 0; ; i++ {
		s.Port = opts.Port
		if s.Port == 0 {
			if s.Port, err = freePort(); err != nil {
				return nil, err
			}
		}
		s.URL = fmt.Sprintf("ldap://127.0.0.1:%d", s.Port)
		if opts.TLS != nil {
			s.LDAPSPort = opts.LDAPSPort
			if s.LDAPSPort == 0 {
				if s.LDAPSPort, err = freePort(); err != nil {
					return nil, err
				}
			}
			s.LDAPSURL = fmt.Sprintf("ldaps://127.0.0.1:%d", s.LDAPSPort)
		}
		conf := s.config(schemaDir)
		if err := os.WriteFile(filepath.Join(dir, "slapd.conf"), []byte(conf), 0o600); err != nil {
			return nil, fmt.Errorf("slapdenv: %w", err)
		}
		err = s.launch([]string{"-f", filepath.Join(dir, "slapd.conf")})
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || i+1 >= attempts {
			return nil, err
		}
	}
	if opts.replica {
		return s, nil
	}
	if err := s.bootstrap(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Restart stops slapd and starts it again on the same directory, port and passwords
// (tests use it to break the store's connection).
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	o := s.opts
	o.Port, o.LDAPSPort = s.Port, s.LDAPSPort
	// A restarted provider has its data and catches up with its peers by replication;
	// re-running bootstrap on it would write (the service password) from a directory
	// that may be behind.
	o.replica = o.ServerID != 0
	n, err := Start(s.Dir, o)
	if err != nil {
		return err
	}
	s.PID, s.proc, s.done = n.PID, n.proc, n.done
	s.stopOnce, s.stopErr = sync.Once{}, nil
	return nil
}

var errExited = errors.New("slapd exited during start")

// launch starts slapd with args plus the listener and log level, and waits until it
// answers. slapd runs in the foreground (-d) because OpenLDAP 2.5 writes its log only
// to stderr there (loglevel/logfile do not reach a file when it daemonises); stderr goes
// to slapd.log. Detaching, when wanted, is done here with a new session instead.
func (s *Server) launch(args []string) error {
	logf, err := os.OpenFile(filepath.Join(s.Dir, "slapd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("slapdenv: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	pidfile := filepath.Join(s.Dir, "slapd.pid")
	_ = os.Remove(pidfile) // a stale one would be mistaken for the new server's
	fmt.Fprintf(logf, "--- slapdenv: starting slapd on %s at %s\n", s.URL, time.Now().Format(time.RFC3339))
	listen := s.URL + "/"
	if s.LDAPSURL != "" {
		listen += " " + s.LDAPSURL + "/"
	}
	cmd := exec.Command(SlapdPath, append([]string{"-d", s.opts.LogLevel, "-h", listen}, args...)...)
	cmd.Dir = s.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr(s.opts.Attached)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("slapdenv: start %s: %w", SlapdPath, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	s.proc = cmd.Process
	if s.opts.Attached {
		s.done = exited
	} else {
		// A detached slapd outlives us; Wait still runs so that it is reaped if it
		// exits while we live. Stop then polls the PID instead of this channel.
		s.done = nil
	}

	deadline := time.Now().Add(StartTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ready := rootDSEAnswers(s.URL)
		if ready {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("%w (%v); last log lines:\n%s", errExited, waitErr, s.LogTail(15))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("slapdenv: slapd did not answer on %s within %v; last log lines:\n%s", s.URL, StartTimeout, s.LogTail(15))
		}
	}
	// slapd writes its pidfile before it accepts connections; read it back so that PID
	// is what `kill $(cat slapd.pid)` (make demo-stop) would hit.
	pid, err := ReadPID(s.Dir)
	if err != nil || pid != cmd.Process.Pid {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("slapdenv: pidfile %s: got %d (%v), started %d", pidfile, pid, err, cmd.Process.Pid)
	}
	s.PID = pid
	return nil
}

// rootDSEAnswers reports whether an anonymous search of the root DSE succeeds: that is
// the first thing every client does, so once it works the server is ready.
func rootDSEAnswers(url string) bool {
	c, err := ldap.DialURL(url, ldap.DialWithDialer(&net.Dialer{Timeout: time.Second}))
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetTimeout(2 * time.Second)
	_, err = c.Search(ldap.NewSearchRequest("", ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
		"(objectClass=*)", []string{"namingContexts"}, nil))
	return err == nil
}

// bootstrap creates the base entry and the service account (idempotently, as rootdn),
// and (re)sets the service password so that a restart with a new password works.
func (s *Server) bootstrap() error {
	c, err := ldap.DialURL(s.URL)
	if err != nil {
		return fmt.Errorf("slapdenv: %w", err)
	}
	defer c.Close()
	c.SetTimeout(10 * time.Second)
	if err := c.Bind(s.RootDN, s.RootPW); err != nil {
		return fmt.Errorf("slapdenv: bind as %s: %w", s.RootDN, err)
	}
	base, err := BaseEntry(s.BaseDN)
	if err != nil {
		return err
	}
	if err := c.Add(base); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		return fmt.Errorf("slapdenv: add %s: %w", s.BaseDN, err)
	}
	svc := ldap.NewAddRequest(s.ServiceDN, nil)
	svc.Attribute("objectClass", []string{"applicationProcess", "simpleSecurityObject"})
	svc.Attribute("cn", []string{"overtime-service"})
	svc.Attribute("description", []string{"Overtime site manager service account"})
	svc.Attribute("userPassword", []string{SSHA(s.ServicePW)})
	err = c.Add(svc)
	if ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		mod := ldap.NewModifyRequest(s.ServiceDN, nil)
		mod.Replace("userPassword", []string{SSHA(s.ServicePW)})
		err = c.Modify(mod)
	}
	if err != nil {
		return fmt.Errorf("slapdenv: service account %s: %w", s.ServiceDN, err)
	}
	repl := ldap.NewAddRequest(s.ReplicatorDN, nil)
	repl.Attribute("objectClass", []string{"applicationProcess", "simpleSecurityObject"})
	repl.Attribute("cn", []string{"overtime-replicator"})
	repl.Attribute("description", []string{"Overtime directory replication (read-only)"})
	repl.Attribute("userPassword", []string{SSHA(s.ReplicatorPW)})
	err = c.Add(repl)
	if ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		mod := ldap.NewModifyRequest(s.ReplicatorDN, nil)
		mod.Replace("userPassword", []string{SSHA(s.ReplicatorPW)})
		err = c.Modify(mod)
	}
	if err != nil {
		return fmt.Errorf("slapdenv: replicator account %s: %w", s.ReplicatorDN, err)
	}
	return nil
}

// BaseEntry builds the add request for a suffix entry from the type of its first RDN.
func BaseEntry(baseDN string) (*ldap.AddRequest, error) {
	dn, err := ldap.ParseDN(baseDN)
	if err != nil || len(dn.RDNs) == 0 || len(dn.RDNs[0].Attributes) != 1 {
		return nil, fmt.Errorf("slapdenv: unsupported base DN %q", baseDN)
	}
	rdn := dn.RDNs[0].Attributes[0]
	req := ldap.NewAddRequest(baseDN, nil)
	switch strings.ToLower(rdn.Type) {
	case "dc":
		req.Attribute("objectClass", []string{"domain"})
	case "o":
		req.Attribute("objectClass", []string{"organization"})
	case "ou":
		req.Attribute("objectClass", []string{"organizationalUnit"})
	default:
		return nil, fmt.Errorf("slapdenv: base DN %q: first RDN must be dc=, o= or ou=", baseDN)
	}
	req.Attribute(rdn.Type, []string{rdn.Value})
	return req, nil
}

// config renders slapd.conf.
func (s *Server) config(schemaDir string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	q := strconv.Quote
	w("# Generated by internal/slapdenv for a throwaway test/demo directory. Do not edit.")
	for _, f := range []string{"core", "cosine", "nis", "inetorgperson"} {
		w("include %s", q(filepath.Join(SystemSchemaDir, f+".schema")))
	}
	if !s.opts.OmitOvertimeSchema {
		w("include %s", q(filepath.Join(schemaDir, "overtime.schema")))
	}
	for _, f := range s.opts.ExtraSchema {
		w("include %s", q(f))
	}
	w("modulepath %s", q(ModuleDir))
	for _, m := range s.opts.Modules {
		w("moduleload %s", m)
	}
	if t := s.opts.TLS; t != nil {
		w("TLSCertificateFile %s", q(t.CertFile))
		w("TLSCertificateKeyFile %s", q(t.KeyFile))
		if t.CAFile != "" {
			w("TLSCACertificateFile %s", q(t.CAFile))
		}
	}
	if hasModule("back_mdb") {
		w("moduleload back_mdb")
	}
	unique := hasModule("unique")
	if unique {
		w("moduleload unique")
	}
	// syncprov answers Content Synchronization searches (RFC 4533): the site manager
	// follows its runtime state with one (ldapstore.WatchState), and replication uses it.
	if hasModule("syncprov") {
		w("moduleload syncprov")
	}
	if s.opts.ServerID != 0 {
		// Global: the ID goes into every CSN this server stamps, which is how providers
		// tell their own changes from their peers'.
		w("serverID %d", s.opts.ServerID)
	}
	w("pidfile %s", q(filepath.Join(s.Dir, "slapd.pid")))
	w("argsfile %s", q(filepath.Join(s.Dir, "slapd.args")))
	// slapd hashes passwords set with the Password Modify extended operation.
	w("password-hash {SSHA}")
	// Root DSE and subschema: readable by anyone (clients discover the server with them,
	// `overtime ldap init` checks that the schema is loaded).
	w(`access to dn.base="" by * read`)
	w(`access to dn.base="cn=Subschema" by * read`)
	w("")
	w("database mdb")
	w("maxsize 1073741824")
	w("suffix %s", q(s.BaseDN))
	w("rootdn %s", q(s.RootDN))
	w("rootpw %s", SSHA(s.RootPW))
	w("directory %s", q(filepath.Join(s.Dir, "db")))
	w("dbnosync") // throwaway data: no fsync per write (10k-host applies in seconds)
	// Indexes for every attribute the store and the boot path search by.
	w("index objectClass eq")
	w("index cn,uid,macAddress,ipHostNumber,member eq")
	// syncprov and syncrepl look entries up by these on every change.
	w("index entryCSN,entryUUID eq")
	if !s.opts.OmitOvertimeSchema {
		w("index otPoolName eq")
	}
	// The service loads the whole site (10k+ entries) in one paged search; the default
	// size limit of 500 would cut it.
	w("limits dn.exact=%s size=unlimited time=unlimited", q(s.ServiceDN))
	w("limits dn.exact=%s size=unlimited time=unlimited", q(s.ReplicatorDN))
	// ACLs. Users (inetOrgPerson under ou=people) may only authenticate against their own
	// password; nobody reads userPassword except the rootdn (which bypasses ACLs). The
	// service account may set passwords (Password Modify, "=w": write without read) and
	// writes everything else. The rootdn also works as service account (`make demo`).
	// The replicator reads everything, passwords included (else they would not
	// replicate), and writes nothing: the peers apply what it reads as their rootdn.
	w("access to attrs=userPassword")
	w("\tby dn.exact=%s =w", q(s.ServiceDN))
	w("\tby dn.exact=%s read", q(s.ReplicatorDN))
	w("\tby anonymous auth")
	w("\tby * none")
	w("access to dn.subtree=%s", q(s.BaseDN))
	w("\tby dn.exact=%s write", q(s.ServiceDN))
	w("\tby dn.exact=%s read", q(s.ReplicatorDN))
	w("\tby self read")
	w("\tby * none")
	// Multi-provider: pull every peer's changes (refreshAndPersist: the peer pushes each
	// change as it happens), as the replicator, for the whole suffix. rid is the peer's
	// position, unique within this server. timeout/network-timeout keep a dead peer
	// from holding a replication thread long; retry says how soon a lost peer is tried
	// again, and so how soon a restarted provider catches up.
	for i, peer := range s.opts.Peers {
		w("syncrepl rid=%03d provider=%s bindmethod=simple binddn=%s credentials=%s searchbase=%s type=refreshAndPersist retry=%s timeout=1 network-timeout=1",
			i+1, peer, q(s.ReplicatorDN), s.ReplicatorPW, q(s.BaseDN), q(s.opts.SyncRetry))
	}
	if len(s.opts.Peers) > 0 {
		// Accept writes although syncrepl consumers run here (a plain consumer is
		// read-only and refers writes to its provider).
		w("multiprovider on")
	}
	// syncprov on every database, single servers included: it answers the peers'
	// syncrepl and any client's RFC 4533 sync search (the state watcher). Overlays run
	// in the reverse order of their configuration: configured first, syncprov runs
	// last, next to the database, so unique below refuses a duplicate before syncprov
	// would see it; the checkpoint writes contextCSN to the database every 100 writes
	// or 1 minute, the session log lets a briefly disconnected peer catch up by changes
	// instead of a full refresh.
	if hasModule("syncprov") {
		w("overlay syncprov")
		w("syncprov-checkpoint 100 1")
		w("syncprov-sessionlog 1000")
	}
	// Defence in depth: the store validates MAC/IP uniqueness in Go before writing; the
	// unique overlay also rejects a duplicate written behind its back (ldapmodify).
	if unique && !s.opts.OmitOvertimeSchema {
		hosts := "ou=hosts,ou=overtime," + s.BaseDN
		w("overlay unique")
		w("unique_uri %s", q("ldap:///"+hosts+"?macAddress?sub"))
		w("unique_uri %s", q("ldap:///"+hosts+"?ipHostNumber?sub"))
	}
	for _, l := range s.opts.DatabaseConfig {
		w("%s", l)
	}
	return b.String()
}

// SyncprovOverlay reports whether Start configures the syncprov overlay (the module exists).
func SyncprovOverlay() bool { return hasModule("syncprov") }

// UniqueOverlay reports whether Start configures the unique overlay (the module exists).
func UniqueOverlay() bool { return hasModule("unique") }

func hasModule(name string) bool {
	for _, ext := range []string{".la", ".so"} {
		if _, err := os.Stat(filepath.Join(ModuleDir, name+ext)); err == nil {
			return true
		}
	}
	return false
}

// Stop terminates slapd (SIGTERM, so that it closes the database cleanly; SIGKILL after
// a deadline) and waits until it is gone. It removes nothing: the directory is the
// caller's. Calling it again is harmless.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.proc == nil {
			return
		}
		s.stopErr = stopProcess(s.proc.Pid, s.done)
	})
	return s.stopErr
}

// StopDir stops a slapd started (detached) in dir by an earlier process, using its pidfile.
func StopDir(dir string) error {
	pid, err := ReadPID(dir)
	if err != nil {
		return err
	}
	return stopProcess(pid, nil)
}

// ReadPID reads dir/slapd.pid.
func ReadPID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "slapd.pid"))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("slapdenv: bad pidfile in %s: %q", dir, b)
	}
	return pid, nil
}

// stopProcess sends SIGTERM, then SIGKILL after 10 s, and waits for the exit: through
// done when we are the parent (attached), else by polling the PID.
func stopProcess(pid int, done chan struct{}) error {
	gone := func() bool {
		if done != nil {
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		return !alive(pid)
	}
	if gone() {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("slapdenv: kill %d: %w", pid, err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	kill := time.After(10 * time.Second)
	giveUp := time.After(20 * time.Second)
	for !gone() {
		select {
		case <-done: // nil channel blocks: detached servers rely on the ticker
		case <-tick.C:
		case <-kill:
			_ = syscall.Kill(pid, syscall.SIGKILL)
		case <-giveUp:
			return fmt.Errorf("slapdenv: slapd %d did not exit", pid)
		}
	}
	return nil
}

// alive reports whether pid still runs. A zombie (exited, not yet reaped by a parent that
// is not us) counts as gone.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// Field 3, after "pid (comm)", is the state.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// LogTail returns the last n lines of slapd.log, for error messages.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "slapd.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FindSchemaDir locates sitemgmt/ldap (overtime.schema, overtime.ldif) in the repository:
// $OVERTIME_SCHEMA_DIR, else by walking up from the working directory to the module root
// (go.mod), else relative to this source file (a binary built from this checkout).
func FindSchemaDir() (string, error) {
	ok := func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "overtime.schema"))
		return err == nil
	}
	if d := os.Getenv("OVERTIME_SCHEMA_DIR"); d != "" {
		if ok(d) {
			return d, nil
		}
		return "", fmt.Errorf("slapdenv: $OVERTIME_SCHEMA_DIR=%s holds no overtime.schema", d)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				if c := filepath.Join(d, "sitemgmt", "ldap"); ok(c) {
					return c, nil
				}
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, good := runtime.Caller(0); good {
		if c := filepath.Join(filepath.Dir(file), "..", "..", "sitemgmt", "ldap"); ok(c) {
			return filepath.Clean(c), nil
		}
	}
	return "", errors.New("slapdenv: cannot find sitemgmt/ldap/overtime.schema (run inside the repository or set $OVERTIME_SCHEMA_DIR)")
}

// SSHA hashes a password in slapd's {SSHA} scheme (salted SHA-1), for entries written
// directly (rootpw, the service account). It is what `slappasswd` produces by default.
func SSHA(pw string) string {
	salt := make([]byte, 8)
	_, _ = rand.Read(salt)
	h := sha1.New()
	h.Write([]byte(pw))
	h.Write(salt)
	return "{SSHA}" + base64.StdEncoding.EncodeToString(append(h.Sum(nil), salt...))
}

func randomPassword() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("slapdenv: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
