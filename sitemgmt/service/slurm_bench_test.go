package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/synth"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// BenchmarkSlurmFeedFanout: K long polls following the feed of a 10,000-host site while
// heartbeats arrive at the site's rate (333/s), one in 20 changing its host's owner
// state (the feed's long polls wake only at those, slurmNodeChanged): CPU cores the replica spends and answers
// per client per second, with the shared build (shared) and as every poll built and
// encoded the feed for itself before (own). -benchtime 1x; each run lasts -feed-secs.
//
//	go test -run '^$' -bench SlurmFeedFanout -benchtime 1x ./sitemgmt/service
func BenchmarkSlurmFeedFanout(b *testing.B) {
	site := synth.Site(10000, 200, 1)
	for _, shared := range []bool{false, true} {
		for _, k := range []int{1, 4, 16} {
			name := fmt.Sprintf("own/K=%d", k)
			if shared {
				name = fmt.Sprintf("shared/K=%d", k)
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					cores, answers := feedFanout(b, site, k, shared, 3*time.Second)
					b.ReportMetric(cores, "cores")
					b.ReportMetric(answers, "answers/s/client")
				}
			})
		}
	}
}

func feedFanout(b *testing.B, site *model.Site, k int, shared bool, d time.Duration) (cores, answersPerClient float64) {
	snap, err := newSnapshot(site)
	if err != nil {
		b.Fatal(err)
	}
	s := newService(nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.snap.Store(snap)
	now := time.Now()
	beat := func(i int, seq uint64) {
		h := site.Hosts[i%len(site.Hosts)].Name
		owner := model.StateNoUser
		if i%20 == 19 {
			owner = model.StateOwnerActive
		}
		if _, err := s.Agents.PutHeartbeat(wire.Heartbeat{Host: h, Time: now, Instance: "x", Seq: seq, Mode: "desktop", ConfigFrom: "api",
			OwnerState: owner, Action: model.ActionRun, GuestState: "running", CPUs: 8, MemoryMB: 12288}, time.Now(), ""); err != nil {
			b.Fatal(err)
		}
	}
	for i := range site.Hosts {
		beat(i, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // heartbeats at 10,000 hosts / 30 s
		defer wg.Done()
		t := time.NewTicker(3 * time.Millisecond)
		defer t.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			<-t.C
			beat(i, uint64(2+i/len(site.Hosts)))
		}
	}()
	var answers atomic.Int64
	before := cpuTime()
	start := time.Now()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var since uint64
			for ctx.Err() == nil {
				var js []byte
				var err error
				if shared {
					js, err = s.Slurm.FeedJSON(ctx, since, 0, 30*time.Second, time.Now)
				} else {
					js, err = ownFeed(ctx, s, since)
				}
				if err != nil {
					return
				}
				answers.Add(1)
				i := bytes.IndexByte(js, ',')
				since, _ = strconv.ParseUint(string(bytes.TrimSpace(js[bytes.IndexByte(js, ':')+1:i])), 10, 64)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	return (cpuTime() - before) / el, float64(answers.Load()) / float64(k) / el
}

// ownFeed is the feed as every long poll made it before the shared build: wait, build
// every node, encode with indentation (the API's writeJSON).
func ownFeed(ctx context.Context, s *Service, since uint64) ([]byte, error) {
	rev, feedRev, changed := s.agents.since()
	if feedRev <= since {
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		rev, _, _ = s.agents.since()
	}
	feed := &wire.SlurmFeed{Revision: rev, Nodes: s.Slurm.buildNodes(s.Snapshot().Site, time.Now()), Reports: []wire.JobReportLine{}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	err := enc.Encode(feed)
	return buf.Bytes(), err
}

func cpuTime() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
