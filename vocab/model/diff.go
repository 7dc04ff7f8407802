package model

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

// Op is what a Change does to one entity.
type Op string

const (
	OpAdd    Op = "add"
	OpModify Op = "modify"
	OpDelete Op = "delete"
)

// Entity kinds named in Change.Kind.
const (
	EntitySite         = "site"
	EntityPool         = "pool"
	EntityHost         = "host"
	EntityBootServer   = "bootserver"
	EntityMode         = "mode"
	EntityImage        = "image"
	EntityImageVersion = "image-version"
	EntityException    = "exception"
	EntityRole         = "role"
)

// Change is one entity-level difference between two sites. For image versions Name is
// "IMAGE/VERSION" (neither part can contain '/'). For modifies Fields lists the changed
// fields by their JSON names, in struct order.
type Change struct {
	Op     Op       `json:"op"`
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
	Fields []string `json:"fields,omitempty"`
}

// String renders a change for humans: "+ host pc009", "~ pool lab-a (room, weekly)",
// "- exception exam-1".
func (c Change) String() string {
	sign := map[Op]string{OpAdd: "+", OpModify: "~", OpDelete: "-"}[c.Op]
	if sign == "" {
		sign = "?"
	}
	s := sign + " " + c.Kind + " " + c.Name
	if len(c.Fields) > 0 {
		s += " (" + strings.Join(c.Fields, ", ") + ")"
	}
	return s
}

// ImageVersionName is the Change.Name of an image version.
func ImageVersionName(image, version string) string { return image + "/" + version }

// SplitImageVersionName undoes ImageVersionName.
func SplitImageVersionName(name string) (image, version string) {
	image, version, _ = strings.Cut(name, "/")
	return image, version
}

// Diff lists what turns cur into next, entity by entity, in an order that is safe to
// apply one change at a time: if applying stops after any change, every reference in the
// written state points to an entity that exists. Both sites are assumed valid (Validate);
// a nil site is an empty one. Diff is pure.
//
// Order: first adds and modifies in dependency order — site fields that reference nothing
// new, boot servers, images, image versions, modes, site fields that reference new modes,
// pools, hosts, exceptions, roles — then deletes in reverse dependency order — roles,
// exceptions, hosts, pools, modes, image versions, images, boot servers. Within a step,
// changes are in name order, except hosts (below).
//
// Hosts also have unique MACs and IPs, which a straight adds-then-deletes order would
// duplicate for a moment when an address moves from one host to another (a PC renamed:
// delete pc1, add pc1a with the same MAC). So, within the host step: a deleted host whose
// MAC or IP is taken over, and that no exception of cur names (nothing can reference it
// then), is deleted first; and a host that takes over an address another host gives up
// by a modify comes after that modify. What cannot be ordered away (two hosts swapping
// addresses, or a released host still named by an exception) is left in name order, and
// CheckAddressOrder reports it: writers (ldapstore) refuse such a change before writing
// anything, and a dry run can say so too.
//
// Image.Pool is not a checked reference (Validate does not check it), so it does not
// take part in the ordering.
func Diff(cur, next *Site) []Change {
	if cur == nil {
		cur = &Site{}
	}
	if next == nil {
		next = &Site{}
	}
	var out []Change
	emit := func(cs []Change) { out = append(out, cs...) }

	// Site fields. The site entry is never added or deleted (ldapstore Init creates it).
	curModes := byName(cur.Modes, func(m *Mode) string { return m.Name })
	var early, late []string
	if cur.Name != next.Name {
		early = append(early, "name")
	}
	if cur.Timezone != next.Timezone {
		early = append(early, "timezone")
	}
	if !SameDesktopLogin(cur.DesktopLogin, next.DesktopLogin) {
		early = append(early, "desktopLogin")
	}
	if !SamePrinting(cur.Printing, next.Printing) {
		early = append(early, "printing")
	}
	if !SameHomes(cur.Homes, next.Homes) {
		early = append(early, "homes")
	}
	for _, f := range []struct {
		name     string
		old, new string
	}{{"defaultMode", cur.DefaultMode, next.DefaultMode}, {"unknownMode", cur.UnknownMode, next.UnknownMode}} {
		if f.old == f.new {
			continue
		}
		if _, exists := curModes[f.new]; f.new == "" || exists {
			early = append(early, f.name)
		} else {
			late = append(late, f.name)
		}
	}
	if len(early) > 0 {
		emit([]Change{{Op: OpModify, Kind: EntitySite, Name: next.Name, Fields: early}})
	}

	bsAdd, bsDel := diffList(EntityBootServer, cur.BootServers, next.BootServers, func(b *BootServer) string { return b.Name }, bootServerFields)
	emit(bsAdd)
	imAdd, imDel := diffList(EntityImage, cur.Images, next.Images, func(im *Image) string { return im.Name }, imageFields)
	emit(imAdd)
	ivAdd, ivDel := diffVersions(cur, next)
	emit(ivAdd)
	modeAdd, modeDel := diffList(EntityMode, cur.Modes, next.Modes, func(m *Mode) string { return m.Name }, modeFields)
	emit(modeAdd)
	if len(late) > 0 {
		emit([]Change{{Op: OpModify, Kind: EntitySite, Name: next.Name, Fields: late}})
	}
	poolAdd, poolDel := diffList(EntityPool, cur.Pools, next.Pools, func(p *Pool) string { return p.Name }, poolFields)
	emit(poolAdd)
	hostAdd, hostDel := diffHosts(cur, next)
	emit(hostAdd)
	excAdd, excDel := diffList(EntityException, cur.Exceptions, next.Exceptions, func(e *Exception) string { return e.Name }, exceptionFields)
	emit(excAdd)
	roleAdd, roleDel := diffList(EntityRole, cur.Roles, next.Roles, func(r *RoleGrant) string { return r.Name }, roleFields)
	emit(roleAdd)

	emit(roleDel)
	emit(excDel)
	emit(hostDel)
	emit(poolDel)
	emit(modeDel)
	emit(ivDel)
	emit(imDel)
	emit(bsDel)
	return out
}

