// Package imagestore is the site manager's image store on disk (overtime serve
// --images-dir, api.Options.ImagesDir): a published version's files in IMAGE/VERSION
// (model.VersionPath) and uploads in progress below the staging area .incoming. Every
// rule about the store's files lives here, whichever front end or server asks:
//
//   - staging (staging.go): streaming an upload into .incoming with its sha256 record,
//     the uploads in flight (inflight.go), the per-user bound and the sweep of forgotten
//     uploads;
//   - verification (verify.go): what a published version's directory must hold
//     (SHA256SUMS listing the root image with the catalogue's sha256, also the boot
//     servers' rule), and a course VM's disks (images/diskcheck);
//   - publishing (publish.go): SHA256SUMS and the move of a staged version into
//     IMAGE/VERSION, and taking it back when the catalogue refuses it;
//   - gc: deleting the directories of versions gc removed, only those proven to be theirs;
//   - serving (serve.go): which files below a store (or a boot file directory) may be
//     downloaded, and whether a version's boot files are there.
//
// The catalogue (which versions exist, who may publish) is service.Images'; the HTTP
// encoding is the API's. Errors are the site model's (model.Invalid, model.Conflict,
// model.NotFound), errstatus.StoreFull for a full store (507), *Failure for the store's
// own failures (500, message without the server's paths) and *TooMany for a user's
// uploads in flight (429).
package imagestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Incoming is the staging area below the store's root: on the same file system, so that
// publishing is a rename; its name starts with a dot, so no image (names.Name) or
// derived version path is ever inside it, and nothing below it is served.
const Incoming = ".incoming"

// The default bounds of a store (Limits).
const (
	// DefaultMaxUpload bounds one uploaded artefact.
	DefaultMaxUpload = 64 << 30
	// DefaultUploadsPerUser bounds the uploads one user has in flight at once.
	DefaultUploadsPerUser = 2
)

// Limits bound what users may put into the store; zero fields take the defaults.
type Limits struct {
	MaxUpload      int64         // one artefact (DefaultMaxUpload)
	UploadsPerUser int           // uploads one user has in flight (DefaultUploadsPerUser)
	StagedPerUser  int64         // bytes one user keeps in unpublished uploads (DefaultStagedPerUser)
	StagingTTL     time.Duration // a staged version untouched this long is swept (DefaultStagingTTL)
}

// Store is the image store at Root, as one site manager process keeps it: the uploads in
// flight are this process's, the files are on disk.
type Store struct {
	Root   string
	Limits Limits
	log    *slog.Logger
	now    func() time.Time
	flight inflight
}

// New opens the store at root (a directory; it is not created). log and now may be nil
// (slog.Default, time.Now).
func New(root string, lim Limits, log *slog.Logger, now func() time.Time) *Store {
	if lim.MaxUpload <= 0 {
		lim.MaxUpload = DefaultMaxUpload
	}
	if lim.UploadsPerUser <= 0 {
		lim.UploadsPerUser = DefaultUploadsPerUser
	}
	if lim.StagedPerUser <= 0 {
		lim.StagedPerUser = DefaultStagedPerUser
	}
	if lim.StagingTTL <= 0 {
		lim.StagingTTL = DefaultStagingTTL
	}
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	st := &Store{Root: root, Limits: lim, log: log, now: now}
	st.flight.init()
	return st
}

// Failure is the store's own failure (the client is told 500): Msg names the image,
// version and file, never a path of the server; Err, which has them, went to the log.
type Failure struct {
	Msg string
	Err error
}

func (f *Failure) Error() string { return f.Msg }
func (f *Failure) Unwrap() error { return f.Err }

// TooMany refuses an upload beyond the user's uploads in flight (429: retry later).
type TooMany struct{ Msg string }

func (e *TooMany) Error() string { return e.Msg }

// fail turns a failure of the store's file system on what of image's version into the
// error the client sees: errstatus.StoreFull when the store is full (ENOSPC, EDQUOT),
// else *Failure. The OS error, which names the server's paths, goes to the log only.
func (st *Store) fail(image, version, what string, err error) error {
	if Full(err) {
		st.log.Warn("image store full", "image", image, "version", version, "file", what, "err", err)
		return errstatus.StoreFull{Msg: fmt.Sprintf("the image store is full: %s of image %s version %s could not be written; free space (overtime image gc) and retry", what, image, version)}
	}
	st.log.Error("image store", "image", image, "version", version, "file", what, "err", err)
	return &Failure{Msg: fmt.Sprintf("the image store failed on %s of image %s version %s (the server log has the details)", what, image, version), Err: err}
}

