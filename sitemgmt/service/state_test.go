package service

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// countingStore is a StateStore that keeps documents in memory and counts writes: the
// write-load test needs a count over many simulated minutes, which a real directory would take
// as long to give. The directory itself is tested with real slapd (ldapstore, and the
// replica tests in this package's external tests).
type countingStore struct {
	mu     sync.Mutex
	docs   map[string][]byte
	puts   int
	fail   bool
	failed int
	// gate, when set, holds every PutState until it is closed; entered gets a value
	// when a PutState starts waiting (a write in flight).
	gate    chan struct{}
	entered chan struct{}
}

func (c *countingStore) LoadState(_ context.Context, fn func(kind, key string, doc []byte)) error {
	return nil
}

func (c *countingStore) PutState(_ context.Context, kind, key string, doc []byte) error {
	if c.gate != nil {
		c.entered <- struct{}{}
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		c.failed++
		return fmt.Errorf("directory unavailable")
	}
	if c.docs == nil {
		c.docs = map[string][]byte{}
	}
	c.docs[kind+"/"+key] = doc
	c.puts++
	return nil
}

func (c *countingStore) DeleteState(_ context.Context, kind, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.docs, kind+"/"+key)
	return nil
}

func (c *countingStore) WatchState(ctx context.Context, ready func(), fn func(kind, key string, doc []byte, deleted bool)) error {
	<-ctx.Done()
	return nil
}

// The steady write load of heartbeats is bounded: 10,000 hosts posting every 30 s for
// 20 simulated minutes, 2% of posts changing the owner state, flushed after every single post
// (the worst case: no coalescing between posts). Each host's stored receive time must
// stay fresher than PersistRefresh + one interval (other replicas judge staleness by it),
// and the writes must stay within one per host per PersistRefresh plus the changes.
func TestStateWriteLoad(t *testing.T) {
	const hosts = 10000
	const hour = 20 * time.Minute // long enough for every refresh cycle to repeat many times
	svc := memService(t)
	cs := &countingStore{}
	svc.useState(cs)
	ctx := context.Background()
	changes := 0
	owner := make([]model.OwnerState, hosts)
	for i := range owner {
		owner[i] = model.StateNoUser
	}
	maxLag := time.Duration(0)
	posts := 0
	for tick := time.Duration(0); tick < hour; tick += wire.HeartbeatInterval {
		for i := 0; i < hosts; i++ {
			at := t0.Add(tick + time.Duration(i)*wire.HeartbeatInterval/hosts)
			if (i*7919+int(tick/time.Second))%50 == 0 { // 2% of posts: the owner came or went
				if owner[i] == model.StateNoUser {
					owner[i] = model.StateOwnerActive
				} else {
					owner[i] = model.StateNoUser
				}
				changes++
			}
			name := fmt.Sprintf("pc%05d", i)
			svc.agents.put(wire.HostStatus{Heartbeat: wire.Heartbeat{Host: name, Instance: "i", Seq: uint64(tick / time.Second),
				Time: at, OwnerState: owner[i], Action: model.ActionRun, Mode: "desktop"}, Received: at})
			posts++
			if err := svc.FlushState(ctx); err != nil {
				t.Fatal(err)
			}
			svc.agents.mu.Lock()
			if lag := at.Sub(svc.agents.persisted[name].received); lag > maxLag {
				maxLag = lag
			}
			svc.agents.mu.Unlock()
		}
	}
	bound := hosts*int(hour/PersistRefresh) + changes + hosts
	t.Logf("%d posts, %d owner changes, %d writes (%.0f/s; bound %d), largest stored-receive lag %s",
		posts, changes, cs.puts, float64(cs.puts)/hour.Seconds(), bound, maxLag)
	if cs.puts > bound {
		t.Errorf("%d writes for %d hosts in 20 minutes, more than %d", cs.puts, hosts, bound)
	}
	if cs.puts >= posts {
		t.Errorf("every post was written (%d writes, %d posts): nothing coalesced", cs.puts, posts)
	}
	if maxLag >= PersistRefresh {
		t.Errorf("stored receive time lagged %s, want < %s", maxLag, PersistRefresh)
	}
	if maxLag+wire.HeartbeatInterval >= wire.StaleAfter {
		t.Errorf("a replica reading the store could see a live host stale (lag %s + interval %s >= %s)", maxLag, wire.HeartbeatInterval, wire.StaleAfter)
	}
}

