package api

import (
	"net/http"

	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Directory users: site admins list, create (putUser) and delete them; every user may
// change their own password, giving the current one, and site admins anyone's.

// PasswordRequest is the body of PUT /api/v1/users/{uid}/password. OldPassword is
// required unless the caller is a site admin.
type PasswordRequest struct {
	OldPassword string `json:"oldPassword,omitempty"`
	Password    string `json:"password"`
}

// minPasswordLen is the shortest password the API sets.
const minPasswordLen = 8

func (s *Server) userRoutes() {
	m := s.mux
	m.HandleFunc("GET /api/v1/users", s.anyUser(s.listUsers))
	m.HandleFunc("DELETE /api/v1/users/{uid}", s.anyUser(s.deleteUser))
	m.HandleFunc("PUT /api/v1/users/{uid}/password", s.anyUser(s.setPassword))
}

func siteAdminOnly(w http.ResponseWriter, r *http.Request) bool {
	if p := principal(r); !p.SiteAdmin {
		writeError(w, http.StatusForbidden, "user "+p.UID+" may not manage users: only a site admin may")
		return false
	}
	return true
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	if !siteAdminOnly(w, r) {
		return
	}
	users, err := s.svc.Backend().Users(r.Context())
	if err != nil {
		s.httpError(w, err)
		return
	}
	if users == nil {
		users = []model.User{}
	}
	writeJSON(w, http.StatusOK, users)
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request) {
	if !siteAdminOnly(w, r) {
		return
	}
	uid := r.PathValue("uid")
	if uid == principal(r).UID {
		// The last site admin deleting themselves would leave nobody to manage users.
		writeError(w, http.StatusConflict, "user "+uid+" may not delete their own account")
		return
	}
	if err := s.userError(s.svc.Backend().DeleteUser(r.Context(), uid), uid); err != nil {
		s.httpError(w, err)
		return
	}
	s.auth.forget(uid)
	writeJSON(w, http.StatusOK, map[string]any{"uid": uid})
}

func (s *Server) setPassword(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	uid := r.PathValue("uid")
	if !p.SiteAdmin && uid != p.UID {
		writeError(w, http.StatusForbidden, "user "+p.UID+" may only change their own password")
		return
	}
	if p.External && uid == p.UID {
		writeError(w, http.StatusConflict, "user "+uid+" is a user of the external directory: change the password there")
		return
	}
	var in PasswordRequest
	if err := decodeJSON(r, &in); err != nil {
		s.httpError(w, err)
		return
	}
	if len(in.Password) < minPasswordLen {
		s.httpError(w, model.Invalid("password too short: at least %d characters", minPasswordLen))
		return
	}
	if !p.SiteAdmin {
		// Proving the old password again (not only the request's credentials) is what
		// passwd(1) asks too.
		if in.OldPassword == "" {
			s.httpError(w, model.Invalid("the current password (oldPassword) is required"))
			return
		}
		if err := s.svc.Accounts.Authenticate(r.Context(), uid, in.OldPassword); err != nil {
			if !service.IsInvalidCredentials(err) {
				writeError(w, http.StatusServiceUnavailable, "directory unavailable; try again")
				return
			}
			writeError(w, http.StatusForbidden, "the current password is wrong")
			return
		}
	}
	if err := s.userError(s.svc.Backend().SetPassword(r.Context(), uid, in.Password), uid); err != nil {
		s.httpError(w, err)
		return
	}
	// The old password must stop working now, not when its cache entry expires.
	s.auth.forget(uid)
	writeJSON(w, http.StatusOK, map[string]any{"uid": uid})
}

// userError turns the store's "no such user" into a 404.
func (s *Server) userError(err error, uid string) error {
	if service.IsNotFound(err) {
		return model.NotFound("user", uid)
	}
	return err
}

func (c *authCache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ok, uid)
}
