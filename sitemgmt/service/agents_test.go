package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
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
	s := &Service{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.snap.Store(snap)
	return s
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// The newest heartbeat by the agent's clock wins, whatever the order of arrival; only
// a stored one counts as a change.
func TestHeartbeatNewestByAgentTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		agentAt []time.Duration // agent clock of each heartbeat, in arrival order (after t0)
		action  model.GuestAction
		rev     uint64
	}{
		{"in order", []time.Duration{0, time.Second}, model.ActionFreeze, 2},
		{"a late older one is kept out", []time.Duration{time.Second, 0}, model.ActionFreeze, 1},
		{"equal times: the later arrival", []time.Duration{time.Second, time.Second}, model.ActionFreeze, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memService(t)
			actions := []model.GuestAction{model.ActionRun, model.ActionFreeze}
			if tc.agentAt[0] > tc.agentAt[1] {
				actions = []model.GuestAction{model.ActionFreeze, model.ActionRun}
			}
			var last wire.HostStatus
			for i, d := range tc.agentAt {
				st, err := s.PutHeartbeat(wire.Heartbeat{Host: "pc1", Time: t0.Add(d), Action: actions[i]}, t0.Add(time.Duration(i)*time.Minute), "10.0.0.1")
				if err != nil {
					t.Fatal(err)
				}
				last = st
			}
			rev, _ := s.agents.since()
			if last.Action != tc.action || rev != tc.rev {
				t.Fatalf("answer %s at revision %d, want %s at %d", last.Action, rev, tc.action, tc.rev)
			}
			if st, ok, err := s.AgentStatus("pc1", t0); err != nil || !ok || st.Action != tc.action {
				t.Fatalf("stored %+v %v %v", st, ok, err)
			}
		})
	}
}

func TestAgentStatus(t *testing.T) {
	s := memService(t)
	if _, err := s.PutHeartbeat(wire.Heartbeat{Host: "ghost", Time: t0}, t0, ""); !errors.As(err, new(*resolve.UnknownHostError)) {
		t.Fatalf("heartbeat of a host the site lacks: %v", err)
	}
	if _, err := s.PutHeartbeat(wire.Heartbeat{Host: "pc1", Time: t0, Pressure: 101}, t0, ""); err == nil {
		t.Fatal("invalid heartbeat kept")
	}
	if _, ok, err := s.AgentStatus("pc1", t0); ok || err != nil {
		t.Fatalf("status before any heartbeat: %v %v", ok, err)
	}
	if _, _, err := s.AgentStatus("ghost", t0); !errors.As(err, new(*resolve.UnknownHostError)) {
		t.Fatalf("status of a host the site lacks: %v", err)
	}
	for _, h := range []string{"pc2", "pc1"} {
		if _, err := s.PutHeartbeat(wire.Heartbeat{Host: h, Time: t0}, t0, ""); err != nil {
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
		list := s.AgentStatuses(tc.pool, tc.at)
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

// Reports are kept by job (a requeued job's latest run), in arrival order, at most
// maxReports, the oldest going first.
func TestJobReports(t *testing.T) {
	s := memService(t)
	jr, err := s.PutJobReport(report("1", "pc1"), t0.In(time.FixedZone("x", 3600)))
	if err != nil || jr.Summary == "" || jr.Received != t0 || jr.Received.Location() != time.UTC {
		t.Fatalf("kept %+v %v", jr, err)
	}
	if _, err := s.PutJobReport(report("x1", "pc1"), t0); err == nil {
		t.Fatal("report with an invalid job id kept")
	}
	mustPut := func(job, host string) {
		if _, err := s.PutJobReport(report(job, host), t0); err != nil {
			t.Fatal(err)
		}
	}
	mustPut("2", "pc2")
	mustPut("1", "pc2") // requeued: runs again, now on pc2
	jobs := func(list []wire.JobReport) string {
		out := ""
		for _, r := range list {
			out += r.Job + "@" + r.Host + " "
		}
		return out
	}
	if got := jobs(s.JobReports("")); got != "2@pc2 1@pc2 " {
		t.Fatalf("reports %q", got)
	}
	if got := jobs(s.JobReports("pc1")); got != "" {
		t.Fatalf("pc1's reports %q", got)
	}
	if r, ok := s.JobReport("1"); !ok || r.Host != "pc2" {
		t.Fatalf("job 1: %+v %v", r, ok)
	}
	rev, _ := s.agents.since()
	if got := jobs(s.agents.reportsSince(rev - 1)); got != "1@pc2 " {
		t.Fatalf("since %d: %q", rev-1, got)
	}
	for i := 0; i < maxReports-1; i++ { // one more than fit
		mustPut(fmt.Sprint(1000+i), "pc1")
	}
	if _, ok := s.JobReport("2"); ok || len(s.JobReports("")) != maxReports {
		t.Fatalf("bound: job 2 kept %v, %d reports", ok, len(s.JobReports("")))
	}
	if _, ok := s.JobReport("1"); !ok {
		t.Fatal("job 1 (newer than job 2) dropped")
	}
}

func TestSlurmFeed(t *testing.T) {
	s := memService(t)
	ctx := context.Background()
	clock := func() time.Time { return t0 }
	feed, err := s.SlurmFeed(ctx, 0, 0, clock)
	if err != nil || feed.Revision != 0 || len(feed.Nodes) != 2 || feed.Nodes[0].Name != "pc1" || feed.Nodes[0].State != wire.SlurmDown || len(feed.Reports) != 0 {
		t.Fatalf("empty feed %+v %v", feed, err)
	}

	// A long poll is answered by the next heartbeat (whether it arrives before or after
	// the poll starts waiting), with that heartbeat's node.
	got := make(chan *wire.SlurmFeed, 1)
	go func() {
		f, err := s.SlurmFeed(ctx, 0, time.Hour, clock)
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	if _, err := s.PutHeartbeat(wire.Heartbeat{Host: "pc1", Time: t0, Mode: "desktop", OwnerState: model.StateNoUser,
		Action: model.ActionRun, GuestState: "running"}, t0, ""); err != nil {
		t.Fatal(err)
	}
	feed = <-got
	if feed.Revision != 1 || feed.Nodes[0].State != wire.SlurmUp || feed.Nodes[0].Features != "overtime,desktop,desk-empty" {
		t.Fatalf("after a heartbeat: %+v", feed)
	}
	// A host in maintenance runs no compute guest: its node is down.
	if _, err := s.PutHeartbeat(wire.Heartbeat{Host: "pc2", Time: t0, Mode: "maint", GuestState: "none"}, t0, ""); err != nil {
		t.Fatal(err)
	}
	mustPutReport := func(job string) {
		if _, err := s.PutJobReport(report(job, "pc1"), t0); err != nil {
			t.Fatal(err)
		}
	}
	mustPutReport("7")
	feed, err = s.SlurmFeed(ctx, 1, time.Hour, clock)
	if err != nil || feed.Revision != 3 || feed.Nodes[1].State != wire.SlurmDown || len(feed.Reports) != 1 || feed.Reports[0].Job != "7" {
		t.Fatalf("since 1: %+v %v", feed, err)
	}

	// Staleness is judged at the clock read when answering.
	late := func() time.Time { return t0.Add(wire.StaleAfter + time.Second) }
	if feed, _ = s.SlurmFeed(ctx, 0, 0, late); feed.Nodes[0].State != wire.SlurmDown {
		t.Fatalf("stale: %+v", feed.Nodes[0])
	}

	// A poll whose client goes away ends with the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.SlurmFeed(cctx, 3, time.Hour, clock); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled poll: %v", err)
	}
}
