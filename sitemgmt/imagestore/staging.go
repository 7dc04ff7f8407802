package imagestore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// The staging area is where a lecturer's bytes wait to be published. Without bounds a
// lecturer could fill the store for everyone by uploading and never publishing: each
// staged file records who uploaded it, what one user keeps staged is bounded
// (DefaultStagedPerUser), and a staged version nobody touched for DefaultStagingTTL is
// removed at the next upload.
const (
	DefaultStagedPerUser = 128 << 30
	DefaultStagingTTL    = 7 * 24 * time.Hour
)

// Record is what the store keeps beside a staged file (RecordName): the sha256 and size
// taken while it streamed, and the uploader.
type Record struct {
	SHA256 string
	Size   int64
	UID    string
}

// RecordName is the name of file's record in its staging directory: a dot file, so that
// it is never a staged artefact itself.
func RecordName(file string) string { return "." + file + ".sha256" }

// Format is the record's content: "SHA256 SIZE UID\n".
func (r Record) Format() []byte {
	return []byte(r.SHA256 + " " + strconv.FormatInt(r.Size, 10) + " " + r.UID + "\n")
}

// ParseRecord reads a record; one without an uploader (written before records named
// one) has UID "".
func ParseRecord(b []byte) (Record, bool) {
	f := strings.Fields(string(b))
	if len(f) < 2 || len(f) > 3 || names.SHA256(f[0]) != nil {
		return Record{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n < 0 {
		return Record{}, false
	}
	r := Record{SHA256: f[0], Size: n}
	if len(f) == 3 {
		r.UID = f[2]
	}
	return r, true
}

// stagedVersions lists the staging directories below root: IMAGE/VERSION of each.
func stagedVersions(root string) ([][2]string, error) {
	base := filepath.Join(root, Incoming)
	images, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, im := range images {
		if !im.IsDir() {
			continue
		}
		vers, err := os.ReadDir(filepath.Join(base, im.Name()))
		if err != nil {
			return nil, err
		}
		for _, v := range vers {
			if v.IsDir() {
				out = append(out, [2]string{im.Name(), v.Name()})
			}
		}
	}
	return out, nil
}

// StagedBytes is what uid keeps staged below root: the sizes of the staged files whose
// records name uid (files still streaming are bounded by the uploads in flight).
func StagedBytes(root, uid string) (int64, error) {
	vers, err := stagedVersions(root)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, v := range vers {
		dir := filepath.Join(root, Incoming, v[0], v[1])
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // discarded or published meanwhile
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".sha256") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			if r, ok := ParseRecord(b); ok && r.UID == uid {
				total += r.Size
			}
		}
	}
	return total, nil
}

// SweepStaging removes the staged versions below root that nobody touched for longer
// than ttl (the newest modification of the directory and its files) and that busy does
// not report in use (an upload or publish in flight: busy("IMAGE/VERSION")). It returns
// the removed IMAGE/VERSION names.
func SweepStaging(root string, ttl time.Duration, now time.Time, busy func(key string) bool) ([]string, error) {
	vers, err := stagedVersions(root)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, v := range vers {
		key := v[0] + "/" + v[1]
		dir := filepath.Join(root, Incoming, v[0], v[1])
		if busy(key) || !untouchedSince(dir, now.Add(-ttl)) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return removed, err
		}
		os.Remove(filepath.Dir(dir)) // the image's staging directory, when empty now
		removed = append(removed, key)
	}
	return removed, nil
}

// untouchedSince: dir and everything directly in it were last modified before t.
func untouchedSince(dir string, t time.Time) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.ModTime().Before(t) {
		return false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(t) {
			return false
		}
	}
	return true
}

// uploadBuffer is the copy buffer of one upload: the memory an upload costs, whatever
// its size.
const uploadBuffer = 1 << 20

// stagingDir is where version's uploads of image wait.
func (st *Store) stagingDir(image, version string) string {
	return filepath.Join(st.Root, Incoming, image, version)
}

