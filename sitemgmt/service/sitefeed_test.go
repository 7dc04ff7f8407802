package service_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// follow runs svc's change feed until the test ends and waits for its first whole site.
func follow(t *testing.T, svc *service.Service) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !svc.FollowSite(ctx, 20*time.Millisecond) {
			t.Error("the ldapstore backend does not follow changes")
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	poll.Until(t, "the feed's refresh phase installed the site", 10*time.Second, func() bool { return svc.FeedStats().Full >= 1 })
}

// rootConn is a plain LDAP connection as the directory's root, for edits behind the site
// manager's back.
func rootConn(t *testing.T, env *testenv.Env) *ldap.Conn {
	t.Helper()
	conn, err := ldap.DialURL(env.Slapd.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Bind(env.Slapd.RootDN, env.Slapd.RootPW); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A write through one replica, a deletion and an ldapmodify behind every replica's back
// are all served by another replica from the change feed, without a reload; the writer's
// own writes coming back through its feed leave its snapshot as it was.
func TestFeedFollowsWrites(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	a := env.Svc
	b := replica(t, env)
	follow(t, a)
	follow(t, b)
	ctx := context.Background()
	host := a.Snapshot().Site.Hosts[0]

	// A field of a host, written through a.
	if _, err := a.Update(ctx, nil, false, func(s *model.Site) error {
		s.Host(host.Name).IP = "10.99.0.7"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replica b serves the host's new address", 10*time.Second, func() bool {
		h := b.Snapshot().Site.Host(host.Name)
		return h != nil && h.IP == "10.99.0.7"
	})
	// A new host, then its deletion.
	if _, err := a.Update(ctx, nil, false, func(s *model.Site) error {
		s.Hosts = append(s.Hosts, model.Host{Name: "feed-new", MAC: "52:54:00:ee:00:01", IP: "10.99.0.8", Pool: host.Pool})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replica b serves the new host by MAC", 10*time.Second, func() bool {
		return b.Snapshot().HostByMAC("52:54:00:ee:00:01") != nil
	})
	if _, err := a.Update(ctx, nil, false, func(s *model.Site) error {
		s.Hosts = slices.DeleteFunc(s.Hosts, func(h model.Host) bool { return h.Name == "feed-new" })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replica b no longer knows the deleted host", 10*time.Second, func() bool {
		return b.Snapshot().Site.Host("feed-new") == nil && b.Snapshot().HostByMAC("52:54:00:ee:00:01") == nil
	})

	// Behind both replicas' back.
	conn := rootConn(t, env)
	mod := ldap.NewModifyRequest("cn=lab-b,ou=pools,ou=overtime,"+env.Slapd.BaseDN, nil)
	mod.Replace("roomNumber", []string{"Room 4.04"})
	if err := conn.Modify(mod); err != nil {
		t.Fatal(err)
	}
	for name, svc := range map[string]*service.Service{"a": a, "b": b} {
		poll.Until(t, "replica "+name+" serves the ldapmodify", 10*time.Second, func() bool {
			return svc.Snapshot().Site.Pool("lab-b").Room == "Room 4.04"
		})
	}
	// a's own writes came back through its feed without changing what it serves.
	if h := a.Snapshot().Site.Host(host.Name); h == nil || h.IP != "10.99.0.7" || a.Snapshot().Site.Host("feed-new") != nil {
		t.Fatalf("the writer's snapshot after its own writes came back: %+v", h)
	}
	if st := b.FeedStats(); st.Applied == 0 || st.Full != 1 || st.Failed != 0 {
		t.Fatalf("replica b's feed: %+v (want incremental batches, the one refresh, no failure)", st)
	}
	// Both replicas hold what a full read of the directory gives.
	want, err := env.Store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, svc := range map[string]*service.Service{"a": a, "b": b} {
		if ch := model.Diff(svc.Snapshot().Site, want); len(ch) > 0 {
			t.Errorf("replica %s differs from the directory: %v", name, ch)
		}
	}
}

// An invalid edit behind the site manager's back (overlapping rules) arrives through the
// feed, is refused and the last good snapshot keeps serving; the edit that repairs it is
// applied to the directory's view, not to the snapshot.
func TestFeedRefusesInvalidEdit(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	follow(t, env.Svc)
	good := env.Svc.Snapshot()
	conn := rootConn(t, env)
	dn := "cn=lab-b,ou=pools,ou=overtime," + env.Slapd.BaseDN
	mod := ldap.NewModifyRequest(dn, nil)
	mod.Add("otWeeklyRule", []string{"wed 17:00-19:00 maintenance"})
	if err := conn.Modify(mod); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the feed refuses the overlapping rule", 10*time.Second, func() bool {
		err := env.Svc.FeedStats().LastErr
		return err != nil && strings.Contains(err.Error(), "overlap")
	})
	if env.Svc.Snapshot() != good {
		t.Fatal("the snapshot was replaced by an invalid directory")
	}
	// Another, valid, edit elsewhere does not make the invalid one disappear from view:
	// still refused.
	mod = ldap.NewModifyRequest("cn=lab-a,ou=pools,ou=overtime,"+env.Slapd.BaseDN, nil)
	mod.Replace("roomNumber", []string{"Room 1.01"})
	if err := conn.Modify(mod); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the second batch is refused too", 10*time.Second, func() bool { return env.Svc.FeedStats().Failed >= 2 })
	if env.Svc.Snapshot() != good {
		t.Fatal("the snapshot was replaced by an invalid directory")
	}
	// The repair: both edits served.
	mod = ldap.NewModifyRequest(dn, nil)
	mod.Delete("otWeeklyRule", []string{"wed 17:00-19:00 maintenance"})
	if err := conn.Modify(mod); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the repaired directory is served", 10*time.Second, func() bool {
		return env.Svc.Snapshot().Site.Pool("lab-a").Room == "Room 1.01" && env.Svc.FeedStats().LastErr == nil
	})
}

