package service

import (
	"sort"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// Runtime state of the node agents: their last heartbeats and the job reports they post.
// It lives in the site manager's memory, not in LDAP: it is state, not configuration, and
// writing it to the directory every 30 s per host would cost a directory write per
// heartbeat for nothing a restart could not rebuild within one interval.
//
// Every change bumps a revision and wakes the long polls of the Slurm feed (SlurmFeed),
// so that an owner's key press reaches Slurm in one round trip, not at the next poll.

// maxReports bounds the job reports kept (about 1 KiB each). Slurm keeps the durable copy
// of batch jobs' reports (AdminComment).
const maxReports = 20000

type agentState struct {
	mu      sync.Mutex
	last    map[string]wire.HostStatus
	rev     uint64
	changed chan struct{} // closed and replaced at every change
	reports map[string]revReport
}

// revReport is a job report with the revision it arrived at.
type revReport struct {
	rev uint64
	r   wire.JobReport
}

// put stores a heartbeat unless it is older (by the agent's clock) than the one already
// stored: the agent posts heartbeats from concurrent goroutines, and a late "run" must not
// overwrite "freeze". It returns the status now stored for the host.
func (a *agentState) put(st wire.HostStatus) wire.HostStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = map[string]wire.HostStatus{}
	}
	if prev, ok := a.last[st.Host]; ok && st.Time.Before(prev.Time) {
		return prev
	}
	a.last[st.Host] = st
	a.bumpLocked()
	return st
}

func (a *agentState) bumpLocked() {
	a.rev++
	if a.changed != nil {
		close(a.changed)
	}
	a.changed = make(chan struct{})
}

// since returns the revision and a channel closed at the next change.
func (a *agentState) since() (uint64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return a.rev, a.changed
}

func (a *agentState) get(host string) (wire.HostStatus, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.last[host]
	return st, ok
}

func (a *agentState) all() []wire.HostStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]wire.HostStatus, 0, len(a.last))
	for _, st := range a.last {
		out = append(out, st)
	}
	return out
}

func (a *agentState) putReport(r wire.JobReport) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bumpLocked()
	if a.reports == nil {
		a.reports = map[string]revReport{}
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

func (a *agentState) report(job string) (wire.JobReport, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	x, ok := a.reports[job]
	return x.r, ok
}

// reportsSince lists the reports that arrived after revision rev, in arrival order.
func (a *agentState) reportsSince(rev uint64) []wire.JobReport {
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

// withStale marks a heartbeat older than wire.StaleAfter at now as stale: the desktop is
// off or its agent is gone.
func withStale(st wire.HostStatus, now time.Time) wire.AgentStatus {
	return wire.AgentStatus{HostStatus: st, Stale: now.Sub(st.Received) > wire.StaleAfter}
}

// PutHeartbeat keeps a node agent's heartbeat (hb.Host set by the caller from the
// authenticated host), received at received from remote. It answers with what is stored
// for the host afterwards: hb, or a newer heartbeat that overtook it (accepted, not
// stored). A host the site does not have is a *resolve.UnknownHostError.
func (s *Service) PutHeartbeat(hb wire.Heartbeat, received time.Time, remote string) (wire.HostStatus, error) {
	if err := hb.Validate(); err != nil {
		return wire.HostStatus{}, err
	}
	if s.Snapshot().Site.Host(hb.Host) == nil {
		return wire.HostStatus{}, &resolve.UnknownHostError{Name: hb.Host}
	}
	return s.agents.put(wire.HostStatus{Heartbeat: hb, Received: received.UTC(), Remote: remote}), nil
}

// AgentStatus is host's last heartbeat as of now; ok is false when the host has posted
// none since the site manager started. A host the site does not have is a
// *resolve.UnknownHostError.
func (s *Service) AgentStatus(host string, now time.Time) (st wire.AgentStatus, ok bool, err error) {
	if s.Snapshot().Site.Host(host) == nil {
		return wire.AgentStatus{}, false, &resolve.UnknownHostError{Name: host}
	}
	hs, ok := s.agents.get(host)
	if !ok {
		return wire.AgentStatus{}, false, nil
	}
	return withStale(hs, now), true, nil
}

// AgentStatuses lists the last heartbeat of every host of the current site that has
// posted one since the site manager started (pool != "": of that pool's hosts only), by
// host name.
func (s *Service) AgentStatuses(pool string, now time.Time) []wire.AgentStatus {
	site := s.Snapshot().Site
	out := []wire.AgentStatus{}
	for _, st := range s.agents.all() {
		h := site.Host(st.Host)
		if h == nil || (pool != "" && h.Pool != pool) {
			continue
		}
		out = append(out, withStale(st, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// PutJobReport keeps a node agent's job interference report (jr.Host set by the caller
// from the authenticated host), filling its summary when the agent sent none, and answers
// with the report as kept.
func (s *Service) PutJobReport(jr wire.JobReport, received time.Time) (wire.JobReport, error) {
	if jr.Summary == "" {
		jr.Summary = wire.ReportSummary(jr)
	}
	if err := jr.Validate(); err != nil {
		return wire.JobReport{}, err
	}
	jr.Received = received.UTC()
	s.agents.putReport(jr)
	return jr, nil
}

// JobReport is the latest report of a job; ok is false when none arrived since the site
// manager started (or it was dropped as one of the oldest of more than maxReports).
func (s *Service) JobReport(job string) (wire.JobReport, bool) { return s.agents.report(job) }

// JobReports lists the reports kept, oldest first (host != "": of that host only).
func (s *Service) JobReports(host string) []wire.JobReport {
	out := []wire.JobReport{}
	for _, jr := range s.agents.reportsSince(0) {
		if host == "" || jr.Host == host {
			out = append(out, jr)
		}
	}
	return out
}
