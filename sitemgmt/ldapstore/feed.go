package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// The site's change feed: an RFC 4533 Content Synchronization search (refreshAndPersist)
// over everything Load reads (the same base, filter and attributes: not the runtime
// state under ou=state, not the audit trail, not the users), so that a replica learns of
// a write, its own or another's or an ldapmodify behind everyone's back, as it happens
// instead of at the next full reload.

// ErrFeedUnknown is returned by a change that cannot be applied to the site it is given
// (an entry of an unknown kind, an image version whose image the site does not have):
// the caller reads the whole site instead.
var ErrFeedUnknown = errors.New("ldapstore: change feed: change cannot be applied incrementally")

// WatchSite follows the site on a connection of its own. full is called once per
// connection with the whole site as Load would return it (the refresh phase, which
// without a cookie delivers every entry: it stands for a full reload, which is also what
// a reconnect amounts to) or the error decoding it. Then changed is called for every
// entry added, modified or deleted, with a description and a function that applies the
// change to a site (the caller's copy; lists stay sorted by name). Applying the same
// change twice gives the same site, so a replica's own write coming back is harmless.
// WatchSite returns when ctx ends (nil) or the connection fails (the error).
func (s *Store) WatchSite(ctx context.Context, full func(*model.Site, error), changed func(what string, apply func(*model.Site) error)) error {
	req := ldap.NewSearchRequest(s.dn.site, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false,
		loadFilter, loadAttrs, nil)
	// The refresh phase is decoded as it arrives (not collected first as Load does), so
	// that a replica does not hold every entry's LDAP form beside two sites.
	refreshing := true
	site, haveSite, versions, refreshErr := &model.Site{}, false, []version(nil), error(nil)
	return s.persist(ctx, req, 256, "site watch", func(e *ldap.Entry, deleted bool) {
		switch {
		case e == nil:
			refreshing = false
			if refreshErr != nil {
				full(nil, refreshErr)
			} else {
				full(finish(site, haveSite, versions))
			}
			site, versions = nil, nil
		case refreshing:
			if !deleted && refreshErr == nil {
				isSite, err := s.decodeEntry(site, &versions, e)
				haveSite = haveSite || isSite
				refreshErr = err
			}
		case deleted:
			kind, name, ok := s.dn.entityOf(e.DN)
			if !ok {
				return // a container or something the site model does not read
			}
			changed("delete "+kind+" "+name, func(site *model.Site) error { return deleteEntity(site, kind, name) })
		default:
			frag, versions := &model.Site{}, []version(nil)
			isSite, err := s.decodeEntry(frag, &versions, e)
			if err != nil {
				// Applying it fails, so the caller falls back to reading everything (which
				// reports the entry in the same words).
				changed("undecodable "+e.DN, func(*model.Site) error { return err })
				return
			}
			if what, apply := patchOf(frag, isSite, versions); apply != nil {
				changed(what, apply)
			}
		}
	})
}

// patchOf turns one decoded entry (frag holds it) into a description and the function
// that puts it into a site; apply is nil for an entry of no kind the model has.
func patchOf(frag *model.Site, isSite bool, versions []version) (what string, apply func(*model.Site) error) {
	switch {
	case isSite:
		return model.EntitySite, func(site *model.Site) error {
			site.Name, site.Timezone, site.DefaultMode, site.UnknownMode = frag.Name, frag.Timezone, frag.DefaultMode, frag.UnknownMode
			return nil
		}
	case len(frag.Hosts) == 1:
		h := frag.Hosts[0]
		return model.EntityHost + " " + h.Name, func(site *model.Site) error {
			site.Hosts = upsert(site.Hosts, h, func(x *model.Host) string { return x.Name })
			return nil
		}
	case len(frag.Pools) == 1:
		p := frag.Pools[0]
		return model.EntityPool + " " + p.Name, func(site *model.Site) error {
			site.Pools = upsert(site.Pools, p, func(x *model.Pool) string { return x.Name })
			return nil
		}
	case len(frag.BootServers) == 1:
		b := frag.BootServers[0]
		return model.EntityBootServer + " " + b.Name, func(site *model.Site) error {
			site.BootServers = upsert(site.BootServers, b, func(x *model.BootServer) string { return x.Name })
			return nil
		}
	case len(frag.Modes) == 1:
		m := frag.Modes[0]
		return model.EntityMode + " " + m.Name, func(site *model.Site) error {
			site.Modes = upsert(site.Modes, m, func(x *model.Mode) string { return x.Name })
			return nil
		}
	case len(frag.Images) == 1:
		im := frag.Images[0]
		return model.EntityImage + " " + im.Name, func(site *model.Site) error {
			// The versions are entries of their own, below the image's.
			if old := site.Image(im.Name); old != nil {
				im.Versions = old.Versions
			}
			site.Images = upsert(site.Images, im, func(x *model.Image) string { return x.Name })
			return nil
		}
	case len(versions) == 1:
		v := versions[0]
		return model.EntityImageVersion + " " + model.ImageVersionName(v.image, v.v.Version), func(site *model.Site) error {
			im := site.Image(v.image)
			if im == nil {
				return fmt.Errorf("%w: version %s of unknown image %s", ErrFeedUnknown, v.v.Version, v.image)
			}
			i := slices.IndexFunc(im.Versions, func(x model.ImageVersion) bool { return x.Version == v.v.Version })
			if i >= 0 {
				im.Versions[i] = v.v
			} else {
				im.Versions = append(im.Versions, v.v)
				slices.SortStableFunc(im.Versions, func(a, b model.ImageVersion) int { return a.Created.Compare(b.Created) })
			}
			return nil
		}
	case len(frag.Exceptions) == 1:
		x := frag.Exceptions[0]
		return model.EntityException + " " + x.Name, func(site *model.Site) error {
			site.Exceptions = upsert(site.Exceptions, x, func(x *model.Exception) string { return x.Name })
			return nil
		}
	case len(frag.Roles) == 1:
		r := frag.Roles[0]
		return model.EntityRole + " " + r.Name, func(site *model.Site) error {
			site.Roles = upsert(site.Roles, r, func(x *model.RoleGrant) string { return x.Name })
			return nil
		}
	}
	return "", nil
}

