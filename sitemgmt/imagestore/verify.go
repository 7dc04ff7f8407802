package imagestore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// ListsRoot reports whether a version's SHA256SUMS (files) lists its root image with the
// catalogue's sha256 (want): root.squashfs when listed, else (other kinds) whichever file
// has that sha256. The site manager's store and the boot servers' copies are held to
// this one rule.
func ListsRoot(files []artefact.File, want string) bool {
	hasRoot := slices.ContainsFunc(files, func(f artefact.File) bool { return f.Name == model.ImageRoot })
	for _, f := range files {
		if f.SHA256 == want && (f.Name == model.ImageRoot || !hasRoot) {
			return true
		}
	}
	return false
}

// CheckVersion refuses (model.Invalid) to register version v of image when its directory
// in the store does not hold what is being registered: when its SHA256SUMS is there,
// every file it lists must match (artefact.Verify) and it must list the root image with
// the registered sha256 (ListsRoot); without a SHA256SUMS, a root image that is there
// must have the registered size. A version whose directory is not in the store (yet) is
// accepted: its files may be placed on the boot servers by other means, and boot servers
// verify what they pull. It hashes every file: call it outside the write lock.
func (st *Store) CheckVersion(image string, v *model.ImageVersion) error {
	if model.ValidName("image", image) != nil || names.Version(v.Version) != nil {
		return nil // Validate reports a bad name
	}
	// The version's own directory, whatever path the request states (CheckVersionPaths
	// refuses any other).
	path := model.VersionPath(image, v.Version)
	dir := filepath.Join(st.Root, filepath.FromSlash(path))
	files, err := artefact.Verify(dir)
	switch {
	case err == nil:
		if ListsRoot(files, v.SHA256) {
			return nil
		}
		return model.Invalid("refusing to publish image %s %s: %s/%s lists no file with sha256 %s (the root image's)", image, v.Version, path, artefact.SumsFile, v.SHA256)
	case errors.Is(err, artefact.ErrMismatch):
		// The error names the file by its path on the server: the client gets the name
		// below the version's directory only.
		msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
		if strings.Contains(msg, st.Root) {
			st.log.Warn("image store: refusing a publication", "image", image, "version", v.Version, "err", err)
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
		st.log.Error("image store: checking a publication failed", "image", image, "version", v.Version, "err", err)
		return model.Invalid("refusing to publish image %s %s: the store's copy in %s cannot be read (the server log has the details)", image, v.Version, path)
	}
}
