package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/hostcred"
	"github.com/overtime-hpc/overtime/sitemgmt/loginguard"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Accounts is the site's users, their logins and the directories behind them: who may log
// in (Login, with its throttle), the user operations of the directory's ou=people (Users,
// PutUser, DeleteUser, SetPassword), the node agents' credentials (HostCredential,
// IssueHostCredential, RevokeHostCredential), and what the service last learnt about the
// directory and the external directory (Directory, External). Each operation a front end
// calls for a user carries its own authorisation, so the JSON API, the web UI and the CLI
// (through the API) are refused alike.
type Accounts struct {
	s *Service
	// ext is the external directory, if any, and extState the outcome of the last
	// contact with it.
	ext      atomic.Pointer[ExternalDirectory]
	extState directoryState
	// logins throttles failed logins (sitemgmt/loginguard); nil until the first login or
	// SetLoginGuard.
	logins atomic.Pointer[loginguard.Guard]
}

// DirectoryHealth is what the service last learnt about the directory: when it last
// answered (a reload, a login, a credential check, whether the answer was yes or no) and,
// while it cannot be asked, since when and why.
type DirectoryHealth struct {
	Reachable bool
	LastOK    time.Time // last answer; zero before the first
	DownSince time.Time // first failure of the current outage; zero when reachable
	Err       string    // the last failure, while unreachable
}

// directoryState records the outcome of every contact with the directory.
type directoryState struct {
	mu sync.Mutex
	h  DirectoryHealth
}

func (d *directoryState) note(err error, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.h = DirectoryHealth{Reachable: true, LastOK: now}
		return
	}
	if d.h.Reachable || d.h.DownSince.IsZero() {
		d.h.DownSince = now
	}
	d.h.Reachable, d.h.Err = false, err.Error()
}

func (d *directoryState) get() DirectoryHealth {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h
}

// Authenticate checks a user's password with the store (Overtime's own ou=people only)
// and records whether the directory answered: a refusal (IsInvalidCredentials) is an
// answer, any other error means it could not be asked.
func (a *Accounts) Authenticate(ctx context.Context, uid, password string) error {
	err := a.s.backend.Authenticate(ctx, uid, password)
	a.noteContact(err, IsInvalidCredentials(err))
	return err
}

// ExternalDirectory is a second source of users, the university's directory
// (sitemgmt/extdir implements it). Its errors follow the store's: IsInvalidCredentials
// for "said no", anything else for "could not be asked".
type ExternalDirectory interface {
	// Authenticate checks the password and returns the roles the user's groups map to.
	Authenticate(ctx context.Context, uid, password string) ([]model.RoleGrant, error)
	// Exists reports whether the directory has exactly one user of that uid.
	Exists(ctx context.Context, uid string) (bool, error)
}

// SetExternal makes x the external directory (nil: none). Set it before serving.
func (a *Accounts) SetExternal(x ExternalDirectory) {
	if x == nil {
		a.ext.Store(nil)
		return
	}
	a.ext.Store(&x)
}

func (a *Accounts) externalDir() ExternalDirectory {
	if p := a.ext.Load(); p != nil {
		return *p
	}
	return nil
}

// NoteExternal records the outcome of a contact with the external directory made outside
// Login (the server's check at start).
func (a *Accounts) NoteExternal(err error) { a.extState.note(err, time.Now()) }

// Login is an authenticated user.
type Login struct {
	UID string
	// External: authenticated by the external directory; Grants are the roles its
	// groups map to (authz.For adds them to the site's own grants for UID).
	External bool
	Grants   []model.RoleGrant
}

