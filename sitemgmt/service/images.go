package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Images is the site's image versions: which is current, publishing and removing them,
// and what boot servers hold.
type Images struct{ s *Service }

// Image distribution state (docs/publishing.md), kept like heartbeats (state.go): in
// memory, and in the directory when the backend is a StateStore, so that every replica
// gates boot scripts by the same reports and a restart forgets nothing.
//
//   - bootimages/SERVER: what boot server SERVER last reported holding verified. Written
//     when the set changes (and refreshed every heldRefresh, so the time says the boot
//     server is alive); a boot server reports every few seconds, so this is a handful of
//     writes per published version and boot server.
//   - booted/HOST: the image versions HOST was last given by a boot script or in its agent
//     configuration. Written when the set changes, not at every boot: one write per host
//     and version switch. `overtime image gc` keeps these versions (a running PC keeps
//     what it booted; its overlay reads the version directory until it reboots).

const heldRefresh = 10 * time.Minute

type heldDoc struct {
	Server   string           `json:"server"`
	Held     []wire.BootImage `json:"held"`
	Reported time.Time        `json:"reported"`
}

// bootedDoc: what a host's last boot script offered (Boot: the scheduled entry and the
// menu's others) and what its agent was last told to run (Guest), "IMAGE/VERSION" sorted.
type bootedDoc struct {
	Host    string    `json:"host"`
	Boot    []string  `json:"boot,omitempty"`
	BootAt  time.Time `json:"bootAt,omitempty"`
	Guest   []string  `json:"guest,omitempty"`
	GuestAt time.Time `json:"guestAt,omitempty"`
}

func (d bootedDoc) at() time.Time {
	if d.GuestAt.After(d.BootAt) {
		return d.GuestAt
	}
	return d.BootAt
}

type imageState struct {
	mu     sync.Mutex
	held   map[string]heldDoc   // by boot server
	stored map[string]heldDoc   // what the store holds (written or seen)
	booted map[string]bootedDoc // by host
	dirty  map[string]bool      // booted docs to write
	index  atomic.Pointer[resolve.Held]
	kick   chan struct{}
}

func (st *imageState) init() {
	if st.held == nil {
		st.held, st.stored, st.booted, st.dirty = map[string]heldDoc{}, map[string]heldDoc{}, map[string]bootedDoc{}, map[string]bool{}
		st.kick = make(chan struct{}, 1)
	}
}

// reindexLocked rebuilds the immutable Held map boot requests read without a lock.
func (st *imageState) reindexLocked() {
	h := make(resolve.Held, len(st.held))
	for srv, d := range st.held {
		set := make(map[string]string, len(d.Held))
		for _, b := range d.Held {
			set[b.Key()] = b.SHA256
		}
		h[srv] = set
	}
	st.index.Store(&h)
}

func (st *imageState) mergeDoc(log *slog.Logger, kind, key string, doc []byte, deleted bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.init()
	switch kind {
	case stateBootImages:
		if deleted {
			delete(st.held, key)
			delete(st.stored, key)
			st.reindexLocked()
			return
		}
		var d heldDoc
		if err := json.Unmarshal(doc, &d); err != nil || d.Server != key || validHeld(d.Held) != nil {
			log.Warn("state: skipping a boot server image report that does not decode", "server", key, "err", err)
			return
		}
		st.stored[key] = d
		if cur, ok := st.held[key]; !ok || d.Reported.After(cur.Reported) {
			st.held[key] = d
			st.reindexLocked()
		}
	case stateBooted:
		if deleted {
			if !st.dirty[key] {
				delete(st.booted, key)
			}
			return
		}
		var d bootedDoc
		if err := json.Unmarshal(doc, &d); err != nil || d.Host != key {
			log.Warn("state: skipping a booted-versions document that does not decode", "host", key, "err", err)
			return
		}
		if cur, ok := st.booted[key]; (!ok || d.at().After(cur.at())) && !st.dirty[key] {
			st.booted[key] = d
		}
	}
}

func validHeld(held []wire.BootImage) error {
	for _, b := range held {
		if err := names.Name("image", b.Image); err != nil {
			return err
		}
		if err := names.Version(b.Version); err != nil {
			return fmt.Errorf("image %s: %w", b.Image, err)
		}
		if err := names.SHA256(b.SHA256); err != nil {
			return fmt.Errorf("image %s %s: %w", b.Image, b.Version, err)
		}
	}
	return nil
}

// Held is what boot servers reported holding verified, for resolve.Query.Held.
func (s *Service) Held() resolve.Held {
	if h := s.images.index.Load(); h != nil {
		return *h
	}
	return nil
}

