package api

import (
	"net/http"
	"strings"
)

// BootFiles is the plain-HTTP face of a site manager that serves its API over HTTPS
// (`overtime serve --tls-cert … --boot-listen ADDR`): what PC firmware and the initramfs
// fetch — boot scripts, kernels, initrds, files, images — and nothing else. Firmware
// (PXE ROMs, iPXE without a trusted CA) cannot do TLS; nothing here is a secret or a
// write, and what the PC runs is checked against the boot script's sha256 (docs/boot.md,
// "What the PC verifies"). Every other request — the API, the web UI, metrics — is
// refused with a pointer to apiURL, so that no credential is ever sent in clear to it.
func BootFiles(s http.Handler, apiURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && bootPath(r.URL.Path) {
			s.ServeHTTP(w, r)
			return
		}
		msg := "this address serves boot files only: the API is served over HTTPS"
		if apiURL != "" {
			msg += " at " + apiURL
		}
		writeError(w, http.StatusForbidden, msg)
	})
}

// bootPath tells the paths of BootFiles: the boot scripts (iPXE, PXELINUX), the boot
// server's files and images, and the health checks of load balancers.
func bootPath(p string) bool {
	switch p {
	case "/boot/ipxe", "/healthz", "/readyz":
		return true
	}
	for _, prefix := range []string{"/boot/ipxe/", "/pxelinux.cfg/", "/files/", "/images/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}
