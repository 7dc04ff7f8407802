package api

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Boot endpoints. A PC in the middle of PXE cannot log in, retry cleverly or read an
// error page: every well-formed request gets a bootable answer (a MAC not in the
// directory gets the site's configured unknown-host mode), malformed ones a 400, and the
// answer is computed from the in-memory snapshot, so that a storm of PCs switched on at
// 08:00 costs no LDAP round trips. What a PC gets is decided by sitemgmt/resolve; these
// handlers only parse the path and render the answer.

// bootQuery is the context of a boot request: now, the boot server this instance answers
// for, and the address the request came in on (the last fallback for a site without
// boot servers, so that the script's URLs still point somewhere that answers).
func (s *Server) bootQuery(r *http.Request) resolve.Query {
	return resolve.Query{At: s.opt.Now(), BootServer: s.opt.BootServer, Self: r.Host, Held: s.svc.Images.Held()}
}

// bootChain is the DHCP filename for iPXE clients: a two-line script that chains to the
// per-MAC script, because iPXE does not expand ${mac} in a DHCP-supplied filename.
func (s *Server) bootChain(w http.ResponseWriter, r *http.Request) {
	srv, _ := s.svc.Snapshot().Resolver.BootServer(nil, s.bootQuery(r))
	httpURL := ""
	if srv != nil {
		httpURL = srv.HTTPURL
	}
	var buf bytes.Buffer
	if err := render.IPXEChain(&buf, httpURL); err != nil {
		s.bootError(w, r, err)
		return
	}
	writeText(w, buf.Bytes())
}

func (s *Server) bootIPXE(w http.ResponseWriter, r *http.Request) {
	// A read by MAC: the request is canonicalised, stored MACs already are (model.Site.Normalize).
	mac, err := model.NormalizeMAC(r.PathValue("mac"))
	if err != nil {
		writeTextError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.renderBoot(w, r, mac, bootIPXE, render.IPXE)
}

// bootPXELinux answers lpxelinux's config search. lpxelinux asks, in order, for the
// client UUID, "01-" + MAC, the IP in hex (shortening), then "default"; only the MAC form
// and "default" carry meaning here, the rest get a fast 404 so lpxelinux moves on.
func (s *Server) bootPXELinux(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	switch {
	case strings.HasPrefix(file, "01-"):
		mac, err := model.NormalizeMAC(strings.TrimPrefix(file, "01-"))
		if err != nil || !strings.Contains(file, "-") {
			writeTextError(w, http.StatusBadRequest, "invalid PXELINUX config name: "+err.Error())
			return
		}
		s.renderBoot(w, r, mac, bootPXELinux, render.PXELinux)
	case file == "default":
		s.renderBoot(w, r, "", bootPXELinux, render.PXELinux)
	case len(file) <= 36 && isHexOrUUID(file):
		http.NotFound(w, r)
	default:
		writeTextError(w, http.StatusBadRequest, "invalid PXELINUX config name")
	}
}

func isHexOrUUID(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}

// Kinds of boot script (overtime_boot_scripts_total's kind label).
const (
	bootIPXE     = "ipxe"
	bootPXELinux = "pxelinux"
)

func (s *Server) renderBoot(w http.ResponseWriter, r *http.Request, mac, kind string, fn func(io.Writer, render.Boot) error) {
	a := s.svc.Snapshot().Resolver.MAC(mac, s.bootQuery(r))
	if a.Host != nil {
		// What this PC may boot from now on stays on its boot server (image gc).
		var given []string
		if a.Image != nil && a.ImageUnavailable == "" {
			given = append(given, a.Mode.Image+"/"+a.Image.Version)
		}
		for _, e := range a.Others {
			if e.Image != nil {
				given = append(given, e.Mode.Image+"/"+e.Image.Version)
			}
		}
		s.svc.Images.NoteBooted(a.Host.Name, false, given, s.opt.Now())
	}
	b := a.Boot()
	b.Timeout = s.opt.MenuTimeout
	if gate := b.Check; gate != nil {
		b.Check = func(m *model.Mode, v *model.ImageVersion) string {
			if why := gate(m, v); why != "" {
				return why
			}
			return s.imageCheck(m, v)
		}
	} else {
		b.Check = s.imageCheck
	}
	var buf bytes.Buffer
	if err := fn(&buf, b); err != nil {
		s.bootError(w, r, err)
		return
	}
	writeText(w, buf.Bytes())
	s.metrics.bootScript(kind, a.Mode)
}

// bootError: rendering failed on data that passed validation. Log it loudly; the client
// gets a 500 (iPXE's chain fails and its script falls back to the local disk).
func (s *Server) bootError(w http.ResponseWriter, r *http.Request, err error) {
	s.opt.Log.Error("boot script rendering failed", "path", r.URL.Path, "err", err)
	writeTextError(w, http.StatusInternalServerError, "boot script rendering failed")
}

func writeText(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func writeTextError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(oneLine(msg) + "\n"))
}

// render serves generated configuration for boot servers, Slurm and NFS.
func (s *Server) render(w http.ResponseWriter, r *http.Request) {
	snap := s.svc.Snapshot()
	site := snap.Site
	now := s.opt.Now()
	modeOf := func(h *model.Host) *model.Mode {
		m, _ := snap.Resolver.ModeAt(h, now)
		return m
	}
	q := r.URL.Query()
	server := func() (*model.BootServer, bool) {
		name := q.Get("server")
		if name == "" && len(site.BootServers) == 1 {
			return &site.BootServers[0], true
		}
		b := site.BootServer(name)
		if b == nil {
			s.httpError(w, model.Invalid("unknown boot server %q (give ?server=NAME)", name))
			return nil, false
		}
		return b, true
	}
	exportRoot := q.Get("exportRoot")
	if exportRoot == "" {
		exportRoot = paths.ImageExport
	}
	var buf bytes.Buffer
	var err error
	switch what := r.PathValue("what"); what {
	case "dnsmasq", "dnsmasq-hosts":
		b, ok := server()
		if !ok {
			return
		}
		d := render.Dnsmasq{Site: site, Server: b,
			HostsFile: valueOr(q.Get("hostsFile"), paths.DnsmasqHosts),
			TFTPRoot:  valueOr(q.Get("tftpRoot"), paths.TFTPRoot)}
		if what == "dnsmasq" {
			err = d.Config(&buf)
		} else {
			err = d.Hosts(&buf)
		}
	case "slurm":
		err = render.SlurmNodes(&buf, site, modeOf)
	case "ganesha":
		b, ok := server()
		if !ok {
			return
		}
		err = render.Ganesha(&buf, site, b, exportRoot)
	case "exports":
		err = render.Exports(&buf, site, exportRoot, valueOr(q.Get("clients"), "*"))
	default:
		s.httpError(w, model.NotFound("renderer", what))
		return
	}
	if err != nil {
		s.httpError(w, model.Invalid("render: %v", err))
		return
	}
	writeText(w, buf.Bytes())
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
