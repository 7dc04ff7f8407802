package api

import (
	"net/http"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/hostlist"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Power commands and the audit trail (docs/operations.md, "Power: reboot, wake, power off"):
//
//	POST /api/v1/power                     reboot, power off or wake the hosts of a hostlist
//	                                       (site admin, or pool admin of every named host)
//	GET  /api/v1/power[?host=H]            the commands and how far they got (any role)
//	GET  /api/v1/audit[?host=H&since=T]    the audit trail (any role)
//	GET  /api/v1/bootservers/{name}/wakes  the magic packets a boot server is to send (any
//	                                       role: MACs are in the site every role reads)
//	POST /api/v1/bootservers/{name}/wakes  the boot server reports them sent (its own
//	                                       account only, like its image reports)
//
// /api/v1/power rather than /api/v1/hosts/power: the latter would shadow a host named
// "power" in /api/v1/hosts/{name}.
func (s *Server) powerRoutes() {
	m := s.mux
	m.HandleFunc("POST /api/v1/power", s.write(s.postPower))
	m.HandleFunc("GET /api/v1/power", s.read(s.listPower))
	m.HandleFunc("GET /api/v1/audit", s.read(s.listAudit))
	m.HandleFunc("GET /api/v1/bootservers/{name}/wakes", s.read(s.getWakes))
	m.HandleFunc("POST /api/v1/bootservers/{name}/wakes", s.read(s.postWakes))
}

// postPower: every named host the site has must be in a pool the user administers (all
// or nothing, checked before anything is recorded); unknown hosts are refused per host.
func (s *Server) postPower(w http.ResponseWriter, r *http.Request) {
	var req wire.HostPowerRequest
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := decodeJSON(r, &req); err != nil {
		s.httpError(w, err)
		return
	}
	hosts, err := hostlist.Expand(req.Hosts)
	if err != nil {
		s.httpError(w, model.Invalid("hosts: %v", err))
		return
	}
	p := principal(r)
	site := s.svc.Snapshot().Site
	for _, name := range hosts {
		if h := site.Host(name); h != nil {
			if err := p.CheckPower(h, string(req.Op)); err != nil {
				s.httpError(w, err)
				return
			}
		}
	}
	res, err := s.svc.Power.Request(r.Context(), p.UID, req.Op, hosts, req.Force, req.Reason, s.opt.Now())
	if err != nil {
		s.serviceError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) listPower(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.svc.Power.Commands(r.URL.Query().Get("host")))
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		var err error
		if since, err = ParseTime(v, s.svc.Snapshot().Engine.Location()); err != nil {
			s.httpError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, s.svc.Audit(r.URL.Query().Get("host"), since))
}

func (s *Server) getWakes(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.svc.Snapshot().Site.BootServer(name) == nil {
		s.httpError(w, model.NotFound("boot server", name))
		return
	}
	wk, err := s.svc.Power.Wakes(name, s.opt.Now())
	if err != nil {
		s.httpError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, wk)
}

func (s *Server) postWakes(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// Checked before the body is read: only that boot server's own account reports.
	if err := principal(r).CheckBootServerReport(name); err != nil {
		s.httpError(w, err)
		return
	}
	if s.svc.Snapshot().Site.BootServer(name) == nil {
		s.httpError(w, model.NotFound("boot server", name))
		return
	}
	var rep wire.WakesSent
	r.Body = http.MaxBytesReader(w, r.Body, maxReportBody)
	if err := decodeJSON(r, &rep); err != nil {
		s.httpError(w, err)
		return
	}
	if err := s.svc.Power.WakesSent(name, rep, s.opt.Now()); err != nil {
		s.httpError(w, err)
		return
	}
	wk, err := s.svc.Power.Wakes(name, s.opt.Now())
	if err != nil {
		s.httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wk)
}
