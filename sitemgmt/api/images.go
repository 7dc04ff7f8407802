package api

import (
	"net/http"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Image distribution (docs/publishing.md). Boot servers pull version directories from
// this server's store (Options.ImagesDir, served under /images/ like boot files), verify
// them and report what they hold; boot scripts and agent configurations only give a host
// what its boot server reported (resolve.Held).

func (s *Server) imageRoutes() {
	m := s.mux
	m.HandleFunc("GET /api/v1/bootservers/{name}/images", s.read(s.getBootImages))
	m.HandleFunc("POST /api/v1/bootservers/{name}/images", s.read(s.postBootImages))
	m.HandleFunc("PUT /api/v1/images/{name}/current", s.write(s.putCurrent))
	m.HandleFunc("GET /api/v1/distribution", s.read(s.getDistribution))
	m.HandleFunc("POST /api/v1/images/gc", s.write(s.postGC))
}

func (s *Server) getBootImages(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.svc.Snapshot().Site.BootServer(name) == nil {
		s.httpError(w, model.NotFound("boot server", name))
		return
	}
	bi, err := s.svc.Images.BootImages(name)
	if err != nil {
		s.httpError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, bi)
}

// maxReportBody bounds a boot server's report (a few hundred versions at most).
const maxReportBody = 1 << 20

func (s *Server) postBootImages(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// Checked before the body is read: only that boot server's own account reports.
	if err := principal(r).CheckBootServerReport(name); err != nil {
		s.httpError(w, err)
		return
	}
	if s.svc.Snapshot().Site.BootServer(name) == nil {
		s.httpError(w, model.NotFound("boot server", name))
		return
	}
	var rep wire.BootImagesReport
	r.Body = http.MaxBytesReader(w, r.Body, maxReportBody)
	if err := decodeJSON(r, &rep); err != nil {
		s.httpError(w, err)
		return
	}
	if err := s.svc.Images.ReportBootImages(r.Context(), name, rep.Held, s.opt.Now()); err != nil {
		s.serviceError(w, err)
		return
	}
	bi, err := s.svc.Images.BootImages(name)
	if err != nil {
		s.httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, bi)
}

// putCurrent switches an image's current version (service.Images.SetCurrent). A rollback
// is the same call with the previous version.
func (s *Server) putCurrent(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Version string `json:"version"`
	}
	if err := decodeJSON(r, &body); err != nil {
		s.httpError(w, err)
		return
	}
	changes, err := s.svc.Images.SetCurrent(r.Context(), principal(r).Check, dryRun(r), r.PathValue("name"), body.Version)
	s.written(w, r, http.StatusOK, changes, err)
}

func (s *Server) getDistribution(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("image")
	if name != "" && s.svc.Snapshot().Site.Image(name) == nil {
		s.httpError(w, model.NotFound("image", name))
		return
	}
	writeJSON(w, http.StatusOK, s.svc.Images.ImageStatus(name, s.opt.BootServer, s.opt.Now()))
}

// postGC removes unreferenced versions from the catalogue and, when this server has the
// store (ImagesDir), their directories from it (service.Images.GC).
func (s *Server) postGC(w http.ResponseWriter, r *http.Request) {
	res, err := s.svc.Images.GC(r.Context(), principal(r).Check, s.store, dryRun(r), r.URL.Query().Get("image"), s.opt.BootServer, s.opt.Now())
	if err != nil {
		s.httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
