package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
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

// incomingDir is the staging area below the images directory: on the same file system,
// so that publishing is a rename; its name starts with a dot, and nothing below a dot
// directory is served (serveFrom) or is a published version.
const incomingDir = imagestore.Incoming

// DefaultMaxUpload bounds one uploaded artefact unless Options.MaxUpload says otherwise.
const DefaultMaxUpload = 64 << 30

// DefaultUploadsPerUser bounds the uploads one user has in flight at once.
const DefaultUploadsPerUser = 2

// uploadBuffer is the copy buffer of one upload: the memory an upload costs, whatever
// its size.
const uploadBuffer = 1 << 20

// uploads tracks what is being uploaded: per user (the quota) and per staged file and
// version (one writer per file; no publish while a file of the version streams).
type uploads struct {
	mu     sync.Mutex
	perUID map[string]int
	files  map[string]bool // image/version/name
	vers   map[string]int  // image/version → uploads in flight
	pub    map[string]bool // image/version being published or discarded
}

func (u *uploads) init() {
	u.perUID, u.files, u.vers, u.pub = map[string]int{}, map[string]bool{}, map[string]int{}, map[string]bool{}
}

// start admits one upload of file name of version key by uid.
func (u *uploads) start(uid, key, name string, limit int) (release func(), status int, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.perUID[uid] >= limit:
		return nil, http.StatusTooManyRequests, fmt.Errorf("%s has %d uploads in progress (at most %d): retry when one is done", uid, u.perUID[uid], limit)
	case u.files[key+"/"+name]:
		return nil, http.StatusConflict, fmt.Errorf("%s of %s is being uploaded by another request", name, key)
	case u.pub[key]:
		return nil, http.StatusConflict, fmt.Errorf("%s is being published or discarded", key)
	}
	u.perUID[uid]++
	u.files[key+"/"+name] = true
	u.vers[key]++
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.perUID[uid]--; u.perUID[uid] <= 0 {
			delete(u.perUID, uid)
		}
		delete(u.files, key+"/"+name)
		if u.vers[key]--; u.vers[key] <= 0 {
			delete(u.vers, key)
		}
	}, 0, nil
}

// busy reports whether version key has an upload, publish or discard in flight.
func (u *uploads) busy(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.vers[key] > 0 || u.pub[key]
}

// exclusive reserves version key for publishing or discarding: no upload into it runs.
func (u *uploads) exclusive(key string) (release func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.vers[key] > 0 || u.pub[key] {
		return nil, model.Conflict("%s has uploads in progress: publish when they are done", key)
	}
	u.pub[key] = true
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.pub, key)
	}, nil
}

func (s *Server) uploadRoutes() {
	s.uploads.init()
	base := "/api/v1/images/{name}/versions/{version}"
	s.mux.HandleFunc("PUT "+base+"/files/{file}", s.uploadFile)
	s.mux.HandleFunc("POST "+base+"/publish", s.write(s.publishUpload))
	s.mux.HandleFunc("DELETE "+base+"/upload", s.write(s.discardUpload))
}

// uploadTarget checks the path values and the user's right to upload to the image, and
// that the version is still open: everything an upload, publish or discard decides
// before touching a body or the store. It answers the request itself when it refuses.
func (s *Server) uploadTarget(w http.ResponseWriter, r *http.Request) (im *model.Image, version string, ok bool) {
	name, version := r.PathValue("name"), r.PathValue("version")
	if err := model.ValidName("image", name); err != nil {
		s.httpError(w, err)
		return nil, "", false
	}
	if err := names.Version(version); err != nil {
		s.httpError(w, model.Invalid("%v", err))
		return nil, "", false
	}
	if s.opt.ImagesDir == "" {
		writeError(w, http.StatusServiceUnavailable, "this site manager keeps no image store: start overtime serve with --images-dir to accept uploads")
		return nil, "", false
	}
	im = s.svc.Snapshot().Site.Image(name)
	if im == nil {
		s.httpError(w, model.NotFound("image", name))
		return nil, "", false
	}
	if err := principal(r).CheckUpload(im); err != nil {
		s.httpError(w, err)
		return nil, "", false
	}
	if im.Version(version) != nil {
		s.httpError(w, model.Conflict("image %s version %s is already published; versions are immutable, upload a new one", name, version))
		return nil, "", false
	}
	if _, err := os.Lstat(filepath.Join(s.opt.ImagesDir, name, version)); err == nil {
		s.httpError(w, model.Conflict("image %s version %s already has a directory in the image store; versions are immutable, upload a new one", name, version))
		return nil, "", false
	}
	return im, version, true
}

