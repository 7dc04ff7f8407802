// Package ldapstore keeps the site in OpenLDAP, the only store. The DIT and schema are
// described in sitemgmt/ldap/README.md.
//
// Load reads the whole site in one paged subtree search. Apply writes the difference
// between two sites entity by entity in model.Diff's safe order, so that a failure half
// way leaves a directory in which every reference still points to an existing entry.
// Users (ou=people) are outside the site model: PutUser and Authenticate handle them.
package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
)

// Config says where the directory is and how the service binds.
type Config struct {
	URL          string // ldap://host:port or ldaps://host:port
	BaseDN       string // e.g. dc=example,dc=org; the site lives under ou=overtime,BaseDN
	BindDN       string // service account (or the rootdn in a throwaway setup)
	BindPassword string
	// Timeout bounds each LDAP request (and dialling); default 30 s. go-ldap does not
	// take a context per request, so this is what stops a hung server from blocking.
	Timeout time.Duration
}

// ErrNotInitialised is returned by Load (and user operations) when the directory has no
// Overtime site entry yet.
var ErrNotInitialised = errors.New("directory not initialised: run overtime ldap init")

// ErrInvalidCredentials is the only thing Authenticate says about a failed login: the
// directory said no. It has an InvalidCredentials method so that callers that only see
// the service.Backend interface (the API) can tell "said no" from "could not be asked"
// (any other error, e.g. an *UnavailableError) without importing this package.
var ErrInvalidCredentials error = invalidCredentialsError("invalid credentials")

type invalidCredentialsError string

func (e invalidCredentialsError) Error() string          { return string(e) }
func (invalidCredentialsError) InvalidCredentials() bool { return true }

// UnavailableError says the directory could not be asked: the connection failed or the
// server answered busy, unavailable or timed out. It has an Unavailable method for
// callers that only see the service.Backend interface.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string   { return "directory unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error   { return e.Err }
func (*UnavailableError) Unavailable() bool { return true }

// isUnavailable reports whether err means the directory could not be asked, as opposed
// to an answer (a refusal, a missing entry...).
func isUnavailable(err error) bool {
	return ldap.IsErrorWithCode(err, ldap.ErrorNetwork) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultBusy) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultUnavailable) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultServerDown) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultTimeout) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultConnectError) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Store is a connection to the directory. It is safe for concurrent use: go-ldap
// multiplexes requests over one connection, which is replaced when it breaks.
type Store struct {
	cfg Config
	dn  layout

	mu   sync.Mutex
	conn *ldap.Conn

	// beforeWrite, when set (tests), runs before each write of Apply; an error from it
	// stops Apply as a failed write would.
	beforeWrite func(i int, c model.Change) error
}

