package service

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Durable, shared runtime state. Heartbeats and job reports are kept in the directory
// (ldapstore implements StateStore), next to the configuration, so that
//   - a restarted site manager answers as before (Slurm's feed, `overtime job-report`),
//   - several replicas behind a load balancer give the same answers: each follows the
//     stored state (WatchState, an RFC 4533 persistent search) and merges what the others
//     wrote into its memory, waking its Slurm feed long polls,
//   - the state has the directory's replication and backups, without a second database.
//
// Why not write every heartbeat: 10,000 PCs posting every 30 s would be 333 directory
// writes a second, each replicated, for numbers that change little. A heartbeat is
// written when something a reader acts on changes (mode, owner state, guest action and
// state, agent instance...: beatSig), and otherwise only to refresh its receive time once
// it is PersistRefresh old. That bounds the steady load at hosts/PersistRefresh writes a
// second plus real changes (TestStateWriteLoad: 10,000 hosts, 20 minutes of heartbeats)
// while keeping every replica's view of a live host fresher than wire.StaleAfter:
// the stored receive time lags the newest by at most PersistRefresh + one interval.
// Job reports are written once each.
//
// Order: each replica accepts heartbeats by their own order (newer: agent instance and
// sequence, never the agent's clock); between replicas the later acceptance wins, by a
// revision clock each replica keeps ahead of every revision it has seen stored (a hybrid
// logical clock, seeded with the wall clock in microseconds). The receive time is merged
// as the latest seen.

// StateStore keeps runtime state documents (opaque JSON) by kind and key.
// ldapstore.Store implements it; a Backend that does not keeps state in memory only.
type StateStore interface {
	LoadState(ctx context.Context, fn func(kind, key string, doc []byte)) error
	PutState(ctx context.Context, kind, key string, doc []byte) error
	DeleteState(ctx context.Context, kind, key string) error
	WatchState(ctx context.Context, ready func(), fn func(kind, key string, doc []byte, deleted bool)) error
}

// State kinds (the same strings as ldapstore's containers).
const (
	stateBeats      = "heartbeats"
	stateReports    = "reports"
	stateBootImages = "bootimages" // images.go
	stateBooted     = "booted"     // images.go
	stateSlurm      = "slurm"      // slurm.go: the controller's Slurm version
	// statePower and stateAudit: power.go
)

// PersistRefresh is how old the stored receive time of an unchanged heartbeat may get
// before it is written again. Half of wire.StaleAfter: with heartbeats every
// wire.HeartbeatInterval, another replica's view of a live host lags by at most
// PersistRefresh + HeartbeatInterval < StaleAfter.
const PersistRefresh = wire.StaleAfter / 2

// storedBeat is a heartbeat document in the store.
type storedBeat struct {
	Rev     uint64          `json:"rev"` // when it was accepted (hostBeat.rev)
	Status  wire.HostStatus `json:"status"`
	Retired string          `json:"retired,omitempty"`
}

// storedReport is a job report document: Rev is the revision of the replica that
// received it, kept so that a restarted replica does not hand Slurm's feed every stored
// report again as new.
type storedReport struct {
	Rev    uint64         `json:"rev"`
	Report wire.JobReport `json:"report"`
}

// persistMark is what the store holds of a host's heartbeat: its receive time and sig.
type persistMark struct {
	received time.Time
	sig      string
}

// beatSig is what of a heartbeat makes a write necessary when it changes: whatever the
// Slurm feed, the agent status or the order of later heartbeats depends on. Time, Seq,
// pressure and CPU seconds change at every heartbeat and are refreshed with the receive
// time.
func beatSig(hb hostBeat) string {
	h := hb.st.Heartbeat
	// Sessions: another replica refuses a power-off by them; the power status: the
	// acknowledgement of a command must reach every replica's view of the host.
	var powerID, powerState string
	if h.Power != nil {
		powerID, powerState = h.Power.ID, string(h.Power.State)
	}
	// The calibration: the Slurm weight and the agent configuration follow it. Judged by
	// its time: a host sends a new profile only after a new run.
	var measured string
	if h.Interference != nil {
		measured = h.Interference.Measured.UTC().Format(time.RFC3339Nano)
	}
	return strings.Join([]string{h.Instance, h.Mode, h.ConfigFrom, string(h.OwnerState), string(h.Action),
		h.GuestState, h.GuestReason, h.Backend, h.Version, strconv.Itoa(h.Restarts), hb.retired,
		strconv.Itoa(h.Sessions), powerID, powerState, measured}, "\x00")
}

// sameJSON compares two documents as the store keeps them.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func reportKeyString(k reportKey) string { return k.job + "@" + k.host }

