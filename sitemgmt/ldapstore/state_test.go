package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// stateEvents collects what WatchState delivers.
type stateEvents struct {
	mu     sync.Mutex
	docs   map[string]string // kind/key -> doc ("" after a delete)
	events []string
	ready  chan struct{}
}

func newStateEvents() *stateEvents {
	return &stateEvents{docs: map[string]string{}, ready: make(chan struct{})}
}

func (e *stateEvents) fn(kind, key string, doc []byte, deleted bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := kind + "/" + key
	if deleted {
		e.docs[k] = ""
		e.events = append(e.events, "delete "+k)
		return
	}
	e.docs[k] = string(doc)
	e.events = append(e.events, "put "+k+" "+string(doc))
}

// waitFor polls until cond holds on the collected documents, or fails after a deadline.
func (e *stateEvents) waitFor(t *testing.T, what string, cond func(docs map[string]string) bool) {
	t.Helper()
	saw := poll.Wait(10*time.Second, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return cond(e.docs)
	})
	if !saw {
		e.mu.Lock()
		events := append([]string(nil), e.events...)
		e.mu.Unlock()
		t.Fatalf("watch never saw %s; events: %q", what, events)
	}
}

// State documents round-trip through the directory, with containers made on first use
// (a directory initialised before state existed), and a watcher on its own connection
// sees every stored document first, then each put and delete as it happens — also those
// made through another connection, as another site manager replica would.
func TestStateStoreAndWatch(t *testing.T) {
	st, srv := initStore(t)
	ctx := context.Background()

	loaded := func() map[string]string {
		t.Helper()
		got := map[string]string{}
		if err := st.LoadState(ctx, func(kind, key string, doc []byte) { got[kind+"/"+key] = string(doc) }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := loaded(); len(got) != 0 {
		t.Fatalf("fresh directory has state: %v", got)
	}
	if err := st.PutState(ctx, StateHeartbeats, "pc1", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.PutState(ctx, StateHeartbeats, "pc1", []byte(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	// Keys with DN metacharacters are escaped, never interpreted.
	odd := `7@pc1,ou=x+cn=y\`
	if err := st.PutState(ctx, StateReports, odd, []byte(`{"r":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := loaded(); len(got) != 2 || got["heartbeats/pc1"] != `{"a":2}` || got["reports/"+odd] != `{"r":1}` {
		t.Fatalf("loaded %v", got)
	}

	ev := newStateEvents()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.WatchState(wctx, func() { close(ev.ready) }, ev.fn) }()
	select {
	case <-ev.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("watch refresh never completed")
	}
	ev.mu.Lock()
	if len(ev.docs) != 2 || ev.docs["heartbeats/pc1"] != `{"a":2}` {
		t.Errorf("refresh delivered %v", ev.docs)
	}
	ev.mu.Unlock()

	// Another connection (another replica) writes: the watcher sees it.
	other, err := Open(Config{URL: srv.URL, BaseDN: srv.BaseDN, BindDN: srv.ServiceDN, BindPassword: srv.ServicePW})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.PutState(ctx, StateHeartbeats, "pc2", []byte(`{"b":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := other.PutState(ctx, StateHeartbeats, "pc1", []byte(`{"a":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteState(ctx, StateReports, odd); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteState(ctx, StateReports, "gone@pc9"); err != nil {
		t.Errorf("deleting a missing document: %v", err)
	}
	ev.waitFor(t, "pc2, pc1 updated and the report deleted", func(d map[string]string) bool {
		v, ok := d["reports/"+odd]
		return d["heartbeats/pc2"] == `{"b":1}` && d["heartbeats/pc1"] == `{"a":3}` && ok && v == ""
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch ended with %v after its context", err)
	}

	// A stopped directory: the watch reports unavailability rather than hanging.
	ev2 := newStateEvents()
	done2 := make(chan error, 1)
	go func() { done2 <- st.WatchState(ctx, func() { close(ev2.ready) }, ev2.fn) }()
	<-ev2.ready
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done2:
		if !errors.As(err, new(*UnavailableError)) {
			t.Errorf("watch of a stopped directory ended with %v, want unavailable", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("watch did not notice the directory stopping")
	}
}

// Bad kinds, keys and documents are refused before anything is sent.
func TestStateRefusesBadInput(t *testing.T) {
	st, _ := initStore(t)
	ctx := context.Background()
	for _, tc := range []struct{ kind, key, doc string }{
		{"users", "pc1", "{}"},
		{StateHeartbeats, "", "{}"},
		{StateHeartbeats, "pc\n1", "{}"},
		{StateHeartbeats, "pc1", ""},
		{StateHeartbeats, fmt.Sprintf("%0300d", 1), "{}"},
	} {
		if err := st.PutState(ctx, tc.kind, tc.key, []byte(tc.doc)); err == nil {
			t.Errorf("PutState(%q, %q, %q) accepted", tc.kind, tc.key, tc.doc)
		}
	}
}
