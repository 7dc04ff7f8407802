package api

import (
	"net/http"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// collection describes one entity list of the site for the generic list/get/put/delete
// endpoints: GET /api/v1/{path}, GET|PUT|DELETE /api/v1/{path}/{name}.
type collection[T any] struct {
	kind string // singular, for messages: "host"
	path string // plural, in URLs: "hosts"
	list func(*model.Site) *[]T
	name func(*T) *string
	// filter selects list entries by query parameters (nil: no filters).
	filter func(r *http.Request, v *T) bool
	// keep carries over from the existing entity what a PUT body may leave out.
	keep func(old, new *T)
	// own records who owns the bookings in new (old is nil when new is created): the
	// server's record of ownership, whatever the body says (docs/site-file.md).
	own func(uid string, old, new *T) error
}

func registerCollections(s *Server) {
	register(s, collection[model.Pool]{kind: "pool", path: "pools",
		list: func(s *model.Site) *[]model.Pool { return &s.Pools },
		name: func(v *model.Pool) *string { return &v.Name },
		own: func(uid string, old, p *model.Pool) (err error) {
			var cur model.Pool // a created pool has no rules yet
			if old != nil {
				cur = *old
			}
			p.RuleOwners, err = model.BookRules("pool "+p.Name, cur.Weekly, cur.RuleOwners, p.Weekly, uid)
			return err
		}})
	register(s, collection[model.Host]{kind: "host", path: "hosts",
		list: func(s *model.Site) *[]model.Host { return &s.Hosts },
		name: func(v *model.Host) *string { return &v.Name },
		filter: func(r *http.Request, h *model.Host) bool {
			p := r.URL.Query().Get("pool")
			return p == "" || h.Pool == p
		},
		own: func(uid string, old, h *model.Host) (err error) {
			var cur model.Host // a created host has no rules yet
			if old != nil {
				cur = *old
			}
			h.RuleOwners, err = model.BookRules("host "+h.Name, cur.Weekly, cur.RuleOwners, h.Weekly, uid)
			return err
		}})
	register(s, collection[model.BootServer]{kind: "boot server", path: "bootservers",
		list: func(s *model.Site) *[]model.BootServer { return &s.BootServers },
		name: func(v *model.BootServer) *string { return &v.Name }})
	register(s, collection[model.Mode]{kind: "mode", path: "modes",
		list: func(s *model.Site) *[]model.Mode { return &s.Modes },
		name: func(v *model.Mode) *string { return &v.Name }})
	register(s, collection[model.Image]{kind: "image", path: "images",
		list: func(s *model.Site) *[]model.Image { return &s.Images },
		name: func(v *model.Image) *string { return &v.Name },
		// Versions are published one by one (POST .../versions) and are immutable; a PUT
		// of the image's description must not drop them.
		keep: func(old, new *model.Image) {
			if new.Versions == nil {
				new.Versions = old.Versions
			}
		}})
	register(s, collection[model.Exception]{kind: "exception", path: "exceptions",
		list: func(s *model.Site) *[]model.Exception { return &s.Exceptions },
		name: func(v *model.Exception) *string { return &v.Name },
		// An exception belongs to whoever created it; changing it does not take it over.
		own: func(uid string, old, e *model.Exception) error {
			if old == nil {
				e.Owner = uid
			} else {
				e.Owner = old.Owner
			}
			return nil
		}})
	register(s, collection[model.RoleGrant]{kind: "role", path: "roles",
		list: func(s *model.Site) *[]model.RoleGrant { return &s.Roles },
		name: func(v *model.RoleGrant) *string { return &v.Name }})
}

// index finds an entity by name in a list (-1: absent).
func (c collection[T]) index(list []T, name string) int {
	for i := range list {
		if *c.name(&list[i]) == name {
			return i
		}
	}
	return -1
}

func register[T any](s *Server, c collection[T]) {
	base := "/api/v1/" + c.path
	s.mux.HandleFunc("GET "+base, s.read(func(w http.ResponseWriter, r *http.Request) {
		all := *c.list(s.svc.Snapshot().Site)
		out := make([]T, 0, len(all))
		for i := range all {
			if c.filter == nil || c.filter(r, &all[i]) {
				out = append(out, all[i])
			}
		}
		writeJSON(w, http.StatusOK, out)
	}))
	s.mux.HandleFunc("GET "+base+"/{name}", s.read(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		all := *c.list(s.svc.Snapshot().Site)
		if i := c.index(all, name); i >= 0 {
			writeJSON(w, http.StatusOK, all[i])
			return
		}
		s.httpError(w, model.NotFound(c.kind, name))
	}))
	// PUT creates (201) or replaces (200) the entity, idempotently. The name in the body,
	// if given, must match the path.
	s.mux.HandleFunc("PUT "+base+"/{name}", s.write(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		var v T
		if err := decodeJSON(r, &v); err != nil {
			s.httpError(w, err)
			return
		}
		if n := c.name(&v); *n == "" {
			*n = name
		} else if *n != name {
			s.httpError(w, model.Invalid("%s name in body %q does not match the URL %q", c.kind, *n, name))
			return
		}
		uid := principal(r).UID
		s.update(w, r, func(site *model.Site) (int, error) {
			list := c.list(site)
			i := c.index(*list, name)
			if i < 0 {
				if c.own != nil {
					if err := c.own(uid, nil, &v); err != nil {
						return 0, err
					}
				}
				*list = append(*list, v)
				return http.StatusCreated, nil
			}
			if c.keep != nil {
				c.keep(&(*list)[i], &v)
			}
			if c.own != nil {
				if err := c.own(uid, &(*list)[i], &v); err != nil {
					return 0, err
				}
			}
			(*list)[i] = v
			return http.StatusOK, nil
		})
	}))
	s.mux.HandleFunc("DELETE "+base+"/{name}", s.write(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		s.update(w, r, func(site *model.Site) (int, error) {
			list := c.list(site)
			i := c.index(*list, name)
			if i < 0 {
				return 0, model.NotFound(c.kind, name)
			}
			*list = append((*list)[:i], (*list)[i+1:]...)
			return http.StatusOK, nil
		})
	}))
}

// addImageVersion publishes a new immutable version of an image
// (service.Images.AddVersion, which checks the store's copy when this server keeps the
// store).
func (s *Server) addImageVersion(w http.ResponseWriter, r *http.Request) {
	var v model.ImageVersion
	if err := decodeJSON(r, &v); err != nil {
		s.httpError(w, err)
		return
	}
	if v.Created.IsZero() {
		v.Created = time.Now().UTC().Truncate(time.Second)
	}
	changes, err := s.svc.Images.AddVersion(r.Context(), principal(r).Check, s.store, dryRun(r), r.PathValue("name"), v)
	s.answerImageWrite(w, r, http.StatusCreated, changes, err)
}