// deleteEntity removes an entity from site; one that is not there is no error (a
// replica's own deletion coming back).
func deleteEntity(site *model.Site, kind, name string) error {
	switch kind {
	case model.EntityHost:
		site.Hosts = remove(site.Hosts, name, func(x *model.Host) string { return x.Name })
	case model.EntityPool:
		site.Pools = remove(site.Pools, name, func(x *model.Pool) string { return x.Name })
	case model.EntityBootServer:
		site.BootServers = remove(site.BootServers, name, func(x *model.BootServer) string { return x.Name })
	case model.EntityMode:
		site.Modes = remove(site.Modes, name, func(x *model.Mode) string { return x.Name })
	case model.EntityImage:
		site.Images = remove(site.Images, name, func(x *model.Image) string { return x.Name })
	case model.EntityImageVersion:
		image, v := model.SplitImageVersionName(name)
		if im := site.Image(image); im != nil {
			im.Versions = slices.DeleteFunc(im.Versions, func(x model.ImageVersion) bool { return x.Version == v })
			if len(im.Versions) == 0 {
				im.Versions = nil
			}
		}
	case model.EntityException:
		site.Exceptions = remove(site.Exceptions, name, func(x *model.Exception) string { return x.Name })
	case model.EntityRole:
		site.Roles = remove(site.Roles, name, func(x *model.RoleGrant) string { return x.Name })
	default:
		// The site entry itself: the directory is being taken apart.
		return fmt.Errorf("%w: deletion of the %s entry", ErrFeedUnknown, kind)
	}
	return nil
}

// find is the position of name in list (sorted by name, see model.Site.Sort).
func find[T any](list []T, n string, name func(*T) string) (int, bool) {
	return slices.BinarySearchFunc(list, n, func(x T, n string) int { return strings.Compare(name(&x), n) })
}

// upsert replaces the element named like x or inserts x in name order.
func upsert[T any](list []T, x T, name func(*T) string) []T {
	i, ok := find(list, name(&x), name)
	if ok {
		list[i] = x
		return list
	}
	return slices.Insert(list, i, x)
}

// remove deletes the element named n, if there is one; an emptied list becomes nil (as
// model.Site.Sort makes it).
func remove[T any](list []T, n string, name func(*T) string) []T {
	i, ok := find(list, n, name)
	if !ok {
		return list
	}
	list = slices.Delete(list, i, i+1)
	if len(list) == 0 {
		return nil
	}
	return list
}

// entityOf is the entity an entry of the site's DIT stands for, from its DN alone (what a
// deletion brings): kind (model.Entity*) and name; ok is false for anything else (the
// containers, users, runtime state).
func (l layout) entityOf(dn string) (kind, name string, ok bool) {
	d, err := ldap.ParseDN(dn)
	if err != nil || len(d.RDNs) < 2 || len(d.RDNs[0].Attributes) != 1 {
		return "", "", false
	}
	first := d.RDNs[0].Attributes[0]
	parent := &ldap.DN{RDNs: d.RDNs[1:]}
	under := func(container string) bool {
		c, err := ldap.ParseDN(container)
		return err == nil && parent.EqualFold(c)
	}
	if strings.EqualFold(first.Type, aVersion) && len(d.RDNs) >= 3 && len(d.RDNs[1].Attributes) == 1 {
		grand := &ldap.DN{RDNs: d.RDNs[2:]}
		if c, err := ldap.ParseDN(l.images); err == nil && grand.EqualFold(c) {
			return model.EntityImageVersion, model.ImageVersionName(d.RDNs[1].Attributes[0].Value, first.Value), true
		}
		return "", "", false
	}
	if !strings.EqualFold(first.Type, aCN) {
		return "", "", false
	}
	for _, k := range []struct{ kind, container string }{
		{model.EntityHost, l.hosts}, {model.EntityPool, l.pools}, {model.EntityBootServer, l.bootServers},
		{model.EntityMode, l.modes}, {model.EntityImage, l.images}, {model.EntityException, l.exceptions},
		{model.EntityRole, l.roles},
	} {
		if under(k.container) {
			return k.kind, first.Value, true
		}
	}
	return "", "", false
}