// Open connects and binds as the service account.
func Open(cfg Config) (*Store, error) {
	if cfg.URL == "" || cfg.BaseDN == "" {
		return nil, errors.New("ldapstore: URL and base DN are required")
	}
	if _, err := ldap.ParseDN(cfg.BaseDN); err != nil {
		return nil, fmt.Errorf("ldapstore: base DN %q: %w", cfg.BaseDN, err)
	}
	if cfg.BindDN != "" && cfg.BindPassword == "" {
		// An empty password would be an unauthenticated bind (RFC 4513 5.1.2): it
		// "succeeds" with anonymous rights and every write then fails obscurely.
		return nil, errors.New("ldapstore: bind password is empty")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	s := &Store{cfg: cfg, dn: newLayout(cfg.BaseDN)}
	if _, err := s.getConn(); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the connection. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

func (s *Store) dial() (*ldap.Conn, error) {
	c, err := ldap.DialURL(s.cfg.URL, ldap.DialWithDialer(&net.Dialer{Timeout: s.cfg.Timeout}))
	if err != nil {
		return nil, fmt.Errorf("ldapstore: connect %s: %w", s.cfg.URL, err)
	}
	c.SetTimeout(s.cfg.Timeout)
	return c, nil
}

// getConn returns the service connection, dialling and binding a new one when there is
// none or the old one has been closed (server restart, idle timeout, network error).
func (s *Store) getConn() (*ldap.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.conn.IsClosing() {
		return s.conn, nil
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	c, err := s.dial()
	if err != nil {
		return nil, err
	}
	if s.cfg.BindDN != "" {
		if err := c.Bind(s.cfg.BindDN, s.cfg.BindPassword); err != nil {
			c.Close()
			return nil, fmt.Errorf("ldapstore: bind as %s: %w", s.cfg.BindDN, err)
		}
	}
	s.conn = c
	return c, nil
}

// dropConn forgets c if it is still the current connection, so the next call redials.
func (s *Store) dropConn(c *ldap.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == c {
		s.conn.Close()
		s.conn = nil
	}
}

// do runs f on the service connection. If the connection turns out to be broken (a
// network error: the server restarted, a proxy dropped an idle connection), it
// reconnects once and runs f again; f must therefore be safe to repeat (see write).
func (s *Store) do(ctx context.Context, f func(c *ldap.Conn) error) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var c *ldap.Conn
		if c, err = s.getConn(); err != nil {
			return err
		}
		if err = f(c); err == nil || !isNetworkError(err) {
			return err
		}
		s.dropConn(c)
	}
	return err
}

func isNetworkError(err error) bool {
	return ldap.IsErrorWithCode(err, ldap.ErrorNetwork)
}

// layout holds the DNs of the DIT (see sitemgmt/ldap/README.md).
type layout struct {
	base, site                                                          string
	pools, hosts, bootServers, modes, images, exceptions, roles, people string
	peopleDN                                                            *ldap.DN // parsed, for member DNs
}

func newLayout(base string) layout {
	site := "ou=overtime," + base
	people, _ := ldap.ParseDN("ou=people," + site) // base was parsed by Open
	return layout{
		peopleDN:    people,
		base:        base,
		site:        site,
		pools:       "ou=pools," + site,
		hosts:       "ou=hosts," + site,
		bootServers: "ou=bootservers," + site,
		modes:       "ou=modes," + site,
		images:      "ou=images," + site,
		exceptions:  "ou=exceptions," + site,
		roles:       "ou=roles," + site,
		people:      "ou=people," + site,
	}
}

// containers are created by Init, in this order.
func (l layout) containers() []string {
	return []string{l.pools, l.hosts, l.bootServers, l.modes, l.images, l.exceptions, l.roles, l.people}
}

// Names are validated before they get here (model.ValidName and friends allow no DN
// metacharacters); escaping anyway means a name can never change the shape of a DN.
func (l layout) pool(n string) string       { return "cn=" + ldap.EscapeDN(n) + "," + l.pools }
func (l layout) host(n string) string       { return "cn=" + ldap.EscapeDN(n) + "," + l.hosts }
func (l layout) bootServer(n string) string { return "cn=" + ldap.EscapeDN(n) + "," + l.bootServers }
func (l layout) mode(n string) string       { return "cn=" + ldap.EscapeDN(n) + "," + l.modes }
func (l layout) image(n string) string      { return "cn=" + ldap.EscapeDN(n) + "," + l.images }
func (l layout) exception(n string) string  { return "cn=" + ldap.EscapeDN(n) + "," + l.exceptions }
func (l layout) role(n string) string       { return "cn=" + ldap.EscapeDN(n) + "," + l.roles }
func (l layout) user(uid string) string     { return "uid=" + ldap.EscapeDN(uid) + "," + l.people }
func (l layout) version(image, v string) string {
	return "otVersion=" + ldap.EscapeDN(v) + "," + l.image(image)
}

// entityDN is the DN of the entry a change writes.
func (l layout) entityDN(kind, name string) string {
	switch kind {
	case model.EntitySite:
		return l.site
	case model.EntityPool:
		return l.pool(name)
	case model.EntityHost:
		return l.host(name)
	case model.EntityBootServer:
		return l.bootServer(name)
	case model.EntityMode:
		return l.mode(name)
	case model.EntityImage:
		return l.image(name)
	case model.EntityImageVersion:
		im, v := model.SplitImageVersionName(name)
		return l.version(im, v)
	case model.EntityException:
		return l.exception(name)
	case model.EntityRole:
		return l.role(name)
	}
	return ""
}

// uidOf extracts the uid from a member DN uid=X,ou=people,...; ok is false for anything
// else (including the empty DN that stands for "no members", see roleEntry).
func (l layout) uidOf(dn string) (string, bool) {
	if dn == "" {
		return "", false
	}
	d, err := ldap.ParseDN(dn)
	if err != nil || len(d.RDNs) < 2 || len(d.RDNs[0].Attributes) != 1 || !strings.EqualFold(d.RDNs[0].Attributes[0].Type, "uid") {
		return "", false
	}
	if l.peopleDN == nil || !(&ldap.DN{RDNs: d.RDNs[1:]}).EqualFold(l.peopleDN) {
		return "", false
	}
	return d.RDNs[0].Attributes[0].Value, true
}
