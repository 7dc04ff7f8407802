// Package statebench measures the site manager's runtime state in the directory
// (sitemgmt/service/state.go) against real slapd, a single server and a multi-provider
// pair side by side in one run:
//
//   - write throughput: heartbeat documents written as the service's flush writes them
//     (4 writers, one modify each), in rounds alternating between the two setups;
//   - propagation: a heartbeat posted to one site manager replica until another replica's
//     Slurm feed long poll wakes with it (both replicas on one server, or each on its own
//     provider of the pair, so that the change also crosses replication).
//
// The bound the service keeps (TestStateWriteLoad) is one write per host per minute plus
// changes: 170 writes/s at 10,000 hosts. These numbers say how much room a directory has.
// slapdenv runs its databases without fsync (dbnosync); a production directory that
// syncs every write is slower, by its disk.
//
//	go test -count=1 -run '^$' -bench State -benchtime 1x ./test/bench/statebench -args -out DIR
package statebench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

var (
	out     = flag.String("out", "", "directory for statebench.json and statebench.md (empty: only log)")
	rounds  = flag.Int("rounds", 7, "write rounds per setup (interleaved)")
	writes  = flag.Int("writes", 3000, "heartbeat documents per write round")
	samples = flag.Int("samples", 200, "propagation samples per setup")
)

type stats struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P99    float64 `json:"p99,omitempty"`
}

