package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/powersave"
	"github.com/overtime-hpc/overtime/sitemgmt/slurmnode"
	"github.com/overtime-hpc/overtime/sitemgmt/slurmres"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/slurmcompat"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Slurm is what the Slurm side reads and asks: the feed of desired nodes and job reports
// (Feed, FeedJSON), reservations (Reservations), power saving (PowerSave) and the
// controller's Slurm version (ReportController, ControllerVersion).
type Slurm struct {
	s     *Service
	cache slurmFeedCache // the feed's last build
	ctld  controllerState
}

// The controller's Slurm version: the sync daemon sends it with its feed requests
// (slurmctld=), the site manager hands it to every node agent (wire.AgentConfig
// SlurmctldVersion), and the agent does not start a compute guest whose slurmd would not
// join it (vocab/slurmcompat). One document for the site in the directory (state kind
// "slurm", key "slurmctld"), written only when the version changes, so that every
// replica hands its agents the same version whichever replica the daemon polls, and a
// restarted replica knows it before the daemon's next poll.
const slurmctldKey = "slurmctld"

// controllerDoc is the stored report: the version, when and by whom it was reported.
type controllerDoc struct {
	Version  string    `json:"version"`
	Reported time.Time `json:"reported"`
	By       string    `json:"by"`
}

type controllerState struct {
	mu     sync.Mutex
	cur    controllerDoc // the newest known (this replica's report or a stored one)
	stored controllerDoc // what the store holds (written by us or seen)
}

