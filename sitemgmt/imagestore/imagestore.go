// Package imagestore is the site manager's image store on disk (overtime serve
// --images-dir, api.Options.ImagesDir): a published version's files in IMAGE/VERSION
// (model.VersionPath) and uploads in progress below the staging area .incoming. It holds
// what touches the store's file system outside an HTTP handler: deleting the directories
// of versions gc removed, the records of staged files and the bounds of the staging area
// (staging.go), and telling a full store from other failures.
package imagestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Incoming is the staging area below the store's root: on the same file system, so that
// publishing is a rename; its name starts with a dot, so no image (names.Name) or
// derived version path is ever inside it, and nothing below it is served.
const Incoming = ".incoming"

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
