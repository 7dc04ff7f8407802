package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// SiteFeed is a Backend that can follow the site's changes as they happen
// (ldapstore.Store, by an RFC 4533 Content Synchronization search).
type SiteFeed interface {
	// WatchSite calls full once per connection with the whole site (or the error reading
	// it), then changed for every changed entry with a description and a function that
	// applies the change to a copy of the site. It returns when ctx ends (nil) or the
	// connection fails.
	WatchSite(ctx context.Context, full func(*model.Site, error), changed func(what string, apply func(*model.Site) error)) error
}

// feedState is what the change feed has brought and not yet applied, and how it went.
type feedState struct {
	mu      sync.Mutex
	pending []feedChange
	kick    chan struct{} // one buffered slot: a change is pending
	// base is the directory's content when it does not validate (a bad manual edit): later
	// changes apply to it, not to the last good snapshot, so that the edit that repairs it
	// lands on the directory's view. nil: the snapshot is the directory's view.
	base *model.Site
	// stats for tests and benchmarks
	applied, full, failed int
	lastErr               error
}

type feedChange struct {
	what  string
	apply func(*model.Site) error
}

// FeedStats is what the change feed has done so far.
type FeedStats struct {
	// Applied counts batches of changes applied incrementally, Full the whole sites
	// installed (a watch connection's refresh phase, a fallback), Failed the batches or
	// sites refused (the last good snapshot kept serving).
	Applied, Full, Failed int
	// LastErr is the last refusal, nil once a later batch or site was installed.
	LastErr error
}

// FeedStats reports the change feed's counters.
func (s *Service) FeedStats() FeedStats {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	return FeedStats{Applied: s.feed.applied, Full: s.feed.full, Failed: s.feed.failed, LastErr: s.feed.lastErr}
}

// FollowSite keeps the snapshot current from the directory's change feed until ctx ends.
// Changes are coalesced for up to coalesce after the first of a batch, applied to a copy
// of the current site, validated and compiled, and swapped in: a write on another replica
// or an ldapmodify is served here without reading the whole site (the cost is one
// validation and compile of the site per batch, see docs/benchmarks/sitemgmt.md). A
// change that cannot be applied incrementally makes it read the whole site; a content
// that does not validate is refused and the last good snapshot keeps serving. Each
// (re)connection of the watch starts with the whole site (a full reload). If the backend
// cannot follow changes, FollowSite returns at once (false); the caller then relies on
// periodic reloads.
func (s *Service) FollowSite(ctx context.Context, coalesce time.Duration) bool {
	feed, ok := s.backend.(SiteFeed)
	if !ok {
		return false
	}
	s.feed.mu.Lock()
	if s.feed.kick == nil {
		s.feed.kick = make(chan struct{}, 1)
	}
	kick := s.feed.kick
	s.feed.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.applyFeed(ctx, kick, coalesce)
	}()
	// Failures are not recorded as the directory's health: reads, writes and logins tell
	// that; a watch that cannot run (no syncprov) must not take a replica out of service.
	s.keepFollowing(ctx, "following the directory's site changes failed; reconnecting (then reading the whole site)", func(ctx context.Context) error {
		return feed.WatchSite(ctx, s.installFull, func(what string, apply func(*model.Site) error) {
			s.feed.mu.Lock()
			s.feed.pending = append(s.feed.pending, feedChange{what, apply})
			s.feed.mu.Unlock()
			select {
			case kick <- struct{}{}:
			default:
			}
		})
	})
	wg.Wait()
	return true
}

// keepFollowing runs watch (a persistent search) until ctx ends, reconnecting after each
// failure with a backoff that doubles from 250 ms to 10 s and starts over after a watch
// that lasted a minute: a directory restart must not turn every replica's watches into a
// reconnect storm, and a short outage should cost well under a second.
func (s *Service) keepFollowing(ctx context.Context, failed string, watch func(context.Context) error) {
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = 250 * time.Millisecond
		}
		s.log.Warn(failed, "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// installFull installs a whole site delivered by the watch (its refresh phase). Changes
// still pending from before are in it.
func (s *Service) installFull(site *model.Site, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.feed.mu.Lock()
	s.feed.pending = nil
	s.feed.mu.Unlock()
	if err == nil {
		// The whole site was read: the directory answered.
		s.directory.note(nil, time.Now())
		err = s.installLocked(site)
	}
	s.noteFeed(err, true)
}

// applyFeed applies pending changes in batches: it waits for the first, then up to
// coalesce for more.
func (s *Service) applyFeed(ctx context.Context, kick <-chan struct{}, coalesce time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		if coalesce > 0 {
			t := time.NewTimer(coalesce)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		s.applyPending(ctx)
	}
}

// applyPending applies what is pending as one batch.
func (s *Service) applyPending(ctx context.Context) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.feed.mu.Lock()
	batch := s.feed.pending
	s.feed.pending = nil
	base := s.feed.base
	s.feed.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if base == nil {
		base = s.snap.Load().Site
	}
	next := base.Clone()
	for _, c := range batch {
		if err := c.apply(next); err != nil {
			s.log.Warn("change feed: cannot apply a change incrementally; reading the whole site", "change", c.what, "err", err)
			err := s.reloadLocked(ctx)
			s.noteFeed(err, true)
			return
		}
	}
	next.Sort()
	err := s.installLocked(next)
	if err != nil {
		s.log.Warn("change feed: the directory's site does not validate; serving the last good snapshot", "err", err, "changes", len(batch))
	}
	s.noteFeed(err, false)
}

// installLocked validates and compiles a site read from the directory and swaps it in;
// otherwise the previous snapshot stays, and later changes apply to this site (the
// directory's view) until one makes it valid.
func (s *Service) installLocked(site *model.Site) error {
	err := site.Validate()
	var snap *Snapshot
	if err != nil {
		err = fmt.Errorf("directory content is invalid, keeping previous snapshot: %w", err)
	} else if snap, err = newSnapshot(site); err != nil {
		err = fmt.Errorf("directory schedule is invalid, keeping previous snapshot: %w", err)
	}
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	if err != nil {
		s.feed.base = site
		return err
	}
	s.feed.base = nil
	s.snap.Store(snap)
	return nil
}

func (s *Service) noteFeed(err error, full bool) {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	switch {
	case err != nil:
		s.feed.failed++
	case full:
		s.feed.full++
	default:
		s.feed.applied++
	}
	s.feed.lastErr = err
}
