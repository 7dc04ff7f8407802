package service

import (
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/slurmnode"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Agents is what the node agents report: heartbeats, owner state and job reports.
type Agents struct{ s *Service }

// Runtime state of the node agents: their last heartbeats and the job reports they post.
// Readers get it from memory; with a StateStore (state.go) it is also kept in the
// directory, so that a restart loses nothing and every replica of the site manager gives
// the same answers. Memory is the cache, the store the shared copy.
//
// Every change bumps a revision; a change the Slurm feed shows (slurmNodeChanged: not a
// heartbeat that repeats the last one) also wakes its long polls (SlurmFeed), so that an
// owner's key press reaches Slurm in one round trip, not at the next poll.

// maxReports bounds the job reports kept (about 1 KiB each). Slurm keeps the durable copy
// of batch jobs' reports (AdminComment). Beyond it the oldest report of the host that
// holds the most goes first (evictLocked), so that a host posting reports of jobs it never
// ran cannot flush the reports of the hosts that ran them.
const maxReports = 20000

type agentState struct {
	mu   sync.Mutex
	last map[string]hostBeat
	rev  uint64
	// feedRev is the revision of the last change the Slurm feed shows (slurmNodeChanged):
	// most heartbeats repeat what the agent said before, and a long poll woken by
	// each of them would make every sync daemon re-read the whole site 300 times a
	// second at 10,000 hosts (docs/benchmarks/slurmscale.md).
	feedRev uint64
	changed chan struct{} // closed and replaced at every change of the feed
	reports map[reportKey]revReport

	// Persistence (state.go); all nil without a StateStore.
	persisted    map[string]persistMark // what the store holds of each host's heartbeat
	dirtyBeats   map[string]bool        // hosts whose heartbeat is to be written
	dirtyReports map[reportKey]bool     // reports to be written
	deadReports  map[reportKey]bool     // reports evicted from memory, to be deleted
	kick         chan struct{}          // wakes the writer (buffered, 1)
}

// hostBeat is what is kept of a host's heartbeats: the newest one (its Received is the
// last time any heartbeat of the host arrived) and the agent instance it replaced.
type hostBeat struct {
	st wire.HostStatus
	// retired is the instance whose heartbeats st's instance took over from: a post of
	// the old agent process still in flight when the new one started must not win.
	retired string
	// rev is the revision at which a replica accepted st: across replicas the later
	// acceptance wins (state.go), so an old document coming back from the store never
	// replaces one accepted after it.
	rev uint64
}

// reportKey is a job report's key: each host keeps its own report of a job, so that no
// host's credential can replace what another host reported (a requeued job runs again,
// possibly on another host, and then has a report from each).
type reportKey struct{ job, host string }

// revReport is a job report with the revision it arrived at (this replica's clock: the
// Slurm feed's order) and the revision its stored document carries (the writer's clock:
// what orders two versions of the report coming back from the store).
type revReport struct {
	rev    uint64
	stored uint64
	r      wire.JobReport
}

// MaxHeartbeatReorder bounds, for agents without an instance id (older agents), how much
// the offset between the agent's clock and the server's (receive time - agent time) may
// differ between two heartbeats for their agent times to order them: an agent posts with
// a 10 s timeout, so a post overtaken by a newer one is at most that late. A larger
// difference is a clock step, and then the server's receive order decides.
const MaxHeartbeatReorder = 15 * time.Second

// newer reports whether heartbeat st should replace prev, stored for the same host.
// Order is judged without trusting the agent's clock, which can jump by hours (a PC whose
// clock runs in local time until NTP steps it):
//   - the same agent instance: by its sequence number (a document made later has a
//     higher one; a resent document has the same one);
//   - another instance: st's agent started after prev's (receive order), unless st comes
//     from the instance prev's already replaced;
//   - no instance (an older agent): by agent time only when the offsets between its
//     clock and the server's agree within MaxHeartbeatReorder (a reordered post), else
//     by receive order (a clock step).
func newer(st wire.HostStatus, prev hostBeat) bool {
	p := prev.st
	switch {
	case st.Instance != "" && st.Instance == p.Instance:
		return st.Seq >= p.Seq
	case st.Instance != "" && st.Instance == prev.retired:
		return false
	case st.Instance != "" || p.Instance != "":
		return true
	}
	skew := st.Received.Sub(st.Time) - p.Received.Sub(p.Time)
	if skew > MaxHeartbeatReorder || skew < -MaxHeartbeatReorder {
		return true
	}
	return !st.Time.Before(p.Time)
}

// put stores a heartbeat unless it is older, by newer's order, than the one stored: the agent posts
// heartbeats from concurrent goroutines, and a late "run" must not overwrite "freeze".
// An overtaken heartbeat still proves the agent alive: it refreshes the stored one's
// Received, so that staleness depends on the server's clock alone. put returns the
// status now stored for the host.
func (a *agentState) put(st wire.HostStatus) wire.HostStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = map[string]hostBeat{}
	}
	defer a.markBeatLocked(st.Host)
	prev, ok := a.last[st.Host]
	if ok && !newer(st, prev) {
		if st.Received.After(prev.st.Received) {
			if st.Received.Sub(prev.st.Received) > wire.StaleAfter {
				a.bumpLocked(true) // the node shown down as stale comes back
			}
			prev.st.Received = st.Received
			a.last[st.Host] = prev
		}
		// An overtaken heartbeat may still carry the host's newest calibration.
		if newerProfile(prev.st.Interference, st.Interference) {
			prev.st.Interference = st.Interference
			a.bumpLocked(true)
			prev.rev = a.rev
			a.last[st.Host] = prev
		}
		return prev.st
	}
	if ok {
		// The agent sends a profile only until its AgentConfig carries it back: the host's
		// last calibration stays with its status (wire.HostStatus).
		st.Interference = laterProfile(prev.st.Interference, st.Interference)
	}
	next := hostBeat{st: st, retired: prev.retired}
	if ok && prev.st.Instance != st.Instance {
		next.retired = prev.st.Instance
	}
	a.bumpLocked(!ok || slurmNodeChanged(prev.st, st))
	next.rev = a.rev
	a.last[st.Host] = next
	return st
}