func byName[T any](list []T, name func(*T) string) map[string]*T {
	m := make(map[string]*T, len(list))
	for i := range list {
		m[name(&list[i])] = &list[i]
	}
	return m
}

// diffList compares two lists of named entities: adds and modifies, then deletes, each in
// name order.
func diffList[T any](kind string, cur, next []T, name func(*T) string, fields func(a, b *T) []string) (addMod, del []Change) {
	if strictlySorted(cur, name) && strictlySorted(next, name) {
		// The usual case (both sorted by Site.Sort): one merge walk, no maps; at 100,000
		// hosts the maps and key sorts were most of a write's time (issue 18).
		i, j := 0, 0
		for i < len(cur) || j < len(next) {
			switch {
			case j == len(next) || (i < len(cur) && name(&cur[i]) < name(&next[j])):
				del = append(del, Change{Op: OpDelete, Kind: kind, Name: name(&cur[i])})
				i++
			case i == len(cur) || name(&next[j]) < name(&cur[i]):
				addMod = append(addMod, Change{Op: OpAdd, Kind: kind, Name: name(&next[j])})
				j++
			default:
				if f := fields(&cur[i], &next[j]); len(f) > 0 {
					addMod = append(addMod, Change{Op: OpModify, Kind: kind, Name: name(&next[j]), Fields: f})
				}
				i++
				j++
			}
		}
		return addMod, del
	}
	curBy := byName(cur, name)
	nextBy := byName(next, name)
	for _, n := range sortedKeys(nextBy) {
		c, ok := curBy[n]
		if !ok {
			addMod = append(addMod, Change{Op: OpAdd, Kind: kind, Name: n})
		} else if f := fields(c, nextBy[n]); len(f) > 0 {
			addMod = append(addMod, Change{Op: OpModify, Kind: kind, Name: n, Fields: f})
		}
	}
	for _, n := range sortedKeys(curBy) {
		if _, ok := nextBy[n]; !ok {
			del = append(del, Change{Op: OpDelete, Kind: kind, Name: n})
		}
	}
	return addMod, del
}