// Login checks a user's password: in Overtime's own ou=people first, and only when the
// uid is not there (the store says NotFound) in the external directory. from is where
// the attempt comes from (the client's address, see sitemgmt/trustproxy; invalid:
// unknown), for the throttle.
//
// Local first, and a local uid never falls through: a break-glass administrator logs in
// while the university's directory is down, and a uid means one person. Were both asked,
// the university's "admin" could log in with their own password and receive every grant
// the site gives the local "admin" (grants name uids), silently merging two people.
// When Overtime's own directory cannot be asked, nothing is: without it we cannot know
// whether the uid is local, and guessing "external" would be exactly that merge.
//
// Guessing is throttled here, once for both front ends (sitemgmt/loginguard): an attempt
// that comes too early is refused with a *loginguard.Throttled error (IsThrottled)
// before any password is tried. A refused password (IsInvalidCredentials) takes at least
// the guard's FailureFloor: an unknown uid costs our directory one search (and the
// external directory one more), a known one a search and a bind, and without the floor
// the difference would tell a guesser which uids exist.
func (a *Accounts) Login(ctx context.Context, uid, password string, from netip.Addr) (Login, error) {
	at, err := a.LoginGuard().Begin(uid, from)
	if err != nil {
		return Login{}, err
	}
	start := time.Now()
	l, err := a.login(ctx, uid, password)
	switch {
	case err == nil:
		at.Succeeded()
	case IsInvalidCredentials(err):
		at.Failed()
		a.padFailure(ctx, start)
	default:
		at.Unanswered()
	}
	return l, err
}