// CheckNew refuses (409) a version that already has a directory in the store: versions
// are immutable, whether or not the catalogue names this one.
func (st *Store) CheckNew(image, version string) error {
	if _, err := os.Lstat(filepath.Join(st.Root, image, version)); err == nil {
		return model.Conflict("image %s version %s already has a directory in the image store; versions are immutable, upload a new one", image, version)
	}
	return nil
}

// Upload is one artefact being streamed into the staging area (BeginUpload, Receive,
// Close).
type Upload struct {
	st                        *Store
	uid, image, version, file string
	dir                       string
	tmp                       *os.File
	release                   func()
	done                      bool
}

// ReadError is a failure to read the upload's body: the client's (it went away, sent
// less than it declared, or more than allowed: then it wraps *http.MaxBytesError).
type ReadError struct {
	File string
	N    int64 // bytes read before
	Err  error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("upload of %s interrupted after %d bytes: %v", e.File, e.N, e.Err)
}
func (e *ReadError) Unwrap() error { return e.Err }

// BeginUpload admits uid's upload of file (length bytes, or -1 when undeclared) as part
// of image's version, before a byte of it is read: a valid artefact name, a declared
// length within Limits.MaxUpload (413), the user's uploads in flight (429, *TooMany), one
// writer per file and none while the version is published (409), the staging area's
// bounds (stagingAdmits) and the file system's free space (507). The caller has checked
// the catalogue and uid's right to upload (service.Images). Close the upload when done.
func (st *Store) BeginUpload(uid, image, version, file string, length int64) (*Upload, error) {
	if err := artefact.ValidName(file); err != nil {
		return nil, model.Invalid("%v", err)
	}
	if length > st.Limits.MaxUpload {
		return nil, errstatus.TooLarge{Limit: st.Limits.MaxUpload}
	}
	release, err := st.flight.start(uid, model.ImageVersionName(image, version), file, st.Limits.UploadsPerUser)
	if err != nil {
		return nil, err
	}
	up := &Upload{st: st, uid: uid, image: image, version: version, file: file, dir: st.stagingDir(image, version), release: release}
	if err := up.open(length); err != nil {
		up.Close()
		return nil, err
	}
	return up, nil
}

func (up *Upload) open(length int64) error {
	st := up.st
	if err := st.stagingAdmits(up.uid, up.image, up.version, up.file, length); err != nil {
		return err
	}
	if err := os.MkdirAll(up.dir, 0o755); err != nil {
		return st.fail(up.image, up.version, "staging "+up.file, err)
	}
	if length > 0 {
		var fs syscall.Statfs_t
		if err := syscall.Statfs(up.dir, &fs); err == nil && int64(fs.Bavail)*fs.Bsize < length {
			return errstatus.StoreFull{Msg: fmt.Sprintf("the image store is full: it has %d bytes free, %s of image %s version %s needs %d; free space (overtime image gc) and retry",
				int64(fs.Bavail)*fs.Bsize, up.file, up.image, up.version, length)}
		}
	}
	tmp, err := os.CreateTemp(up.dir, "."+up.file+".part-*")
	if err != nil {
		return st.fail(up.image, up.version, "staging "+up.file, err)
	}
	up.tmp = tmp
	return nil
}

