// Package service is the site manager's core: it keeps a validated, compiled snapshot of
// the site for readers (boot script requests read it without locks or LDAP round trips)
// and funnels every write through one path: clone, change, validate, compile the schedule,
// authorise, diff, write to LDAP in a safe order, swap the snapshot. The snapshot is kept
// current by periodic reloads and the directory's change feed (sitefeed.go).
//
// It also owns the site manager's runtime state, which is not configuration (agents.go):
// the node agents' heartbeats and job reports, kept outside the site model in the
// directory so that restarts and replicas agree (state.go), and the audit trail of site
// writes and power commands (audit.go).
//
// The business operations are methods of one type a concern, reached through Service's
// fields: Bookings (bookings.go), Entities (entities.go), Images (images.go), Hosts (hosts.go), Power (power.go),
// Agents (agents.go), Accounts (directory.go: users, logins and their throttle, host
// credentials, the directories' health) and Slurm (slurm.go: the feed and its long poll,
// reservations, power saving). The HTTP layer only decodes, authenticates, authorises
// through these and encodes around them.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Backend is the store. ldapstore.Store implements it; it is an interface only so that
// the service does not care how the connection is made.
type Backend interface {
	Load(ctx context.Context) (*model.Site, error)
	Apply(ctx context.Context, cur, next *model.Site) ([]model.Change, error)
	Authenticate(ctx context.Context, uid, password string) error
	PutUser(ctx context.Context, uid, displayName, password string) error
	// Directory users (outside the site model): listing, deleting and setting the
	// password of an existing user; an unknown uid is an error with NotFound() true.
	Users(ctx context.Context) ([]model.User, error)
	DeleteUser(ctx context.Context, uid string) error
	SetPassword(ctx context.Context, uid, password string) error
	// Node agent credentials (outside the site model): the stored hash of a host's token
	// ("" = none) and setting or (with "") removing it.
	HostCredential(ctx context.Context, host string) (string, error)
	SetHostCredential(ctx context.Context, host, hash string) error
}

// validatedApplier is a Backend that can write a site without validating it again
// (ldapstore.Store).
type validatedApplier interface {
	ApplyValidated(ctx context.Context, cur, next *model.Site) ([]model.Change, error)
}

// Snapshot is an immutable view of the site. Never modify it; Update builds a new one.
type Snapshot struct {
	Site   *model.Site
	Engine *schedule.Engine
	// Resolver answers "what does host H get now" for this site; every reader that needs
	// a host's mode, boot server, image or guest asks it.
	Resolver *resolve.Resolver
	Loaded   time.Time
}

// HostByMAC finds a host by canonical MAC.
func (s *Snapshot) HostByMAC(mac string) *model.Host { return s.Resolver.HostByMAC(mac) }

// Host finds a host by name (nil: none): Site.Host without the scan.
func (s *Snapshot) Host(name string) *model.Host { return s.Resolver.HostByName(name) }

func newSnapshot(site *model.Site) (*Snapshot, error) {
	eng, err := schedule.Compile(site)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Site: site, Engine: eng, Resolver: resolve.New(site, eng), Loaded: time.Now()}, nil
}

// Service owns the snapshot and serialises writes.
type Service struct {
	backend Backend
	log     *slog.Logger
	writeMu sync.Mutex
	snap    atomic.Pointer[Snapshot]
	agents  agentState // heartbeats and job reports (agents.go)
	audit   auditState // the audit trail of site writes and power commands (audit.go)
	state   StateStore // where they are kept beyond this process (state.go); nil: memory only
	// directory is the outcome of the last contact with the directory: every reload,
	// login and credential check notes it (directory.go, Accounts.Directory tells it).
	directory directoryState
	// feed is the directory's change feed (sitefeed.go).
	feed feedState

	// The named operations, one type a concern. Service itself keeps the snapshot, the
	// one write path (Update) and the runtime state's persistence; the front ends call
	// these and decide nothing themselves.
	Bookings *Bookings // weekly rules and exceptions, with their owners (bookings.go)
	Entities *Entities // whole entities without bookings, removals, the settings (entities.go)
	Images   *Images   // image versions: current, publish, gc, boot servers' copies (images.go)
	Hosts    *Hosts    // what a host gets: its boot answer and agent configuration (hosts.go)
	Power    *Power    // power commands and wakes (power.go)
	Agents   *Agents   // heartbeats, owner state and job reports (agents.go)
	Accounts *Accounts // users, logins and the directories (directory.go)
	Slurm    *Slurm    // the Slurm feed, reservations and power saving (slurm.go)
}

