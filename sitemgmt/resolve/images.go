package resolve

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Held is what boot servers reported holding verified: boot server name -> "IMAGE/VERSION"
// -> the sha256 of the root image as the boot server verified it. A boot server that is
// not in the map has never reported: it does not distribute images (they are placed on
// it by other means, e.g. it shares the site manager's store) and is not gated. One that
// is in the map (even with an empty set) is: its hosts are only given versions it holds.
type Held map[string]map[string]string

// holds says whether srv may hand out v of image: it is not gated, or reported v with the
// catalogue's sha256 (a version deleted and published again under the same name with other
// content does not count).
func (h Held) holds(srv *model.BootServer, image string, v *model.ImageVersion) bool {
	if srv == nil {
		return true
	}
	set, gated := h[srv.Name]
	if !gated {
		return true
	}
	return set[image+"/"+v.Version] == v.SHA256
}

// Gated reports whether srv's hosts are limited to what it reported.
func (h Held) Gated(server string) bool {
	_, ok := h[server]
	return ok
}

// pick is the one rule for which version of im a reference (pin "" = unpinned) gets on
// srv: the pinned version, else the image's current (else newest); if srv is gated and
// does not hold it verified, an unpinned reference falls back to the newest older
// version srv holds (the previous version keeps booting while the new one is on its way);
// a pinned one does not (the administrator chose that build). v is nil only when the
// catalogue has no such version; why is "" when v can be given out, else the reason it
// cannot (v is then the version that was wanted), and note says a fallback was taken.
func pick(im *model.Image, pin string, srv *model.BootServer, held Held) (v *model.ImageVersion, why, note string) {
	want := im.Version(pin)
	if want == nil || held.holds(srv, im.Name, want) {
		return want, "", ""
	}
	if pin == "" {
		var best *model.ImageVersion
		for i := range im.Versions {
			c := &im.Versions[i]
			if c.Created.Before(want.Created) && held.holds(srv, im.Name, c) && (best == nil || c.Created.After(best.Created)) {
				best = c
			}
		}
		if best != nil {
			return best, "", fmt.Sprintf("image %s %s is not yet verified on boot server %s: giving %s", im.Name, want.Version, srv.Name, best.Version)
		}
		return want, fmt.Sprintf("image %s %s is not yet verified on boot server %s (nor an older version)", im.Name, want.Version, srv.Name), ""
	}
	return want, fmt.Sprintf("image %s %s (pinned) is not yet verified on boot server %s", im.Name, want.Version, srv.Name), ""
}

// imageFor is the version mode m boots on srv (see pick); nil v when m boots no image.
func (r *Resolver) imageFor(m *model.Mode, srv *model.BootServer, held Held) (v *model.ImageVersion, why, note string) {
	if m == nil || m.Image == "" {
		return nil, "", ""
	}
	im := r.site.Image(m.Image)
	if im == nil {
		return nil, "", ""
	}
	return pick(im, m.ImageVersion, srv, held)
}

// Wanted lists the image versions boot server name should hold, each with the reason:
// for every image that a mode its hosts may be in boots, runs as a guest or starts as a
// course VM, the version that mode's pin names, the image's current version, and every
// version published after the current one (staged, so that `overtime image current`
// switches to a version that is already there). The modes its hosts may be in are those
// of its pools' and hosts' weekly rules, of exceptions targeting them, the site's default
// and unknown-host modes and the menu's local-disk and maintenance modes. Its hosts
// include those without a boot server of their own or their pool's: any boot server may
// be the instance that answers them (Query.BootServer).
func (r *Resolver) Wanted(name string) []wire.BootImage {
	site := r.site
	q := Query{BootServer: name}
	modes := map[string]string{} // mode -> first reason
	use := func(mode, why string) {
		if _, ok := modes[mode]; !ok && mode != "" {
			modes[mode] = why
		}
	}
	use(site.DefaultMode, "the site's default mode")
	use(site.UnknownMode, "the mode of unknown hosts")
	for _, m := range site.Modes {
		if m.Kind == model.KindLocalDisk || m.Kind == model.KindMaintenance {
			use(m.Name, "in every boot menu")
		}
	}
	pools := map[string]bool{}
	hosts := map[string]bool{}
	for i := range site.Hosts {
		h := &site.Hosts[i]
		if b, _ := r.BootServer(h, q); b == nil || b.Name != name {
			continue
		}
		hosts[h.Name] = true
		if !pools[h.Pool] {
			pools[h.Pool] = true
			if p := r.pool(h.Pool); p != nil {
				for _, rule := range p.Weekly {
					use(lastWord(rule), "pool "+p.Name+" rule")
				}
			}
		}
		for _, rule := range h.Weekly {
			use(lastWord(rule), "host "+h.Name+" rule")
		}
	}
	for _, e := range site.Exceptions {
		for _, t := range e.Targets {
			if pools[t.Pool] || hosts[t.Host] {
				use(e.Mode, "exception "+e.Name)
				break
			}
		}
	}
	out := map[string]wire.BootImage{}
	add := func(image, pin, why string) {
		im := site.Image(image)
		if im == nil {
			return
		}
		cur := im.Version("")
		for i := range im.Versions {
			v := &im.Versions[i]
			var reason string
			switch {
			case pin != "" && v.Version == pin:
				reason = why + " (pinned)"
			case pin != "":
				continue
			case v == cur:
				reason = why + " (current)"
			case cur != nil && v.Created.After(cur.Created):
				reason = why + " (staged: newer than current)"
			default:
				continue
			}
			k := image + "/" + v.Version
			if _, ok := out[k]; !ok {
				out[k] = wire.BootImage{Image: image, Version: v.Version, Path: v.Path, SHA256: v.SHA256, Size: v.Size, Reason: reason}
			}
		}
	}
	for name, why := range modes {
		m := site.Mode(name)
		if m == nil {
			continue
		}
		why = "mode " + m.Name + " (" + why + ")"
		add(m.Image, m.ImageVersion, why)
		if m.Guest != nil {
			add(m.Guest.Image, m.Guest.Version, why+" guest")
		}
		add(m.VM, "", why+" course VM")
	}
	list := make([]wire.BootImage, 0, len(out))
	for _, b := range out {
		list = append(list, b)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Key() < list[j].Key() })
	return list
}

