package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// memService is a Service over a fixed site, without a store: enough for the runtime
// state, which never touches the directory.
func memService(t *testing.T) *Service {
	t.Helper()
	site := &model.Site{
		Name: "t", Timezone: "UTC", DefaultMode: "desktop",
		Modes: []model.Mode{{Name: "desktop", Kind: model.KindDesktop}, {Name: "maint", Kind: model.KindMaintenance}},
		Pools: []model.Pool{{Name: "lab"}, {Name: "other"}},
		Hosts: []model.Host{
			{Name: "pc1", MAC: "52:54:00:00:00:01", Pool: "lab"},
			{Name: "pc2", MAC: "52:54:00:00:00:02", Pool: "other"},
		},
	}
	snap, err := newSnapshot(site)
	if err != nil {
		t.Fatal(err)
	}
	s := newService(nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.snap.Store(snap)
	return s
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// Heartbeat order never trusts the agent's clock. Each case posts heartbeats in arrival
// order (the agent's instance and sequence number, its clock and the server's receive
// time) and says which one is kept, and what the host then looks like to the site
// manager a minute after the last one arrived.
func TestHeartbeatOrder(t *testing.T) {
	type post struct {
		instance string
		seq      uint64
		agent    time.Duration // the agent's clock, after t0
		received time.Duration // the server's receive time, after t0
	}
	const h = time.Hour
	s := time.Second
	for _, tc := range []struct {
		name  string
		posts []post
		kept  int    // index of the post kept
		rev   uint64 // revision afterwards: one per stored heartbeat
	}{
		{"in order", []post{{"a", 1, 0, 0}, {"a", 2, 30 * s, 30 * s}}, 1, 2},
		{"concurrent posts: the higher sequence wins over a later arrival", []post{{"a", 2, s, s}, {"a", 1, 0, 2 * s}}, 0, 1},
		{"a resent document (same sequence) is kept", []post{{"a", 3, 0, 0}, {"a", 3, 0, 30 * s}}, 1, 2},
		// The bug this order fixes: a PC whose clock ran hours ahead until NTP stepped it
		// back must not freeze its host at the heartbeat from the future.
		{"clock from the future, then stepped back", []post{{"a", 1, 5 * h, 0}, {"a", 2, 30 * s, 30 * s}, {"a", 3, 60 * s, 60 * s}}, 2, 3},
		{"clock stepped forward", []post{{"a", 1, 0, 0}, {"a", 2, 5 * h, 30 * s}}, 1, 2},
		{"clock in the past throughout", []post{{"a", 1, -2 * h, 0}, {"a", 2, -2*h + 30*s, 30 * s}}, 1, 2},
		{"agent restart with a clock behind: the new instance wins", []post{{"a", 7, 5 * h, 0}, {"b", 1, 30 * s, 30 * s}}, 1, 2},
		{"a late post of the replaced instance loses", []post{{"a", 7, 0, 0}, {"b", 1, 30 * s, 30 * s}, {"a", 8, 31 * s, 32 * s}}, 1, 2},
		{"upgrade from an agent without instance", []post{{"", 0, 5 * h, 0}, {"b", 1, 30 * s, 30 * s}}, 1, 2},
		// Older agents send no instance: their clock orders two heartbeats only when
		// it agrees with the server's within MaxHeartbeatReorder, else arrival does.
		{"old agent: a reordered post loses", []post{{"", 0, 2 * s, 2 * s}, {"", 0, 0, 3 * s}}, 0, 1},
		{"old agent: clock from the future, then stepped back", []post{{"", 0, 5 * h, 0}, {"", 0, 30 * s, 30 * s}}, 1, 2},
		{"old agent: clock stepped back an hour", []post{{"", 0, 0, 0}, {"", 0, -h + 30*s, 30 * s}}, 1, 2},
		{"old agent: clock off by hours throughout", []post{{"", 0, 3 * h, 0}, {"", 0, 3*h + 30*s, 30 * s}, {"", 0, 3*h + 29*s, 31 * s}}, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := memService(t)
			var answer wire.HostStatus
			for i, p := range tc.posts {
				hb := wire.Heartbeat{Host: "pc1", Instance: p.instance, Seq: p.seq, Time: t0.Add(p.agent), Restarts: i}
				st, err := svc.Agents.PutHeartbeat(hb, t0.Add(p.received), "10.0.0.1")
				if err != nil {
					t.Fatal(err)
				}
				answer = st
			}
			if answer.Restarts != tc.kept {
				t.Errorf("answer is post %d, want %d", answer.Restarts, tc.kept)
			}
			if rev, _, _ := svc.agents.since(); rev != tc.rev {
				t.Errorf("revision %d, want %d", rev, tc.rev)
			}
			last := tc.posts[len(tc.posts)-1].received
			st, ok, err := svc.Agents.Status("pc1", t0.Add(last+time.Minute))
			if err != nil || !ok || st.Restarts != tc.kept {
				t.Fatalf("stored %+v %v %v, want post %d", st, ok, err, tc.kept)
			}
			// Staleness follows the server's clock alone: an overtaken heartbeat
			// still shows the agent alive.
			if st.Stale || !st.Received.Equal(t0.Add(last)) {
				t.Errorf("received %s stale %v, want %s and fresh", st.Received, st.Stale, t0.Add(last))
			}
		})
	}
}

func TestAgentStatus(t *testing.T) {
	s := memService(t)
	if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: "ghost", Time: t0}, t0, ""); !errors.As(err, new(*resolve.UnknownHostError)) {
		t.Fatalf("heartbeat of a host the site lacks: %v", err)
	}
	if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc1", Time: t0, Pressure: 101}, t0, ""); err == nil {
		t.Fatal("invalid heartbeat kept")
	}
	if _, ok, err := s.Agents.Status("pc1", t0); ok || err != nil {
		t.Fatalf("status before any heartbeat: %v %v", ok, err)
	}
	if _, _, err := s.Agents.Status("ghost", t0); !errors.As(err, new(*resolve.UnknownHostError)) {
		t.Fatalf("status of a host the site lacks: %v", err)
	}
	for _, h := range []string{"pc2", "pc1"} {
		if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: h, Time: t0}, t0, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		pool  string
		at    time.Time
		hosts string
		stale bool
	}{
		{"", t0.Add(wire.StaleAfter), "pc1,pc2", false},
		{"", t0.Add(wire.StaleAfter + time.Second), "pc1,pc2", true},
		{"other", t0, "pc2", false},
		{"nope", t0, "", false},
	} {
		list := s.Agents.Statuses(tc.pool, tc.at)
		hosts := ""
		for i, st := range list {
			if i > 0 {
				hosts += ","
			}
			hosts += st.Host
			if st.Stale != tc.stale {
				t.Errorf("pool %q at %s: %s stale %v", tc.pool, tc.at, st.Host, st.Stale)
			}
		}
		if hosts != tc.hosts || list == nil {
			t.Errorf("pool %q: hosts %q (%v), want %q", tc.pool, hosts, list, tc.hosts)
		}
	}
}