// ReportController records version as the Slurm controller's (user by reported it;
// the caller authorised that: authz.Principal.CheckSlurmReport). A version that is not
// one (slurmcompat.Valid) is model.Invalid, naming it. A change is logged and written to
// the directory; a failed write is logged and tried again at the next report, and never
// fails the report: the daemon's feed must not depend on it.
func (sl *Slurm) ReportController(ctx context.Context, by, version string, now time.Time) error {
	if err := slurmcompat.Valid(version); err != nil {
		return model.Invalid("slurmctld: %v", err)
	}
	st := &sl.ctld
	d := controllerDoc{Version: version, Reported: now.UTC(), By: by}
	st.mu.Lock()
	prev := st.cur.Version
	st.cur = d
	write := sl.s.state != nil && st.stored.Version != version
	st.mu.Unlock()
	if prev != version {
		sl.s.log.Info("Slurm controller version", "slurmctld", version, "was", prev, "by", by)
	}
	if !write {
		return nil
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := sl.s.state.PutState(ctx, stateSlurm, slurmctldKey, doc); err != nil {
		sl.s.log.Warn("state: the Slurm controller's version was not written; trying again at its next report", "slurmctld", version, "err", err)
		return nil
	}
	st.mu.Lock()
	st.stored = d
	st.mu.Unlock()
	return nil
}

// ControllerVersion is the Slurm controller's version as last reported ("": never).
func (sl *Slurm) ControllerVersion() string {
	sl.ctld.mu.Lock()
	defer sl.ctld.mu.Unlock()
	return sl.ctld.cur.Version
}

// mergeDoc takes the stored report (loaded, or another replica's write): the newer
// report wins; one that does not decode is logged and skipped.
func (st *controllerState) mergeDoc(log *slog.Logger, key string, doc []byte, deleted bool) {
	if key != slurmctldKey || deleted {
		return
	}
	var d controllerDoc
	if err := json.Unmarshal(doc, &d); err != nil || slurmcompat.Valid(d.Version) != nil {
		log.Warn("state: skipping a Slurm controller document that does not decode", "key", key, "err", err)
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stored = d
	if st.cur.Version == "" || d.Reported.After(st.cur.Reported) {
		st.cur = d
	}
}

// Feed is the desired Slurm node of every host and the job reports that arrived
// after revision since. With wait > 0 and nothing new past since, it first waits up to
// wait for the next heartbeat or report (long poll); it returns ctx's error when ctx ends
// first. now is the clock, read after the wait: staleness is judged when answering.
// A long poll's answer is the shared build of buildNodes (at most one per FeedCoalesce).
// With base, the build id of an earlier answer, the answer may be a delta: only the
// nodes that changed since that build (wire.SlurmFeed).
func (sl *Slurm) Feed(ctx context.Context, since, base uint64, wait time.Duration, now func() time.Time) (*wire.SlurmFeed, error) {
	a, err := sl.feed(ctx, since, base, wait, now, false)
	if err != nil {
		return nil, err
	}
	feed := &wire.SlurmFeed{Revision: a.rev, Build: a.build, Delta: a.delta, Nodes: slices.Clone(a.nodes), Reports: []wire.JobReportLine{}}
	for _, jr := range sl.s.agents.reportsSince(since) {
		feed.Reports = append(feed.Reports, wire.JobReportLine{Job: jr.Job, Host: jr.Host, Summary: jr.Summary})
	}
	return feed, nil
}

// FeedJSON is Feed encoded (compact JSON, a wire.SlurmFeed): the nodes' encoding
// of a whole list is shared by every long poll answered from the same build, so that K
// sync daemons cost one encoding of the whole site, not K.
func (sl *Slurm) FeedJSON(ctx context.Context, since, base uint64, wait time.Duration, now func() time.Time) ([]byte, error) {
	a, err := sl.feed(ctx, since, base, wait, now, true)
	if err != nil {
		return nil, err
	}
	reports := []wire.JobReportLine{}
	for _, jr := range sl.s.agents.reportsSince(since) {
		reports = append(reports, wire.JobReportLine{Job: jr.Job, Host: jr.Host, Summary: jr.Summary})
	}
	rj, err := json.Marshal(reports)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(a.js)+len(rj)+96)
	b = append(b, `{"revision":`...)
	b = strconv.AppendUint(b, a.rev, 10)
	b = append(b, `,"build":`...)
	b = strconv.AppendUint(b, a.build, 10)
	if a.delta {
		b = append(b, `,"delta":true`...)
	}
	b = append(b, `,"nodes":`...)
	b = append(b, a.js...)
	b = append(b, `,"reports":`...)
	b = append(b, rj...)
	return append(b, "}\n"...), nil
}

// FeedCoalesce is how often, at most, a replica builds the Slurm feed for long polls.
// Long polls wake only at changes the feed shows (slurmNodeChanged), but a burst of them (a
// room logging in at 08:00) would otherwise make every long poll build and encode every
// node (2.8 MB at 10,000 hosts) for itself, so that the replica's CPU grew with the
// number of daemons (docs/benchmarks/agentscale.md, BenchmarkSlurmFeedFanout). Long
// polls share one build instead, made at most every FeedCoalesce, which delays a change
// by at most that much; a plain read (wait 0) always gets the current state. 50 ms keeps
// the delay a fifth of the 250 ms owner-to-Slurm target (docs/benchmarks/slurmscale.md).
const FeedCoalesce = 50 * time.Millisecond

// Deltas of the Slurm feed: a sync daemon that holds an earlier build asks what changed
// since, so that its reconcile costs O(changes), not O(hosts) (docs/slurm.md). Each build
// records which nodes differ from the build before it; a delta is the union over the
// builds since the caller's. Past maxDeltaNodes changed nodes a whole list is answered
// instead: the daemon then does one whole reconcile (two RPCs for the node and job tables)
// rather than one node RPC per change.
const (
	feedHistory   = 256 // builds remembered
	maxDeltaNodes = 64
)

// slurmFeedCache is the last build of the Slurm feed's nodes.
type slurmFeedCache struct {
	mu    sync.Mutex
	rev   uint64    // the agents' feed revision it was built at
	snap  *Snapshot // ... from this snapshot
	at    time.Time // ... judging staleness at this instant (the caller's clock)
	built time.Time // wall clock of the build
	nodes []wire.SlurmNode
	js    []byte // nodes as JSON, made when first asked for
	// id is the build's id: a random epoch per process in the bits above 32 (so that a
	// base from another replica, or from before a restart, is not mistaken for one of
	// this replica's builds) and a sequence below; at most 2^52, exact in any JSON reader.
	id   uint64
	hist []feedDiff // the last builds' changes, oldest first
}

// feedDiff is what one build changed from the build before it: the names of the nodes
// that differ or are new (sorted), or all (a node removed, or more than maxDeltaNodes).
type feedDiff struct {
	id    uint64
	names []string
	all   bool
}

// feedAnswer is one answer of the feed: the nodes (shared: read only), their JSON when
// asked for, the agents' revision and the build, and whether the nodes are a delta.
type feedAnswer struct {
	rev, build uint64
	delta      bool
	nodes      []wire.SlurmNode
	js         []byte
}

// feed waits as Feed does and answers from the current build.
func (sl *Slurm) feed(ctx context.Context, since, base uint64, wait time.Duration, now func() time.Time, encode bool) (feedAnswer, error) {
	_, feedRev, changed := sl.s.agents.since()
	if feedRev <= since && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return feedAnswer{}, ctx.Err()
		}
		t.Stop()
	}
	c := &sl.cache
	var rev uint64
	for {
		rev, feedRev, _ = sl.s.agents.since()
		snap := sl.s.Snapshot()
		c.mu.Lock()
		at := now()
		// The last build is the answer while nothing it shows changed since (staleness
		// judged up to a second earlier). The revision answered is the current one: the
		// heartbeats since repeated what the build shows.
		if c.nodes != nil && c.rev == feedRev && c.snap == snap && at.Sub(c.at).Abs() < time.Second {
			break
		}
		// A long poll waits for the next build slot.
		if d := FeedCoalesce - time.Since(c.built); wait > 0 && c.nodes != nil && d > 0 {
			c.mu.Unlock()
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return feedAnswer{}, ctx.Err()
			}
			continue
		}
		c.install(feedRev, snap, at, sl.buildNodes(snap.Site, at))
		break
	}
	defer c.mu.Unlock()
	a := feedAnswer{rev: rev, build: c.id}
	if names, ok := c.changedSince(base); ok {
		a.delta, a.nodes = true, make([]wire.SlurmNode, 0, len(names))
		for _, name := range names {
			if i, found := sort.Find(len(c.nodes), func(i int) int { return strings.Compare(name, c.nodes[i].Name) }); found {
				a.nodes = append(a.nodes, c.nodes[i])
			}
		}
		if encode {
			js, err := json.Marshal(a.nodes)
			if err != nil {
				return feedAnswer{}, err
			}
			a.js = js
		}
		return a, nil
	}
	a.nodes = c.nodes
	if encode && c.js == nil {
		js, err := json.Marshal(c.nodes)
		if err != nil {
			return feedAnswer{}, err
		}
		c.js = js
	}
	a.js = c.js
	return a, nil
}

