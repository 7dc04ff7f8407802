package errstatus

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestOf: each kind of refusal has its status, wrapped or not, and only the server's own
// failures are internal.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		err      error
		status   int
		internal bool
	}{
		{model.NotFound("image", "x"), http.StatusNotFound, false},
		{TooLarge{Limit: 10}, http.StatusRequestEntityTooLarge, false},
		{StoreFull{Msg: "full"}, http.StatusInsufficientStorage, false},
		{&Unavailable{Msg: "directory unavailable; try again", Err: errors.New("ldap: refused")}, http.StatusServiceUnavailable, false},
		{&authz.Forbidden{Msg: "no"}, http.StatusForbidden, false},
		{model.Invalid("bad"), http.StatusBadRequest, false},
		{model.Conflict("dup"), http.StatusConflict, false},
		{fmt.Errorf("publish: %w", model.Conflict("dup")), http.StatusConflict, false},
		{errors.New("ldap: connection refused"), http.StatusBadGateway, true},
	} {
		status, msg, internal := Of(tc.err)
		if status != tc.status || internal != tc.internal || msg == "" {
			t.Errorf("Of(%v) = %d %q internal=%v, want %d internal=%v", tc.err, status, msg, internal, tc.status, tc.internal)
		}
	}
}
