package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// The built-in HTTP server: what `overtime serve --images-dir` does for
// {HTTPURL}/images/{path}/vmlinuz and initrd.img — net/http with http.ServeContent on
// the open file (sendfile(2) underneath) — without the directory and the boot scripts.
// It runs as a child process in the server namespace so that its CPU time is its own.
// -http-cmd replaces it by any other server.

func httpdMain() {
	root, listen := os.Getenv("BOOTSTORM_ROOT"), os.Getenv("BOOTSTORM_LISTEN")
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fatalf("httpd: %v", err)
	}
	srv := &http.Server{Handler: imagesHandler(root), ReadHeaderTimeout: 10 * time.Second}
	fmt.Println("ready")
	fatalf("httpd: %v", srv.Serve(ln))
}

// imagesHandler serves root/images/... at /images/... .
func imagesHandler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean(r.URL.Path)
		rel, ok := strings.CutPrefix(p, "/images/")
		if !ok || rel == "" {
			http.NotFound(w, r)
			return
		}
		f, err := os.Open(filepath.Join(root, "images", filepath.FromSlash(rel)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
	})
}
