package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
)

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
func (s *Service) Authenticate(ctx context.Context, uid, password string) error {
	err := s.backend.Authenticate(ctx, uid, password)
	s.noteContact(err, IsInvalidCredentials(err))
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
func (s *Service) SetExternal(x ExternalDirectory) {
	if x == nil {
		s.ext.Store(nil)
		return
	}
	s.ext.Store(&x)
}

func (s *Service) externalDir() ExternalDirectory {
	if p := s.ext.Load(); p != nil {
		return *p
	}
	return nil
}

// NoteExternal records the outcome of a contact with the external directory made outside
// Login (the server's check at start).
func (s *Service) NoteExternal(err error) { s.extState.note(err, time.Now()) }

// Login is an authenticated user.
type Login struct {
	UID string
	// External: authenticated by the external directory; Grants are the roles its
	// groups map to (authz.For adds them to the site's own grants for UID).
	External bool
	Grants   []model.RoleGrant
}

// Login checks a user's password: in Overtime's own ou=people first, and only when the
// uid is not there (the store says NotFound) in the external directory.
//
// Local first, and a local uid never falls through: a break-glass administrator logs in
// while the university's directory is down, and a uid means one person. Were both asked,
// the university's "admin" could log in with their own password and receive every grant
// the site gives the local "admin" (grants name uids), silently merging two people.
// When Overtime's own directory cannot be asked, nothing is: without it we cannot know
// whether the uid is local, and guessing "external" would be exactly that merge.
func (s *Service) Login(ctx context.Context, uid, password string) (Login, error) {
	err := s.Authenticate(ctx, uid, password)
	x := s.externalDir()
	if x == nil || !IsNotFound(err) {
		return Login{UID: uid}, err
	}
	grants, err := x.Authenticate(ctx, uid, password)
	s.extState.note(answered(err, IsInvalidCredentials(err)), time.Now())
	if err != nil {
		return Login{}, err
	}
	return Login{UID: uid, External: true, Grants: grants}, nil
}

// userExists reports whether uid can log in as a user: in ou=people (known, from the
// store's listing) or, when not there, in the external directory.
func (s *Service) userExists(ctx context.Context, uid string, local map[string]bool) (bool, error) {
	if local[uid] {
		return true, nil
	}
	x := s.externalDir()
	if x == nil {
		return false, nil
	}
	ok, err := x.Exists(ctx, uid)
	var inv *model.InvalidError
	if !errors.As(err, &inv) {
		s.extState.note(err, time.Now())
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
func (s *Service) HostCredential(ctx context.Context, host string) (string, error) {
	hash, err := s.backend.HostCredential(ctx, host)
	s.noteContact(err, IsNotFound(err))
	return hash, err
}

// noteContact records the outcome of a contact with the directory: reachable when it
// succeeded or its error is an answer.
func (s *Service) noteContact(err error, answer bool) {
	if answer {
		err = nil
	}
	s.directory.note(err, time.Now())
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
func (s *Service) Directory() DirectoryHealth { return s.directory.get() }

// External says whether the external directory answered at the last contact; ok is false
// when none is configured. Before the first contact it counts as reachable.
func (s *Service) External() (h DirectoryHealth, ok bool) {
	if s.externalDir() == nil {
		return DirectoryHealth{}, false
	}
	h = s.extState.get()
	if h.LastOK.IsZero() && h.DownSince.IsZero() {
		h.Reachable = true
	}
	return h, true
}