// New loads the site and compiles it. A directory whose content does not validate is
// reported, not served half-understood.
func New(ctx context.Context, b Backend, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.Default()
	}
	s := newService(b, log)
	if err := s.Reload(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// newService is a Service with its concerns wired to it and no snapshot yet (New loads
// one; the package's tests store one of their own).
func newService(b Backend, log *slog.Logger) *Service {
	s := &Service{backend: b, log: log}
	s.Bookings, s.Entities, s.Images, s.Hosts, s.Power = &Bookings{s: s}, &Entities{s: s}, &Images{s: s}, &Hosts{s: s}, &Power{s: s}
	s.Agents, s.Accounts, s.Slurm = &Agents{s: s}, &Accounts{s: s}, &Slurm{s: s}
	return s
}

// Snapshot returns the current snapshot (never nil after New).
func (s *Service) Snapshot() *Snapshot { return s.snap.Load() }

// Reload reads the whole site from LDAP, picking up edits made behind the service's back
// (e.g. ldapmodify). If the directory no longer validates, the previous snapshot is kept
// and the error returned, so a bad manual edit cannot take boot service down.
func (s *Service) Reload(ctx context.Context) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.reloadLocked(ctx)
}

func (s *Service) reloadLocked(ctx context.Context) error {
	site, err := s.backend.Load(ctx)
	// A reload that read the directory proves it reachable, even if the content then
	// fails to validate.
	s.directory.note(err, time.Now())
	if err != nil {
		return err
	}
	return s.installLocked(site)
}

// ReloadEvery reloads periodically until ctx ends; failures are logged and the last good
// snapshot keeps serving.
func (s *Service) ReloadEvery(ctx context.Context, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Reload(ctx); err != nil {
				s.log.Warn("reload failed; serving last good snapshot", "err", err)
			}
		}
	}
}

// Authorizer decides whether a principal may make the changes between cur and next.
type Authorizer func(cur, next *model.Site, changes []model.Change) error

// Update applies fn to a copy of the current site, canonicalises the result
// (model.Site.Normalize), validates it (fields, references, uniqueness, schedule
// overlaps), authorises the resulting changes and writes them. With dryRun it stops
// before writing. Either the whole change is validated and written in dependency order,
// or nothing is written; a store failure half way leaves a directory whose references are
// intact (see model.Diff) and the snapshot is reloaded.
func (s *Service) Update(ctx context.Context, authz Authorizer, dryRun bool, fn func(site *model.Site) error) ([]model.Change, error) {
	return s.update(ctx, authz, dryRun, func(_ *Snapshot, next *model.Site) error { return fn(next) })
}

// update is Update for changes planned from the snapshot the write starts from (cur):
// under the write lock, so that nothing can change between deciding and writing.
func (s *Service) update(ctx context.Context, authz Authorizer, dryRun bool, fn func(cur *Snapshot, next *model.Site) error) ([]model.Change, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	curSnap := s.snap.Load()
	cur := curSnap.Site
	next := cur.Clone()
	if err := fn(curSnap, next); err != nil {
		return nil, err
	}
	// The one place where written MACs are canonicalised (see model.Site.Normalize).
	if err := next.Normalize(); err != nil {
		return nil, err
	}
	next.Sort()
	// A deletion that leaves references behind is refused naming what still uses the
	// entity, before Validate would blame the user of it ("unknown mode").
	if err := model.CheckDeletedReferences(cur, next); err != nil {
		return nil, err
	}
	if err := next.Validate(); err != nil {
		return nil, err
	}
	// A written version lives in its own IMAGE/VERSION directory (gc deletes it).
	if err := model.CheckVersionPaths(cur, next); err != nil {
		return nil, err
	}
	snap, err := newSnapshot(next)
	if err != nil {
		return nil, err
	}
	// A site that has a site admin keeps one: a site file without roles (or a careless
	// role edit) must not lock every administrator out, which only LDAP surgery undoes.
	if hasSiteAdmin(cur) && !hasSiteAdmin(next) {
		return nil, model.Invalid("this change would leave the site without a site admin; keep a site-admin role with at least one member")
	}
	changes := model.Diff(cur, next)
	// Refuse, already in a dry run, what the store would refuse: address moves that
	// cannot be ordered without two hosts sharing a MAC or IP for a moment.
	if err := model.CheckAddressOrder(cur, next, changes); err != nil {
		return nil, err
	}
	if authz != nil {
		if err := authz(cur, next, changes); err != nil {
			return nil, err
		}
	}
	// After authorisation: which uids the directory has is for those who may grant roles.
	if err := s.checkSiteAdmins(ctx, cur, next, changes); err != nil {
		return nil, err
	}
	if dryRun || len(changes) == 0 {
		return changes, nil
	}
	apply := s.backend.Apply
	if v, ok := s.backend.(validatedApplier); ok {
		apply = v.ApplyValidated // next was validated above
	}
	done, err := apply(ctx, cur, next)
	if err != nil {
		// Part of the change may have been written. Re-read what is there so that the
		// snapshot matches the directory, and report what did land.
		if rerr := s.reloadLocked(ctx); rerr != nil {
			s.log.Error("reload after failed write", "err", rerr)
		}
		return done, fmt.Errorf("write failed after %d of %d changes: %w", len(done), len(changes), err)
	}
	s.snap.Store(snap)
	for _, c := range done {
		s.log.Info("changed", "change", c.String())
	}
	// The audit trail: who changed what, at the one place every site write passes.
	s.auditSiteWrite(ctx, cur, next, done)
	return done, nil
}

