// Package errstatus answers one question: which HTTP status, and which message for the
// user, an error of the site manager's operations gets. The JSON API and the web UI both
// ask it, so a refusal reads the same, with the same status, from either front end.
package errstatus

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TooLarge is a request body over its limit (413).
type TooLarge struct{ Limit int64 }

func (e TooLarge) Error() string {
	return fmt.Sprintf("request body too large: at most %d bytes", e.Limit)
}

// StoreFull is a write the image store had no room for (507). Its message names the
// image and version, never a path of the server.
type StoreFull struct{ Msg string }

func (e StoreFull) Error() string { return e.Msg }

// Unavailable is something an operation needed that cannot be had now (503): the
// directory during an outage, an image store this server does not keep. Not a refusal:
// the user is told to try again or where the service is, never "wrong password". Msg is
// the user's; Err, the cause, goes to the log.
type Unavailable struct {
	Msg string
	Err error
}

func (e *Unavailable) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Unavailable) Unwrap() error { return e.Err }

// Of maps err to its status and the message shown to the user. Internal reports whether
// the error is the server's own (a directory or file system failure the user cannot
// mend): the caller logs those.
func Of(err error) (status int, msg string, internal bool) {
	var inv *model.InvalidError
	var forb *authz.Forbidden
	var nf *model.NotFoundError
	var big TooLarge
	var full StoreFull
	var un *Unavailable
	switch {
	case errors.As(err, &un):
		return http.StatusServiceUnavailable, un.Msg, false
	case errors.As(err, &nf):
		return http.StatusNotFound, err.Error(), false
	case errors.As(err, &big):
		return http.StatusRequestEntityTooLarge, err.Error(), false
	case errors.As(err, &full):
		return http.StatusInsufficientStorage, err.Error(), false
	case errors.As(err, &forb):
		return http.StatusForbidden, err.Error(), false
	case errors.As(err, &inv):
		if inv.Conflict {
			return http.StatusConflict, err.Error(), false
		}
		return http.StatusBadRequest, err.Error(), false
	}
	return http.StatusBadGateway, "directory error: " + err.Error(), true
}

// Internal reports whether err is the server's own failure rather than a refusal of what
// the user asked (the write metrics count the two apart).
func Internal(err error) bool {
	_, _, internal := Of(err)
	return internal
}
