package api

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Boot files over HTTP: the kernel, initrd and (for lpxelinux) the syslinux modules a PC
// loads after the first small loader. TFTP carries only that loader (see
// render.Dnsmasq.Config); HTTP is several times faster for the tens of megabytes that
// follow and serves a room full of PCs switched on at once (docs/benchmarks/bootstorm.md).
//
// Files come from directories given at start-up (Options.ImagesDir, FilesDir,
// SyslinuxDir) through os.Root, so no request path can leave them, whatever it contains
// (.., symlinks pointing out). Only regular files are served; directories are never
// listed. http.ServeContent answers Range and conditional requests, which iPXE and
// lpxelinux do not need but curl-based tools and resumable downloads use.

// syslinuxModules are the files lpxelinux fetches relative to its path prefix (DHCP
// option 210): its core module and what the rendered menu needs (menu.c32 and its
// libraries), and reboot.c32, which an exam configuration runs when its mode cannot be
// loaded. Anything else at the top level is not a boot file.
var syslinuxModules = map[string]bool{
	"ldlinux.c32": true, "menu.c32": true, "libutil.c32": true, "libcom32.c32": true,
	"vesamenu.c32": true, "libmenu.c32": true, "libgpl.c32": true, "reboot.c32": true,
}

func (s *Server) fileRoutes() {
	if s.opt.ImagesDir != "" {
		s.mux.HandleFunc("GET /images/{path...}", s.serveFrom(s.opt.ImagesDir, "path"))
	}
	if s.opt.FilesDir != "" {
		s.mux.HandleFunc("GET /files/{path...}", s.serveFrom(s.opt.FilesDir, "path"))
	}
	if s.opt.SyslinuxDir != "" {
		serve := s.serveFrom(s.opt.SyslinuxDir, "module")
		s.mux.HandleFunc("GET /{module}", func(w http.ResponseWriter, r *http.Request) {
			if !syslinuxModules[r.PathValue("module")] {
				http.NotFound(w, r)
				return
			}
			serve(w, r)
		})
	}
}

// serveFrom serves the file named by the path value key below dir.
func (s *Server) serveFrom(dir, key string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue(key)
		if trimmed := strings.TrimSuffix(name, "/"); trimmed == "" || strings.Contains(name, "\x00") || path.Clean("/"+trimmed) != "/"+trimmed {
			writeTextError(w, http.StatusBadRequest, "invalid file path")
			return
		}
		// Nothing below a dot directory is a published file: uploads are staged in
		// {ImagesDir}/.incoming (upload.go) until they are published.
		if strings.HasPrefix(name, ".") || strings.Contains(name, "/.") {
			http.NotFound(w, r)
			return
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			s.opt.Log.Error("boot file directory unusable", "dir", dir, "err", err)
			writeTextError(w, http.StatusInternalServerError, "boot file directory unusable")
			return
		}
		defer root.Close()
		// Only regular files: opening a FIFO would block the handler until some writer
		// came, and a device or socket is nobody's kernel. Checked before opening, and
		// the open does not block either (O_NONBLOCK, no effect on regular files) in case
		// the file is swapped in between; the opened file's mode is what counts.
		fi, err := root.Stat(name)
		if err == nil && fi.Mode().IsRegular() {
			var f *os.File
			if f, err = root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				defer f.Close()
				fi, err = f.Stat()
				if err == nil && fi.Mode().IsRegular() {
					// Image versions are immutable: a path names one content for ever.
					w.Header().Set("Cache-Control", "public, max-age=86400, immutable")
					w.Header().Set("Content-Type", "application/octet-stream")
					http.ServeContent(w, r, "", fi.ModTime(), f)
					return
				}
			}
		}
		switch {
		case err == nil:
			http.NotFound(w, r) // a directory, FIFO, device or socket
		case errors.Is(err, fs.ErrNotExist):
			s.opt.Log.Warn("boot file not found", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.NotFound(w, r)
		default:
			// Escapes from the root (.., symlinks out) land here too.
			writeTextError(w, http.StatusForbidden, "not a boot file")
		}
	}
}

// imageCheck reports why an image version's boot files are not usable on this server,
// or "" when they are. It runs only when the server serves the images itself
// (Options.ImagesDir): then a version that is in the catalogue but whose files are not
// (yet) on disk, or whose root image has another size than published, shows up in the
// menu as unavailable and the PC falls back instead of fetching a 404 or booting a root
// that fails its check in the initramfs.
func (s *Server) imageCheck(m *model.Mode, v *model.ImageVersion) string {
	if s.opt.ImagesDir == "" || v == nil {
		return ""
	}
	root, err := os.OpenRoot(s.opt.ImagesDir)
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
