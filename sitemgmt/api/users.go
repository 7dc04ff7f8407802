package api

import (
	"net/http"
)

// Directory users: site admins list, create (putUser) and delete them; every user may
// change their own password, giving the current one, and site admins anyone's. Who may do
// what, and what a password must be, is decided by the service's operations
// (service.Accounts: Users, PutUser, DeleteUser, SetPassword); these handlers decode,
// call them and encode.

// UserRequest is the body of POST /api/v1/users.
type UserRequest struct {
	UID      string `json:"uid"`
	Name     string `json:"name"`
	Password string `json:"password"`
}

// PasswordRequest is the body of PUT /api/v1/users/{uid}/password. OldPassword is
// required unless the caller is a site admin.
type PasswordRequest struct {
	OldPassword string `json:"oldPassword,omitempty"`
	Password    string `json:"password"`
}

func (s *Server) userRoutes() {
	m := s.mux
	m.HandleFunc("GET /api/v1/users", s.anyUser(s.listUsers))
	m.HandleFunc("DELETE /api/v1/users/{uid}", s.anyUser(s.deleteUser))
	m.HandleFunc("PUT /api/v1/users/{uid}/password", s.anyUser(s.setPassword))
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	users, err := s.svc.Accounts.Users(r.Context(), principal(r))
	if err != nil {
		s.httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, users)
}

func (s *Server) putUser(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	// Refused before the body is read, as before the rules moved to the service.
	if err := s.svc.Accounts.MayManageUsers(p); err != nil {
		s.httpError(w, err)
		return
	}
	var in UserRequest
	if err := decodeJSON(r, &in); err != nil {
		s.httpError(w, err)
		return
	}
	if err := s.svc.Accounts.PutUser(r.Context(), p, in.UID, in.Name, in.Password); err != nil {
		s.httpError(w, err)
		return
	}
	s.auth.forget(in.UID)
	writeJSON(w, http.StatusOK, map[string]any{"uid": in.UID})
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request) {
	uid := r.PathValue("uid")
	if err := s.svc.Accounts.DeleteUser(r.Context(), principal(r), uid); err != nil {
		s.httpError(w, err)
		return
	}
	s.auth.forget(uid)
	writeJSON(w, http.StatusOK, map[string]any{"uid": uid})
}

func (s *Server) setPassword(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	uid := r.PathValue("uid")
	// Refused before the body is read, as before the rules moved to the service.
	if err := s.svc.Accounts.MaySetPassword(p, uid); err != nil {
		s.httpError(w, err)
		return
	}
	var in PasswordRequest
	if err := decodeJSON(r, &in); err != nil {
		s.httpError(w, err)
		return
	}
	if err := s.svc.Accounts.SetPassword(r.Context(), p, uid, in.OldPassword, in.Password); err != nil {
		s.httpError(w, err)
		return
	}
	// The old password must stop working now, not when its cache entry expires.
	s.auth.forget(uid)
	writeJSON(w, http.StatusOK, map[string]any{"uid": uid})
}

func (c *authCache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ok, uid)
}