// strictlySorted: names in increasing order, none twice.
func strictlySorted[T any](list []T, name func(*T) string) bool {
	for i := 1; i < len(list); i++ {
		if name(&list[i-1]) >= name(&list[i]) {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diffVersions compares the versions of all images. A version present in both with
// different content is reported as a modify; versions are immutable, so writers refuse it.
func diffVersions(cur, next *Site) (addMod, del []Change) {
	index := func(s *Site) map[string]*ImageVersion {
		m := map[string]*ImageVersion{}
		for i := range s.Images {
			for j := range s.Images[i].Versions {
				v := &s.Images[i].Versions[j]
				m[ImageVersionName(s.Images[i].Name, v.Version)] = v
			}
		}
		return m
	}
	curBy, nextBy := index(cur), index(next)
	for _, n := range sortedKeys(nextBy) {
		c, ok := curBy[n]
		if !ok {
			addMod = append(addMod, Change{Op: OpAdd, Kind: EntityImageVersion, Name: n})
		} else if f := versionFields(c, nextBy[n]); len(f) > 0 {
			addMod = append(addMod, Change{Op: OpModify, Kind: EntityImageVersion, Name: n, Fields: f})
		}
	}
	for _, n := range sortedKeys(curBy) {
		if _, ok := nextBy[n]; !ok {
			del = append(del, Change{Op: OpDelete, Kind: EntityImageVersion, Name: n})
		}
	}
	return addMod, del
}

// diffHosts is diffList for hosts plus the ordering for unique MACs and IPs described at
// Diff.
func diffHosts(cur, next *Site) (addMod, del []Change) {
	name := func(h *Host) string { return h.Name }
	addMod, del = diffList(EntityHost, cur.Hosts, next.Hosts, name, hostFields)
	if len(addMod) == 0 && len(del) == 0 {
		return nil, nil
	}
	curBy := HostFinder(cur.Hosts)
	nextBy := HostFinder(next.Hosts)

	// Addresses claimed in next, and who holds them now: only needed when a host goes
	// away or an address moves (at 100,000 hosts these maps cost more than the rest).
	var claimedMAC, claimedIP map[string]string
	if len(del) > 0 {
		claimedMAC, claimedIP = make(map[string]string, len(next.Hosts)), make(map[string]string, len(next.Hosts))
		for _, h := range next.Hosts {
			claimedMAC[h.MAC] = h.Name
			if h.IP != "" {
				claimedIP[h.IP] = h.Name
			}
		}
	}
	moves := false
	for _, c := range addMod {
		h, old := nextBy(c.Name), curBy(c.Name)
		if old == nil || old.MAC != h.MAC || (h.IP != "" && old.IP != h.IP) {
			moves = true
			break
		}
	}
	var holderMAC, holderIP map[string]string
	if moves {
		holderMAC, holderIP = make(map[string]string, len(cur.Hosts)), make(map[string]string, len(cur.Hosts))
		for _, h := range cur.Hosts {
			holderMAC[h.MAC] = h.Name
			if h.IP != "" {
				holderIP[h.IP] = h.Name
			}
		}
	}
	named := map[string]bool{} // hosts an exception of cur targets
	for _, e := range cur.Exceptions {
		for _, t := range e.Targets {
			if t.Host != "" {
				named[t.Host] = true
			}
		}
	}

	// Released hosts go first.
	var release, rest []Change
	for _, c := range del {
		h := curBy(c.Name)
		_, macTaken := claimedMAC[h.MAC]
		_, ipTaken := claimedIP[h.IP]
		if (macTaken || (h.IP != "" && ipTaken)) && !named[h.Name] {
			release = append(release, c)
		} else {
			rest = append(rest, c)
		}
	}

	// Adds and modifies: a host that claims an address held by another host that is
	// modified (and so gives it up) comes after that host. Depth-first in name order
	// gives a deterministic topological order; a cycle (a swap) is cut where found.
	changed := map[string]int{}
	for i, c := range addMod {
		changed[c.Name] = i
	}
	deps := func(c Change) []string {
		h := nextBy(c.Name)
		old := curBy(c.Name) // nil for adds
		var d []string
		if old == nil || old.MAC != h.MAC {
			if holder, ok := holderMAC[h.MAC]; ok && holder != h.Name {
				d = append(d, holder)
			}
		}
		if h.IP != "" && (old == nil || old.IP != h.IP) {
			if holder, ok := holderIP[h.IP]; ok && holder != h.Name {
				d = append(d, holder)
			}
		}
		return d
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]int, len(addMod))
	ordered := make([]Change, 0, len(addMod))
	var visit func(i int)
	visit = func(i int) {
		if state[i] != unvisited {
			return
		}
		state[i] = visiting
		for _, holder := range deps(addMod[i]) {
			if j, ok := changed[holder]; ok && state[j] == unvisited {
				visit(j)
			}
		}
		state[i] = done
		ordered = append(ordered, addMod[i])
	}
	for i := range addMod {
		visit(i)
	}
	return append(release, ordered...), rest
}

// HostFinder looks hosts up by name: by binary search in a list sorted by Site.Sort
// (no index to build), else through a map.
func HostFinder(hosts []Host) func(name string) *Host {
	if strictlySorted(hosts, func(h *Host) string { return h.Name }) {
		return func(name string) *Host {
			i, ok := sort.Find(len(hosts), func(i int) int { return strings.Compare(name, hosts[i].Name) })
			if !ok {
				return nil
			}
			return &hosts[i]
		}
	}
	m := byName(hosts, func(h *Host) string { return h.Name })
	return func(name string) *Host { return m[name] }
}

// Field comparisons. Each returns the JSON names of the fields that differ, in struct order.

type fieldCmp struct {
	name string
	same bool
}

func changedFields(cmps ...fieldCmp) []string {
	var out []string
	for _, c := range cmps {
		if !c.same {
			out = append(out, c.name)
		}
	}
	return out
}

func poolFields(a, b *Pool) []string {
	return changedFields(
		fieldCmp{"description", a.Description == b.Description},
		fieldCmp{"room", a.Room == b.Room},
		fieldCmp{"bootServer", a.BootServer == b.BootServer},
		fieldCmp{"weekly", sameRules(a.Weekly, b.Weekly, a.RuleOwners, b.RuleOwners)},
		fieldCmp{"policy", SamePolicy(a.Policy, b.Policy)},
		fieldCmp{"desktopLogin", SameDesktopLogin(a.DesktopLogin, b.DesktopLogin)},
		fieldCmp{"printing", SamePrinting(a.Printing, b.Printing)},
		fieldCmp{"homes", SameHomes(a.Homes, b.Homes)},
	)
}

func hostFields(a, b *Host) []string {
	return changedFields(
		fieldCmp{"mac", a.MAC == b.MAC},
		fieldCmp{"ip", a.IP == b.IP},
		fieldCmp{"pool", a.Pool == b.Pool},
		fieldCmp{"bootServer", a.BootServer == b.BootServer},
		fieldCmp{"weekly", sameRules(a.Weekly, b.Weekly, a.RuleOwners, b.RuleOwners)},
	)
}

func bootServerFields(a, b *BootServer) []string {
	return changedFields(
		fieldCmp{"ip", a.IP == b.IP},
		fieldCmp{"httpURL", a.HTTPURL == b.HTTPURL},
		fieldCmp{"nfsServer", a.NFSServer == b.NFSServer},
		fieldCmp{"nfsRoot", a.NFSRoot == b.NFSRoot},
		fieldCmp{"dhcp", a.DHCP == b.DHCP},
		fieldCmp{"interface", a.Interface == b.Interface},
		fieldCmp{"subnet", a.Subnet == b.Subnet},
		fieldCmp{"rangeFrom", a.RangeFrom == b.RangeFrom},
		fieldCmp{"rangeTo", a.RangeTo == b.RangeTo},
		fieldCmp{"router", a.Router == b.Router},
		fieldCmp{"dnsServers", slices.Equal(a.DNSServers, b.DNSServers)},
		fieldCmp{"domain", a.Domain == b.Domain},
	)
}

func modeFields(a, b *Mode) []string {
	return changedFields(
		fieldCmp{"kind", a.Kind == b.Kind},
		fieldCmp{"description", a.Description == b.Description},
		fieldCmp{"image", a.Image == b.Image},
		fieldCmp{"imageVersion", a.ImageVersion == b.ImageVersion},
		fieldCmp{"vm", a.VM == b.VM},
		fieldCmp{"kernel", a.Kernel == b.Kernel},
		fieldCmp{"initrd", a.Initrd == b.Initrd},
		fieldCmp{"kernelArgs", a.KernelArgs == b.KernelArgs},
		fieldCmp{"guest", SameGuest(a.Guest, b.Guest)},
	)
}

// imageFields compares an image's own fields; its versions are separate changes.
func imageFields(a, b *Image) []string {
	return changedFields(
		fieldCmp{"kind", a.Kind == b.Kind},
		fieldCmp{"description", a.Description == b.Description},
		fieldCmp{"pool", a.Pool == b.Pool},
		fieldCmp{"current", a.Current == b.Current},
	)
}

func versionFields(a, b *ImageVersion) []string {
	return changedFields(
		fieldCmp{"sha256", a.SHA256 == b.SHA256},
		fieldCmp{"size", a.Size == b.Size},
		fieldCmp{"path", a.Path == b.Path},
		fieldCmp{"created", a.Created.Equal(b.Created)},
	)
}

// exceptionFields compares targets and the allow list as sets: a store may not keep their
// order (LDAP keeps pool and host targets in two attributes, and values of one attribute
// unordered), and the order means nothing.
func exceptionFields(a, b *Exception) []string {
	return changedFields(
		fieldCmp{"kind", a.Kind == b.Kind},
		fieldCmp{"description", a.Description == b.Description},
		fieldCmp{"start", a.Start.Equal(b.Start)},
		fieldCmp{"end", a.End.Equal(b.End)},
		fieldCmp{"mode", a.Mode == b.Mode},
		fieldCmp{"targets", sameTargets(a.Targets, b.Targets)},
		fieldCmp{"allow", sameSet(a.Allow, b.Allow)},
		fieldCmp{"owner", a.Owner == b.Owner},
	)
}

// sameRules compares weekly rules and who owns them: the store keeps both in the rule
// attributes (ldapstore), so a change of owner is a change of the "weekly" field.
func sameRules(a, b []string, ao, bo RuleOwners) bool {
	return slices.Equal(a, b) && maps.Equal(ao, bo)
}

func sameTargets(a, b []Target) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(ts []Target) []string {
		k := make([]string, len(ts))
		for i, t := range ts {
			k[i] = t.Pool + "\x00" + t.Host
		}
		sort.Strings(k)
		return k
	}
	return slices.Equal(key(a), key(b))
}

// sameSet compares two lists of distinct strings regardless of order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func roleFields(a, b *RoleGrant) []string {
	return changedFields(
		fieldCmp{"role", a.Role == b.Role},
		fieldCmp{"pool", a.Pool == b.Pool},
		fieldCmp{"bootServer", a.BootServer == b.BootServer},
		fieldCmp{"members", slices.Equal(a.Members, b.Members)},
	)
}