// A directory outage loses nothing: heartbeats and reports stay queued (one entry per
// host: bounded by the site) and are written when the directory is back.
func TestStateQueuedDuringOutage(t *testing.T) {
	svc := memService(t)
	cs := &countingStore{fail: true}
	svc.useState(cs)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		at := t0.Add(time.Duration(i) * wire.HeartbeatInterval)
		state := model.StateNoUser
		if i%2 == 1 {
			state = model.StateOwnerActive
		}
		if _, err := svc.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc1", Instance: "i", Seq: uint64(i + 1), Time: at, OwnerState: state}, at, ""); err != nil {
			t.Fatal(err)
		}
		if err := svc.FlushState(ctx); err == nil {
			t.Fatal("flush during an outage reported success")
		}
	}
	if _, err := svc.Agents.PutJobReport(wire.JobReport{Job: "42", Host: "pc1", Start: t0, End: t0.Add(time.Minute), Seconds: 60}, t0); err != nil {
		t.Fatal(err)
	}
	if n := svc.StatePending(); n != 2 {
		t.Errorf("%d writes queued during the outage, want 2 (one heartbeat, one report)", n)
	}
	cs.mu.Lock()
	cs.fail = false
	cs.mu.Unlock()
	if err := svc.FlushState(ctx); err != nil {
		t.Fatal(err)
	}
	if svc.StatePending() != 0 || cs.puts != 2 {
		t.Errorf("after the outage: %d pending, %d written", svc.StatePending(), cs.puts)
	}
	if doc := string(cs.docs["heartbeats/pc1"]); doc == "" || !strings.Contains(doc, `"seq":10`) {
		t.Errorf("stored heartbeat is not the last one: %s", doc)
	}
}

// Documents coming back from the store (our own writes echoed late, another replica's)
// never replace a heartbeat accepted after them, whatever their instance: the later
// acceptance wins. The case that needed this: an agent without an instance id, then one
// with, and the first document's echo arriving last.
func TestMergeBeatLaterAcceptanceWins(t *testing.T) {
	svc := memService(t)
	cs := &countingStore{}
	svc.useState(cs)
	ctx := context.Background()
	old := wire.Heartbeat{Host: "pc1", Time: t0, Action: model.ActionRun}
	if _, err := svc.Agents.PutHeartbeat(old, t0, ""); err != nil {
		t.Fatal(err)
	}
	if err := svc.FlushState(ctx); err != nil {
		t.Fatal(err)
	}
	echo := cs.docs["heartbeats/pc1"]
	cur := wire.Heartbeat{Host: "pc1", Instance: "new", Seq: 1, Time: t0.Add(time.Second), Action: model.ActionFreeze}
	if _, err := svc.Agents.PutHeartbeat(cur, t0.Add(time.Second), ""); err != nil {
		t.Fatal(err)
	}
	svc.mergeDoc(stateBeats, "pc1", echo, false, true)
	if st, _, _ := svc.Agents.Status("pc1", t0); st.Action != model.ActionFreeze {
		t.Fatalf("the echo of an older write replaced the newer heartbeat: %+v", st)
	}
	// Another replica's later acceptance does replace it.
	later := fmt.Appendf(nil, `{"rev":%d,"status":{"host":"pc1","instance":"new","seq":2,"time":%q,"action":"throttle","received":%q}}`,
		svc.agents.rev+5, t0.Add(2*time.Second).Format(time.RFC3339), t0.Add(2*time.Second).Format(time.RFC3339))
	svc.mergeDoc(stateBeats, "pc1", later, false, true)
	if st, _, _ := svc.Agents.Status("pc1", t0); st.Action != model.ActionThrottle || st.Seq != 2 {
		t.Fatalf("another replica's later heartbeat was not taken: %+v", st)
	}
}

