package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/go-ldap/ldap/v3"
)

// Runtime state: the node agents' last heartbeats and the job reports they post
// (sitemgmt/service/state.go decides what is written when). It is not configuration, so
// it is outside the site model: one otState entry per document, under
// ou=state,ou=overtime,BASE:
//
//	cn=pc-a01,ou=heartbeats,ou=state,ou=overtime,BASE   otStateDoc: {"status":{...}}
//	cn=1234@pc-a01,ou=reports,ou=state,ou=overtime,BASE  otStateDoc: {"rev":...,"report":{...}}
//
// The documents are opaque here (JSON the service encodes). Why the directory and not a
// store of its own: the directory is already replicated (multi-provider syncrepl) and
// backed up, so state gets the same failover and durability without a second database
// for a computer centre to run; the service bounds the write load (see its package).
// Every site manager replica follows the subtree with an RFC 4533 Content
// Synchronization search (WatchState), so a heartbeat posted to one replica reaches the
// Slurm feed of another within milliseconds. That needs the syncprov overlay on the
// database, which replication needs anyway.

// State kinds: the container each kind of document lives in.
const (
	StateHeartbeats = "heartbeats"
	StateReports    = "reports"
	StateBootImages = "bootimages" // per boot server: the image versions it holds verified
	StateBooted     = "booted"     // per host: the image versions it was last given
	StatePower      = "power"      // per command: a reboot, power-off or wake and how far it got
	StateAudit      = "audit"      // per entry: the audit trail (power commands, site writes)
	StateSlurm      = "slurm"      // the Slurm controller's version (one document, slurmctld)
)

var stateKinds = []string{StateHeartbeats, StateReports, StateBootImages, StateBooted, StatePower, StateAudit, StateSlurm}

func (l layout) stateRoot() string { return "ou=state," + l.site }
func (l layout) stateKind(kind string) string {
	return "ou=" + ldap.EscapeDN(kind) + "," + l.stateRoot()
}
func (l layout) stateEntry(kind, key string) string {
	return "cn=" + ldap.EscapeDN(key) + "," + l.stateKind(kind)
}

const (
	ocState    = "otState"
	aStateDoc  = "otStateDoc"
	maxKeyLen  = 200
	maxDocSize = 65536 // the schema's bound on otStateDoc
)

func validStateKind(kind string) error {
	if !slices.Contains(stateKinds, kind) {
		return fmt.Errorf("ldapstore: unknown state kind %q", kind)
	}
	return nil
}

// validStateKey: the service's keys are host names and "JOB@HOST"; anything printable and
// short is accepted (the DN is escaped), control characters and empty keys are not.
func validStateKey(key string) error {
	if key == "" || len(key) > maxKeyLen || strings.IndexFunc(key, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("ldapstore: invalid state key %q", key)
	}
	return nil
}

// PutState stores doc as the state document kind/key, replacing what was there. The
// containers are created on first use, so that a directory initialised before state was
// kept needs no migration.
func (s *Store) PutState(ctx context.Context, kind, key string, doc []byte) error {
	if err := validStateKind(kind); err != nil {
		return err
	}
	if err := validStateKey(key); err != nil {
		return err
	}
	if len(doc) == 0 || len(doc) > maxDocSize {
		return fmt.Errorf("ldapstore: state document %s/%s: %d bytes (1..%d)", kind, key, len(doc), maxDocSize)
	}
	dn := s.dn.stateEntry(kind, key)
	mod := ldap.NewModifyRequest(dn, nil)
	mod.Replace(aStateDoc, []string{string(doc)})
	err := s.write(ctx, op{mod: mod})
	if !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return wrapState(err, kind, key)
	}
	add := ldap.NewAddRequest(dn, nil)
	add.Attribute(aObjectClass, []string{ocState})
	add.Attribute(aCN, []string{key})
	add.Attribute(aStateDoc, []string{string(doc)})
	err = s.write(ctx, op{add: add})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		// The containers are missing: make them and add again.
		for _, c := range []string{s.dn.stateRoot(), s.dn.stateKind(kind)} {
			if err := s.ensure(ctx, ou(c)); err != nil {
				return wrapState(err, kind, key)
			}
		}
		err = s.write(ctx, op{add: add})
	}
	if ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		// Another replica added it between our modify and add: replace its value.
		err = s.write(ctx, op{mod: mod})
	}
	return wrapState(err, kind, key)
}

// DeleteState removes kind/key; removing what is not there is not an error.
func (s *Store) DeleteState(ctx context.Context, kind, key string) error {
	if err := validStateKind(kind); err != nil {
		return err
	}
	if err := validStateKey(key); err != nil {
		return err
	}
	err := s.write(ctx, op{del: ldap.NewDelRequest(s.dn.stateEntry(kind, key), nil)})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return nil
	}
	return wrapState(err, kind, key)
}

func wrapState(err error, kind, key string) error {
	if err == nil {
		return nil
	}
	if isUnavailable(err) {
		return &UnavailableError{Err: err}
	}
	return fmt.Errorf("ldapstore: state %s/%s: %w", kind, key, err)
}

// stateSearch selects every state document.
func (s *Store) stateSearch(controls []ldap.Control) *ldap.SearchRequest {
	return ldap.NewSearchRequest(s.dn.stateRoot(), ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		0, 0, false, "(objectClass="+ocState+")", []string{aCN, aStateDoc}, controls)
}