func parseReportKey(s string) (reportKey, bool) {
	job, host, ok := strings.Cut(s, "@")
	return reportKey{job, host}, ok && job != "" && host != ""
}

// durableLocked reports whether a store keeps the state (set by LoadState).
func (a *agentState) durableLocked() bool { return a.persisted != nil }

// markBeatLocked queues host's heartbeat for writing when the store's copy is outdated.
func (a *agentState) markBeatLocked(host string) {
	if !a.durableLocked() {
		return
	}
	hb, ok := a.last[host]
	if !ok {
		return
	}
	m, ok := a.persisted[host]
	if ok && m.sig == beatSig(hb) && hb.st.Received.Sub(m.received) < PersistRefresh {
		return
	}
	a.dirtyBeats[host] = true
	a.wake()
}

func (a *agentState) markReportLocked(k reportKey) {
	if !a.durableLocked() {
		return
	}
	delete(a.deadReports, k)
	a.dirtyReports[k] = true
	a.wake()
}

func (a *agentState) markDeadLocked(k reportKey) {
	if !a.durableLocked() {
		return
	}
	delete(a.dirtyReports, k)
	a.deadReports[k] = true
	a.wake()
}

func (a *agentState) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// noteStoredLocked records that the store holds hb (written by us or seen in the watch).
func (a *agentState) noteStoredLocked(host string, hb hostBeat) {
	if m, ok := a.persisted[host]; ok && m.received.After(hb.st.Received) {
		return
	}
	a.persisted[host] = persistMark{received: hb.st.Received, sig: beatSig(hb)}
}

// mergeBeat takes a heartbeat document from the store (another replica's write, our
// own write coming back, or a load). Each replica already chose, by the heartbeats' own
// order (newer), what it accepted; between replicas the later acceptance wins, by the
// revision clock that every replica keeps ahead of every revision it has seen (a hybrid
// logical clock). The receive time becomes the latest known either way.
func (a *agentState) mergeBeat(sb storedBeat) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := sb.Status
	host := st.Host
	in := hostBeat{st: st, retired: sb.Retired, rev: sb.Rev}
	a.noteStoredLocked(host, in)
	if sb.Rev > a.rev {
		a.rev = sb.Rev
	}
	prev, ok := a.last[host]
	if ok && sb.Rev <= prev.rev {
		if st.Received.After(prev.st.Received) {
			if st.Received.Sub(prev.st.Received) > wire.StaleAfter {
				a.bumpLocked(true) // the node shown down as stale comes back
			}
			prev.st.Received = st.Received
			a.last[host] = prev
		}
		if newerProfile(prev.st.Interference, st.Interference) {
			prev.st.Interference = st.Interference
			a.last[host] = prev
			a.bumpLocked(true)
		}
		return
	}
	if ok && prev.st.Received.After(in.st.Received) {
		in.st.Received = prev.st.Received
	}
	if ok {
		// A replica that accepted a heartbeat before it saw another's profile wrote it
		// without: the later measured calibration stays.
		in.st.Interference = laterProfile(prev.st.Interference, in.st.Interference)
	}
	if a.last == nil {
		a.last = map[string]hostBeat{}
	}
	a.bumpLocked(!ok || slurmNodeChanged(prev.st, in.st))
	a.last[host] = in
}

// mergeReport takes a job report document from the store. live: seen by the watch (new
// to this replica: it gets this replica's next revision, so that a Slurm feed following
// this replica sees it); else loaded at start (it keeps the stored revision).
func (a *agentState) mergeReport(k reportKey, sr storedReport, live bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reports == nil {
		a.reports = map[reportKey]revReport{}
	}
	if x, ok := a.reports[k]; ok && (sr.Rev < x.stored || sameJSON(x.r, sr.Report)) {
		// An older version: our own earlier write coming back through the watch after
		// the report was replaced (and that newer write already left the dirty set),
		// or a replica's write this one has already superseded.
		return
	}
	if a.dirtyReports[k] {
		return // ours is newer and on its way to the store
	}
	// Revisions work like a hybrid logical clock across replicas: each replica's runs
	// ahead of every revision it has seen stored, so a feed client that read up to
	// revision N on one replica is not given the same report again by another (or by
	// this one after a restart).
	rev := sr.Rev
	if rev > a.rev {
		a.rev = rev
	}
	if live {
		a.bumpLocked(true)
		rev = a.rev
	}
	a.reports[k] = revReport{rev: rev, stored: sr.Rev, r: sr.Report}
	a.evictLocked()
}

func (a *agentState) dropReport(k reportKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.dirtyReports[k] {
		delete(a.reports, k)
	}
}

