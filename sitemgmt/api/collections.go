package api

import (
	"context"
	"net/http"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
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
	// put and del are the named operations behind PUT and DELETE: service.Bookings for
	// entities with bookings (pools, hosts, exceptions), which records who owns them
	// whatever the body says; service.Entities for the others.
	put func(ctx context.Context, p authz.Principal, dryRun bool, v T) (created bool, changes []model.Change, err error)
	del func(ctx context.Context, p authz.Principal, dryRun bool, name string) ([]model.Change, error)
}

func registerCollections(s *Server) {
	register(s, collection[model.Pool]{kind: "pool", path: "pools",
		list: func(s *model.Site) *[]model.Pool { return &s.Pools },
		name: func(v *model.Pool) *string { return &v.Name },
		put:  s.svc.Bookings.PutPool,
		del:  s.remover(model.EntityPool)})
	register(s, collection[model.Host]{kind: "host", path: "hosts",
		list: func(s *model.Site) *[]model.Host { return &s.Hosts },
		name: func(v *model.Host) *string { return &v.Name },
		filter: func(r *http.Request, h *model.Host) bool {
			p := r.URL.Query().Get("pool")
			return p == "" || h.Pool == p
		},
		put: s.svc.Bookings.PutHost,
		del: s.remover(model.EntityHost)})
	register(s, collection[model.BootServer]{kind: "boot server", path: "bootservers",
		list: func(s *model.Site) *[]model.BootServer { return &s.BootServers },
		name: func(v *model.BootServer) *string { return &v.Name },
		put:  s.svc.Entities.PutBootServer,
		del:  s.remover(model.EntityBootServer)})
	register(s, collection[model.Mode]{kind: "mode", path: "modes",
		list: func(s *model.Site) *[]model.Mode { return &s.Modes },
		name: func(v *model.Mode) *string { return &v.Name },
		put:  s.svc.Entities.PutMode,
		del:  s.remover(model.EntityMode)})
	register(s, collection[model.Image]{kind: "image", path: "images",
		list: func(s *model.Site) *[]model.Image { return &s.Images },
		name: func(v *model.Image) *string { return &v.Name },
		// A PUT of the image's description keeps its versions (service.Entities.PutImage).
		put: s.svc.Entities.PutImage,
		del: s.remover(model.EntityImage)})
	register(s, collection[model.Exception]{kind: "exception", path: "exceptions",
		list: func(s *model.Site) *[]model.Exception { return &s.Exceptions },
		name: func(v *model.Exception) *string { return &v.Name },
		// An exception belongs to whoever created it; changing it does not take it over.
		put: s.svc.Bookings.PutException,
		del: s.svc.Bookings.RemoveException})
	register(s, collection[model.RoleGrant]{kind: "role", path: "roles",
		list: func(s *model.Site) *[]model.RoleGrant { return &s.Roles },
		name: func(v *model.RoleGrant) *string { return &v.Name },
		put:  s.svc.Entities.PutRole,
		del:  s.remover(model.EntityRole)})
}

// remover is DELETE's operation for an entity of kind.
func (s *Server) remover(kind string) func(context.Context, authz.Principal, bool, string) ([]model.Change, error) {
	return func(ctx context.Context, p authz.Principal, dryRun bool, name string) ([]model.Change, error) {
		return s.svc.Entities.Remove(ctx, p, dryRun, kind, name)
	}
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
		created, changes, err := c.put(r.Context(), principal(r), dryRun(r), v)
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		s.written(w, r, status, changes, err)
	}))
	s.mux.HandleFunc("DELETE "+base+"/{name}", s.write(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		changes, err := c.del(r.Context(), principal(r), dryRun(r), name)
		s.written(w, r, http.StatusOK, changes, err)
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
	s.written(w, r, http.StatusCreated, changes, err)
}