// install makes nodes (sorted by name) the current build and records what it changed.
// The caller holds c.mu.
func (c *slurmFeedCache) install(feedRev uint64, snap *Snapshot, at time.Time, nodes []wire.SlurmNode) {
	if c.id == 0 {
		c.id = (uint64(rand.Uint32()>>12) | 1) << 32
	}
	c.id++
	d := feedDiff{id: c.id}
	if c.nodes == nil {
		d.all = true
	} else {
		d.names, d.all = diffFeedNodes(c.nodes, nodes)
	}
	if len(c.hist) == feedHistory {
		c.hist = slices.Delete(c.hist, 0, 1)
	}
	c.hist = append(c.hist, d)
	c.rev, c.snap, c.at, c.built, c.nodes, c.js = feedRev, snap, at, time.Now(), nodes, nil
}

// diffFeedNodes compares two builds (each sorted by name): the names whose Slurm node
// differs or is new in cur, or all when a node is gone or more than maxDeltaNodes changed.
// The comment does not count: it quotes the last heartbeat's time, which every heartbeat
// moves (167 a second at 5,000 hosts), and Slurm is not given it; a delta is for what
// Slurm shows (docs/slurm.md).
func diffFeedNodes(old, cur []wire.SlurmNode) (names []string, all bool) {
	i := 0
	for j := range cur {
		if i < len(old) && old[i].Name < cur[j].Name {
			return nil, true // old[i] is gone
		}
		if i < len(old) && old[i].Name == cur[j].Name {
			a, b := old[i], cur[j]
			a.Comment, b.Comment = "", ""
			if a != b {
				names = append(names, cur[j].Name)
			}
			i++
		} else {
			names = append(names, cur[j].Name)
		}
		if len(names) > maxDeltaNodes {
			return nil, true
		}
	}
	if i < len(old) {
		return nil, true
	}
	return names, false
}

