package api

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/powersave"
	"github.com/overtime-hpc/overtime/sitemgmt/slurmnode"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// The Slurm side of the API (docs/slurm.md):
//
//	GET  /api/v1/slurm/nodes?since=REV&wait=S  desired Slurm node states + new job reports
//	                                           (long poll: answers at once when the
//	                                           revision is past REV, else after S seconds)
//	POST /api/v1/agent/jobs                    a node agent's job interference report
//	GET  /api/v1/jobs/{id}                     one job's report (any directory user)
//	GET  /api/v1/jobs?host=NAME                recent reports (any role)
//	POST /api/v1/slurm/resume                  Slurm's ResumeProgram: wake hosts, putting
//	                                           local-disk ones in a cluster mode
//	POST /api/v1/slurm/suspend                 Slurm's SuspendProgram: give hosts back
//	                                           (both: pool admin of every host's pool)
func (s *Server) slurmRoutes() {
	m := s.mux
	m.HandleFunc("POST /api/v1/slurm/resume", s.write(s.slurmPower(true)))
	m.HandleFunc("POST /api/v1/slurm/suspend", s.write(s.slurmPower(false)))
	m.HandleFunc("GET /api/v1/slurm/nodes", s.read(s.slurmNodes))
	m.HandleFunc("POST /api/v1/agent/jobs", s.agent(s.postJobReport))
	m.HandleFunc("GET /api/v1/jobs/{id}", s.anyUser(s.getJobReport))
	m.HandleFunc("GET /api/v1/jobs", s.read(s.listJobReports))
}

// maxSlurmWait bounds a long poll; the sync daemon asks again at once.
const maxSlurmWait = 60 * time.Second

func (s *Server) slurmNodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since uint64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.httpError(w, model.Invalid("since: %q is not a revision number", v))
			return
		}
		since = n
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
	rev, changed := s.status.since()
	if rev <= since && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		t.Stop()
		rev, _ = s.status.since()
	}
	site := s.svc.Snapshot().Site
	now := s.opt.Now()
	feed := wire.SlurmFeed{Revision: rev, Nodes: []wire.SlurmNode{}, Reports: []wire.JobReportLine{}}
	for i := range site.Hosts {
		h := &site.Hosts[i]
		var st *wire.AgentStatus
		if hs, ok := s.status.get(h.Name); ok {
			x := s.withStale(hs, now)
			st = &x
		}
		feed.Nodes = append(feed.Nodes, slurmnode.Desired(site, h, st, now))
	}
	sort.Slice(feed.Nodes, func(i, j int) bool { return feed.Nodes[i].Name < feed.Nodes[j].Name })
	for _, jr := range s.status.reportsSince(since) {
		feed.Reports = append(feed.Reports, wire.JobReportLine{Job: jr.Job, Host: jr.Host, Summary: jr.Summary})
	}
	writeJSON(w, http.StatusOK, feed)
}

// slurmPower answers Slurm's power saving programs. The plan is made inside the write,
// from the snapshot the write starts from, so that a concurrent change cannot slip
// between deciding and writing; the exceptions it adds or removes are authorised like
// any exception change (a site admin, or an admin of every host's pool).
func (s *Server) slurmPower(resume bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req wire.PowerRequest
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := decodeJSON(r, &req); err != nil {
			s.httpError(w, err)
			return
		}
		now := s.opt.Now()
		var plan *powersave.Plan
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
		_, err := s.svc.Update(r.Context(), p.Check, dryRun(r), func(site *model.Site) error {
			var err error
			if resume {
				plan, err = powersave.Resume(site, s.svc.Snapshot().Engine, req, now)
			} else {
				plan, err = powersave.Suspend(site, req)
			}
			if err != nil {
				return err
			}
			plan.Apply(site)
			return nil
		})
		if err != nil {
			s.httpError(w, err)
			return
		}
		// After the write (or, in a dry run, without it): what the schedule now says.
		snap := s.svc.Snapshot()
		powersave.Describe(snap.Site, snap.Engine, plan.Results, now)
		for _, res := range plan.Results {
			s.opt.Log.Info("slurm power saving", "resume", resume, "host", res.Host, "action", res.Action, "mode", res.Mode, "reason", res.Reason)
		}
		writeJSON(w, http.StatusOK, wire.PowerResponse{Hosts: plan.Results})
	}
}

// maxJobReport bounds a report body; a real one is under a kilobyte.
const maxJobReport = 16 << 10

func (s *Server) postJobReport(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if !p.IsHost() {
		writeError(w, http.StatusForbidden, "user "+p.UID+" may not post job reports: only a host's node agent may")
		return
	}
	var jr wire.JobReport
	r.Body = http.MaxBytesReader(w, r.Body, maxJobReport)
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
	if jr.Summary == "" {
		jr.Summary = wire.ReportSummary(jr)
	}
	if err := jr.Validate(); err != nil {
		s.httpError(w, err)
		return
	}
	jr.Received = s.opt.Now().UTC()
	s.status.putReport(jr)
	writeJSON(w, http.StatusOK, jr)
}

func (s *Server) getJobReport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := wire.ValidJobID(id); err != nil {
		s.httpError(w, err)
		return
	}
	jr, ok := s.status.report(id)
	if !ok {
		writeError(w, http.StatusNotFound, "no interference report for job "+id+" (it has not ended on an Overtime node since the site manager started)")
		return
	}
	writeJSON(w, http.StatusOK, jr)
}

func (s *Server) listJobReports(w http.ResponseWriter, r *http.Request) {
	host := r.URL.Query().Get("host")
	out := []wire.JobReport{}
	for _, jr := range s.status.reportsSince(0) {
		if host == "" || jr.Host == host {
			out = append(out, jr)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// jobReports keeps the most recent reports in memory, by job, each with the revision it
// arrived at. Slurm keeps the durable copy of batch jobs' reports (AdminComment).
type jobReports map[string]revReport

type revReport struct {
	rev uint64
	r   wire.JobReport
}

// maxReports bounds the reports kept (about 1 KiB each).
const maxReports = 20000

func (a *agentStatus) putReport(r wire.JobReport) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bumpLocked()
	if a.reports == nil {
		a.reports = jobReports{}
	}
	// A requeued job runs again and reports again: the latest run replaces it.
	a.reports[r.Job] = revReport{rev: a.rev, r: r}
	if len(a.reports) > maxReports {
		oldest := r.Job
		for job, x := range a.reports {
			if x.rev < a.reports[oldest].rev {
				oldest = job
			}
		}
		delete(a.reports, oldest)
	}
}

func (a *agentStatus) report(job string) (wire.JobReport, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	x, ok := a.reports[job]
	return x.r, ok
}

// reportsSince lists the reports that arrived after revision rev, in arrival order.
func (a *agentStatus) reportsSince(rev uint64) []wire.JobReport {
	a.mu.Lock()
	var list []revReport
	for _, x := range a.reports {
		if x.rev > rev {
			list = append(list, x)
		}
	}
	a.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].rev < list[j].rev })
	out := make([]wire.JobReport, len(list))
	for i, x := range list {
		out[i] = x.r
	}
	return out
}