// ErrNotFound is returned for lookups of missing entities.
var ErrNotFound = errors.New("not found")

func hasSiteAdmin(site *model.Site) bool {
	for _, r := range site.Roles {
		if r.Role == model.RoleSiteAdmin && len(r.Members) > 0 {
			return true
		}
	}
	return false
}

// checkSiteAdmins refuses a change of the site-admin grants that makes a user site admin
// whom the directory does not have, or that leaves no site admin who can log in: a grant
// to a misspelt uid locks the administrators out as surely as no grant at all. The
// directory is asked only when a site-admin grant changes. Other roles may name users not
// created yet (a site file is applied before its users are added, docs/site-file.md);
// such a grant locks nobody out.
func (s *Service) checkSiteAdmins(ctx context.Context, cur, next *model.Site, changes []model.Change) error {
	touched := false
	for _, c := range changes {
		if c.Kind == model.EntityRole && (isSiteAdminGrant(cur, c.Name) || isSiteAdminGrant(next, c.Name)) {
			touched = true
			break
		}
	}
	if !touched {
		return nil
	}
	users, err := s.backend.Users(ctx)
	if err != nil {
		return fmt.Errorf("listing directory users to check the site-admin grants: %w", err)
	}
	local := map[string]bool{}
	for _, u := range users {
		local[u.UID] = true
	}
	// Only members the change adds must exist: a site admin whose account was deleted
	// since does not block every later edit of the grant. Users of the external
	// directory exist too (looked up there, only for uids not in ou=people).
	before := siteAdmins(cur)
	var unknown []string
	for _, uid := range slices.Sorted(maps.Keys(siteAdmins(next))) {
		if before[uid] {
			continue
		}
		ok, err := s.Accounts.userExists(ctx, uid, local)
		if err != nil {
			return err
		}
		if !ok {
			unknown = append(unknown, uid)
		}
	}
	if len(unknown) > 0 {
		return model.Invalid("the site-admin role cannot be given to %s: not a directory user; create the user first (overtime user add UID)", strings.Join(unknown, ", "))
	}
	loginAdmin := func(site *model.Site) (bool, error) {
		for _, uid := range slices.Sorted(maps.Keys(siteAdmins(site))) {
			ok, err := s.Accounts.userExists(ctx, uid, local)
			if ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	}
	// next is asked first: it usually keeps a local admin, and then the external
	// directory is not asked at all.
	if ok, err := loginAdmin(next); ok || err != nil {
		return err
	}
	if ok, err := loginAdmin(cur); ok || err != nil {
		if err != nil {
			return err
		}
		return model.Invalid("this change would leave the site without a site admin who is a directory user; keep a site-admin role with at least one existing user")
	}
	return nil
}

func isSiteAdminGrant(site *model.Site, name string) bool {
	r := site.Role(name)
	return r != nil && r.Role == model.RoleSiteAdmin
}

// siteAdmins is the set of members of the site's site-admin grants.
func siteAdmins(site *model.Site) map[string]bool {
	m := map[string]bool{}
	for _, r := range site.Roles {
		if r.Role == model.RoleSiteAdmin {
			for _, uid := range r.Members {
				m[uid] = true
			}
		}
	}
	return m
}