// laterProfile is the later measured of two calibrations (b when equally old; nil only when
// both are).
func laterProfile(a, b *wire.InterferenceProfile) *wire.InterferenceProfile {
	switch {
	case b == nil:
		return a
	case a == nil || !a.Measured.After(b.Measured):
		return b
	}
	return a
}

// newerProfile reports whether cand was measured after old (or old is nil).
func newerProfile(old, cand *wire.InterferenceProfile) bool {
	return cand != nil && (old == nil || cand.Measured.After(old.Measured))
}

// profile is host's last calibration (nil: none known).
func (a *agentState) profile(host string) *wire.InterferenceProfile {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.last[host].st.Interference; p != nil {
		c := *p
		return &c
	}
	return nil
}

// bumpLocked moves the revision; feed: the change is one the Slurm feed shows, which
// wakes its long polls.
func (a *agentState) bumpLocked(feed bool) {
	a.rev++
	if !feed {
		return
	}
	a.feedRev = a.rev
	if a.changed != nil {
		close(a.changed)
	}
	a.changed = make(chan struct{})
}

// slurmNodeChanged reports whether heartbeat cur changes the host's Slurm node from what old
// gave (slurmnode.Desired), apart from the receive time its comment quotes: a node shown
// down for a stale heartbeat comes up, or the mode, owner, guest, size or calibration
// moved. The running mode's kind follows the mode's name, which the comment carries.
func slurmNodeChanged(old, cur wire.HostStatus) bool {
	if cur.Received.Sub(old.Received) > wire.StaleAfter {
		return true
	}
	o := old
	o.Received = cur.Received
	return !reflect.DeepEqual(slurmnode.Desired(cur.Host, &wire.AgentStatus{HostStatus: o}, nil),
		slurmnode.Desired(cur.Host, &wire.AgentStatus{HostStatus: cur}, nil))
}