func lastWord(rule string) string {
	f := strings.Fields(rule)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// Booted is a record of what a host was last given to boot (boot scripts) or run (agent
// configuration), "IMAGE/VERSION" keys, and when. A running PC keeps what it booted, so
// those versions must stay on its boot server until it boots something else.
type Booted struct {
	Host     string
	Versions []string
	At       time.Time
}

// Blockers says, for every version of every image ("IMAGE/VERSION"), what still
// references it; a version with no entry may be removed by `overtime image gc`. A version
// is kept when it is its image's current version or newer (staged), when a mode pins it
// (and so a rule, exception or the site that uses the mode), when any host resolves to it
// at q.At (scheduled mode, menu entries, guest; with q.Held, a fallback counts), or when
// a host was last given it (booted; a host deleted from the site no longer counts).
func (r *Resolver) Blockers(q Query, booted []Booted) map[string][]string {
	site := r.site
	out := map[string][]string{}
	block := func(image, version, why string) {
		k := image + "/" + version
		for _, x := range out[k] {
			if x == why {
				return
			}
		}
		out[k] = append(out[k], why)
	}
	for i := range site.Images {
		im := &site.Images[i]
		cur := im.Version("")
		for _, v := range im.Versions {
			switch {
			case v.Version == cur.Version && im.Current != "":
				block(im.Name, v.Version, "it is the current version")
			case v.Version == cur.Version:
				block(im.Name, v.Version, "it is the newest version (what unpinned modes boot)")
			case v.Created.After(cur.Created):
				block(im.Name, v.Version, "it is newer than the current version (staged)")
			}
		}
	}
	for _, m := range site.Modes {
		if m.Image != "" && m.ImageVersion != "" {
			block(m.Image, m.ImageVersion, "mode "+m.Name+" is pinned to it")
		}
		if m.Guest != nil && m.Guest.Version != "" {
			block(m.Guest.Image, m.Guest.Version, "mode "+m.Name+"'s guest is pinned to it")
		}
	}
	for i := range site.Hosts {
		h := &site.Hosts[i]
		a := r.For(h, q)
		if a.Image != nil && a.Mode != nil {
			block(a.Mode.Image, a.Image.Version, "host "+h.Name+" boots it now (mode "+a.Mode.Name+")")
		}
		for _, e := range a.Others {
			if e.Image != nil {
				block(e.Mode.Image, e.Image.Version, "host "+h.Name+"'s boot menu offers it (mode "+e.Mode.Name+")")
			}
		}
		if a.Guest != nil {
			block(a.Guest.Guest.Image, a.Guest.Resolved.Version, "host "+h.Name+" runs it as its guest now")
		}
	}
	for _, b := range booted {
		if site.Host(b.Host) == nil {
			continue
		}
		for _, k := range b.Versions {
			image, version, _ := strings.Cut(k, "/")
			block(image, version, fmt.Sprintf("host %s was given it at %s (a running PC keeps what it booted)", b.Host, b.At.UTC().Format(time.RFC3339)))
		}
	}
	return out
}