// errReader remembers its reader's error, so that a failed copy tells the client's
// failure (reading the body) from the store's (writing the file).
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// Receive streams body to the staged file through a fixed buffer, hashing it on the way
// (never held in memory), and records its sha256, size and uploader beside it
// (RecordName). A body that fails to read is *ReadError; a store that fails to write,
// errstatus.StoreFull or *Failure.
func (up *Upload) Receive(body io.Reader) (wire.UploadedFile, error) {
	st, tmp := up.st, up.tmp
	h := sha256.New()
	rd := &errReader{r: body}
	n, err := io.CopyBuffer(io.MultiWriter(tmp, h), rd, make([]byte, uploadBuffer))
	switch {
	case err != nil && rd.err != nil && errors.Is(err, rd.err):
		return wire.UploadedFile{}, &ReadError{File: up.file, N: n, Err: err}
	case err != nil:
		return wire.UploadedFile{}, st.fail(up.image, up.version, up.file, err)
	}
	if err := tmp.Sync(); err != nil {
		return wire.UploadedFile{}, st.fail(up.image, up.version, up.file, err)
	}
	if err := tmp.Close(); err != nil {
		return wire.UploadedFile{}, st.fail(up.image, up.version, up.file, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(up.dir, up.file)
	if err := os.Rename(tmp.Name(), final); err != nil {
		return wire.UploadedFile{}, st.fail(up.image, up.version, up.file, err)
	}
	up.done = true
	if err := atomicfile.WriteFile(filepath.Join(up.dir, RecordName(up.file)), Record{SHA256: sum, Size: n, UID: up.uid}.Format(), 0o644); err != nil {
		os.Remove(final)
		return wire.UploadedFile{}, st.fail(up.image, up.version, "the checksum record of "+up.file, err)
	}
	st.log.Info("image file uploaded", "user", up.uid, "image", up.image, "version", up.version, "file", up.file, "bytes", n, "sha256", sum)
	return wire.UploadedFile{Image: up.image, Version: up.version, Name: up.file, SHA256: sum, Size: n}, nil
}

// Close ends the upload: a part not received whole is removed, and the upload no longer
// counts as in flight.
func (up *Upload) Close() {
	if up.tmp != nil && !up.done {
		up.tmp.Close()
		os.Remove(up.tmp.Name())
		up.done = true
	}
	if up.release != nil {
		up.release()
		up.release = nil
	}
}

// stagingAdmits first removes the staged versions nobody touched for Limits.StagingTTL
// (not those in flight), then bounds what uid keeps staged: the records of uid's staged
// files plus this upload's declared length (or nothing, when undeclared: it is cut at
// MaxUpload, and uploads in flight are bounded per user) must stay within
// Limits.StagedPerUser. A lecturer who uploads and never publishes must not fill the
// store for everyone (507).
func (st *Store) stagingAdmits(uid, image, version, file string, length int64) error {
	removed, err := SweepStaging(st.Root, st.Limits.StagingTTL, st.now(), st.flight.busy)
	for _, key := range removed {
		st.log.Info("staged upload expired", "version", key, "after", st.Limits.StagingTTL)
	}
	if err != nil {
		st.log.Error("image store: sweeping expired uploads", "err", err)
	}
	have, err := StagedBytes(st.Root, uid)
	if err != nil {
		return st.fail(image, version, "staging "+file, err)
	}
	if have+max(length, 0) > st.Limits.StagedPerUser {
		return errstatus.StoreFull{Msg: fmt.Sprintf("%s of image %s version %s: user %s has %d bytes in unpublished uploads and may stage at most %d: publish them or discard them (DELETE /api/v1/images/IMAGE/versions/VERSION/upload) first; staged versions untouched for %s are removed",
			file, image, version, uid, have, st.Limits.StagedPerUser, st.Limits.StagingTTL)}
	}
	return nil
}

// Discard removes what is staged for image's version (existed: there was something),
// unless an upload into it is in flight (409).
func (st *Store) Discard(image, version string) (existed bool, err error) {
	release, err := st.flight.exclusive(model.ImageVersionName(image, version))
	if err != nil {
		return false, err
	}
	defer release()
	dir := st.stagingDir(image, version)
	_, err = os.Lstat(dir)
	existed = err == nil
	if err := os.RemoveAll(dir); err != nil {
		return existed, st.fail(image, version, "the staged files", err)
	}
	os.Remove(filepath.Dir(dir))
	return existed, nil
}