// LoadState makes the runtime state durable and shared through the backend, if it is a
// StateStore: it reads what the store holds (heartbeats, job reports) and from then on
// queues changes for SyncState to write. Call it once, before serving; without a
// StateStore it does nothing. The revision continues above every stored one and above
// the clock in microseconds, so that a Slurm feed client's last revision from before a
// restart (or from another replica) never makes it wait for changes it has not seen.
func (s *Service) LoadState(ctx context.Context) error {
	st, ok := s.backend.(StateStore)
	if !ok {
		return nil
	}
	s.useState(st)
	return st.LoadState(ctx, func(kind, key string, doc []byte) { s.mergeDoc(kind, key, doc, false, false) })
}

// useState starts keeping the runtime state in st.
func (s *Service) useState(st StateStore) {
	a := &s.agents
	a.mu.Lock()
	a.persisted = map[string]persistMark{}
	a.dirtyBeats = map[string]bool{}
	a.dirtyReports = map[reportKey]bool{}
	a.deadReports = map[reportKey]bool{}
	a.kick = make(chan struct{}, 1)
	if now := uint64(time.Now().UnixMicro()); a.rev < now {
		a.rev = now
	}
	a.mu.Unlock()
	s.state = &writeCounter{StateStore: st}
}

// mergeDoc decodes one stored document and merges it; a document that does not decode
// (a hand edit, a newer version's field) is logged and skipped, never fatal.
func (s *Service) mergeDoc(kind, key string, doc []byte, deleted, live bool) {
	switch kind {
	case stateBeats:
		if deleted {
			return // a host's heartbeat goes with the host; nothing to undo in memory
		}
		var sb storedBeat
		if err := json.Unmarshal(doc, &sb); err != nil || sb.Status.Host != key || sb.Status.Validate() != nil {
			s.log.Warn("state: skipping a heartbeat document that does not decode", "host", key, "err", err)
			return
		}
		s.agents.mergeBeat(sb)
	case stateReports:
		k, ok := parseReportKey(key)
		if !ok {
			return
		}
		if deleted {
			s.agents.dropReport(k)
			return
		}
		var sr storedReport
		if err := json.Unmarshal(doc, &sr); err != nil || sr.Report.Job != k.job || sr.Report.Host != k.host || sr.Report.Validate() != nil {
			s.log.Warn("state: skipping a job report document that does not decode", "key", key, "err", err)
			return
		}
		s.agents.mergeReport(k, sr, live)
	case stateBootImages, stateBooted:
		s.Images.st.mergeDoc(s.log, kind, key, doc, deleted)
	case stateSlurm:
		s.Slurm.ctld.mergeDoc(s.log, key, doc, deleted)
	case statePower:
		s.Power.state.mergeDoc(s.log, key, doc, deleted)
	case stateAudit:
		s.audit.mergeDoc(s.log, key, doc, deleted)
	}
}

// StateWriteWorkers is how many state writes are in flight at once.
const StateWriteWorkers = 4

// SyncState runs until ctx ends: it writes queued state to the store and follows the
// store's changes (other replicas' writes), reconnecting after failures. At the end it
// makes a last attempt, bounded by finalFlush, to write what is still queued (a graceful
// shutdown loses nothing). Without LoadState having found a StateStore it returns at once.
func (s *Service) SyncState(ctx context.Context, finalFlush time.Duration) {
	if s.state == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.watchState(ctx)
	}()
	go func() {
		defer wg.Done()
		s.Images.syncBooted(ctx)
	}()
	backoff := time.Duration(0)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), finalFlush)
			if err := s.FlushState(fctx); err != nil {
				s.log.Warn("state: not everything was written before shutdown", "err", err)
			}
			cancel()
			wg.Wait()
			return
		case <-s.agents.kick:
		case <-retry.C:
		}
		if err := s.FlushState(ctx); err != nil {
			if ctx.Err() != nil {
				continue
			}
			backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
			s.log.Warn("state: writing to the directory failed; kept in memory, retrying", "err", err, "retryIn", backoff)
			retry.Reset(backoff)
		} else {
			backoff = 0
		}
	}
}

func (s *Service) watchState(ctx context.Context) {
	s.keepFollowing(ctx, "state: following the directory's state failed; reconnecting", func(ctx context.Context) error {
		return s.state.WatchState(ctx, nil, func(kind, key string, doc []byte, deleted bool) {
			s.mergeDoc(kind, key, doc, deleted, true)
		})
	})
}

// stateWrite is one queued write: a document to put, or (doc nil) a key to delete.
type stateWrite struct {
	kind, key string
	doc       []byte
	report    *reportKey
}

