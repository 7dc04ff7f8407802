package service

import (
	"context"
	"slices"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Entities writes the site's entities whole, as the API's PUT and DELETE of
// /api/v1/{kind}/{name} and its settings endpoint do: boot servers, modes, images'
// descriptions and role grants, the site's own settings, and the removal of any entity.
// Entities with bookings are put by Bookings (PutPool, PutHost, PutException), which
// records their owners.
type Entities struct{ s *Service }

// noOwners is the put hook of entities without bookings.
func noOwners[T any](*T) error { return nil }

// PutBootServer creates (created: true) or replaces the boot server b.Name.
func (e *Entities) PutBootServer(ctx context.Context, p authz.Principal, dryRun bool, b model.BootServer) (created bool, changes []model.Change, err error) {
	return put(e.s, ctx, p, dryRun, func(s *model.Site) *[]model.BootServer { return &s.BootServers }, b.Name,
		func(v *model.BootServer) string { return v.Name }, noOwners[model.BootServer], &b)
}

// PutMode creates or replaces the mode m.Name.
func (e *Entities) PutMode(ctx context.Context, p authz.Principal, dryRun bool, m model.Mode) (created bool, changes []model.Change, err error) {
	return put(e.s, ctx, p, dryRun, func(s *model.Site) *[]model.Mode { return &s.Modes }, m.Name,
		func(v *model.Mode) string { return v.Name }, noOwners[model.Mode], &m)
}

// PutImage creates or replaces the description of image im.Name. Versions are
// published one by one (Images.AddVersion, Images.Publish) and are immutable: a
// description without versions keeps the ones the image has.
func (e *Entities) PutImage(ctx context.Context, p authz.Principal, dryRun bool, im model.Image) (created bool, changes []model.Change, err error) {
	return put(e.s, ctx, p, dryRun, func(s *model.Site) *[]model.Image { return &s.Images }, im.Name,
		func(v *model.Image) string { return v.Name }, func(old *model.Image) error {
			if old != nil && im.Versions == nil {
				im.Versions = old.Versions
			}
			return nil
		}, &im)
}

// PutRole creates or replaces the role grant r.Name.
func (e *Entities) PutRole(ctx context.Context, p authz.Principal, dryRun bool, r model.RoleGrant) (created bool, changes []model.Change, err error) {
	return put(e.s, ctx, p, dryRun, func(s *model.Site) *[]model.RoleGrant { return &s.Roles }, r.Name,
		func(v *model.RoleGrant) string { return v.Name }, noOwners[model.RoleGrant], &r)
}

// Remove deletes the entity of kind (model.EntityPool, EntityHost, EntityBootServer,
// EntityMode, EntityImage, EntityRole) named name; an unknown name is model.NotFound.
// Whether p may, and whether anything still refers to it, the one write path decides.
// Exceptions are removed by Bookings.RemoveException.
func (e *Entities) Remove(ctx context.Context, p authz.Principal, dryRun bool, kind, name string) ([]model.Change, error) {
	return e.s.Update(ctx, p.Check, dryRun, func(site *model.Site) error {
		var found bool
		switch kind {
		case model.EntityPool:
			found = remove(&site.Pools, func(v *model.Pool) bool { return v.Name == name })
		case model.EntityHost:
			found = remove(&site.Hosts, func(v *model.Host) bool { return v.Name == name })
		case model.EntityBootServer:
			found = remove(&site.BootServers, func(v *model.BootServer) bool { return v.Name == name })
		case model.EntityMode:
			found = remove(&site.Modes, func(v *model.Mode) bool { return v.Name == name })
		case model.EntityImage:
			found = remove(&site.Images, func(v *model.Image) bool { return v.Name == name })
		case model.EntityRole:
			found = remove(&site.Roles, func(v *model.RoleGrant) bool { return v.Name == name })
		default:
			return model.Invalid("cannot remove entities of kind %q here", kind)
		}
		if !found {
			what := kind // as users read it
			if kind == model.EntityBootServer {
				what = "boot server"
			}
			return model.NotFound(what, name)
		}
		return nil
	})
}

func remove[T any](list *[]T, is func(*T) bool) bool {
	i := slices.IndexFunc(*list, func(v T) bool { return is(&v) })
	if i < 0 {
		return false
	}
	*list = slices.Delete(*list, i, i+1)
	return true
}

// Settings are the site's own fields an administrator sets (GET|PUT /api/v1/settings).
type Settings struct {
	Name        string `json:"name"`
	Timezone    string `json:"timezone"`
	DefaultMode string `json:"defaultMode"`
	UnknownMode string `json:"unknownMode,omitempty"`
}

// PutDesktopLogin sets how desktops find and authenticate users (d; nil removes it): the
// site's when pool is "", else that pool's own, which overrides the site's.
func (e *Entities) PutDesktopLogin(ctx context.Context, p authz.Principal, dryRun bool, pool string, d *model.DesktopLogin) ([]model.Change, error) {
	return e.putSeat(ctx, p, dryRun, pool, func(site *model.Site) { site.DesktopLogin = d.Clone() },
		func(pl *model.Pool) { pl.DesktopLogin = d.Clone() })
}

// PutPrinting sets the print server the desktops use (pr; nil removes it): the site's
// when pool is "", else that pool's own, which replaces the site's for its PCs. A pool's
// admins may set their pool's, a site admin any (authz: the pool's "printing" field).
func (e *Entities) PutPrinting(ctx context.Context, p authz.Principal, dryRun bool, pool string, pr *model.Printing) ([]model.Change, error) {
	return e.putSeat(ctx, p, dryRun, pool, func(site *model.Site) { site.Printing = pr.Clone() },
		func(pl *model.Pool) { pl.Printing = pr.Clone() })
}

// PutHomes sets the file server of the desktops' home directories (h; nil removes it,
// and homes are temporary again): the site's when pool is "", else that pool's own,
// which replaces the site's for its PCs. Only a site admin may set either, unlike
// printing: authz's pool "homes" field is not its pool admins' (the server gets the
// users' files and their cifs logins), so their writes are refused here, not only hidden
// by the UI.
func (e *Entities) PutHomes(ctx context.Context, p authz.Principal, dryRun bool, pool string, h *model.Homes) ([]model.Change, error) {
	return e.putSeat(ctx, p, dryRun, pool, func(site *model.Site) { site.Homes = h.Clone() },
		func(pl *model.Pool) { pl.Homes = h.Clone() })
}

// putSeat sets a seat field of the site (pool "") or of pool, a 404 for a pool the site
// does not have.
func (e *Entities) putSeat(ctx context.Context, p authz.Principal, dryRun bool, pool string, ofSite func(*model.Site), ofPool func(*model.Pool)) ([]model.Change, error) {
	return e.s.Update(ctx, p.Check, dryRun, func(site *model.Site) error {
		if pool == "" {
			ofSite(site)
			return nil
		}
		pl := site.Pool(pool)
		if pl == nil {
			return model.NotFound("pool", pool)
		}
		ofPool(pl)
		return nil
	})
}

// PutSettings sets the site's settings.
func (e *Entities) PutSettings(ctx context.Context, p authz.Principal, dryRun bool, in Settings) ([]model.Change, error) {
	return e.s.Update(ctx, p.Check, dryRun, func(site *model.Site) error {
		site.Name, site.Timezone, site.DefaultMode, site.UnknownMode = in.Name, in.Timezone, in.DefaultMode, in.UnknownMode
		return nil
	})
}