func report(job, host string) wire.JobReport {
	return wire.JobReport{Job: job, Host: host, Start: t0, End: t0.Add(time.Minute), Seconds: 60}
}

// Reports are kept per job and host (a host replaces only its own report of a job; a
// job requeued onto another host has a report from each) and read side by side, in
// arrival order, at most maxReports: beyond it the oldest report of the host holding the
// most goes first, so a host flooding reports of made-up jobs evicts only its own.
func TestJobReports(t *testing.T) {
	s := memService(t)
	jr, err := s.Agents.PutJobReport(report("1", "pc1"), t0.In(time.FixedZone("x", 3600)))
	if err != nil || jr.Summary == "" || jr.Received != t0 || jr.Received.Location() != time.UTC {
		t.Fatalf("kept %+v %v", jr, err)
	}
	if _, err := s.Agents.PutJobReport(report("x1", "pc1"), t0); err == nil {
		t.Fatal("report with an invalid job id kept")
	}
	mustPut := func(job, host string) {
		if _, err := s.Agents.PutJobReport(report(job, host), t0); err != nil {
			t.Fatal(err)
		}
	}
	mustPut("2", "pc2")
	mustPut("1", "pc2") // requeued: runs again, now on pc2
	again := report("1", "pc2")
	again.ThrottledSeconds = 7
	if _, err := s.Agents.PutJobReport(again, t0); err != nil { // pc2's agent reposts its run
		t.Fatal(err)
	}
	jobs := func(list []wire.JobReport) string {
		out := ""
		for _, r := range list {
			out += r.Job + "@" + r.Host + " "
		}
		return out
	}
	if got := jobs(s.Agents.JobReports("")); got != "1@pc1 2@pc2 1@pc2 " {
		t.Fatalf("reports %q", got)
	}
	if got := jobs(s.Agents.JobReports("pc1")); got != "1@pc1 " {
		t.Fatalf("pc1's reports %q", got)
	}
	// Job 1's reports side by side, by host, though pc2's arrived last.
	if got := jobs(s.Agents.JobReportsOf("1")); got != "1@pc1 1@pc2 " {
		t.Fatalf("job 1's reports %q", got)
	}
	if got := s.Agents.JobReportsOf("3"); got == nil || len(got) != 0 {
		t.Fatalf("job 3's reports %v, want none", got)
	}
	for _, tc := range []struct{ host, want string }{{"pc2", "pc2"}, {"pc1", "pc1"}} {
		r, ok := s.Agents.JobReport("1", tc.host)
		if !ok || r.Host != tc.want {
			t.Fatalf("job 1 of host %q: %+v %v, want %s's", tc.host, r, ok, tc.want)
		}
		if want := map[string]float64{"pc1": 0, "pc2": 7}[tc.want]; r.ThrottledSeconds != want {
			t.Fatalf("job 1 of host %q: throttled %v, want %v", tc.host, r.ThrottledSeconds, want)
		}
	}
	for _, host := range []string{"pc3", ""} {
		if r, ok := s.Agents.JobReport("1", host); ok {
			t.Fatalf("job 1 of host %q: %+v", host, r)
		}
	}
	rev, _, _ := s.agents.since()
	if got := jobs(s.agents.reportsSince(rev - 1)); got != "1@pc2 " {
		t.Fatalf("since %d: %q", rev-1, got)
	}
	// pc1 floods: two more than fit. It holds the most, so its own oldest go (job 1, then
	// job 1000); pc2's two reports, older than all of pc1's but 1@pc1, stay.
	for i := 0; i < maxReports-1; i++ {
		mustPut(fmt.Sprint(1000+i), "pc1")
	}
	if n := len(s.Agents.JobReports("")); n != maxReports {
		t.Fatalf("bound: %d reports kept, want %d", n, maxReports)
	}
	if got := jobs(s.Agents.JobReports("pc2")); got != "2@pc2 1@pc2 " {
		t.Fatalf("pc1's flood evicted pc2's reports: pc2 keeps %q", got)
	}
	for _, job := range []string{"1", "1000"} {
		if _, ok := s.Agents.JobReport(job, "pc1"); ok {
			t.Fatalf("job %s's report of pc1 (among pc1's oldest) kept", job)
		}
	}
	if _, ok := s.Agents.JobReport("1001", "pc1"); !ok {
		t.Fatal("job 1001's report of pc1 dropped: only two had to go")
	}
}

