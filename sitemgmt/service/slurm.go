package service

import (
	"context"
	"sort"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/powersave"
	"github.com/overtime-hpc/overtime/sitemgmt/slurmnode"
	"github.com/overtime-hpc/overtime/sitemgmt/slurmres"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// SlurmFeed is the desired Slurm node of every host and the job reports that arrived
// after revision since. With wait > 0 and nothing new past since, it first waits up to
// wait for the next heartbeat or report (long poll); it returns ctx's error when ctx ends
// first. now is the clock, read after the wait: staleness is judged when answering.
func (s *Service) SlurmFeed(ctx context.Context, since uint64, wait time.Duration, now func() time.Time) (*wire.SlurmFeed, error) {
	rev, changed := s.agents.since()
	if rev <= since && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
		rev, _ = s.agents.since()
	}
	site := s.Snapshot().Site
	at := now()
	dir := s.Directory()
	feed := &wire.SlurmFeed{Revision: rev, Nodes: make([]wire.SlurmNode, 0, len(site.Hosts)), Reports: []wire.JobReportLine{}}
	for i := range site.Hosts {
		h := &site.Hosts[i]
		var st *wire.AgentStatus
		var running *model.Mode
		if hs, ok := s.agents.get(h.Name); ok {
			x := withStale(hs, at)
			if x.Stale && staleOnlyByOutage(hs.Received, at, dir, time.Now()) {
				x.Stale = false
			}
			st = &x
			running = site.Mode(hs.Mode)
		}
		feed.Nodes = append(feed.Nodes, slurmnode.Desired(h.Name, st, running))
	}
	sort.Slice(feed.Nodes, func(i, j int) bool { return feed.Nodes[i].Name < feed.Nodes[j].Name })
	for _, jr := range s.agents.reportsSince(since) {
		feed.Reports = append(feed.Reports, wire.JobReportLine{Job: jr.Job, Host: jr.Host, Summary: jr.Summary})
	}
	return feed, nil
}

// SlurmReservations is every host's coming windows without a compute guest in
// [now, now+horizon), from the current snapshot's schedule (sitemgmt/slurmres). It is not
// part of the long-poll feed: windows change with the schedule and the clock, not with
// heartbeats, and a week of them for every host would multiply the size of every feed
// answer; the sync daemon asks for them once per resync instead.
func (s *Service) SlurmReservations(now time.Time, horizon time.Duration) wire.SlurmReservations {
	return slurmres.All(s.Snapshot().Resolver, now, horizon)
}

// SlurmPower carries out Slurm's power saving calls (resume: wake hosts, putting local-disk
// ones in a cluster mode; else suspend: give them back to their schedule). The plan is
// made inside the write, from the snapshot the write starts from, so that a concurrent
// change cannot slip between deciding and writing; the exceptions it adds or removes are
// authorised by authz like any exception change. The results then say what the schedule
// now gives each host (in a dry run: still gives).
func (s *Service) SlurmPower(ctx context.Context, authz Authorizer, dryRun, resume bool, req wire.PowerRequest, now time.Time) ([]wire.PowerResult, error) {
	var plan *powersave.Plan
	_, err := s.update(ctx, authz, dryRun, func(cur *Snapshot, next *model.Site) error {
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
	powersave.Describe(s.Snapshot().Resolver, plan.Results, now)
	if !dryRun {
		s.slurmPowerCommands(ctx, resume, plan.Results, now)
	}
	for _, res := range plan.Results {
		s.log.Info("slurm power saving", "resume", resume, "host", res.Host, "action", res.Action, "mode", res.Mode, "reason", res.Reason)
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

// slurmPowerCommands makes Slurm's power saving switch PCs: a suspend records a power-off
// by "slurm" for every released host (the agent carries it out, never with a user logged
// in: then the PC stays on and follows its schedule, and the result says so); a resume
// cancels a host's pending power-off, which would otherwise switch off the PC Slurm now
// wants as soon as its agent asks for its configuration.
func (s *Service) slurmPowerCommands(ctx context.Context, resume bool, results []wire.PowerResult, now time.Time) {
	if resume {
		for _, r := range results {
			if r.Action == wire.PowerWake || r.Action == wire.PowerCluster {
				s.CancelPower(r.Host, "cancelled: Slurm resumed the host (ResumeProgram)", now)
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
	res, err := s.RequestPower(ctx, UserSlurm, wire.OpPowerOff, hosts, false, "Slurm power saving: idle (SuspendProgram)", now)
	if err != nil {
		s.log.Warn("slurm suspend: power-off not recorded", "hosts", hosts, "err", err)
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