// ReportBootImages records that boot server server holds exactly held, verified (the
// caller has authorised the boot server's account). Stored when the set changed or the
// stored report is older than heldRefresh; an error means the directory did not take it
// (the boot server reports again at its next round).
func (s *Service) ReportBootImages(ctx context.Context, server string, held []wire.BootImage, now time.Time) error {
	if s.Snapshot().Site.BootServer(server) == nil {
		return model.Invalid("unknown boot server %q", server)
	}
	if err := validHeld(held); err != nil {
		return model.Invalid("%v", err)
	}
	held = slices.Clone(held)
	for i := range held {
		held[i].Reason = ""
	}
	sort.Slice(held, func(i, j int) bool { return held[i].Key() < held[j].Key() })
	d := heldDoc{Server: server, Held: held, Reported: now.UTC()}
	st := &s.images
	st.mu.Lock()
	st.init()
	st.held[server] = d
	st.reindexLocked()
	old, ok := st.stored[server]
	same := ok && sameJSON(old.Held, d.Held) && now.Sub(old.Reported) < heldRefresh
	st.mu.Unlock()
	if same || s.state == nil {
		return nil
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := s.state.PutState(ctx, stateBootImages, server, doc); err != nil {
		return err
	}
	st.mu.Lock()
	st.stored[server] = d
	st.mu.Unlock()
	return nil
}

// BootImages is what boot server server should hold (the resolver's Wanted list) and
// what it last reported holding.
func (s *Service) BootImages(server string) (wire.BootImages, error) {
	snap := s.Snapshot()
	if snap.Site.BootServer(server) == nil {
		return wire.BootImages{}, model.Invalid("unknown boot server %q", server)
	}
	out := wire.BootImages{Server: server, Wanted: snap.Resolver.Wanted(server), Held: []wire.BootImage{}}
	st := &s.images
	st.mu.Lock()
	if d, ok := st.held[server]; ok {
		out.Held, out.Reported = d.Held, d.Reported
	}
	st.mu.Unlock()
	return out, nil
}

// HeldBy lists each boot server's last report (for `overtime image list/show`).
func (s *Service) HeldBy() map[string][]wire.BootImage {
	st := &s.images
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string][]wire.BootImage, len(st.held))
	for srv, d := range st.held {
		out[srv] = d.Held
	}
	return out
}

// NoteBooted records that host was given versions ("IMAGE/VERSION") at now, by a boot
// script (guest false) or in its agent configuration (guest true). Only a change of the
// set is kept (and written to the store in the background).
func (s *Service) NoteBooted(host string, guest bool, versions []string, now time.Time) {
	if host == "" {
		return
	}
	versions = slices.Clone(versions)
	sort.Strings(versions)
	versions = slices.Compact(versions)
	st := &s.images
	st.mu.Lock()
	defer st.mu.Unlock()
	st.init()
	d := st.booted[host]
	d.Host = host
	if guest {
		if slices.Equal(d.Guest, versions) {
			return
		}
		d.Guest, d.GuestAt = versions, now.UTC()
	} else {
		if slices.Equal(d.Boot, versions) {
			return
		}
		d.Boot, d.BootAt = versions, now.UTC()
	}
	st.booted[host] = d
	if s.state != nil {
		st.dirty[host] = true
		select {
		case st.kick <- struct{}{}:
		default:
		}
	}
}

// Booted lists what every host was last given.
func (s *Service) Booted() []resolve.Booted {
	st := &s.images
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]resolve.Booted, 0, len(st.booted))
	for _, d := range st.booted {
		out = append(out, resolve.Booted{Host: d.Host, Versions: append(slices.Clone(d.Boot), d.Guest...), At: d.at()})
	}
	return out
}

// syncBooted writes changed booted records until ctx ends (SyncState runs it).
func (s *Service) syncBooted(ctx context.Context) {
	st := &s.images
	st.mu.Lock()
	st.init()
	kick := st.kick
	st.mu.Unlock()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-retry.C:
		}
		st.mu.Lock()
		var todo []bootedDoc
		for h := range st.dirty {
			todo = append(todo, st.booted[h])
		}
		clear(st.dirty)
		st.mu.Unlock()
		for i, d := range todo {
			doc, err := json.Marshal(d)
			if err == nil {
				err = s.state.PutState(ctx, stateBooted, d.Host, doc)
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("state: writing what hosts booted failed; retrying", "err", err)
				st.mu.Lock()
				for _, x := range todo[i:] {
					if cur, ok := st.booted[x.Host]; ok && cur.at().Equal(x.at()) {
						st.dirty[x.Host] = true
					}
				}
				st.mu.Unlock()
				retry.Reset(5 * time.Second)
				break
			}
		}
	}
}

