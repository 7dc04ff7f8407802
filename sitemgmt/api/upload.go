package api

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Uploads of image version artefacts into the site manager's store (Options.ImagesDir):
//
//	PUT    /api/v1/images/{name}/versions/{version}/files/{file}   stream one artefact
//	POST   /api/v1/images/{name}/versions/{version}/publish        SHA256SUMS + register
//	DELETE /api/v1/images/{name}/versions/{version}/upload         discard what is staged
//
// A body is streamed to a temporary file in the staging area {ImagesDir}/.incoming/
// {image}/{version}/ through a fixed 1 MiB buffer and hashed on the way; it is never held
// in memory. Who may upload is decided from the image before a byte of the body is read
// (authz.Principal.CheckUpload), as are the size (Content-Length over Options.MaxUpload:
// 413) and the user's number of uploads in flight (429); a body without a length is cut
// off at the limit while it streams. Publishing writes SHA256SUMS (images/artefact) from
// the sums taken while streaming, renames the staging directory to {ImagesDir}/{image}/
// {version} and registers the version through the one write path, which authorises the
// diff again. A registered version, or a version directory already in the store, is
// never written again (409).
//
// The handlers below only decode, authorise and encode: the store's rules (staging,
// bounds, verification, the move into place) are sitemgmt/imagestore's, publishing is
// service.Images.Publish.

// DefaultMaxUpload bounds one uploaded artefact unless Options.MaxUpload says otherwise.
const DefaultMaxUpload = imagestore.DefaultMaxUpload

// DefaultUploadsPerUser bounds the uploads one user has in flight at once.
const DefaultUploadsPerUser = imagestore.DefaultUploadsPerUser

func (s *Server) uploadRoutes() {
	// The store is this server's when it has one (also what gc, publishing and serving
	// use); its bounds are the server's options.
	if s.opt.ImagesDir != "" {
		s.store = imagestore.New(s.opt.ImagesDir, imagestore.Limits{MaxUpload: s.opt.MaxUpload, UploadsPerUser: s.opt.UploadsPerUser,
			StagedPerUser: s.opt.StagedPerUser, StagingTTL: s.opt.StagingTTL}, s.opt.Log, s.opt.Now)
	}
	base := "/api/v1/images/{name}/versions/{version}"
	s.mux.HandleFunc("PUT "+base+"/files/{file}", s.uploadFile)
	s.mux.HandleFunc("POST "+base+"/publish", s.write(s.publishUpload))
	s.mux.HandleFunc("DELETE "+base+"/upload", s.write(s.discardUpload))
}

// uploadTarget asks the service whether the user may upload to the image's version now
// (service.Images.MayUpload): everything an upload, publish or discard decides
// before touching a body or the store. It answers the request itself when it refuses.
func (s *Server) uploadTarget(w http.ResponseWriter, r *http.Request) (im *model.Image, version string, ok bool) {
	version = r.PathValue("version")
	im, err := s.svc.Images.MayUpload(principal(r), s.store, r.PathValue("name"), version)
	if err != nil {
		s.httpError(w, err)
		return nil, "", false
	}
	return im, version, true
}

// uploadFile streams one artefact into the staging area (imagestore.Store.BeginUpload,
// Upload.Receive).
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if p.IsHost() {
		writeError(w, http.StatusForbidden, hostOnlyAgent(p.Host))
		return
	}
	if why := canWrite(p); why != "" {
		writeError(w, http.StatusForbidden, why)
		return
	}
	r = r.WithContext(s.contextWith(r, p))
	im, version, ok := s.uploadTarget(w, r)
	if !ok {
		return
	}
	up, err := s.store.BeginUpload(p.UID, im.Name, version, r.PathValue("file"), r.ContentLength)
	if err != nil {
		s.storeError(w, err)
		return
	}
	defer up.Close()
	max := s.store.Limits.MaxUpload
	res, err := up.Receive(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	var rerr *imagestore.ReadError
	switch {
	case errors.As(err, &mbe):
		// Keep reading after the answer (lingerDrain): HTTP/1 stops a request's body
		// once the response starts, unless the handler asks for full duplex first.
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		s.httpError(w, errstatus.TooLarge{Limit: max})
		lingerDrain(rc, r.Body)
		return
	case errors.As(err, &rerr):
		// A read error is the client's (it went away, or sent less than it declared).
		s.httpError(w, model.Invalid("%v", rerr))
		return
	case err != nil:
		// A write error is the store's (a full store, 507): answered while the client may
		// still be sending, so drained like the 413 above, or the client would see its
		// connection reset instead of the answer. (Once the body is read the drain reads
		// nothing.)
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		s.storeError(w, err)
		lingerDrain(rc, r.Body)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

// storeError answers an error of the image store: its own failures 500 with a message
// that names the image, version and file, never the server's paths (the store logged the
// OS error), too many uploads in flight 429, everything else as httpError maps it (a
// full store 507).
func (s *Server) storeError(w http.ResponseWriter, err error) {
	var fail *imagestore.Failure
	var many *imagestore.TooMany
	switch {
	case errors.As(err, &fail):
		writeError(w, http.StatusInternalServerError, fail.Msg)
	case errors.As(err, &many):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, many.Msg)
	default:
		s.httpError(w, err)
	}
}

// publishUpload turns the staged files of a version into a published, registered one
// (service.Images.Publish).
func (s *Server) publishUpload(w http.ResponseWriter, r *http.Request) {
	var req wire.PublishRequest
	if err := decodeJSON(r, &req); err != nil {
		s.httpError(w, err)
		return
	}
	im, version, ok := s.uploadTarget(w, r)
	if !ok {
		return
	}
	p := principal(r)
	changes, err := s.svc.Images.Publish(r.Context(), p.Check, s.store, dryRun(r), im.Name, version, req, time.Now())
	if err != nil {
		s.storeError(w, err)
		return
	}
	if dryRun(r) {
		writeJSON(w, http.StatusOK, map[string]any{"dryRun": true, "changes": changeList(changes)})
		return
	}
	s.opt.Log.Info("image version published", "user", p.UID, "image", im.Name, "version", version)
	writeJSON(w, http.StatusCreated, map[string]any{"dryRun": false, "changes": changeList(changes)})
}

// discardUpload removes what is staged for a version.
func (s *Server) discardUpload(w http.ResponseWriter, r *http.Request) {
	im, version, ok := s.uploadTarget(w, r)
	if !ok {
		return
	}
	existed, err := s.store.Discard(im.Name, version)
	if err != nil {
		s.storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"image": im.Name, "version": version, "discarded": existed})
}

// lingerDrain reads and discards, for a moment, what the client still sends after an
// early answer (413 while streaming a body of undeclared length): closing a socket with
// unread data makes the kernel reset the connection, and a client still writing its body
// then sees "connection reset by peer" instead of the answer. Bounded in bytes and time,
// as Apache's lingering close; body is the request's own body (the MaxBytesReader around
// it has stopped reading), and rc's request must be in full duplex.
func lingerDrain(rc *http.ResponseController, body io.Reader) {
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, body, lingerBytes)
}

// How long and how much lingerDrain reads at most.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 8 << 20
)