func (s *Server) stagingDir(image, version string) string {
	return filepath.Join(s.opt.ImagesDir, incomingDir, image, version)
}

// uploadFile streams one artefact into the staging area.
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
	file := r.PathValue("file")
	if err := artefact.ValidName(file); err != nil {
		s.httpError(w, model.Invalid("%v", err))
		return
	}
	max := s.opt.MaxUpload
	if r.ContentLength > max {
		s.httpError(w, errstatus.TooLarge{Limit: max})
		return
	}
	key := model.ImageVersionName(im.Name, version)
	release, status, err := s.uploads.start(p.UID, key, file, s.opt.UploadsPerUser)
	if err != nil {
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "5")
		}
		writeError(w, status, err.Error())
		return
	}
	defer release()
	if !s.stagingAdmits(w, p.UID, im.Name, version, file, r.ContentLength) {
		return
	}
	dir := s.stagingDir(im.Name, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.storeError(w, im.Name, version, "staging "+file, err)
		return
	}
	if r.ContentLength > 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err == nil && int64(st.Bavail)*st.Bsize < r.ContentLength {
			writeError(w, http.StatusInsufficientStorage, fmt.Sprintf("the image store is full: it has %d bytes free, %s of image %s version %s needs %d; free space (overtime image gc) and retry",
				int64(st.Bavail)*st.Bsize, file, im.Name, version, r.ContentLength))
			return
		}
	}
	tmp, err := os.CreateTemp(dir, "."+file+".part-*")
	if err != nil {
		s.storeError(w, im.Name, version, "staging "+file, err)
		return
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	body := http.MaxBytesReader(w, r.Body, max)
	n, err := io.CopyBuffer(io.MultiWriter(tmp, h), body, make([]byte, uploadBuffer))
	var mbe *http.MaxBytesError
	var pe *os.PathError // the only error of the store's: a write to tmp
	switch {
	case errors.As(err, &mbe):
		// Keep reading after the answer (lingerDrain): HTTP/1 stops a request's body
		// once the response starts, unless the handler asks for full duplex first.
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		s.httpError(w, errstatus.TooLarge{Limit: max})
		lingerDrain(rc, r.Body)
		return
	case errors.As(err, &pe):
		// A write error is the store's (a full store, 507): answered while the client may
		// still be sending, so drained like the 413 above, or the client would see its
		// connection reset instead of the answer.
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		s.storeError(w, im.Name, version, file, err)
		lingerDrain(rc, r.Body)
		return
	case err != nil:
		// A read error is the client's (it went away, or sent less than it declared).
		s.httpError(w, model.Invalid("upload of %s interrupted after %d bytes: %v", file, n, err))
		return
	}
	// The body is read: no drain needed from here on.
	if err := tmp.Sync(); err != nil {
		s.storeError(w, im.Name, version, file, err)
		return
	}
	if err := tmp.Close(); err != nil {
		s.storeError(w, im.Name, version, file, err)
		return
	}
	sum := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(dir, file)
	if err := os.Rename(tmp.Name(), final); err != nil {
		s.storeError(w, im.Name, version, file, err)
		return
	}
	done = true
	if err := atomicfile.WriteFile(filepath.Join(dir, imagestore.RecordName(file)), imagestore.Record{SHA256: sum, Size: n, UID: p.UID}.Format(), 0o644); err != nil {
		os.Remove(final)
		s.storeError(w, im.Name, version, "the checksum record of "+file, err)
		return
	}
	s.opt.Log.Info("image file uploaded", "user", p.UID, "image", im.Name, "version", version, "file", file, "bytes", n, "sha256", sum)
	writeJSON(w, http.StatusCreated, wire.UploadedFile{Image: im.Name, Version: version, Name: file, SHA256: sum, Size: n})
}