// When the watch's connection breaks (slapd restarted), the feed reconnects and reads the
// whole site again (the new connection's refresh), so what changed meanwhile is served.
func TestFeedReconnectReloads(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	b := replica(t, env)
	follow(t, b)
	if err := env.Slapd.Restart(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the feed reconnected with a whole site", 30*time.Second, func() bool { return b.FeedStats().Full >= 2 })
	conn := rootConn(t, env)
	mod := ldap.NewModifyRequest("cn=lab-b,ou=pools,ou=overtime,"+env.Slapd.BaseDN, nil)
	mod.Replace("roomNumber", []string{"Room 5.05"})
	if err := conn.Modify(mod); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "replica b serves an edit after the reconnect", 10*time.Second, func() bool {
		return b.Snapshot().Site.Pool("lab-b").Room == "Room 5.05"
	})
}

// Across the providers of a multi-provider pair: a write through the replica on one
// provider, and a deletion, are served by the replica on the other.
func TestFeedAcrossProviders(t *testing.T) {
	pair := slapdtest.StartReplicatedT(t, 2, slapdenv.Options{})
	ctx := context.Background()
	d, err := synth.Fill(ctx, pair[0], "pair", "admin-secret", synth.Site(40, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Store.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := service.New(ctx, d.Store, quiet)
	if err != nil {
		t.Fatal(err)
	}
	storeB, err := ldapstore.Open(ldapstore.Config{URL: pair[1].URL, BaseDN: pair[1].BaseDN, BindDN: pair[1].RootDN, BindPassword: pair[1].RootPW})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { storeB.Close() })
	poll.Until(t, "the second provider holds the site", 30*time.Second, func() bool {
		s, err := storeB.Load(ctx)
		return err == nil && len(s.Hosts) == 40
	})
	b, err := service.New(ctx, storeB, quiet)
	if err != nil {
		t.Fatal(err)
	}
	follow(t, b)
	host := a.Snapshot().Site.Hosts[3]
	if _, err := a.Update(ctx, nil, false, func(s *model.Site) error {
		s.Host(host.Name).Weekly = []string{"daily 00:00-24:00 cluster"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the replica on the other provider serves the rule", 10*time.Second, func() bool {
		h := b.Snapshot().Site.Host(host.Name)
		return h != nil && len(h.Weekly) == 1
	})
	if _, err := a.Update(ctx, nil, false, func(s *model.Site) error {
		s.Hosts = slices.DeleteFunc(s.Hosts, func(h model.Host) bool { return h.Name == host.Name })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the replica on the other provider drops the deleted host", 10*time.Second, func() bool {
		return b.Snapshot().Site.Host(host.Name) == nil && b.Snapshot().HostByMAC(host.MAC) == nil
	})
}
