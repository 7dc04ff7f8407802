package service

import (
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

// NoteDirectory records the outcome of a contact with the directory made outside the
// service (the API's logins and host credential checks): nil when the directory answered
// (a refusal is an answer), else the error that says it could not be asked.
func (s *Service) NoteDirectory(err error) { s.directory.note(err, time.Now()) }

// Directory says whether the directory answered at the last contact (see DirectoryHealth).
func (s *Service) Directory() DirectoryHealth { return s.directory.get() }