// stagingAdmits first removes the staged versions nobody touched for Options.StagingTTL
// (not those in flight), then bounds what uid keeps staged: the records of uid's staged
// files plus this upload's declared length (or nothing, when undeclared: it is cut at
// MaxUpload, and uploads in flight are bounded per user) must stay within
// Options.StagedPerUser. A lecturer who uploads and never publishes must not fill the
// store for everyone. It answers the request itself (507) when it refuses.
func (s *Server) stagingAdmits(w http.ResponseWriter, uid, image, version, file string, length int64) bool {
	removed, err := imagestore.SweepStaging(s.opt.ImagesDir, s.opt.StagingTTL, s.opt.Now(), s.uploads.busy)
	for _, key := range removed {
		s.opt.Log.Info("staged upload expired", "version", key, "after", s.opt.StagingTTL)
	}
	if err != nil {
		s.opt.Log.Error("image store: sweeping expired uploads", "err", err)
	}
	have, err := imagestore.StagedBytes(s.opt.ImagesDir, uid)
	if err != nil {
		s.storeError(w, image, version, "staging "+file, err)
		return false
	}
	if have+max(length, 0) > s.opt.StagedPerUser {
		writeError(w, http.StatusInsufficientStorage, fmt.Sprintf("%s of image %s version %s: user %s has %d bytes in unpublished uploads and may stage at most %d: publish them or discard them (DELETE /api/v1/images/IMAGE/versions/VERSION/upload) first; staged versions untouched for %s are removed",
			file, image, version, uid, have, s.opt.StagedPerUser, s.opt.StagingTTL))
		return false
	}
	return true
}

// storeError answers a failure of the image store's file system while writing (or
// reading) what of image's version: 507 when the store is full (ENOSPC, EDQUOT), else
// 500. The answer names the image, version and file, never the server's paths: the OS
// error, which has them, goes to the log only.
func (s *Server) storeError(w http.ResponseWriter, image, version, what string, err error) {
	if imagestore.Full(err) {
		s.opt.Log.Warn("image store full", "image", image, "version", version, "file", what, "err", err)
		writeError(w, http.StatusInsufficientStorage, fmt.Sprintf("the image store is full: %s of image %s version %s could not be written; free space (overtime image gc) and retry", what, image, version))
		return
	}
	s.opt.Log.Error("image store", "image", image, "version", version, "file", what, "err", err)
	writeError(w, http.StatusInternalServerError, fmt.Sprintf("the image store failed on %s of image %s version %s (the server log has the details)", what, image, version))
}

// staged lists the artefacts staged for a version with their sums: the files, not the
// dot files (parts in progress, sidecars).
func staged(dir string) ([]artefact.File, map[string]int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var files []artefact.File
	sizes := map[string]int64{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() || artefact.ValidName(name) != nil {
			continue
		}
		sum, size := "", int64(-1)
		if b, err := os.ReadFile(filepath.Join(dir, imagestore.RecordName(name))); err == nil {
			if rec, ok := imagestore.ParseRecord(b); ok {
				sum, size = rec.SHA256, rec.Size
			}
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, err
		}
		if sum == "" || fi.Size() != size {
			// No record of the stream (or a different file): hash it now.
			if sum, size, err = artefact.Sum(filepath.Join(dir, name)); err != nil {
				return nil, nil, err
			}
		}
		files = append(files, artefact.File{Name: name, SHA256: sum})
		sizes[name] = size
	}
	return files, sizes, nil
}

