package service_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// replica starts another site manager service on env's directory, as a second
// `overtime serve` behind a load balancer (or the same one after a restart) would be.
func replica(t *testing.T, env *testenv.Env) *service.Service {
	t.Helper()
	st, err := ldapstore.Open(ldapstore.Config{URL: env.Slapd.URL, BaseDN: env.Slapd.BaseDN, BindDN: env.Slapd.ServiceDN, BindPassword: env.Slapd.ServicePW})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	svc, err := service.New(ctx, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.LoadState(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); svc.SyncState(sctx, 5*time.Second) }()
	t.Cleanup(func() { stop(); <-done })
	return svc
}

// Two site manager replicas on one directory give the same answers: a heartbeat or a
// job report posted to one is seen by the other, and wakes the other's Slurm feed long
// poll. A third instance started afterwards (a restart) answers with everything at once
// and does not hand the feed stored reports again as new.
func TestReplicasShareState(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	a := env.Svc
	b := replica(t, env)
	ctx := context.Background()
	host := a.Snapshot().Site.Hosts[0].Name
	now := time.Now().UTC().Truncate(time.Second)

	hb := wire.Heartbeat{Host: host, Instance: "agent-1", Seq: 1, Time: now, Mode: "desktop", OwnerState: model.StateNoUser, Action: model.ActionRun, GuestState: "running"}
	if _, err := a.Agents.PutHeartbeat(hb, now, "10.0.0.9"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replica b sees the heartbeat posted to a", 10*time.Second, func() bool {
		st, ok, err := b.Agents.Status(host, now)
		return err == nil && ok && st.Instance == "agent-1" && st.OwnerState == model.StateNoUser && st.Remote == "10.0.0.9"
	})

	// b's Slurm feed long poll wakes when a receives the owner's key press.
	feed, err := b.Slurm.Feed(ctx, 0, 0, 0, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan *wire.SlurmFeed, 1)
	go func() {
		f, err := b.Slurm.Feed(ctx, feed.Revision, 0, 20*time.Second, time.Now)
		if err != nil {
			t.Error(err)
		}
		woke <- f
	}()
	hb.Seq, hb.OwnerState, hb.Action = 2, model.StateOwnerActive, model.ActionThrottle
	start := time.Now()
	if _, err := a.Agents.PutHeartbeat(hb, now.Add(time.Second), "10.0.0.9"); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-woke:
		node := findNode(f, host)
		if f.Revision <= feed.Revision || node == nil || !containsFeature(node.Features, wire.FeatureOwnerActive) {
			t.Errorf("b's feed after a's heartbeat: revision %d (was %d), node %+v", f.Revision, feed.Revision, node)
		}
		t.Logf("b's long poll woke %s after a's heartbeat", time.Since(start))
	case <-time.After(15 * time.Second):
		t.Fatal("b's long poll did not wake after a heartbeat posted to a")
	}

	// A job report posted to b is readable on a.
	jr := wire.JobReport{Job: "4711", Host: host, Start: now.Add(-time.Hour), End: now, Seconds: 3600, GuestCPUSeconds: 3000}
	if _, err := b.Agents.PutJobReport(jr, now); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replica a has the report posted to b", 10*time.Second, func() bool {
		r, ok := a.Agents.JobReport("4711", host)
		return ok && r.GuestCPUSeconds == 3000
	})
	aFeed, err := a.Slurm.Feed(ctx, 0, 0, 0, time.Now)
	if err != nil || len(aFeed.Reports) != 1 {
		t.Fatalf("a's feed has %v reports (err %v), want the one posted to b", aFeed, err)
	}

	// A restart: everything written is there at once, and a feed client's revision from
	// before the restart neither waits nor gets the old report again.
	for _, s := range []*service.Service{a, b} {
		if err := s.FlushState(ctx); err != nil || s.StatePending() != 0 {
			t.Fatalf("flush: %v, %d pending", err, s.StatePending())
		}
	}
	c := replica(t, env)
	st, ok, err := c.Agents.Status(host, now.Add(2*time.Second))
	if err != nil || !ok || st.Instance != "agent-1" || st.Seq != 2 || st.OwnerState != model.StateOwnerActive || st.Stale {
		t.Errorf("restarted replica's status of %s: %+v %v %v", host, st, ok, err)
	}
	if r, ok := c.Agents.JobReport("4711", host); !ok || r.Host != host {
		t.Errorf("restarted replica lost the job report: %+v %v", r, ok)
	}
	since := aFeed.Revision
	t0 := time.Now()
	cf, err := c.Slurm.Feed(ctx, since, 0, 20*time.Second, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(t0) > 5*time.Second || cf.Revision <= since {
		t.Errorf("restarted replica's feed for revision %d: waited %s, answered revision %d", since, time.Since(t0), cf.Revision)
	}
	if len(cf.Reports) != 0 {
		t.Errorf("restarted replica handed the feed stored reports again: %+v", cf.Reports)
	}
	if all, _ := c.Slurm.Feed(ctx, 0, 0, 0, time.Now); len(all.Reports) != 1 {
		t.Errorf("restarted replica's feed from revision 0 has %d reports, want 1", len(all.Reports))
	}
}

func findNode(f *wire.SlurmFeed, name string) *wire.SlurmNode {
	for i := range f.Nodes {
		if f.Nodes[i].Name == name {
			return &f.Nodes[i]
		}
	}
	return nil
}

func containsFeature(list, f string) bool { return slices.Contains(strings.Split(list, ","), f) }

// The controller's Slurm version, reported to one replica by the sync daemon, reaches
// the agent configurations of another and of one started afterwards (a restart); a
// report that is not a version is refused and changes nothing.
func TestReplicasShareSlurmctldVersion(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	a := env.Svc
	b := replica(t, env)
	ctx := context.Background()
	host := a.Snapshot().Site.Hosts[0].Name
	now := time.Now().UTC()
	version := func(s *service.Service) string {
		cfg, err := s.Hosts.AgentConfig(host, service.AgentRequest{At: now})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.SlurmctldVersion
	}
	if v := version(b); v != "" {
		t.Fatalf("before any report: %q", v)
	}
	if err := a.Slurm.ReportController(ctx, "slurmsync", "22.05.8", now); err != nil {
		t.Fatal(err)
	}
	if v := version(a); v != "22.05.8" {
		t.Fatalf("the replica the daemon polls: %q", v)
	}
	poll.Until(t, "replica b hands its agents the version reported to a", 10*time.Second, func() bool { return version(b) == "22.05.8" })
	var inv *model.InvalidError
	if err := a.Slurm.ReportController(ctx, "slurmsync", "22.05.8-4", now); !errors.As(err, &inv) || !strings.Contains(err.Error(), `"22.05.8-4"`) {
		t.Fatalf("a version with a Debian revision: %v, want invalid naming it", err)
	}
	if v := version(a); v != "22.05.8" {
		t.Fatalf("after a refused report: %q", v)
	}
	// The controller is upgraded; the daemon's next report says so.
	if err := a.Slurm.ReportController(ctx, "slurmsync", "23.02.7", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replica b follows the upgrade", 10*time.Second, func() bool { return version(b) == "23.02.7" })
	if c := replica(t, env); version(c) != "23.02.7" {
		t.Fatalf("a restarted replica: %q, want the stored 23.02.7", version(c))
	}
}