// since returns the revision, the revision of the last change the Slurm feed shows and
// a channel closed at the next such change.
func (a *agentState) since() (rev, feedRev uint64, changed <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return a.rev, a.feedRev, a.changed
}

func (a *agentState) get(host string) (wire.HostStatus, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	hb, ok := a.last[host]
	return hb.st, ok
}

func (a *agentState) all() []wire.HostStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]wire.HostStatus, 0, len(a.last))
	for _, hb := range a.last {
		out = append(out, hb.st)
	}
	return out
}

func (a *agentState) putReport(r wire.JobReport) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bumpLocked(true)
	if a.reports == nil {
		a.reports = map[reportKey]revReport{}
	}
	// A job requeued onto the same host runs again and reports again: its latest run
	// replaces the host's report. Another host's report of the job is kept beside it.
	key := reportKey{r.Job, r.Host}
	a.reports[key] = revReport{rev: a.rev, stored: a.rev, r: r}
	a.markReportLocked(key)
	a.evictLocked()
}

// evictLocked drops reports beyond maxReports (from the store too): the oldest report of
// the host that holds the most (of those tied, the one whose oldest is oldest). Dropping
// the oldest of all would let any host's credential flush every other host's reports by
// posting maxReports reports of made-up jobs; this way a flood evicts the flooder's own
// reports once it holds the most, and every host keeps at least its newest
// maxReports/(hosts with reports) whatever others post.
func (a *agentState) evictLocked() {
	for len(a.reports) > maxReports {
		type held struct {
			n      int
			oldest reportKey
		}
		byHost := map[string]*held{}
		for k, x := range a.reports {
			h := byHost[k.host]
			if h == nil {
				byHost[k.host] = &held{n: 1, oldest: k}
				continue
			}
			h.n++
			if x.rev < a.reports[h.oldest].rev {
				h.oldest = k
			}
		}
		var victim *held
		for _, h := range byHost {
			if victim == nil || h.n > victim.n || (h.n == victim.n && a.reports[h.oldest].rev < a.reports[victim.oldest].rev) {
				victim = h
			}
		}
		delete(a.reports, victim.oldest)
		a.markDeadLocked(victim.oldest)
	}
}

// report is host's report of job.
func (a *agentState) report(job, host string) (wire.JobReport, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	x, ok := a.reports[reportKey{job, host}]
	return x.r, ok
}