// publishUpload turns the staged files of a version into a published, registered one.
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
	key := model.ImageVersionName(im.Name, version)
	release, err := s.uploads.exclusive(key)
	if err != nil {
		s.httpError(w, err)
		return
	}
	defer release()
	dir := s.stagingDir(im.Name, version)
	files, sizes, err := staged(dir)
	if err != nil {
		s.storeError(w, im.Name, version, "the staged files", err)
		return
	}
	if len(files) == 0 {
		s.httpError(w, model.Invalid("image %s version %s: nothing uploaded to publish", im.Name, version))
		return
	}
	var have []string
	for _, f := range files {
		have = append(have, f.Name)
	}
	sort.Strings(have)
	if req.Files != nil {
		want := append([]string(nil), req.Files...)
		sort.Strings(want)
		if !slices.Equal(want, have) {
			s.httpError(w, model.Invalid("image %s version %s: staged files %v, the request expects %v; upload what is missing or discard the upload", im.Name, version, have, want))
			return
		}
	}
	root := req.Root
	switch {
	case root != "":
	case slices.Contains(have, model.ImageRoot):
		root = model.ImageRoot
	case slices.Contains(have, vmspec.DiskFile):
		root = vmspec.DiskFile
	case len(have) == 1:
		root = have[0]
	default:
		s.httpError(w, model.Invalid("image %s version %s: which file is the root image? name it (root) among %v", im.Name, version, have))
		return
	}
	var rootSum string
	for _, f := range files {
		if f.Name == root {
			rootSum = f.SHA256
		}
	}
	if rootSum == "" {
		s.httpError(w, model.Invalid("image %s version %s: root %s was not uploaded (staged: %v)", im.Name, version, root, have))
		return
	}
	// A course VM's disks run on every PC of its pool: checked here, whoever uploaded
	// them, before anything is published (images/diskcheck).
	if im.Kind == model.ImageCourseVM && !s.checkCourseVM(w, r, im.Name, version, dir, have) {
		return
	}
	v := model.ImageVersion{Version: version, SHA256: rootSum, Size: sizes[root],
		Path: model.VersionPath(im.Name, version), Created: time.Now().UTC().Truncate(time.Second)}
	register := func(dry bool) ([]model.Change, error) {
		return s.svc.Update(r.Context(), principal(r).Check, dry, func(site *model.Site) error {
			cur := site.Image(im.Name)
			if cur == nil {
				return model.NotFound("image", im.Name)
			}
			if cur.Version(version) != nil {
				return model.Conflict("image %s version %s already exists; versions are immutable, publish a new one", im.Name, version)
			}
			cur.Versions = append(cur.Versions, v)
			return nil
		})
	}
	// Judge the publication first (authorisation, validation), then move the files, then
	// write: a refused publication leaves the store as it was.
	changes, err := register(true)
	if err != nil || dryRun(r) {
		if err != nil {
			s.httpError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"dryRun": true, "changes": changeList(changes)})
		return
	}
	// Every step that can fail (a full store: 507) comes before the version is registered
	// and leaves the staging area as it was, so that the same publish can be retried:
	// SHA256SUMS is written whole or not at all (atomicfile) and taken back, the rename
	// moves the whole directory or nothing and is undone, and the sidecars go only once
	// the version is registered.
	sums := filepath.Join(dir, artefact.SumsFile)
	if err := atomicfile.WriteFile(sums, artefact.Format(files), 0o644); err != nil {
		s.storeError(w, im.Name, version, artefact.SumsFile, err)
		return
	}
	unstage := func() { os.Remove(sums) }
	final := filepath.Join(s.opt.ImagesDir, filepath.FromSlash(model.VersionPath(im.Name, version)))
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		unstage()
		s.storeError(w, im.Name, version, "the image's directory", err)
		return
	}
	// The staging directory and its files were made 0755/0600 by CreateTemp: published
	// artefacts are world-readable (they are exported read-only to every PC).
	for _, f := range files {
		if err := os.Chmod(filepath.Join(dir, f.Name), 0o644); err != nil {
			unstage()
			s.storeError(w, im.Name, version, f.Name, err)
			return
		}
	}
	if err := os.Rename(dir, final); err != nil {
		unstage()
		s.storeError(w, im.Name, version, "the version's directory", err)
		return
	}
	// Back to staging, so that a retry finds the files where it looks for them.
	restage := func() {
		if rerr := os.Rename(final, dir); rerr != nil {
			s.opt.Log.Error("image store: moving a failed publication back to staging failed", "image", im.Name, "version", version, "err", rerr)
			return
		}
		unstage()
	}
	// The rename is durable before the catalogue names the version. Some file systems
	// (FUSE, network) cannot sync a directory at all: only a real failure counts.
	if err := syncDir(filepath.Dir(final)); err != nil && (imagestore.Full(err) || errors.Is(err, syscall.EIO)) {
		restage()
		s.storeError(w, im.Name, version, "the version's directory", err)
		return
	}
	if changes, err = register(false); err != nil {
		restage()
		s.httpError(w, err)
		return
	}
	for _, f := range files {
		os.Remove(filepath.Join(final, imagestore.RecordName(f.Name)))
	}
	os.Remove(filepath.Dir(dir)) // the image's staging directory, when it is empty now
	s.opt.Log.Info("image version published", "user", principal(r).UID, "image", im.Name, "version", version, "files", have)
	writeJSON(w, http.StatusCreated, map[string]any{"dryRun": false, "changes": changeList(changes)})
}

// discardUpload removes what is staged for a version.
func (s *Server) discardUpload(w http.ResponseWriter, r *http.Request) {
	im, version, ok := s.uploadTarget(w, r)
	if !ok {
		return
	}
	release, err := s.uploads.exclusive(model.ImageVersionName(im.Name, version))
	if err != nil {
		s.httpError(w, err)
		return
	}
	defer release()
	dir := s.stagingDir(im.Name, version)
	_, err = os.Lstat(dir)
	existed := err == nil
	if err := os.RemoveAll(dir); err != nil {
		s.storeError(w, im.Name, version, "the staged files", err)
		return
	}
	os.Remove(filepath.Dir(dir))
	writeJSON(w, http.StatusOK, map[string]any{"image": im.Name, "version": version, "discarded": existed})
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
