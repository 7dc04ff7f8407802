package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// The Slurm side of the API (docs/slurm.md):
//
//	GET  /api/v1/slurm/nodes?since=REV&wait=S[&base=BUILD][&slurmctld=VERSION]
//	                                           desired Slurm node states + new job reports
//	                                           (long poll: answers at once when the
//	                                           revision is past REV, else after S seconds;
//	                                           with base, only the nodes changed since that
//	                                           build where the replica can tell); with
//	                                           slurmctld, the daemon reports its
//	                                           controller's Slurm version (a site admin
//	                                           or viewer), handed on to the agents
//	GET  /api/v1/slurm/reservations?horizon=D  every host's coming windows without a compute
//	                                           guest (default 168h, at most 744h)
//	POST /api/v1/agent/jobs                    a node agent's job interference report
//	                                           (a host, for itself; it replaces only its
//	                                           own report of the job)
//	GET  /api/v1/jobs/{id}                     every host's report of one job, by host
//	                                           (wire.JobReports; any directory user)
//	GET  /api/v1/jobs/{id}?host=NAME           that host's report of the job (wire.JobReport)
//	GET  /api/v1/jobs?host=NAME                recent reports (any role)
//	POST /api/v1/slurm/resume                  Slurm's ResumeProgram: wake hosts, putting
//	                                           local-disk ones in a cluster mode
//	POST /api/v1/slurm/suspend                 Slurm's SuspendProgram: give hosts back
//	                                           (both: pool admin of every host's pool)
//
// Who may read job reports: any role reads all of them (every role reads the whole site);
// a directory user without a role reads one job's report by its id, because HPC users run
// `overtime job-report` on their own jobs and the site manager cannot tell whose job it
// is (reports carry no owner, and Slurm users need not be directory users). A report
// names a pool PC and its numbers, not a person, and Slurm writes the same summary into
// the job's AdminComment, which `scontrol show job` shows; host credentials read nothing.
func (s *Server) slurmRoutes() {
	m := s.mux
	m.HandleFunc("POST /api/v1/slurm/resume", s.write(s.slurmPower(true)))
	m.HandleFunc("POST /api/v1/slurm/suspend", s.write(s.slurmPower(false)))
	m.HandleFunc("GET /api/v1/slurm/nodes", s.read(s.slurmNodes))
	m.HandleFunc("GET /api/v1/slurm/reservations", s.read(s.slurmReservations))
	m.HandleFunc("POST /api/v1/agent/jobs", s.agent(s.postJobReport))
	m.HandleFunc("GET /api/v1/jobs/{id}", s.anyUser(s.getJobReport))
	m.HandleFunc("GET /api/v1/jobs", s.read(s.listJobReports))
}

// maxSlurmWait bounds a long poll; the sync daemon asks again at once.
const maxSlurmWait = 60 * time.Second

func (s *Server) slurmNodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// counter is an optional whole number parameter (0 when absent).
	counter := func(name, what string) (uint64, error) {
		v := q.Get(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, model.Invalid("%s: %q is not a %s", name, v, what)
		}
		return n, nil
	}
	since, err := counter("since", "revision number")
	if err != nil {
		s.httpError(w, err)
		return
	}
	base, err := counter("base", "build number")
	if err != nil {
		s.httpError(w, err)
		return
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			s.httpError(w, model.Invalid("wait: %q is not a number of seconds", v))
			return
		}
		wait = min(time.Duration(n*float64(time.Second)), maxSlurmWait)
	}
	if _, ok := q["slurmctld"]; ok {
		// The sync daemon's report of its controller's Slurm version, before the long
		// poll: the agents' next configurations carry it.
		p := principal(r)
		if err := p.CheckSlurmReport(); err != nil {
			s.httpError(w, err)
			return
		}
		if err := s.svc.Slurm.ReportController(r.Context(), p.UID, q.Get("slurmctld"), s.opt.Now()); err != nil {
			s.httpError(w, err)
			return
		}
	}
	feed, err := s.svc.Slurm.FeedJSON(r.Context(), since, base, wait, s.opt.Now)
	if err != nil {
		return // the client went away during the long poll
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(feed)
}

