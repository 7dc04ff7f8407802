package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// The audit trail: who changed what. Every site write is recorded by the one write path
// (update, service.go) with its field diffs; the power commands record their requests and
// ends (power.go). The trail is runtime state kept like heartbeats (state.go): in memory,
// and in the directory's ou=state when the backend is a StateStore, one document per
// entry (audit/ID, wire.AuditEntry, IDs sortable by time), so that a restart does not
// lose it and every replica shows the same trail. Entries are queued and written by
// SyncState.

const (
	stateAudit = "audit"
	// maxAudit bounds the entries kept (memory and directory); the oldest go first. An
	// entry is ~300 bytes.
	maxAudit = 50000
)

type auditState struct {
	mu      sync.Mutex
	entries map[string]wire.AuditEntry
	dirty   map[string]bool // IDs to write
	dead    map[string]bool // IDs to delete
}

func (a *auditState) init() {
	if a.entries == nil {
		a.entries, a.dirty, a.dead = map[string]wire.AuditEntry{}, map[string]bool{}, map[string]bool{}
	}
}

type actorKey struct{}

type actor struct {
	uid string
	now func() time.Time
}

// WithUser is ctx carrying the uid of the person a request acts for and the API's clock
// (nil: time.Now): the audit trail records them for site writes (Update), which take an
// Authorizer, not a user, and must stamp entries on the same clock as power commands
// (`overtime serve --now` moves it).
func WithUser(ctx context.Context, uid string, now func() time.Time) context.Context {
	return context.WithValue(ctx, actorKey{}, actor{uid, now})
}

func actorFrom(ctx context.Context) (string, time.Time) {
	a, _ := ctx.Value(actorKey{}).(actor)
	uid, now := a.uid, time.Now()
	if uid == "" {
		uid = "system"
	}
	if a.now != nil {
		now = a.now()
	}
	return uid, now
}

// addAudit keeps entries and queues them for the directory.
func (s *Service) addAudit(entries ...wire.AuditEntry) {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	durable := s.state != nil
	for _, e := range entries {
		a.entries[e.ID] = e
		if durable {
			delete(a.dead, e.ID)
			a.dirty[e.ID] = true
		}
	}
	if durable {
		s.agents.wake()
	}
	a.evictLocked(durable)
}

// evictLocked drops the oldest entries beyond maxAudit.
func (a *auditState) evictLocked(durable bool) {
	if len(a.entries) <= maxAudit {
		return
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range a.entries {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids[:len(a.entries)-maxAudit] {
		delete(a.entries, id)
		if durable {
			delete(a.dirty, id)
			a.dead[id] = true
		}
	}
}

// auditDiffChanges is how many changes of one write get their field diffs in the audit
// entry (a CSV import of a whole building lists every host, but diffs only the first).
const auditDiffChanges = 50

// auditSiteWrite records a successful site write (the one write path, update) with its
// change list and, per change, its field diff (model.FieldDiff: old → new): who changed
// what, and from what to what.
func (s *Service) auditSiteWrite(ctx context.Context, cur, next *model.Site, done []model.Change) {
	if len(done) == 0 {
		return
	}
	user, now := actorFrom(ctx)
	var detail, hosts []string
	var sums []string
	for i, c := range done {
		sums = append(sums, c.String())
		detail = append(detail, c.String())
		if i < auditDiffChanges {
			for _, l := range model.FieldDiff(cur, next, c) {
				detail = append(detail, "    "+l)
			}
		}
		if c.Kind == model.EntityHost {
			hosts = append(hosts, c.Name)
		}
	}
	target := string(done[0].Kind) + " " + done[0].Name
	if len(done) > 1 {
		target = fmt.Sprintf("%d entities", len(done))
	}
	sum := fmt.Sprintf("site changed: %s", strings.Join(sums[:min(3, len(sums))], "; "))
	if len(sums) > 3 {
		sum += fmt.Sprintf("; … (%d changes)", len(sums))
	}
	s.addAudit(wire.AuditEntry{ID: newID("", now), Time: now.UTC(), Kind: wire.AuditSite, User: user, Target: target, Hosts: hosts, Summary: sum, Detail: detail})
}

// Audit lists the trail, oldest first: entries concerning host (if not ""), at or after
// since (if not zero).
func (s *Service) Audit(host string, since time.Time) []wire.AuditEntry {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []wire.AuditEntry{}
	for _, e := range a.entries {
		if (host == "" || slices.Contains(e.Hosts, host)) && (since.IsZero() || !e.Time.Before(since)) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// ---- the store ----

// mergeDoc takes an audit document from the store; our own unwritten entry wins over
// what the store still has.
func (a *auditState) mergeDoc(log *slog.Logger, key string, doc []byte, deleted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	if a.dirty[key] {
		return
	}
	if deleted {
		delete(a.entries, key)
		return
	}
	var e wire.AuditEntry
	if err := json.Unmarshal(doc, &e); err != nil || e.ID != key {
		log.Warn("state: skipping an audit document that does not decode", "id", key, "err", err)
		return
	}
	a.entries[key] = e
}

// flush writes the queued audit documents to st; what fails stays queued.
func (a *auditState) flush(ctx context.Context, st StateStore) error {
	a.mu.Lock()
	a.init()
	a.mu.Unlock()
	return flushDocs(ctx, &a.mu, a.dirty, a.dead, st, stateAudit, func(id string) ([]byte, bool) {
		e, ok := a.entries[id]
		if !ok {
			return nil, false
		}
		doc, err := json.Marshal(e)
		return doc, err == nil
	})
}

func (a *auditState) pendingWrites() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.dirty) + len(a.dead)
}
