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
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Config says where the directory is and how the service binds.
type Config struct {
	// URL is the directory server: ldap://host:port or ldaps://host:port, or several
	// separated by spaces or commas as in ldap.conf's URI ("ldap://a ldap://b"). With
	// several, the store uses the first that answers and fails over to the next when
	// a server cannot be reached (see Store).
	URL string
	// URLs are more servers, tried after those in URL.
	URLs         []string
	BaseDN       string // e.g. dc=example,dc=org; the site lives under ou=overtime,BaseDN
	BindDN       string // service account (or the rootdn in a throwaway setup)
	BindPassword string
	// Timeout bounds each LDAP request (and dialling); default 30 s. go-ldap does not
	// take a context per request, so this is what stops a hung server from blocking.
	Timeout time.Duration
	// RetryPrimary is how long the store stays on a server it failed over to before it
	// tries the earlier ones of the list again; default 30 s.
	RetryPrimary time.Duration
}

// Servers returns the servers of a configuration in the order the store tries them:
// URL's (split at spaces and commas), then URLs, each once.
func (c Config) Servers() []string {
	var out []string
	add := func(u string) {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	for _, u := range strings.FieldsFunc(c.URL, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		add(u)
	}
	for _, u := range c.URLs {
		add(strings.TrimSpace(u))
	}
	return out
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

// UnavailableError says the directory could not be asked: no server of the list could
// be reached, or each answered busy, unavailable or timed out. It has an Unavailable
// method for callers that only see the service.Backend interface.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string   { return "directory unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error   { return e.Err }
func (*UnavailableError) Unavailable() bool { return true }

// isUnavailable reports whether err means the directory could not be asked, as opposed
// to an answer (a refusal, a missing entry...). The store fails over on such errors, so
// one that reaches a caller means every server failed.
func isUnavailable(err error) bool {
	return serverFailed(err) || errors.Is(err, context.DeadlineExceeded)
}

// serverFailed reports whether err means this server could not do the operation (the
// connection failed, or the server said it is busy, unavailable or shutting down), so
// that another server should be asked.
func serverFailed(err error) bool {
	return ldap.IsErrorAnyOf(err, ldap.ErrorNetwork, ldap.LDAPResultBusy, ldap.LDAPResultUnavailable,
		ldap.LDAPResultServerDown, ldap.LDAPResultTimeout, ldap.LDAPResultConnectError) ||
		isSendError(err)
}

// isSendError recognises go-ldap's errors for a connection that broke under a request:
// it could not write the request (broken pipe, connection reset) or the connection
// closed before the answer came (EOF: the server went away). go-ldap (v3.4) returns
// them as plain errors, not as ErrorNetwork, and after a failed write keeps the
// connection open, so without this a store kept sending on a dead connection.
func isSendError(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "unable to send request") || strings.Contains(m, "unable to read LDAP response packet")
}

// Store is a connection to the directory. It is safe for concurrent use: go-ldap
// multiplexes requests over one connection, which is replaced when it breaks.
//
// With several servers (multi-provider replicas of one another, see
// sitemgmt/ldap/README.md), the connection goes to the first of the list that answers.
// When a server fails (it refuses the connection, the connection breaks, a request times
// out, the server answers busy or unavailable), it is marked down and requests move to
// the next; reads, binds and writes alike, so that a caller sees "unavailable" only
// when every server failed. A server marked down is skipped for RetryPrimary; after
// that, a background probe connects to the earlier servers and moves the connection
// back to the first that answers and has caught up with the current one (its
// contextCSN), so that load returns to the preferred server when it is back, and reads
// after the move see what was written before it.
type Store struct {
	cfg  Config
	urls []string
	dn   layout

	mu      sync.Mutex
	conn    *ldap.Conn
	connIdx int         // which of urls conn talks to
	downAt  []time.Time // per server: when it last failed; zero when not known to be down
	probeAt time.Time   // when the probe for the earlier servers may next run
	probing bool

	// switching is held shared by each Apply for its writes and exclusively by the
	// probe while it moves the connection back, so that one Apply's writes stay on one
	// server (see run) and a pending move is not starved by back-to-back Applies.
	switching sync.RWMutex

	now func() time.Time // the clock (tests move it)

	// beforeWrite, when set (tests), runs before each write of Apply; an error from it
	// stops Apply as a failed write would.
	beforeWrite func(i int, c model.Change) error
}

// Open connects and binds as the service account.
func Open(cfg Config) (*Store, error) {
	urls := cfg.Servers()
	if len(urls) == 0 || cfg.BaseDN == "" {
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
	if cfg.RetryPrimary <= 0 {
		cfg.RetryPrimary = 30 * time.Second
	}
	s := &Store{cfg: cfg, urls: urls, dn: newLayout(cfg.BaseDN), downAt: make([]time.Time, len(urls)), now: time.Now}
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

// Server returns the URL of the server the service connection talks to ("" when there
// is none): for logs, health reports and tests.
func (s *Store) Server() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return ""
	}
	return s.urls[s.connIdx]
}

func (s *Store) dial(url string) (*ldap.Conn, error) {
	c, err := ldap.DialURL(url, ldap.DialWithDialer(&net.Dialer{Timeout: s.cfg.Timeout}))
	if err != nil {
		return nil, fmt.Errorf("ldapstore: connect %s: %w", url, err)
	}
	c.SetTimeout(s.cfg.Timeout)
	return c, nil
}

// dialBind connects to one server and binds as the service account.
func (s *Store) dialBind(url string) (*ldap.Conn, error) {
	c, err := s.dial(url)
	if err != nil {
		return nil, err
	}
	if s.cfg.BindDN != "" {
		if err := c.Bind(s.cfg.BindDN, s.cfg.BindPassword); err != nil {
			c.Close()
			return nil, fmt.Errorf("ldapstore: bind as %s on %s: %w", s.cfg.BindDN, url, err)
		}
	}
	return c, nil
}

// order returns the server indexes to try: those not known to be down (or down for
// RetryPrimary already) in list order, first then the one prefer names if it is among
// them; the servers known to be down come last, as a last resort rather than never.
func (s *Store) order(prefer int) []int {
	now := s.now()
	var up, down []int
	if prefer >= 0 && s.isUp(prefer, now) {
		up = append(up, prefer)
	}
	for i := range s.urls {
		switch {
		case i == prefer && s.isUp(i, now):
		case s.isUp(i, now):
			up = append(up, i)
		default:
			down = append(down, i)
		}
	}
	return append(up, down...)
}

func (s *Store) isUp(i int, now time.Time) bool {
	return s.downAt[i].IsZero() || now.Sub(s.downAt[i]) >= s.cfg.RetryPrimary
}

// markDown records that server i failed. Called with s.mu held.
func (s *Store) markDown(i int) {
	s.downAt[i] = s.now()
}

// getConn returns the service connection, connecting when there is none or the old one
// has been closed (server restart, idle timeout, network error): to the servers in
// order, skipping those known to be down. The error, when no server could be reached,
// wraps every server's error (network errors: isUnavailable holds).
func (s *Store) getConn() (*ldap.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.conn.IsClosing() {
		s.maybeProbe()
		return s.conn, nil
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	// Dialling under the lock: concurrent callers wait for this connection instead of
	// each opening one of their own.
	var errs []error
	for _, i := range s.order(-1) {
		c, err := s.dialBind(s.urls[i])
		if err != nil {
			if !serverFailed(err) {
				// An answer (the service password is wrong): another server would
				// say the same; failing over would hide a misconfiguration.
				return nil, err
			}
			s.markDown(i)
			errs = append(errs, err)
			continue
		}
		s.conn, s.connIdx, s.downAt[i] = c, i, time.Time{}
		if i > 0 {
			s.probeAt = s.now().Add(s.cfg.RetryPrimary)
		}
		return c, nil
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("ldapstore: no directory server answered: %w", errors.Join(errs...))
}

// failed handles an error of an operation on c: the connection is dropped if it is
// still the current one, so that the next call connects anew. A server that timed out
// or answered busy/unavailable is also marked down, so that the next connection goes
// elsewhere; a broken connection alone is not (an idle connection dropped by a
// firewall says nothing about the server): the redial finds out.
func (s *Store) failed(c *ldap.Conn, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != c {
		return
	}
	if !(ldap.IsErrorWithCode(err, ldap.ErrorNetwork) || isSendError(err)) || strings.Contains(err.Error(), "timed out") {
		s.markDown(s.connIdx)
	}
	s.conn.Close()
	s.conn = nil
}

// do runs f on the service connection. If the server fails under it (serverFailed: the
// server restarted or died, a proxy dropped an idle connection, a timeout, busy), it
// runs f again on a new connection, to the same server if it answers, else to the next
// (getConn); f must therefore be safe to repeat (see write). Every server gets its
// chance before the error is returned.
func (s *Store) do(ctx context.Context, f func(c *ldap.Conn) error) error {
	var err error
	for attempt := 0; attempt <= len(s.urls); attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var c *ldap.Conn
		if c, err = s.getConn(); err != nil {
			return err
		}
		if err = f(c); err == nil || !serverFailed(err) {
			return err
		}
		s.failed(c, err)
	}
	return err
}

// maybeProbe starts the probe for the earlier servers when the connection is not on the
// first server and RetryPrimary has passed. Called with s.mu held.
func (s *Store) maybeProbe() {
	if s.connIdx == 0 || s.probing || s.now().Before(s.probeAt) {
		return
	}
	s.probing = true
	s.probeAt = s.now().Add(s.cfg.RetryPrimary)
	cur, idx := s.conn, s.connIdx
	go s.probe(cur, idx)
}

// probe connects to the servers before idx in order and moves the service connection
// to the first that answers once it has caught up with what the current server held
// when the probe began (contextCSN; with writes going on all the time, "caught up with
// the current server" would never hold). It runs in the background so that no request
// waits for a server that is still down. The old connection is closed only after
// Timeout, so that requests already sent on it finish.
func (s *Store) probe(cur *ldap.Conn, idx int) {
	defer func() {
		s.mu.Lock()
		s.probing = false
		s.mu.Unlock()
	}()
	target := contextCSN(cur, s.cfg.BaseDN)
	for i := 0; i < idx; i++ {
		c, err := s.dialBind(s.urls[i])
		if err != nil {
			s.mu.Lock()
			s.markDown(i)
			s.mu.Unlock()
			continue
		}
		// Back, but maybe still replicating: reads there would miss recent writes.
		// Replication runs at network speed, so wait for it a little; if it takes
		// longer, the next probe (RetryPrimary later) looks again.
		deadline := time.Now().Add(s.cfg.Timeout)
		for !caughtUp(contextCSN(c, s.cfg.BaseDN), target) {
			if time.Now().After(deadline) {
				c.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.switching.Lock() // waits for Applies in progress, holds back new ones
		s.mu.Lock()
		if s.conn != cur {
			// The connection failed over meanwhile; the next probe starts afresh.
			s.mu.Unlock()
			s.switching.Unlock()
			c.Close()
			return
		}
		s.conn, s.connIdx, s.downAt[i] = c, i, time.Time{}
		s.mu.Unlock()
		s.switching.Unlock()
		time.AfterFunc(s.cfg.Timeout, func() { cur.Close() })
		return
	}
}

// contextCSN reads the contextCSN values of the suffix entry (one per provider's
// serverID, kept by syncprov); nil when the entry has none or they cannot be read.
func contextCSN(c *ldap.Conn, base string) []string {
	res, err := c.Search(ldap.NewSearchRequest(base, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 1, 0, false,
		"(objectClass=*)", []string{"contextCSN"}, nil))
	if err != nil || len(res.Entries) != 1 {
		return nil
	}
	return res.Entries[0].GetAttributeValues("contextCSN")
}

// caughtUp reports whether a server whose contextCSN values are cand has every change
// the server with cur has: for each serverID in cur, cand's CSN for it is at least as
// new. CSNs (YYYYmmddHHMMSS.uuuuuuZ#count#sid#mod) compare as strings for one sid.
func caughtUp(cand, cur []string) bool {
	sid := func(csn string) string {
		if f := strings.Split(csn, "#"); len(f) == 4 {
			return f[2]
		}
		return ""
	}
	have := map[string]string{}
	for _, c := range cand {
		have[sid(c)] = c
	}
	for _, c := range cur {
		if have[sid(c)] < c {
			return false
		}
	}
	return true
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
