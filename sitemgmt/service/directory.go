package service

import (
	"context"
	"errors"
	"sync"
	"time"
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

// Authenticate checks a user's password with the store and records whether the directory
// answered: a refusal (IsInvalidCredentials) is an answer, any other error means it could
// not be asked.
func (s *Service) Authenticate(ctx context.Context, uid, password string) error {
	err := s.backend.Authenticate(ctx, uid, password)
	s.noteContact(err, IsInvalidCredentials(err))
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