// padFailure waits until the failure floor has passed since start (or ctx ends).
func (a *Accounts) padFailure(ctx context.Context, start time.Time) {
	rest := a.LoginGuard().FailureFloor() - time.Since(start)
	if rest <= 0 {
		return
	}
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (a *Accounts) login(ctx context.Context, uid, password string) (Login, error) {
	err := a.Authenticate(ctx, uid, password)
	x := a.externalDir()
	if x == nil || !IsNotFound(err) {
		return Login{UID: uid}, err
	}
	grants, err := x.Authenticate(ctx, uid, password)
	a.extState.note(answered(err, IsInvalidCredentials(err)), time.Now())
	if err != nil {
		return Login{}, err
	}
	return Login{UID: uid, External: true, Grants: grants}, nil
}

// LoginAllowed is nil when uid may try a password from now, or the *loginguard.Throttled
// refusal Login would give, without counting an attempt. The API asks it before its
// cache of recent logins compares a password: the cache must be no way around the
// throttle.
func (a *Accounts) LoginAllowed(uid string, from netip.Addr) error {
	if w := a.LoginGuard().Check(uid, from); w > 0 {
		return &loginguard.Throttled{Wait: w}
	}
	return nil
}

// IsThrottled reports whether err is a throttled login, and how long to wait.
func IsThrottled(err error) (time.Duration, bool) {
	var th *loginguard.Throttled
	if errors.As(err, &th) {
		return th.Wait, true
	}
	return 0, false
}

// LoginGuard is the login throttle (loginguard.Default until SetLoginGuard).
func (a *Accounts) LoginGuard() *loginguard.Guard {
	if g := a.logins.Load(); g != nil {
		return g
	}
	a.logins.CompareAndSwap(nil, loginguard.New(loginguard.Default))
	return a.logins.Load()
}

// SetLoginGuard replaces the login throttle (tests: another clock or policy), forgetting
// what the old one counted.
func (a *Accounts) SetLoginGuard(g *loginguard.Guard) { a.logins.Store(g) }

// userExists reports whether uid can log in as a user: in ou=people (known, from the
// store's listing) or, when not there, in the external directory.
func (a *Accounts) userExists(ctx context.Context, uid string, local map[string]bool) (bool, error) {
	if local[uid] {
		return true, nil
	}
	x := a.externalDir()
	if x == nil {
		return false, nil
	}
	ok, err := x.Exists(ctx, uid)
	var inv *model.InvalidError
	if !errors.As(err, &inv) {
		a.extState.note(err, time.Now())
	}
	if err != nil && !errors.As(err, &inv) {
		return false, fmt.Errorf("asking the external directory whether %s exists: %w", uid, err)
	}
	return ok, err
}

// answered is nil when err is an answer (so the directory was reachable).
func answered(err error, answer bool) error {
	if answer {
		return nil
	}
	return err
}

// HostCredential reads a host's stored token hash ("" = none) and records whether the
// directory answered: a missing host (IsNotFound) is an answer, any other error means it
// could not be asked.
func (a *Accounts) HostCredential(ctx context.Context, host string) (string, error) {
	hash, err := a.s.backend.HostCredential(ctx, host)
	a.noteContact(err, IsNotFound(err))
	return hash, err
}

// MayManageHostCredential is host (by name) when p may issue and revoke its agent
// credential (authz.Principal.CheckHostCredential: a site admin or an admin of its pool);
// an unknown host is a *model.NotFoundError.
func (a *Accounts) MayManageHostCredential(p authz.Principal, host string) (*model.Host, error) {
	h := a.s.Snapshot().Host(host)
	if h == nil {
		return nil, model.NotFound("host", host)
	}
	if err := p.CheckHostCredential(h); err != nil {
		return nil, err
	}
	return h, nil
}

// IssueHostCredential makes a new token for host's node agent, for p, replacing any
// previous one, and returns it: the directory keeps only its hash, so this is the only
// time it is seen.
func (a *Accounts) IssueHostCredential(ctx context.Context, p authz.Principal, host string) (string, error) {
	h, err := a.MayManageHostCredential(p, host)
	if err != nil {
		return "", err
	}
	tok, err := hostcred.New(h.Name)
	if err != nil {
		return "", err
	}
	if err := a.s.backend.SetHostCredential(ctx, h.Name, hostcred.Hash(tok)); err != nil {
		return "", hostError(err, h.Name)
	}
	return tok, nil
}

// RevokeHostCredential removes host's agent credential, for p, and reports whether it had
// one.
func (a *Accounts) RevokeHostCredential(ctx context.Context, p authz.Principal, host string) (bool, error) {
	h, err := a.MayManageHostCredential(p, host)
	if err != nil {
		return false, err
	}
	old, err := a.HostCredential(ctx, h.Name)
	if err == nil {
		err = a.s.backend.SetHostCredential(ctx, h.Name, "")
	}
	if err != nil {
		return false, hostError(err, h.Name)
	}
	return old != "", nil
}

// hostError turns the store's "no such entry" for a host into a *model.NotFoundError.
func hostError(err error, host string) error {
	if IsNotFound(err) {
		return model.NotFound("host", host)
	}
	return err
}

// noteContact records the outcome of a contact with the directory: reachable when it
// succeeded or its error is an answer.
func (a *Accounts) noteContact(err error, answer bool) {
	if answer {
		err = nil
	}
	a.s.directory.note(err, time.Now())
}

// IsInvalidCredentials reports whether the store said "no" to a login
// (ldapstore.ErrInvalidCredentials); any other Authenticate error means it could not be
// asked.
func IsInvalidCredentials(err error) bool {
	var ic interface{ InvalidCredentials() bool }
	return errors.As(err, &ic) && ic.InvalidCredentials()
}

// IsNotFound reports whether the store said "no such entry" (an unknown host or user).
func IsNotFound(err error) bool {
	var nf interface{ NotFound() bool }
	return errors.As(err, &nf) && nf.NotFound()
}

// Directory says whether the directory answered at the last contact (see DirectoryHealth).
func (a *Accounts) Directory() DirectoryHealth { return a.s.directory.get() }

// External says whether the external directory answered at the last contact; ok is false
// when none is configured. Before the first contact it counts as reachable.
func (a *Accounts) External() (h DirectoryHealth, ok bool) {
	if a.externalDir() == nil {
		return DirectoryHealth{}, false
	}
	h = a.extState.get()
	if h.LastOK.IsZero() && h.DownSince.IsZero() {
		h.Reachable = true
	}
	return h, true
}

// ---- directory users (ou=people) ----
//
// The user operations carry their own authorisation, so that every front end (the JSON
// API, and any later web or CLI path) asks the same questions: site admins list, create
// and delete users; every user may change their own password, giving the current one,
// and site admins anyone's.

// MinPasswordLen is the shortest password Overtime sets.
const MinPasswordLen = 8

// directoryUnavailable is an operation that needed the directory's answer and could not
// get it: not a refusal, so the front ends answer "try again" (errstatus: 503), never
// "wrong password".
func directoryUnavailable(err error) error {
	return &errstatus.Unavailable{Msg: "directory unavailable; try again", Err: err}
}

// MayManageUsers is nil when p may list, create and delete directory users: only a site
// admin may.
func (a *Accounts) MayManageUsers(p authz.Principal) error {
	if !p.SiteAdmin {
		return &authz.Forbidden{Msg: "user " + p.UID + " may not manage users: only a site admin may"}
	}
	return nil
}

// Users lists the directory's users (ou=people; never nil), for p.
func (a *Accounts) Users(ctx context.Context, p authz.Principal) ([]model.User, error) {
	if err := a.MayManageUsers(p); err != nil {
		return nil, err
	}
	users, err := a.s.backend.Users(ctx)
	if err != nil {
		return nil, err
	}
	if users == nil {
		users = []model.User{}
	}
	return users, nil
}

// PutUser creates user uid in ou=people or, when it exists, sets its display name
// (displayName; "": the uid) and password, for p.
func (a *Accounts) PutUser(ctx context.Context, p authz.Principal, uid, displayName, password string) error {
	if err := a.MayManageUsers(p); err != nil {
		return err
	}
	if err := model.ValidUID(uid); err != nil {
		return err
	}
	if err := checkPassword(password); err != nil {
		return err
	}
	if displayName == "" {
		displayName = uid
	}
	return a.s.backend.PutUser(ctx, uid, displayName, password)
}

// DeleteUser deletes user uid from ou=people, for p; an unknown uid is a
// *model.NotFoundError.
func (a *Accounts) DeleteUser(ctx context.Context, p authz.Principal, uid string) error {
	if err := a.MayManageUsers(p); err != nil {
		return err
	}
	if uid == p.UID {
		// The last site admin deleting themselves would leave nobody to manage users.
		return model.Conflict("user %s may not delete their own account", uid)
	}
	return userError(a.s.backend.DeleteUser(ctx, uid), uid)
}

// MaySetPassword is nil when p may set uid's password: their own, unless they are a user
// of the external directory (whose passwords are set there), or, for a site admin,
// anyone's.
func (a *Accounts) MaySetPassword(p authz.Principal, uid string) error {
	if !p.SiteAdmin && uid != p.UID {
		return &authz.Forbidden{Msg: "user " + p.UID + " may only change their own password"}
	}
	if p.External && uid == p.UID {
		return model.Conflict("user %s is a user of the external directory: change the password there", uid)
	}
	return nil
}

// SetPassword sets uid's password for p (MaySetPassword). A user who is not a site admin
// proves the current password (old) again, not only the request's credentials, as
// passwd(1) asks too: a wrong one is refused (*authz.Forbidden), and a directory that
// cannot be asked is a *errstatus.Unavailable. An unknown uid is a *model.NotFoundError.
func (a *Accounts) SetPassword(ctx context.Context, p authz.Principal, uid, old, password string) error {
	if err := a.MaySetPassword(p, uid); err != nil {
		return err
	}
	if err := checkPassword(password); err != nil {
		return err
	}
	if !p.SiteAdmin {
		if old == "" {
			return model.Invalid("the current password (oldPassword) is required")
		}
		if err := a.Authenticate(ctx, uid, old); err != nil {
			if !IsInvalidCredentials(err) {
				return directoryUnavailable(err)
			}
			return &authz.Forbidden{Msg: "the current password is wrong"}
		}
	}
	return userError(a.s.backend.SetPassword(ctx, uid, password), uid)
}

func checkPassword(password string) error {
	if len(password) < MinPasswordLen {
		return model.Invalid("password too short: at least %d characters", MinPasswordLen)
	}
	return nil
}

// userError turns the store's "no such user" into a *model.NotFoundError (404).
func userError(err error, uid string) error {
	if IsNotFound(err) {
		return model.NotFound("user", uid)
	}
	return err
}
