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

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Images is the site's image versions: which is current, publishing and removing them,
// and what boot servers hold.
type Images struct {
	s  *Service
	st imageState // boot servers' verified image versions, versions hosts were given
}

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
func (im *Images) Held() resolve.Held {
	if h := im.st.index.Load(); h != nil {
		return *h
	}
	return nil
}

// ReportBootImages records that boot server server holds exactly held, verified (the
// caller has authorised the boot server's account). Stored when the set changed or the
// stored report is older than heldRefresh; an error means the directory did not take it
// (the boot server reports again at its next round).
func (im *Images) ReportBootImages(ctx context.Context, server string, held []wire.BootImage, now time.Time) error {
	s := im.s
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
	st := &im.st
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
func (im *Images) BootImages(server string) (wire.BootImages, error) {
	s := im.s
	snap := s.Snapshot()
	if snap.Site.BootServer(server) == nil {
		return wire.BootImages{}, model.Invalid("unknown boot server %q", server)
	}
	out := wire.BootImages{Server: server, Wanted: snap.Resolver.Wanted(server), Held: []wire.BootImage{}}
	st := &im.st
	st.mu.Lock()
	if d, ok := st.held[server]; ok {
		out.Held, out.Reported = d.Held, d.Reported
	}
	st.mu.Unlock()
	return out, nil
}

// HeldBy lists each boot server's last report (for `overtime image list/show`).
func (im *Images) HeldBy() map[string][]wire.BootImage {
	st := &im.st
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
func (im *Images) NoteBooted(host string, guest bool, versions []string, now time.Time) {
	s := im.s
	if host == "" {
		return
	}
	versions = slices.Clone(versions)
	sort.Strings(versions)
	versions = slices.Compact(versions)
	st := &im.st
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
func (im *Images) Booted() []resolve.Booted {
	st := &im.st
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]resolve.Booted, 0, len(st.booted))
	for _, d := range st.booted {
		out = append(out, resolve.Booted{Host: d.Host, Versions: append(slices.Clone(d.Boot), d.Guest...), At: d.at()})
	}
	return out
}

// syncBooted writes changed booted records until ctx ends (SyncState runs it).
func (im *Images) syncBooted(ctx context.Context) {
	s := im.s
	st := &im.st
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
func (im *Images) ImageStatus(name, instance string, now time.Time) []wire.ImageStatus {
	return imageStatus(im.s.Snapshot(), name, im.imageQuery(instance, now), im.HeldBy(), im.Booted())
}

func (im *Images) imageQuery(instance string, now time.Time) resolve.Query {
	return resolve.Query{At: now, BootServer: instance, Held: im.Held()}
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
// versions. It returns the removed versions (with their paths; boot servers delete their
// copies at their next sync) and the kept ones with their blockers. image "" means every
// image. When store is not nil (this server keeps the image store), the removed versions'
// directories are deleted from it too (FilesRemoved): only after the catalogue no longer
// names them, so that a boot script rendered meanwhile never points at a deleted
// directory. Which directories may go is imagestore's to prove.
func (im *Images) GC(ctx context.Context, authz Authorizer, store *imagestore.Store, dryRun bool, image, instance string, now time.Time) (wire.GCResult, error) {
	res := wire.GCResult{DryRun: dryRun, Removed: []wire.BootImage{}, Kept: []wire.ImageVersionStatus{}}
	q, heldBy, booted := im.imageQuery(instance, now), im.HeldBy(), im.Booted()
	_, err := im.s.update(ctx, authz, dryRun, func(cur *Snapshot, next *model.Site) error {
		res.Removed, res.Kept = res.Removed[:0], res.Kept[:0]
		if image != "" && cur.Site.Image(image) == nil {
			return model.Invalid("unknown image %q", image)
		}
		for _, st := range imageStatus(cur, image, q, heldBy, booted) {
			img := next.Image(st.Name)
			for _, vs := range st.Versions {
				if len(vs.Blockers) > 0 {
					vs.Image = st.Name
					res.Kept = append(res.Kept, vs)
					continue
				}
				res.Removed = append(res.Removed, wire.BootImage{Image: st.Name, Version: vs.Version, Path: vs.Path, SHA256: vs.SHA256, Size: vs.Size})
				img.Versions = slices.DeleteFunc(img.Versions, func(v model.ImageVersion) bool { return v.Version == vs.Version })
			}
		}
		return nil
	})
	if err != nil || dryRun || store == nil {
		return res, err
	}
	res.FilesRemoved = append(res.FilesRemoved, store.GC(im.s.Snapshot().Site, res.Removed)...)
	return res, nil
}

// MayUpload is the check before a file of image's version is received into store: valid
// names, a store on this server (else errstatus.Unavailable, 503), an image that exists,
// that p may upload to (authz.Principal.CheckUpload), a version not yet published (409)
// and a staging area that admits it (imagestore.Store.CheckNew). It answers the image.
func (im *Images) MayUpload(p authz.Principal, store *imagestore.Store, image, version string) (*model.Image, error) {
	if err := model.ValidName("image", image); err != nil {
		return nil, err
	}
	if err := names.Version(version); err != nil {
		return nil, model.Invalid("%v", err)
	}
	if store == nil {
		return nil, &errstatus.Unavailable{Msg: "this site manager keeps no image store: start overtime serve with --images-dir to accept uploads"}
	}
	cur := im.s.Snapshot().Site.Image(image)
	if cur == nil {
		return nil, model.NotFound("image", image)
	}
	if err := p.CheckUpload(cur); err != nil {
		return nil, err
	}
	if cur.Version(version) != nil {
		return nil, model.Conflict("image %s version %s is already published; versions are immutable, upload a new one", image, version)
	}
	if err := store.CheckNew(image, version); err != nil {
		return nil, err
	}
	return cur, nil
}

// SetCurrent switches image's current version to version ("": follow the newest), as
// authz allows: one attribute of the image entry, so every reader sees the old or the new
// version, never a mixture. A rollback is the same call with the previous version. An
// unknown image is model.NotFound, an unknown version model.Invalid naming the published
// ones.
func (im *Images) SetCurrent(ctx context.Context, authz Authorizer, dryRun bool, image, version string) ([]model.Change, error) {
	return im.s.Update(ctx, authz, dryRun, func(site *model.Site) error {
		img := site.Image(image)
		if img == nil {
			return model.NotFound("image", image)
		}
		if version != "" && img.Version(version) == nil {
			return model.Invalid("image %s has no version %q (published: %s)", image, version, versionList(img))
		}
		img.Current = version
		return nil
	})
}

func versionList(im *model.Image) string {
	var v []string
	for _, x := range im.Versions {
		v = append(v, x.Version)
	}
	if len(v) == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}

// AddVersion registers version v of image in the catalogue, as authz allows. Versions
// are immutable: one the image already has is a conflict. When store is not nil and this
// is no dry run, the store's copy of the version is checked first (imagestore
// Store.CheckVersion): outside the write lock (hashing a multi-GB image takes seconds),
// and only for a change the caller may make, which a dry run first validates and
// authorises.
func (im *Images) AddVersion(ctx context.Context, authz Authorizer, store *imagestore.Store, dryRun bool, image string, v model.ImageVersion) ([]model.Change, error) {
	add := func(site *model.Site) error {
		img := site.Image(image)
		if img == nil {
			return model.NotFound("image", image)
		}
		if img.Version(v.Version) != nil && v.Version != "" {
			return model.Conflict("image %s version %s already exists; versions are immutable, publish a new one", image, v.Version)
		}
		img.Versions = append(img.Versions, v)
		return nil
	}
	if store != nil && !dryRun {
		if _, err := im.s.Update(ctx, authz, true, add); err != nil {
			return nil, err
		}
		if err := store.CheckVersion(image, &v); err != nil {
			return nil, err
		}
	}
	return im.s.Update(ctx, authz, dryRun, add)
}

// Publish turns what is staged in store for image's version into a published,
// registered version created at now (imagestore's publish.go has the steps). The
// publication is judged first (authorisation, validation: a dry run of AddVersion), then
// the files are moved into the store, then the version is written: a refused
// publication leaves the store as it was, and a write that fails moves the files back
// into staging, so that the same publish can be retried. With dryRun only the judgement
// runs.
func (im *Images) Publish(ctx context.Context, authz Authorizer, store *imagestore.Store, dryRun bool, image, version string, req wire.PublishRequest, now time.Time) ([]model.Change, error) {
	img := im.s.Snapshot().Site.Image(image)
	if img == nil {
		return nil, model.NotFound("image", image)
	}
	if store == nil {
		return nil, model.Invalid("this site manager keeps no image store: nothing is staged to publish")
	}
	staged, err := store.Stage(ctx, image, version, img.Kind, req)
	if err != nil {
		return nil, err
	}
	defer staged.Release()
	v := model.ImageVersion{Version: version, SHA256: staged.RootSHA256, Size: staged.RootSize,
		Path: model.VersionPath(image, version), Created: now.UTC().Truncate(time.Second)}
	changes, err := im.AddVersion(ctx, authz, nil, true, image, v)
	if err != nil || dryRun {
		return changes, err
	}
	undo, err := staged.Move()
	if err != nil {
		return nil, err
	}
	if changes, err = im.AddVersion(ctx, authz, nil, false, image, v); err != nil {
		undo()
		return changes, err
	}
	staged.Done()
	return changes, nil
}