// reportsOf lists every host's report of job, by host name.
func (a *agentState) reportsOf(job string) []wire.JobReport {
	a.mu.Lock()
	out := []wire.JobReport{}
	for k, x := range a.reports {
		if k.job == job {
			out = append(out, x.r)
		}
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
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
func (ag *Agents) PutHeartbeat(hb wire.Heartbeat, received time.Time, remote string) (wire.HostStatus, error) {
	if err := hb.Validate(); err != nil {
		return wire.HostStatus{}, err
	}
	if ag.s.Snapshot().Host(hb.Host) == nil {
		return wire.HostStatus{}, &resolve.UnknownHostError{Name: hb.Host}
	}
	st := ag.s.agents.put(wire.HostStatus{Heartbeat: hb, Received: received.UTC(), Remote: remote})
	// The newest heartbeat answers the host's pending power commands (power.go).
	ag.s.Power.ack(st, received)
	return st, nil
}

// InterferenceProfile is host's last calibration, as a heartbeat brought it (nil: none
// known; kept across restarts and replicas with a StateStore). The agent configuration
// hands it back to the host (resolve.Query.Interference), whose agent forgets it at
// every reboot.
func (ag *Agents) InterferenceProfile(host string) *wire.InterferenceProfile {
	return ag.s.agents.profile(host)
}

// Status is host's last heartbeat as of now; ok is false when the host has posted
// none (kept across restarts and replicas with a StateStore). A host the site does not have is a
// *resolve.UnknownHostError.
func (ag *Agents) Status(host string, now time.Time) (st wire.AgentStatus, ok bool, err error) {
	if ag.s.Snapshot().Host(host) == nil {
		return wire.AgentStatus{}, false, &resolve.UnknownHostError{Name: host}
	}
	hs, ok := ag.s.agents.get(host)
	if !ok {
		return wire.AgentStatus{}, false, nil
	}
	return withStale(hs, now), true, nil
}

// Statuses lists the last heartbeat of every host of the current site that has
// posted one (pool != "": of that pool's hosts only), by
// host name.
func (ag *Agents) Statuses(pool string, now time.Time) []wire.AgentStatus {
	site := ag.s.Snapshot().Site
	out := []wire.AgentStatus{}
	for _, st := range ag.s.agents.all() {
		h := site.Host(st.Host)
		if h == nil || (pool != "" && h.Pool != pool) {
			continue
		}
		out = append(out, withStale(st, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// StatusesByHost is every kept heartbeat as of now, by host name, whether or not the
// site still has the host: a caller that walks the site's hosts joins by name in constant
// time (Statuses looks every status's host up in the site, which is linear).
func (ag *Agents) StatusesByHost(now time.Time) map[string]*wire.AgentStatus {
	all := ag.s.agents.all()
	out := make(map[string]*wire.AgentStatus, len(all))
	for i := range all {
		st := withStale(all[i], now)
		out[st.Host] = &st
	}
	return out
}

// PutJobReport keeps a node agent's job interference report (jr.Host set by the caller
// from the authenticated host: authz.Principal.AgentHost) and answers with the report as
// kept. It replaces only the same host's report of the job: a host's credential cannot
// overwrite what another host reported, and readers see every host's report of a job
// side by side (JobReportsOf), so a report of a job the host never ran cannot hide the
// real one either. The site manager cannot tell which nodes ran a job (it has no Slurm
// client; docs/slurm.md), so it cannot refuse such a report.
//
// The summary is always made here from the checked numbers and the authenticated host's
// name, whatever the agent sent: it is the one free-text field of a report, and a text
// posted by one host must not be able to claim it speaks for another host's run.
func (ag *Agents) PutJobReport(jr wire.JobReport, received time.Time) (wire.JobReport, error) {
	if err := jr.Validate(); err != nil {
		return wire.JobReport{}, err
	}
	if jr.Host == "" {
		return wire.JobReport{}, model.Invalid("job report of job %s: no host (the report's host is the authenticated node agent's)", jr.Job)
	}
	jr.Summary = wire.ReportSummary(jr)
	jr.Received = received.UTC()
	ag.s.agents.putReport(jr)
	return jr, nil
}

// JobReport is host's report of job; ok is false when none arrived (or it was dropped
// beyond maxReports). There is no "latest of any host": JobReportsOf gives them all.
func (ag *Agents) JobReport(job, host string) (wire.JobReport, bool) {
	return ag.s.agents.report(job, host)
}

// JobReportsOf is every host's report of job, sorted by host (none: empty). A job
// requeued onto another host has a report from each; a host that never ran the job may
// have posted one too, which stands beside the others under its own name.
func (ag *Agents) JobReportsOf(job string) []wire.JobReport {
	return ag.s.agents.reportsOf(job)
}

// JobReports lists the reports kept, oldest first (host != "": of that host only).
func (ag *Agents) JobReports(host string) []wire.JobReport {
	out := []wire.JobReport{}
	for _, jr := range ag.s.agents.reportsSince(0) {
		if host == "" || jr.Host == host {
			out = append(out, jr)
		}
	}
	return out
}
