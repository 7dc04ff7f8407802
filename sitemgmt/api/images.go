package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
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
	bi, err := s.svc.BootImages(name)
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
	if err := s.svc.ReportBootImages(r.Context(), name, rep.Held, s.opt.Now()); err != nil {
		s.serviceError(w, err)
		return
	}
	bi, err := s.svc.BootImages(name)
	if err != nil {
		s.httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, bi)
}

// putCurrent switches an image's current version: one attribute of the image entry, so
// every reader sees the old or the new version, never a mixture. A rollback is the same
// call with the previous version.
func (s *Server) putCurrent(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var body struct {
		Version string `json:"version"`
	}
	if err := decodeJSON(r, &body); err != nil {
		s.httpError(w, err)
		return
	}
	s.update(w, r, func(site *model.Site) (int, error) {
		im := site.Image(name)
		if im == nil {
			return 0, model.NotFound("image", name)
		}
		if body.Version != "" && im.Version(body.Version) == nil {
			return 0, model.Invalid("image %s has no version %q (published: %s)", name, body.Version, versionList(im))
		}
		im.Current = body.Version
		return http.StatusOK, nil
	})
}

func versionList(im *model.Image) string {
	var v []string
	for _, x := range im.Versions {
		v = append(v, x.Version)
	}
	if len(v) == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}

func (s *Server) getDistribution(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("image")
	if name != "" && s.svc.Snapshot().Site.Image(name) == nil {
		s.httpError(w, model.NotFound("image", name))
		return
	}
	writeJSON(w, http.StatusOK, s.svc.ImageStatus(name, s.opt.BootServer, s.opt.Now()))
}

// postGC removes unreferenced versions from the catalogue and, when this server has the
// store (ImagesDir), their directories from it. Only after the catalogue no longer names
// them: a boot script rendered meanwhile never points at a deleted directory. Which
// directories may go is imagestore.RemoveVersions' to prove, not this handler's.
func (s *Server) postGC(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	res, err := s.svc.GC(r.Context(), p.Check, dryRun(r), r.URL.Query().Get("image"), s.opt.BootServer, s.opt.Now())
	if err != nil {
		s.httpError(w, err)
		return
	}
	if !res.DryRun && s.opt.ImagesDir != "" {
		lock := func(image, version string) (func(), error) {
			return s.uploads.exclusive(model.ImageVersionName(image, version))
		}
		deleted, left, err := imagestore.RemoveVersions(s.opt.ImagesDir, s.svc.Snapshot().Site, res.Removed, lock)
		if err != nil {
			s.opt.Log.Error("gc: the image store cannot be read; no version directory deleted", "err", err)
		}
		for _, l := range left {
			s.opt.Log.Warn("gc: a removed version's directory stays in the image store", "image", l.Image, "version", l.Version, "why", l.Why, "err", l.Err)
		}
		res.FilesRemoved = append(res.FilesRemoved, deleted...)
	}
	writeJSON(w, http.StatusOK, res)
}

// storeCheck refuses to publish a version whose directory in this server's store does
// not hold what is being published: when its SHA256SUMS is there, every file it lists
// must match (artefact.Verify) and it must list the root image with the published
// sha256; without a SHA256SUMS, a root image that is there must have the published size.
// A version whose directory is not in the store (yet) is accepted: its files may be
// placed on the boot servers by other means, and boot servers verify what they pull.
func (s *Server) storeCheck(image string, v *model.ImageVersion) error {
	if s.opt.ImagesDir == "" || model.ValidName("image", image) != nil || names.Version(v.Version) != nil {
		return nil // Validate reports a bad name
	}
	// The version's own directory, whatever path the request states (CheckVersionPaths
	// refuses any other).
	path := model.VersionPath(image, v.Version)
	dir := filepath.Join(s.opt.ImagesDir, filepath.FromSlash(path))
	files, err := artefact.Verify(dir)
	switch {
	case err == nil:
		for _, f := range files {
			if f.SHA256 == v.SHA256 && (f.Name == model.ImageRoot || !slices.ContainsFunc(files, func(x artefact.File) bool { return x.Name == model.ImageRoot })) {
				return nil
			}
		}
		return model.Invalid("refusing to publish image %s %s: %s/%s lists no file with sha256 %s (the root image's)", image, v.Version, path, artefact.SumsFile, v.SHA256)
	case errors.Is(err, artefact.ErrMismatch):
		// The error names the file by its path on the server: the client gets the name
		// below the version's directory only.
		msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
		if strings.Contains(msg, s.opt.ImagesDir) {
			s.opt.Log.Warn("image store: refusing a publication", "image", image, "version", v.Version, "err", err)
			msg = "a file does not match its checksum (the server log names it)"
		}
		return model.Invalid("refusing to publish image %s %s: the store's copy in %s is corrupt or truncated: %s", image, v.Version, path, msg)
	case errors.Is(err, fs.ErrNotExist):
		fi, serr := os.Stat(filepath.Join(dir, model.ImageRoot))
		if serr == nil && v.Size > 0 && fi.Size() != v.Size {
			return model.Invalid("refusing to publish image %s %s: %s/%s in the store has %d bytes, not %d (truncated?)", image, v.Version, path, model.ImageRoot, fi.Size(), v.Size)
		}
		return nil
	default:
		s.opt.Log.Error("image store: checking a publication failed", "image", image, "version", v.Version, "err", err)
		return model.Invalid("refusing to publish image %s %s: the store's copy in %s cannot be read (the server log has the details)", image, v.Version, path)
	}
}
