package imagestore

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// What may be downloaded from a store, or from any directory of boot files (the API
// serves its FilesDir and SyslinuxDir by the same rule): a regular file below the
// directory, by a clean relative path, not below a dot directory (the staging area
// .incoming and its parts are never served), reached through os.Root, so that no
// request path can leave the directory, whatever it contains (.., symbolic links
// pointing out).

// The refusals of Open besides fs.ErrNotExist (not there: 404).
var (
	ErrBadPath     = errors.New("invalid file path")            // 400
	ErrNotServed   = errors.New("not a published file")         // 404: below a dot directory, not a regular file
	ErrOutside     = errors.New("not a boot file")              // 403: leads out of the directory
	ErrDirUnusable = errors.New("boot file directory unusable") // 500: the directory itself
)

// Open opens the file name below dir for serving, by the rules above. The file is a
// regular file: checked before opening, and the open does not block either (O_NONBLOCK,
// no effect on regular files) in case the file is swapped in between; the opened file's
// mode is what counts. Opening a FIFO would block the caller until some writer came, and
// a device or socket is nobody's kernel.
func Open(dir, name string) (*os.File, error) {
	if trimmed := strings.TrimSuffix(name, "/"); trimmed == "" || strings.Contains(name, "\x00") || path.Clean("/"+trimmed) != "/"+trimmed {
		return nil, ErrBadPath
	}
	// Nothing below a dot directory is a published file: uploads are staged in
	// {store}/.incoming until they are published.
	if strings.HasPrefix(name, ".") || strings.Contains(name, "/.") {
		return nil, ErrNotServed
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDirUnusable, err)
	}
	defer root.Close()
	fi, err := root.Stat(name)
	if err == nil && fi.Mode().IsRegular() {
		var f *os.File
		if f, err = root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			if fi, err = f.Stat(); err == nil && fi.Mode().IsRegular() {
				return f, nil
			}
			f.Close()
		}
	}
	switch {
	case err == nil:
		return nil, ErrNotServed // a directory, FIFO, device or socket
	case errors.Is(err, os.ErrNotExist):
		return nil, err
	default:
		// Escapes from the root (.., symlinks out) land here too.
		return nil, fmt.Errorf("%w: %v", ErrOutside, err)
	}
}

// Unusable reports why version v's boot files, booted by mode m, are not usable from the
// store, or "" when they are: a version that is in the catalogue but whose files are not
// (yet) on disk, or whose root image has another size than published, shows up in the
// menu as unavailable and the PC falls back instead of fetching a 404 or booting a root
// that fails its check in the initramfs.
func (st *Store) Unusable(m *model.Mode, v *model.ImageVersion) string {
	if v == nil {
		return ""
	}
	root, err := os.OpenRoot(st.Root)
	if err != nil {
		return "image directory of the boot server is unusable"
	}
	defer root.Close()
	for _, f := range []string{model.ImageKernel, model.ImageInitrd, model.ImageRoot} {
		if f == model.ImageKernel && m.Kernel != "" || f == model.ImageInitrd && m.Initrd != "" {
			continue // the mode brings its own
		}
		fi, err := root.Stat(path.Join(v.Path, f))
		if err != nil || !fi.Mode().IsRegular() {
			return "image " + m.Image + " " + v.Version + " has no " + f + " on the boot server"
		}
		if f == model.ImageRoot && v.Size > 0 && fi.Size() != v.Size {
			return "image " + m.Image + " " + v.Version + " " + f + " on the boot server has the wrong size"
		}
	}
	return ""
}