// slurmReservations answers the sync daemon's reservation round: horizon is a Go duration
// ("168h") or whole seconds ("604800").
func (s *Server) slurmReservations(w http.ResponseWriter, r *http.Request) {
	horizon := wire.DefaultReservationHorizon
	if v := r.URL.Query().Get("horizon"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.ParseInt(v, 10, 64)
			if nerr != nil {
				s.httpError(w, model.Invalid("horizon: %q is neither a duration (168h) nor whole seconds", v))
				return
			}
			d = time.Duration(n) * time.Second
		}
		if d <= 0 || d > wire.MaxReservationHorizon {
			s.httpError(w, model.Invalid("horizon: %s out of range (more than 0, at most %s)", d, wire.MaxReservationHorizon))
			return
		}
		horizon = d
	}
	writeJSON(w, http.StatusOK, s.svc.Slurm.Reservations(s.opt.Now(), horizon))
}

// slurmPower answers Slurm's power saving programs: the caller must administer every
// named host's pool (checked here, before the write); the service plans and writes the
// exceptions inside the write, where they are authorised like any exception change.
func (s *Server) slurmPower(resume bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req wire.PowerRequest
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := decodeJSON(r, &req); err != nil {
			s.httpError(w, err)
			return
		}
		p := principal(r)
		site := s.svc.Snapshot().Site
		for _, name := range req.Hosts {
			if h := site.Host(name); h != nil {
				if err := p.CheckPowerSave(h); err != nil {
					s.httpError(w, err)
					return
				}
			}
		}
		results, err := s.svc.Slurm.PowerSave(r.Context(), p.Check, dryRun(r), resume, req, s.opt.Now())
		if err != nil {
			s.httpError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, wire.PowerResponse{Hosts: results})
	}
}

func (s *Server) postJobReport(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if !p.IsHost() {
		writeError(w, http.StatusForbidden, "user "+p.UID+" may not post job reports: only a host's node agent may")
		return
	}
	var jr wire.JobReport
	r.Body = http.MaxBytesReader(w, r.Body, maxAgentBody)
	if err := decodeJSON(r, &jr); err != nil {
		s.httpError(w, err)
		return
	}
	host, err := p.AgentHost(jr.Host, true)
	if err != nil {
		s.httpError(w, err)
		return
	}
	jr.Host = host
	jr, err = s.svc.Agents.PutJobReport(jr, s.opt.Now())
	if err != nil {
		s.httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, jr)
}

// getJobReport answers every host's report of the job side by side (the site manager
// cannot tell which of them ran it, and none replaces another: docs/slurm.md), or with
// ?host= that host's alone.
func (s *Server) getJobReport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := wire.ValidJobID(id); err != nil {
		s.httpError(w, err)
		return
	}
	q := r.URL.Query()
	if !q.Has("host") {
		list := s.svc.Agents.JobReportsOf(id)
		if len(list) == 0 {
			writeError(w, http.StatusNotFound, "no interference report for job "+id+" (none has arrived from an Overtime node, or they were among the oldest dropped)")
			return
		}
		writeJSON(w, http.StatusOK, wire.JobReports{Job: id, Reports: list})
		return
	}
	host := q.Get("host")
	if err := model.ValidHostname(host); err != nil {
		s.httpError(w, model.Invalid("host: %v", err))
		return
	}
	jr, ok := s.svc.Agents.JobReport(id, host)
	if !ok {
		writeError(w, http.StatusNotFound, "no interference report for job "+id+" from host "+host+" (none has arrived from it, or it was among the oldest dropped)")
		return
	}
	writeJSON(w, http.StatusOK, jr)
}

func (s *Server) listJobReports(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.svc.Agents.JobReports(r.URL.Query().Get("host")))
}