func summarise(v []float64, p99 bool) stats {
	s := slices.Clone(v)
	slices.Sort(s)
	st := stats{Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
	if p99 {
		st.P99 = s[int(0.99*float64(len(s)-1)+0.5)]
	}
	return st
}

type result struct {
	Date        string               `json:"date"`
	CPUs        int                  `json:"cpus"`
	Writes      int                  `json:"writesPerRound"`
	WritesPerS  map[string][]float64 `json:"writesPerSecond"`
	Write       map[string]stats     `json:"writeStats"`
	PropagateMs map[string][]float64 `json:"propagationMs"`
	Propagate   map[string]stats     `json:"propagationStats"`
	Note        string               `json:"note"`
}

// heartbeatDoc is a document of the size the service writes (about 400 bytes).
func heartbeatDoc(host string, seq int) []byte {
	now := time.Now().UTC()
	doc, _ := json.Marshal(map[string]any{"rev": seq, "status": wire.HostStatus{
		Heartbeat: wire.Heartbeat{Host: host, Time: now, Instance: "0123456789abcdef", Seq: uint64(seq), Mode: "desktop",
			ConfigFrom: "api", OwnerState: model.StateOwnerActive, Action: model.ActionThrottle, GuestState: "running",
			Backend: "container", Pressure: 3.5, GuestCPUSeconds: 12345.6, Version: "v1.2.3"},
		Received: now, Remote: "10.20.0.11"}})
	return doc
}

func openStore(b *testing.B, srv *slapdenv.Server, url string) *ldapstore.Store {
	b.Helper()
	st, err := ldapstore.Open(ldapstore.Config{URL: url, BaseDN: srv.BaseDN, BindDN: srv.RootDN, BindPassword: srv.RootPW})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// writeRound writes n heartbeat documents with 4 writers and returns writes per second.
func writeRound(b *testing.B, st *ldapstore.Store, round, n int) float64 {
	ctx := context.Background()
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range service.StateWriteWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				host := fmt.Sprintf("pc%05d", i)
				if err := st.PutState(ctx, ldapstore.StateHeartbeats, host, heartbeatDoc(host, round)); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// replicaService is a site manager service with its state running, on store st.
func replicaService(b *testing.B, st *ldapstore.Store) *service.Service {
	b.Helper()
	ctx := context.Background()
	svc, err := service.New(ctx, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.LoadState(ctx); err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); svc.SyncState(sctx, 5*time.Second) }()
	b.Cleanup(func() { stop(); <-done })
	return svc
}

// propagate posts heartbeats to a and measures until b's feed long poll returns them.
func propagate(b *testing.B, a, bb *service.Service, host string, n int) []float64 {
	ctx := context.Background()
	var ms []float64
	for i := 1; i <= n; i++ {
		feed, err := bb.Slurm.Feed(ctx, 0, 0, 0, time.Now)
		if err != nil {
			b.Fatal(err)
		}
		state := model.StateNoUser
		if i%2 == 0 {
			state = model.StateOwnerActive
		}
		woke := make(chan time.Time, 1)
		go func() {
			rev := feed.Revision
			for {
				f, err := bb.Slurm.Feed(ctx, rev, 0, 10*time.Second, time.Now)
				if err != nil {
					b.Error(err)
					woke <- time.Time{}
					return
				}
				st, ok, _ := bb.Agents.Status(host, time.Now())
				if ok && st.OwnerState == state && st.Seq == uint64(1000+i) {
					woke <- time.Now()
					return
				}
				rev = f.Revision
			}
		}()
		start := time.Now()
		if _, err := a.Agents.PutHeartbeat(wire.Heartbeat{Host: host, Instance: "bench", Seq: uint64(1000 + i), Time: start,
			Mode: "desktop", OwnerState: state, Action: model.ActionRun}, start, ""); err != nil {
			b.Fatal(err)
		}
		var at time.Time
		select {
		case at = <-woke:
		case <-time.After(20 * time.Second):
			sa, _, _ := a.Agents.Status(host, time.Now())
			sb, _, _ := bb.Agents.Status(host, time.Now())
			b.Fatalf("sample %d: the other replica did not see the heartbeat within 20 s: posted %+v, seen %+v (%d writes pending)", i, sa, sb, a.StatePending())
		}
		if at.IsZero() {
			b.Fatal("the other replica never saw the heartbeat")
		}
		ms = append(ms, float64(at.Sub(start).Microseconds())/1000)
	}
	return ms
}

func BenchmarkState(b *testing.B) {
	single := slapdtest.StartT(b)
	pair := slapdtest.StartReplicatedT(b, 2, slapdenv.Options{})
	setups := map[string]*ldapstore.Store{
		"single":     openStore(b, single, single.URL),
		"replicated": openStore(b, pair[0], pair[0].URL),
	}
	ctx := context.Background()
	site := testenv.ExampleSite(b)
	for name, st := range setups {
		if err := st.Init(ctx, ldapstore.InitOptions{SiteName: "example", Timezone: "Europe/Berlin", AdminUID: "admin", AdminPassword: "admin-secret"}); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		cur, err := st.Load(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Apply(ctx, cur, site); err != nil {
			b.Fatalf("%s: apply: %v", name, err)
		}
	}
	r := result{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), Writes: *writes,
		WritesPerS: map[string][]float64{}, Write: map[string]stats{}, PropagateMs: map[string][]float64{}, Propagate: map[string]stats{},
		Note: "slapd without fsync (dbnosync); writes: 4 writers, one modify per document; propagation: heartbeat posted to one replica until another replica's Slurm feed long poll returns it"}
	b.ResetTimer()
	for round := 0; round < *rounds; round++ {
		for _, name := range []string{"single", "replicated"} {
			r.WritesPerS[name] = append(r.WritesPerS[name], writeRound(b, setups[name], round, *writes))
		}
	}
	// Propagation: two replicas on one server, and one on each provider of the pair.
	host := site.Hosts[0].Name
	sameA, sameB := replicaService(b, openStore(b, single, single.URL)), replicaService(b, openStore(b, single, single.URL))
	crossA, crossB := replicaService(b, openStore(b, pair[0], pair[0].URL)), replicaService(b, openStore(b, pair[1], pair[1].URL))
	r.PropagateMs["one server"] = propagate(b, sameA, sameB, host, *samples)
	r.PropagateMs["across providers"] = propagate(b, crossA, crossB, host, *samples)
	b.StopTimer()
	for k, v := range r.WritesPerS {
		r.Write[k] = summarise(v, false)
	}
	for k, v := range r.PropagateMs {
		r.Propagate[k] = summarise(v, true)
	}
	md := fmt.Sprintf(`# Runtime state in the directory

%s, %d CPUs. %s. Each write round writes %d heartbeat documents (about 400 bytes),
the two setups alternate, %d rounds each; propagation: %d samples each.

| directory | writes/s median | min | max | ratio to single |
|---|---|---|---|---|
| single slapd | %.0f | %.0f | %.0f | 1.00 |
| multi-provider pair (writes on one, replicated to the other) | %.0f | %.0f | %.0f | %.2f |

The service's steady load at 10,000 hosts is about 170 writes/s (TestStateWriteLoad), so
the directory here has room for about %.0f× that.

| replicas | propagation p50 (ms) | p99 | max |
|---|---|---|---|
| both on one slapd | %.2f | %.2f | %.2f |
| each on its own provider | %.2f | %.2f | %.2f |

Propagation is from PutHeartbeat on one replica to the other replica's Slurm feed long
poll answering with it: the directory write (queued, flushed by the writer), syncprov's
persistent search to the other replica, the merge and the long poll wake-up; across
providers it also includes syncrepl between the two slapds.
`, r.Date, r.CPUs, r.Note, r.Writes, *rounds, *samples,
		r.Write["single"].Median, r.Write["single"].Min, r.Write["single"].Max,
		r.Write["replicated"].Median, r.Write["replicated"].Min, r.Write["replicated"].Max, r.Write["replicated"].Median/r.Write["single"].Median,
		min(r.Write["single"].Median, r.Write["replicated"].Median)/170,
		r.Propagate["one server"].Median, r.Propagate["one server"].P99, r.Propagate["one server"].Max,
		r.Propagate["across providers"].Median, r.Propagate["across providers"].P99, r.Propagate["across providers"].Max)
	b.Log("\n" + md)
	if *out != "" {
		js, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(filepath.Join(*out, "statebench.json"), append(js, '\n'), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*out, "statebench.md"), []byte(md), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