// changedSince is the names of the nodes that changed after build base, sorted, and
// whether the builds remembered can tell (base is one of them, or the current one).
func (c *slurmFeedCache) changedSince(base uint64) ([]string, bool) {
	// The oldest build remembered says what changed since the one before it.
	if base == 0 || base > c.id || len(c.hist) == 0 || base+1 < c.hist[0].id {
		return nil, false
	}
	var names []string
	for _, d := range c.hist {
		if d.id <= base {
			continue
		}
		if d.all {
			return nil, false
		}
		names = append(names, d.names...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > maxDeltaNodes {
		return nil, false
	}
	return names, true
}

// buildNodes is the desired Slurm node of every host, by name, at instant at.
func (sl *Slurm) buildNodes(site *model.Site, at time.Time) []wire.SlurmNode {
	dir := sl.s.Accounts.Directory()
	nodes := make([]wire.SlurmNode, 0, len(site.Hosts))
	for i := range site.Hosts {
		h := &site.Hosts[i]
		var st *wire.AgentStatus
		var running *model.Mode
		if hs, ok := sl.s.agents.get(h.Name); ok {
			x := withStale(hs, at)
			if x.Stale && staleOnlyByOutage(hs.Received, at, dir, time.Now()) {
				x.Stale = false
			}
			st = &x
			running = site.Mode(hs.Mode)
		}
		nodes = append(nodes, slurmnode.Desired(h.Name, st, running))
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes
}

// Reservations is every host's coming windows without a compute guest in
// [now, now+horizon), from the current snapshot's schedule (sitemgmt/slurmres). It is not
// part of the long-poll feed: windows change with the schedule and the clock, not with
// heartbeats, and a week of them for every host would multiply the size of every feed
// answer; the sync daemon asks for them once per resync instead.
func (sl *Slurm) Reservations(now time.Time, horizon time.Duration) wire.SlurmReservations {
	return slurmres.All(sl.s.Snapshot().Resolver, now, horizon)
}

// PowerSave carries out Slurm's power saving calls (resume: wake hosts, putting local-disk
// ones in a cluster mode; else suspend: give them back to their schedule). The plan is
// made inside the write, from the snapshot the write starts from, so that a concurrent
// change cannot slip between deciding and writing; the exceptions it adds or removes are
// authorised by authz like any exception change. The results then say what the schedule
// now gives each host (in a dry run: still gives).
func (sl *Slurm) PowerSave(ctx context.Context, authz Authorizer, dryRun, resume bool, req wire.PowerRequest, now time.Time) ([]wire.PowerResult, error) {
	var plan *powersave.Plan
	_, err := sl.s.update(ctx, authz, dryRun, func(cur *Snapshot, next *model.Site) error {
		var err error
		if resume {
			plan, err = powersave.Resume(cur.Resolver, req, now)
		} else {
			plan, err = powersave.Suspend(cur.Resolver, req)
		}
		if err != nil {
			return err
		}
		plan.Apply(next)
		return nil
	})
	if err != nil {
		return nil, err
	}
	powersave.Describe(sl.s.Snapshot().Resolver, plan.Results, now)
	if !dryRun {
		sl.powerCommands(ctx, resume, plan.Results, now)
	}
	for _, res := range plan.Results {
		sl.s.log.Info("slurm power saving", "resume", resume, "host", res.Host, "action", res.Action, "mode", res.Mode, "reason", res.Reason)
	}
	return plan.Results, nil
}

// staleOnlyByOutage reports whether a stale heartbeat (received at received, judged at at
// on the API's clock) may be stale only because the directory is down: heartbeats may
// then stop arriving because this server cannot verify them (a host token not in the
// verified cache), so a heartbeat that was still fresh when the outage began is not
// judged stale, and an outage of Overtime's own directory never makes Slurm mark nodes
// down and requeue their jobs. The agent still evicts the guest by itself when its owner
// returns. Ages, not instants, are compared: dir.DownSince is on the wall clock (wallNow),
// received and at on the API's clock, which a demo may shift.
func staleOnlyByOutage(received, at time.Time, dir DirectoryHealth, wallNow time.Time) bool {
	if dir.Reachable || dir.DownSince.IsZero() {
		return false
	}
	return at.Sub(received)-wallNow.Sub(dir.DownSince) <= wire.StaleAfter
}

// powerCommands makes Slurm's power saving switch PCs: a suspend records a power-off
// by "slurm" for every released host (the agent carries it out, never with a user logged
// in: then the PC stays on and follows its schedule, and the result says so); a resume
// cancels a host's pending power-off, which would otherwise switch off the PC Slurm now
// wants as soon as its agent asks for its configuration.
func (sl *Slurm) powerCommands(ctx context.Context, resume bool, results []wire.PowerResult, now time.Time) {
	if resume {
		for _, r := range results {
			if r.Action == wire.PowerWake || r.Action == wire.PowerCluster {
				sl.s.Power.Cancel(r.Host, "cancelled: Slurm resumed the host (ResumeProgram)", now)
			}
		}
		return
	}
	var hosts []string
	idx := map[string]int{}
	for i, r := range results {
		if r.Action == wire.PowerReleased {
			hosts = append(hosts, r.Host)
			idx[r.Host] = i
		}
	}
	if len(hosts) == 0 {
		return
	}
	res, err := sl.s.Power.Request(ctx, UserSlurm, wire.OpPowerOff, hosts, false, "Slurm power saving: idle (SuspendProgram)", now)
	if err != nil {
		sl.s.log.Warn("slurm suspend: power-off not recorded", "hosts", hosts, "err", err)
		for _, h := range hosts {
			results[idx[h]].Reason = "power-off not recorded: " + err.Error()
		}
		return
	}
	for _, r := range res.Hosts {
		if r.Accepted {
			results[idx[r.Host]].Reason = "power-off requested (" + r.ID + ")"
		} else {
			results[idx[r.Host]].Reason = "stays on: " + r.Reason
		}
	}
}