// Full reports whether err is the store's file system running out of space or quota:
// the client is told 507 Insufficient Storage, not 500.
func Full(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// Left is a removed version whose directory gc did not delete, and why.
type Left struct {
	Image, Version, Why string
	Err                 error // the file system's error, with paths: for the server log only
}

func (l Left) String() string {
	return fmt.Sprintf("image %s version %s: %s", l.Image, l.Version, l.Why)
}

// Lock reserves version image/version against uploads and publishes while its directory
// is deleted (api's upload tracker); an error means one is in progress.
type Lock func(image, version string) (release func(), err error)

// GC deletes the directories of the versions gc removed from the catalogue (site is the
// catalogue after gc), as RemoveVersions proves they may go, with no upload or publish of
// them in flight. It returns the deleted paths (relative to Root) and logs what stays.
func (st *Store) GC(site *model.Site, removed []wire.BootImage) []string {
	lock := func(image, version string) (func(), error) {
		return st.flight.exclusive(model.ImageVersionName(image, version))
	}
	deleted, left, err := RemoveVersions(st.Root, site, removed, lock)
	if err != nil {
		st.log.Error("gc: the image store cannot be read; no version directory deleted", "err", err)
	}
	for _, l := range left {
		st.log.Warn("gc: a removed version's directory stays in the image store", "image", l.Image, "version", l.Version, "why", l.Why, "err", l.Err)
	}
	return deleted
}

// RemoveVersions deletes from the store at root the directories of the versions gc
// removed from the catalogue; site is the catalogue after gc. It deletes only a directory
// it can prove is the removed version's own:
//
//   - its path is the derived IMAGE/VERSION (an older release let a version state any
//     path; such a version's directory may be another's, and is left alone);
//   - no version still in the catalogue, of any image, has that path, a path inside it
//     or a path it is inside;
//   - no upload or publish of that version is in progress (lock);
//   - IMAGE and IMAGE/VERSION are real directories, not symbolic links, and resolve to
//     exactly root/IMAGE/VERSION: inside the store, outside the staging area.
//
// It returns the deleted paths (relative to root) and what it left, with why. A version
// whose directory is not there is in neither list.
func RemoveVersions(root string, site *model.Site, removed []wire.BootImage, lock Lock) (deleted []string, left []Left, err error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, nil, fmt.Errorf("image store: %w", err)
	}
	for _, b := range removed {
		why, ferr := removable(site, b), error(nil)
		if why == "" {
			why, ferr = removeDir(realRoot, b, lock)
		}
		switch why {
		case "":
			deleted = append(deleted, b.Path)
		case gone:
		default:
			left = append(left, Left{Image: b.Image, Version: b.Version, Why: why, Err: ferr})
		}
	}
	return deleted, left, nil
}

// gone: the version's directory is not in the store; nothing to delete.
const gone = "\x00gone"

// removable decides from the catalogue alone ("" yes, else why not).
func removable(site *model.Site, b wire.BootImage) string {
	if names.Name("image", b.Image) != nil || names.Version(b.Version) != nil {
		return "not a valid image and version name"
	}
	own := model.VersionPath(b.Image, b.Version)
	if b.Path != own {
		return fmt.Sprintf("its path %q is not its own directory %s (stored by an earlier release): delete that directory by hand if nothing else uses it", b.Path, own)
	}
	for i := range site.Images {
		im := &site.Images[i]
		for _, v := range im.Versions {
			if model.PathsOverlap(v.Path, own) {
				return fmt.Sprintf("image %s version %s still uses %s", im.Name, v.Version, v.Path)
			}
		}
	}
	return ""
}

// removeDir deletes root/IMAGE/VERSION after checking it on disk ("" done, gone, else
// why not and the file system's error, if any).
func removeDir(root string, b wire.BootImage, lock Lock) (string, error) {
	if lock != nil {
		release, err := lock(b.Image, b.Version)
		if err != nil {
			return "an upload or publish of it is in progress", nil
		}
		defer release()
	}
	imDir := filepath.Join(root, b.Image)
	dir := filepath.Join(imDir, b.Version)
	for _, d := range []string{imDir, dir} {
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return gone, nil
		case err != nil:
			return "its directory cannot be examined", err
		case fi.Mode()&os.ModeSymlink != 0:
			return "its directory is a symbolic link: not deleted", nil
		case !fi.IsDir():
			return "it is not a directory: not deleted", nil
		}
	}
	// Lstat above checked the two components; resolving the whole path proves no other
	// component leads elsewhere, and that it is neither outside the store nor staging.
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil || resolved != dir || !strings.HasPrefix(resolved, root+string(filepath.Separator)) ||
		strings.HasPrefix(resolved, filepath.Join(root, Incoming)+string(filepath.Separator)) {
		return "its directory does not resolve to its own place in the store: not deleted", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "deleting its directory failed", err
	}
	return "", nil
}