// The echo of an older write of a job report does not replace the newer report put
// since (found by TestOpenAPICoverage in CI: a job requeued on the same host reported
// twice, the watch returned the first write after the second had been flushed, and
// readers were given the first again).
func TestReportEchoKeepsNewerReport(t *testing.T) {
	svc := memService(t)
	cs := &countingStore{}
	svc.useState(cs)
	ctx := context.Background()
	rep := wire.JobReport{Job: "42", Host: "pc1", Start: t0, End: t0.Add(time.Minute), Seconds: 60, ThrottledSeconds: 10}
	if _, err := svc.Agents.PutJobReport(rep, t0); err != nil {
		t.Fatal(err)
	}
	if err := svc.FlushState(ctx); err != nil {
		t.Fatal(err)
	}
	echo := cs.docs["reports/42@pc1"]
	if echo == nil {
		t.Fatalf("the report was not written: %v", cs.docs)
	}
	rep.ThrottledSeconds = 12
	if _, err := svc.Agents.PutJobReport(rep, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := svc.FlushState(ctx); err != nil { // the newer one is no longer dirty
		t.Fatal(err)
	}
	svc.mergeDoc(stateReports, "42@pc1", echo, false, true)
	if r, ok := svc.Agents.JobReport("42", "pc1"); !ok || r.ThrottledSeconds != 12 {
		t.Fatalf("the echo of an older write replaced the newer report: %+v %v", r, ok)
	}
	// Another replica's later write does replace it.
	later := fmt.Appendf(nil, `{"rev":%d,"report":{"job":"42","host":"pc1","start":%q,"end":%q,"seconds":60,"throttledSeconds":30}}`,
		svc.agents.rev+5, t0.Format(time.RFC3339), t0.Add(time.Minute).Format(time.RFC3339))
	svc.mergeDoc(stateReports, "42@pc1", later, false, true)
	if r, _ := svc.Agents.JobReport("42", "pc1"); r.ThrottledSeconds != 30 {
		t.Fatalf("another replica's later report was not taken: %+v", r)
	}
}

// A heartbeat put while the previous one's write is in flight is written too, also when
// it equals what the store held before that write (found by the state benchmark: an
// owner who came and went within one write was never written, and other replicas kept
// showing her at the desk until the next refresh).
func TestHeartbeatDuringWriteIsWritten(t *testing.T) {
	svc := memService(t)
	cs := &countingStore{}
	svc.useState(cs)
	ctx := context.Background()
	post := func(seq uint64, state model.OwnerState) {
		t.Helper()
		at := t0.Add(time.Duration(seq) * time.Second)
		if _, err := svc.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc1", Instance: "i", Seq: seq, Time: at, OwnerState: state}, at, ""); err != nil {
			t.Fatal(err)
		}
	}
	post(1, model.StateNoUser)
	if err := svc.FlushState(ctx); err != nil {
		t.Fatal(err)
	}
	post(2, model.StateOwnerActive)
	cs.gate, cs.entered = make(chan struct{}), make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- svc.FlushState(ctx) }()
	<-cs.entered               // seq 2 is being written
	post(3, model.StateNoUser) // equal to seq 1, what the store held before
	close(cs.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := svc.StatePending(); n != 1 {
		t.Fatalf("%d writes queued after a heartbeat arrived during a write, want 1", n)
	}
	cs.gate = nil
	if err := svc.FlushState(ctx); err != nil {
		t.Fatal(err)
	}
	if doc := string(cs.docs["heartbeats/pc1"]); !strings.Contains(doc, `"seq":3`) {
		t.Errorf("stored heartbeat is not the last one: %s", doc)
	}
}