// CheckAddressOrder replays the host changes of Diff(cur, next) in order and reports a
// Conflict if a host would take a MAC or IP that another host still has at that point.
// Diff orders address moves so that this does not happen where it can; what is left —
// two hosts swapping addresses, or a host taking over the address of a host that an
// exception still names — has to be done in two steps (e.g. first retarget or delete the
// exception). Applying it anyway would duplicate the address for a moment (and keep the
// duplicate if the write stopped there), or fail half way on a directory that enforces
// uniqueness.
func CheckAddressOrder(cur, next *Site, changes []Change) error {
	if cur == nil {
		cur = &Site{}
	}
	if next == nil {
		next = &Site{}
	}
	// A change that moves no address (the usual field or rule edit) cannot conflict:
	// answered without indexing every host's addresses.
	curFind, nextFind := HostFinder(cur.Hosts), HostFinder(next.Hosts)
	moves := false
	for _, c := range changes {
		if c.Kind != EntityHost {
			continue
		}
		old, h := curFind(c.Name), nextFind(c.Name)
		if c.Op != OpModify || old == nil || h == nil || old.MAC != h.MAC || old.IP != h.IP {
			moves = true
			break
		}
	}
	if !moves {
		return nil
	}
	name := func(h *Host) string { return h.Name }
	curBy, nextBy := byName(cur.Hosts, name), byName(next.Hosts, name)
	mac, ip := map[string]string{}, map[string]string{}
	for _, h := range cur.Hosts {
		mac[h.MAC] = h.Name
		if h.IP != "" {
			ip[h.IP] = h.Name
		}
	}
	release := func(m map[string]string, v, name string) {
		if v != "" && m[v] == name {
			delete(m, v)
		}
	}
	claim := func(m map[string]string, what, v, name string) error {
		if v == "" {
			return nil
		}
		if other, ok := m[v]; ok && other != name {
			return conflict("host %s cannot take %s %s in the same change that removes it from host %s (a swap of addresses, or the address of a host an exception still names): change it in two steps", name, what, v, other)
		}
		m[v] = name
		return nil
	}
	for _, c := range changes {
		if c.Kind != EntityHost {
			continue
		}
		if old := curBy[c.Name]; old != nil && c.Op != OpAdd {
			release(mac, old.MAC, c.Name)
			release(ip, old.IP, c.Name)
		}
		if h := nextBy[c.Name]; h != nil && c.Op != OpDelete {
			if err := claim(mac, "MAC", h.MAC, c.Name); err != nil {
				return err
			}
			if err := claim(ip, "IP", h.IP, c.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