// stateOf decodes an entry's DN into kind and key; ok is false for anything that is not
// a state document (the containers).
func (s *Store) stateOf(dn string) (kind, key string, ok bool) {
	d, err := ldap.ParseDN(dn)
	if err != nil || len(d.RDNs) < 2 {
		return "", "", false
	}
	first, second := d.RDNs[0].Attributes, d.RDNs[1].Attributes
	if len(first) != 1 || len(second) != 1 || !strings.EqualFold(first[0].Type, "cn") || !strings.EqualFold(second[0].Type, "ou") {
		return "", "", false
	}
	kind, key = second[0].Value, first[0].Value
	if validStateKind(kind) != nil || validStateKey(key) != nil {
		return "", "", false
	}
	return kind, key, true
}

// LoadState calls fn for every stored state document, in one paged search. A directory
// without state yet is empty, not an error.
func (s *Store) LoadState(ctx context.Context, fn func(kind, key string, doc []byte)) error {
	var res *ldap.SearchResult
	err := s.do(ctx, func(c *ldap.Conn) error {
		var err error
		res, err = c.SearchWithPaging(s.stateSearch(nil), 1000)
		return err
	})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return nil
	}
	if err != nil {
		if isUnavailable(err) {
			return &UnavailableError{Err: err}
		}
		return fmt.Errorf("ldapstore: load state: %w", err)
	}
	for _, e := range res.Entries {
		if kind, key, ok := s.stateOf(e.DN); ok {
			if doc := e.GetRawAttributeValue(aStateDoc); len(doc) > 0 {
				fn(kind, key, doc)
			}
		}
	}
	return nil
}

// WatchState follows the state documents with a Content Synchronization search in
// refreshAndPersist mode (RFC 4533): first every stored document, then each change as it
// happens, on a connection of its own. fn gets deleted=true (and no doc) for a removed
// document. ready, when not nil, is called once the refresh is complete. WatchState
// returns when ctx ends (nil) or the connection fails (the error: the caller reconnects;
// the refresh then repeats, so fn must be idempotent).
func (s *Store) WatchState(ctx context.Context, ready func(), fn func(kind, key string, doc []byte, deleted bool)) error {
	// The containers must exist for the search base; making them here also means a
	// freshly initialised directory can be watched before the first heartbeat.
	containers := []string{s.dn.stateRoot()}
	for _, k := range stateKinds {
		containers = append(containers, s.dn.stateKind(k))
	}
	for _, c := range containers {
		if err := s.ensure(ctx, ou(c)); err != nil {
			return wrapState(err, "watch", c)
		}
	}
	return s.persist(ctx, s.stateSearch(nil), 64, "state watch", func(e *ldap.Entry, deleted bool) {
		if e == nil {
			if ready != nil {
				ready()
			}
			return
		}
		kind, key, ok := s.stateOf(e.DN)
		if !ok {
			return
		}
		if deleted {
			fn(kind, key, nil, true)
		} else if doc := e.GetRawAttributeValue(aStateDoc); len(doc) > 0 {
			fn(kind, key, doc, false)
		}
	})
}

// persist runs a Content Synchronization search in refreshAndPersist mode (RFC 4533) on
// a connection of its own, the one way both the site's change feed and the state watch
// follow the directory. fn gets every entry with whether its Sync State says deleted,
// and fn(nil, false) once, when the refresh phase ends. persist returns when ctx ends
// (nil) or the connection fails (an UnavailableError: the caller reconnects, and the
// refresh repeats).
func (s *Store) persist(ctx context.Context, req *ldap.SearchRequest, pageSize int, what string, fn func(e *ldap.Entry, deleted bool)) error {
	c, err := s.dialBound()
	if err != nil {
		return &UnavailableError{Err: err}
	}
	defer c.Close()
	// No timeout on this connection: a persistent search waits as long as nothing changes.
	c.SetTimeout(0)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := c.Syncrepl(wctx, req, pageSize, ldap.SyncRequestModeRefreshAndPersist, nil, false)
	refreshing := true
	for r.Next() {
		e := r.Entry()
		if e == nil {
			if !refreshing {
				continue
			}
			for _, ctl := range r.Controls() {
				if info, ok := ctl.(*ldap.ControlSyncInfo); ok && refreshDone(info) {
					refreshing = false
				}
			}
			if !refreshing {
				fn(nil, false)
			}
			continue
		}
		deleted := false
		for _, ctl := range r.Controls() {
			if st, ok := ctl.(*ldap.ControlSyncState); ok && st.State == ldap.SyncStateDelete {
				deleted = true
			}
		}
		fn(e, deleted)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := r.Err(); err != nil {
		return &UnavailableError{Err: err}
	}
	return &UnavailableError{Err: errors.New(what + " ended")}
}

// refreshDone: the Sync Info message that ends the refresh phase of refreshAndPersist
// (refreshDelete or refreshPresent with refreshDone TRUE, or a newcookie after it).
func refreshDone(info *ldap.ControlSyncInfo) bool {
	switch {
	case info.RefreshDelete != nil:
		return info.RefreshDelete.RefreshDone
	case info.RefreshPresent != nil:
		return info.RefreshPresent.RefreshDone
	}
	return false
}

// dialBound opens a new connection bound as the service account (for the state watch,
// which holds its connection for a persistent search), to the first server that answers
// in the store's failover order. With multi-provider replication every provider has the
// whole state, so the watch may follow any of them.
func (s *Store) dialBound() (*ldap.Conn, error) {
	s.mu.Lock()
	order := s.order(s.connIdx)
	s.mu.Unlock()
	var errs []error
	for _, i := range order {
		c, err := s.dialBind(s.urls[i])
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if !serverFailed(err) {
			break
		}
	}
	return nil, errors.Join(errs...)
}
