package api

import (
	"errors"
	"io/fs"
	"net/http"

	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
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
// listed (imagestore.Open decides what may be served). http.ServeContent answers Range and conditional requests, which iPXE and
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

// serveFrom serves the file named by the path value key below dir; which files may be
// served is imagestore.Open's rule.
func (s *Server) serveFrom(dir, key string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, err := imagestore.Open(dir, r.PathValue(key))
		switch {
		case err == nil:
		case errors.Is(err, imagestore.ErrBadPath):
			writeTextError(w, http.StatusBadRequest, "invalid file path")
			return
		case errors.Is(err, imagestore.ErrNotServed):
			http.NotFound(w, r) // below a dot directory; a directory, FIFO, device or socket
			return
		case errors.Is(err, imagestore.ErrDirUnusable):
			s.opt.Log.Error("boot file directory unusable", "dir", dir, "err", err)
			writeTextError(w, http.StatusInternalServerError, "boot file directory unusable")
			return
		case errors.Is(err, fs.ErrNotExist):
			s.opt.Log.Warn("boot file not found", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.NotFound(w, r)
			return
		default:
			writeTextError(w, http.StatusForbidden, "not a boot file")
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			writeTextError(w, http.StatusForbidden, "not a boot file")
			return
		}
		// Image versions are immutable: a path names one content for ever.
		w.Header().Set("Cache-Control", "public, max-age=86400, immutable")
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", fi.ModTime(), f)
	}
}

// imageCheck reports why an image version's boot files are not usable on this server,
// or "" when they are (imagestore.Store.Unusable). It runs only when the server serves
// the images itself (Options.ImagesDir).
func (s *Server) imageCheck(m *model.Mode, v *model.ImageVersion) string {
	if s.store == nil {
		return ""
	}
	return s.store.Unusable(m, v)
}