// The summary is the server's, made from the checked numbers and the report's host
// (the authenticated agent's): a text the agent sent cannot claim another host's run.
func TestJobReportSummary(t *testing.T) {
	s := memService(t)
	r := report("7", "pc2")
	r.ThrottledSeconds = 30
	r.Summary = "overtime: job 7 on pc1 60 s: throttled 0 s"
	kept, err := s.Agents.PutJobReport(r, t0)
	if err != nil || kept.Summary != wire.ReportSummary(kept) || !strings.HasPrefix(kept.Summary, "overtime: job 7 on pc2 60 s: throttled 30 s") {
		t.Fatalf("kept %+v %v", kept, err)
	}
	if got, _ := s.Agents.JobReport("7", "pc2"); got.Summary != kept.Summary {
		t.Fatalf("stored summary %q", got.Summary)
	}
	r.Host = ""
	if _, err := s.Agents.PutJobReport(r, t0); err == nil || !strings.Contains(err.Error(), "no host") {
		t.Fatalf("a report without its host: %v", err)
	}
}

func TestSlurmFeed(t *testing.T) {
	s := memService(t)
	ctx := context.Background()
	clock := func() time.Time { return t0 }
	feed, err := s.Slurm.Feed(ctx, 0, 0, 0, clock)
	if err != nil || feed.Revision != 0 || len(feed.Nodes) != 2 || feed.Nodes[0].Name != "pc1" || feed.Nodes[0].State != wire.SlurmDown || len(feed.Reports) != 0 {
		t.Fatalf("empty feed %+v %v", feed, err)
	}

	// A long poll waits while nothing changes and is woken by the next heartbeat, with
	// that heartbeat's node: still unanswered after 300 ms (it would answer at once
	// without waiting), answered within 5 s of the heartbeat (its timeout is an hour).
	got := make(chan *wire.SlurmFeed, 1)
	pollErr := make(chan error, 1)
	go func() {
		f, err := s.Slurm.Feed(ctx, 0, 0, time.Hour, clock)
		pollErr <- err
		got <- f
	}()
	select {
	case f := <-got:
		t.Fatalf("long poll answered before any change: %+v (%v)", f, <-pollErr)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc1", Time: t0, Mode: "desktop", OwnerState: model.StateNoUser,
		Action: model.ActionRun, GuestState: "running"}, t0, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-pollErr:
		if err != nil {
			t.Fatal(err)
		}
		feed = <-got
	case <-time.After(5 * time.Second):
		t.Fatal("long poll not woken by the heartbeat: no answer 5 s after it")
	}
	if feed.Revision != 1 || feed.Nodes[0].State != wire.SlurmUp || feed.Nodes[0].Features != "overtime,desktop,desk-empty" {
		t.Fatalf("after a heartbeat: %+v", feed)
	}
	// A host in maintenance runs no compute guest: its node is down.
	if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc2", Time: t0, Mode: "maint", GuestState: "none"}, t0, ""); err != nil {
		t.Fatal(err)
	}
	mustPutReport := func(job string) {
		if _, err := s.Agents.PutJobReport(report(job, "pc1"), t0); err != nil {
			t.Fatal(err)
		}
	}
	mustPutReport("7")
	feed, err = s.Slurm.Feed(ctx, 1, 0, time.Hour, clock)
	if err != nil || feed.Revision != 3 || feed.Nodes[1].State != wire.SlurmDown || len(feed.Reports) != 1 || feed.Reports[0].Job != "7" {
		t.Fatalf("since 1: %+v %v", feed, err)
	}

	// Staleness is judged at the clock read when answering.
	late := func() time.Time { return t0.Add(wire.StaleAfter + time.Second) }
	if feed, _ = s.Slurm.Feed(ctx, 0, 0, 0, late); feed.Nodes[0].State != wire.SlurmDown {
		t.Fatalf("stale: %+v", feed.Nodes[0])
	}

	// A poll whose client goes away ends with the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Slurm.Feed(cctx, 3, 0, time.Hour, clock); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled poll: %v", err)
	}
}