// FlushState writes every queued heartbeat and report now. Anything it could not write
// stays queued, and the first error is returned.
func (s *Service) FlushState(ctx context.Context) error {
	if s.state == nil {
		return nil
	}
	perr := errors.Join(s.Power.flush(ctx), s.audit.flush(ctx, s.state))
	err := s.flushAgents(ctx)
	if err == nil {
		err = perr
	}
	return err
}

// flushAgents writes the queued heartbeats and job reports.
func (s *Service) flushAgents(ctx context.Context) error {
	a := &s.agents
	a.mu.Lock()
	var todo []stateWrite
	for host := range a.dirtyBeats {
		hb := a.last[host]
		doc, err := json.Marshal(storedBeat{Rev: hb.rev, Status: hb.st, Retired: hb.retired})
		if err == nil {
			todo = append(todo, stateWrite{kind: stateBeats, key: host, doc: doc})
			// What the store will hold once this write lands. Noted now, not after it
			// returns: a heartbeat put while the write is in flight is compared with it
			// (markBeatLocked), else one equal to the previous stored document would be
			// skipped and never written. A failed write queues the host again.
			a.noteStoredLocked(host, hb)
		}
	}
	for k := range a.dirtyReports {
		x, ok := a.reports[k]
		if !ok {
			continue
		}
		doc, err := json.Marshal(storedReport{Rev: x.stored, Report: x.r})
		if err == nil {
			kk := k
			todo = append(todo, stateWrite{kind: stateReports, key: reportKeyString(k), doc: doc, report: &kk})
		}
	}
	for k := range a.deadReports {
		kk := k
		todo = append(todo, stateWrite{kind: stateReports, key: reportKeyString(k), report: &kk})
	}
	clear(a.dirtyBeats)
	clear(a.dirtyReports)
	clear(a.deadReports)
	a.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}

	var (
		mu       sync.Mutex
		firstErr error
		failed   []stateWrite
		wg       sync.WaitGroup
		next     = make(chan stateWrite)
	)
	for range min(StateWriteWorkers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range next {
				var err error
				if w.doc == nil {
					err = s.state.DeleteState(ctx, w.kind, w.key)
				} else {
					err = s.state.PutState(ctx, w.kind, w.key, w.doc)
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, w)
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, w := range todo {
		next <- w
	}
	close(next)
	wg.Wait()
	if len(failed) == 0 {
		return nil
	}
	// Queue again what failed, unless something newer was queued meanwhile (it is).
	a.mu.Lock()
	for _, w := range failed {
		switch {
		case w.kind == stateBeats:
			a.dirtyBeats[w.key] = true
		case w.doc != nil && !a.deadReports[*w.report]:
			a.dirtyReports[*w.report] = true
		case w.doc == nil && !a.dirtyReports[*w.report]:
			a.deadReports[*w.report] = true
		}
	}
	a.mu.Unlock()
	if firstErr == nil {
		firstErr = errors.New("state write failed")
	}
	return firstErr
}

// StatePending counts the writes queued for the store (tests, metrics).
func (s *Service) StatePending() int {
	a := &s.agents
	a.mu.Lock()
	n := len(a.dirtyBeats) + len(a.dirtyReports) + len(a.deadReports)
	a.mu.Unlock()
	return n + s.Power.state.pendingWrites() + s.audit.pendingWrites()
}

// flushDocs writes a state kind's queued documents to st: each ID in dirty (its document
// from doc, false when it no longer exists) is put, each in dead deleted. The queue is
// taken under mu and the writes made without it; what fails goes back on the queue,
// unless a later change queued the opposite. The audit trail and the power commands
// keep their documents this way.
func flushDocs(ctx context.Context, mu *sync.Mutex, dirty, dead map[string]bool, st StateStore, kind string, doc func(id string) ([]byte, bool)) error {
	type w struct {
		id  string
		doc []byte
	}
	mu.Lock()
	var todo []w
	for id := range dirty {
		if d, ok := doc(id); ok {
			todo = append(todo, w{id, d})
		}
	}
	for id := range dead {
		todo = append(todo, w{id: id})
	}
	clear(dirty)
	clear(dead)
	mu.Unlock()
	var errs []error
	for _, x := range todo {
		var err error
		if x.doc == nil {
			err = st.DeleteState(ctx, kind, x.id)
		} else {
			err = st.PutState(ctx, kind, x.id, x.doc)
		}
		if err != nil {
			errs = append(errs, err)
			mu.Lock()
			if x.doc == nil {
				if !dirty[x.id] {
					dead[x.id] = true
				}
			} else if !dead[x.id] {
				dirty[x.id] = true
			}
			mu.Unlock()
		}
	}
	return errors.Join(errs...)
}