// ImageStatus lists every image (or only name) with its versions: sizes, where each is
// verified or still missing, and what keeps gc from removing it. instance is the boot
// server this replica answers for (resolve.Query.BootServer).
func (s *Service) ImageStatus(name, instance string, now time.Time) []wire.ImageStatus {
	snap := s.Snapshot()
	return imageStatus(snap, name, s.imageQuery(instance, now), s.HeldBy(), s.Booted())
}

func (s *Service) imageQuery(instance string, now time.Time) resolve.Query {
	return resolve.Query{At: now, BootServer: instance, Held: s.Held()}
}

func imageStatus(snap *Snapshot, name string, q resolve.Query, heldBy map[string][]wire.BootImage, booted []resolve.Booted) []wire.ImageStatus {
	site := snap.Site
	blockers := snap.Resolver.Blockers(q, booted)
	wanted := map[string][]string{} // IMAGE/VERSION -> boot servers that should hold it
	for _, b := range site.BootServers {
		for _, w := range snap.Resolver.Wanted(b.Name) {
			wanted[w.Key()] = append(wanted[w.Key()], b.Name)
		}
	}
	verified := map[string][]string{}
	for srv, held := range heldBy {
		for _, h := range held {
			verified[h.Key()+"\x00"+h.SHA256] = append(verified[h.Key()+"\x00"+h.SHA256], srv)
		}
	}
	out := []wire.ImageStatus{}
	for i := range site.Images {
		im := &site.Images[i]
		if name != "" && im.Name != name {
			continue
		}
		st := wire.ImageStatus{Name: im.Name, Kind: string(im.Kind), Explicit: im.Current != "", Versions: []wire.ImageVersionStatus{}}
		cur := im.Version("")
		if cur != nil {
			st.Current = cur.Version
		}
		for _, v := range im.Versions {
			k := im.Name + "/" + v.Version
			vs := wire.ImageVersionStatus{Version: v.Version, Path: v.Path, SHA256: v.SHA256, Size: v.Size,
				Created: v.Created, Current: cur != nil && cur.Version == v.Version, Blockers: blockers[k]}
			vs.VerifiedOn = verified[k+"\x00"+v.SHA256]
			sort.Strings(vs.VerifiedOn)
			for _, srv := range wanted[k] {
				if _, reports := heldBy[srv]; reports && !slices.Contains(vs.VerifiedOn, srv) {
					vs.MissingOn = append(vs.MissingOn, srv)
				}
			}
			sort.Strings(vs.MissingOn)
			st.Versions = append(st.Versions, vs)
		}
		out = append(out, st)
	}
	return out
}

// GC removes from the catalogue every image version nothing references (resolve.Blockers:
// not current or newer, not pinned, not what any host resolves to or was last given),
// judged on the snapshot the write starts from, and authorised like any deletion of
// versions. It returns the removed versions (with their paths, so that the caller deletes
// the files from its store; boot servers delete theirs at their next sync) and the kept
// ones with their blockers. image "" means every image.
func (s *Service) GC(ctx context.Context, authz Authorizer, dryRun bool, image, instance string, now time.Time) (wire.GCResult, error) {
	res := wire.GCResult{DryRun: dryRun, Removed: []wire.BootImage{}, Kept: []wire.ImageVersionStatus{}}
	q, heldBy, booted := s.imageQuery(instance, now), s.HeldBy(), s.Booted()
	_, err := s.update(ctx, authz, dryRun, func(cur *Snapshot, next *model.Site) error {
		res.Removed, res.Kept = res.Removed[:0], res.Kept[:0]
		if image != "" && cur.Site.Image(image) == nil {
			return model.Invalid("unknown image %q", image)
		}
		for _, st := range imageStatus(cur, image, q, heldBy, booted) {
			im := next.Image(st.Name)
			for _, vs := range st.Versions {
				if len(vs.Blockers) > 0 {
					vs.Image = st.Name
					res.Kept = append(res.Kept, vs)
					continue
				}
				res.Removed = append(res.Removed, wire.BootImage{Image: st.Name, Version: vs.Version, Path: vs.Path, SHA256: vs.SHA256, Size: vs.Size})
				im.Versions = slices.DeleteFunc(im.Versions, func(v model.ImageVersion) bool { return v.Version == vs.Version })
			}
		}
		return nil
	})
	return res, err
}