// Long polls share one build of the feed, made at most every FeedCoalesce; plain reads
// see every change at once; the JSON answer is the feed's encoding.
func TestSlurmFeedCoalesced(t *testing.T) {
	s := memService(t)
	ctx := context.Background()
	clock := func() time.Time { return t0 }
	beat := func(seq uint64, state model.OwnerState) {
		t.Helper()
		if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc1", Time: t0, Instance: "a", Seq: seq, Mode: "desktop", OwnerState: state,
			Action: model.ActionRun, GuestState: "running"}, t0, ""); err != nil {
			t.Fatal(err)
		}
	}
	beat(1, model.StateNoUser)
	first, err := s.Slurm.Feed(ctx, 0, 0, time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	// A change right after the build: a plain read has it at once, a long poll waits for
	// the next build slot.
	beat(2, model.StateOwnerActive)
	if f, _ := s.Slurm.Feed(ctx, first.Revision, 0, 0, clock); f.Revision != first.Revision+1 || f.Nodes[0].Features != "overtime,desktop,owner-active" {
		t.Fatalf("plain read after a change: %+v", f)
	}
	beat(3, model.StateNoUser)
	start := time.Now()
	f, err := s.Slurm.Feed(ctx, first.Revision+1, 0, time.Hour, clock)
	if err != nil || f.Revision != first.Revision+2 || f.Nodes[0].Features != "overtime,desktop,desk-empty" {
		t.Fatalf("long poll: %+v %v", f, err)
	}
	if d := time.Since(start); d < FeedCoalesce/2 {
		t.Fatalf("long poll answered after %s, within the coalescing interval of the last build", d)
	}
	// Many polls at one revision: one build, the same answer.
	js, err := s.Slurm.FeedJSON(ctx, 0, 0, time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	var dec wire.SlurmFeed
	if err := json.Unmarshal(js, &dec); err != nil || dec.Revision != f.Revision || len(dec.Nodes) != len(f.Nodes) || dec.Nodes[0] != f.Nodes[0] || dec.Reports == nil {
		t.Fatalf("JSON answer %s: %+v %v", js, dec, err)
	}
	built := s.Slurm.cache.built
	for range 5 {
		if _, err := s.Slurm.FeedJSON(ctx, 0, 0, time.Hour, clock); err != nil {
			t.Fatal(err)
		}
	}
	if s.Slurm.cache.built != built {
		t.Fatal("a poll at an unchanged revision built the feed again")
	}
}

// A heartbeat that repeats what the host's Slurm node already shows moves the revision
// but does not answer a long poll; a change of the node does, and so does the first
// heartbeat after the host went stale (its node was down).
func TestSlurmFeedWakesOnChangesOnly(t *testing.T) {
	s := memService(t)
	ctx := context.Background()
	clock := func() time.Time { return t0 }
	beat := func(seq uint64, state model.OwnerState, at time.Time) {
		t.Helper()
		if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc1", Time: at, Instance: "a", Seq: seq, Mode: "desktop", OwnerState: state,
			Action: model.ActionRun, GuestState: "running"}, at, ""); err != nil {
			t.Fatal(err)
		}
	}
	beat(1, model.StateNoUser, t0)
	first, err := s.Slurm.Feed(ctx, 0, 0, 0, clock)
	if err != nil {
		t.Fatal(err)
	}
	beat(2, model.StateNoUser, t0.Add(30*time.Second))
	if rev, _, _ := s.agents.since(); rev != first.Revision+1 {
		t.Fatalf("revision %d after a repeated heartbeat, want %d", rev, first.Revision+1)
	}
	poll := func(since uint64, wait time.Duration) (*wire.SlurmFeed, time.Duration) {
		t.Helper()
		start := time.Now()
		f, err := s.Slurm.Feed(ctx, since, 0, wait, clock)
		if err != nil {
			t.Fatal(err)
		}
		return f, time.Since(start)
	}
	if f, d := poll(first.Revision, 300*time.Millisecond); d < 250*time.Millisecond || f.Nodes[0].Features != "overtime,desktop,desk-empty" {
		t.Fatalf("a repeated heartbeat answered the long poll after %s: %+v", d, f)
	}
	got := make(chan *wire.SlurmFeed, 1)
	go func() {
		f, err := s.Slurm.Feed(ctx, first.Revision+1, 0, time.Hour, clock)
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	beat(3, model.StateOwnerActive, t0.Add(40*time.Second))
	f := <-got
	if f.Revision != first.Revision+2 || f.Nodes[0].Features != "overtime,desktop,owner-active" {
		t.Fatalf("after an owner change: %+v", f)
	}
	// Back after longer than StaleAfter: the node was down, so this wakes the poll.
	back := t0.Add(40*time.Second + wire.StaleAfter + time.Minute)
	go func() {
		f, err := s.Slurm.Feed(ctx, f.Revision, 0, time.Hour, func() time.Time { return back })
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	beat(4, model.StateOwnerActive, back)
	if f = <-got; f.Nodes[0].State != wire.SlurmUp {
		t.Fatalf("after the host came back: %+v", f)
	}
}

// A reader that holds a build gets only what changed since (a delta); one whose build
// this replica cannot account for gets the whole list.
func TestSlurmFeedDelta(t *testing.T) {
	s := memService(t)
	ctx := context.Background()
	clock := func() time.Time { return t0 }
	beat := func(host string, seq uint64, state model.OwnerState) {
		t.Helper()
		if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: host, Time: t0, Instance: "a", Seq: seq, Mode: "desktop", OwnerState: state,
			Action: model.ActionRun, GuestState: "running"}, t0, ""); err != nil {
			t.Fatal(err)
		}
	}
	names := func(f *wire.SlurmFeed) string {
		var n []string
		for _, x := range f.Nodes {
			n = append(n, x.Name+"="+x.Features)
		}
		return strings.Join(n, " ")
	}
	beat("pc1", 1, model.StateNoUser)
	beat("pc2", 1, model.StateNoUser)
	full, err := s.Slurm.Feed(ctx, 0, 0, 0, clock)
	if err != nil || full.Delta || full.Build == 0 || len(full.Nodes) != 2 {
		t.Fatalf("whole feed: %+v %v", full, err)
	}
	if full.Build >= 1<<53 {
		t.Fatalf("build id %d is not exact in a JSON reader's float64", full.Build)
	}
	// Nothing changed: an empty delta of the same build.
	f, err := s.Slurm.Feed(ctx, full.Revision, full.Build, 0, clock)
	if err != nil || !f.Delta || f.Build != full.Build || len(f.Nodes) != 0 {
		t.Fatalf("unchanged: %+v %v", f, err)
	}
	// pc1's owner comes: the long poll from the held build answers pc1 alone.
	got := make(chan *wire.SlurmFeed, 1)
	go func() {
		f, err := s.Slurm.Feed(ctx, full.Revision, full.Build, time.Hour, clock)
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	beat("pc1", 2, model.StateOwnerActive)
	f = <-got
	if !f.Delta || f.Build <= full.Build || names(f) != "pc1=overtime,desktop,owner-active" {
		t.Fatalf("after pc1's change: delta %v build %d nodes %q", f.Delta, f.Build, names(f))
	}
	// Changes over several builds add up, each node once with its latest state.
	beat("pc2", 2, model.StateOwnerActive)
	s.Slurm.Feed(ctx, 0, 0, 0, clock) // a build in between
	beat("pc1", 3, model.StateNoUser)
	if f, _ = s.Slurm.Feed(ctx, 0, full.Build, 0, clock); !f.Delta || names(f) != "pc1=overtime,desktop,desk-empty pc2=overtime,desktop,owner-active" {
		t.Fatalf("since the first build: delta %v nodes %q", f.Delta, names(f))
	}
	// A build of another replica (another epoch), a future one, none: the whole list.
	for _, base := range []uint64{full.Build ^ 1<<40, f.Build + 1, 0} {
		if g, _ := s.Slurm.Feed(ctx, 0, base, 0, clock); g.Delta || len(g.Nodes) != 2 {
			t.Fatalf("base %d: delta %v, %d nodes", base, g.Delta, len(g.Nodes))
		}
	}
	// The JSON answer says the same.
	js, err := s.Slurm.FeedJSON(ctx, 0, full.Build, 0, clock)
	var dec wire.SlurmFeed
	if err != nil || json.Unmarshal(js, &dec) != nil || !dec.Delta || dec.Build != f.Build || names(&dec) != names(f) {
		t.Fatalf("JSON delta %s: %v", js, err)
	}
}

func TestDiffFeedNodes(t *testing.T) {
	n := func(spec string) []wire.SlurmNode {
		var out []wire.SlurmNode
		for _, f := range strings.Fields(spec) {
			name, feat, _ := strings.Cut(f, "=")
			out = append(out, wire.SlurmNode{Name: name, Features: feat})
		}
		return out
	}
	many := func(k int, feat string) []wire.SlurmNode {
		var out []wire.SlurmNode
		for i := range k {
			out = append(out, wire.SlurmNode{Name: fmt.Sprintf("pc%03d", i), Features: feat})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		old, cur []wire.SlurmNode
		want     string
		all      bool
	}{
		{"same", n("a=x b=x"), n("a=x b=x"), "", false},
		{"changed", n("a=x b=x c=x"), n("a=x b=y c=x"), "b", false},
		{"comment only", []wire.SlurmNode{{Name: "a", Comment: "heartbeat 10:00:00"}}, []wire.SlurmNode{{Name: "a", Comment: "heartbeat 10:00:30"}}, "", false},
		{"added", n("a=x c=x"), n("a=x b=x c=x d=x"), "b d", false},
		{"removed in the middle", n("a=x b=x c=x"), n("a=x c=x"), "", true},
		{"removed at the end", n("a=x b=x"), n("a=x"), "", true},
		{"at the bound", many(maxDeltaNodes, "x"), many(maxDeltaNodes, "y"), "", false},
		{"past the bound", many(maxDeltaNodes+1, "x"), many(maxDeltaNodes+1, "y"), "", true},
	} {
		names, all := diffFeedNodes(tc.old, tc.cur)
		if all != tc.all || (!tc.all && tc.name != "at the bound" && strings.Join(names, " ") != tc.want) || (tc.name == "at the bound" && len(names) != maxDeltaNodes) {
			t.Errorf("%s: %q all=%v, want %q all=%v", tc.name, names, all, tc.want, tc.all)
		}
	}
}
