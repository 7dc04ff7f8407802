package model

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// --- a small simulator of a store that applies one Change at a time ---------------------

// simApply applies c to state the way a store does: adds copy the entity from next
// (images without their versions, which are changes of their own), modifies copy only the
// fields the change names, deletes remove. Errors are what a directory would refuse.
func simApply(state, cur, next *Site, c Change) error {
	switch c.Kind {
	case EntitySite:
		copyFields(reflect.ValueOf(state).Elem(), reflect.ValueOf(next).Elem(), c.Fields)
		return nil
	case EntityImageVersion:
		img, ver := SplitImageVersionName(c.Name)
		im := state.Image(img)
		if im == nil {
			return fmt.Errorf("%v: image %s does not exist", c, img)
		}
		i := slices.IndexFunc(im.Versions, func(v ImageVersion) bool { return v.Version == ver })
		switch c.Op {
		case OpAdd:
			if i >= 0 {
				return fmt.Errorf("%v: exists", c)
			}
			im.Versions = append(im.Versions, *next.Image(img).Version(ver))
		case OpModify:
			copyFields(reflect.ValueOf(&im.Versions[i]).Elem(), reflect.ValueOf(next.Image(img).Version(ver)).Elem(), c.Fields)
		case OpDelete:
			if i < 0 {
				return fmt.Errorf("%v: missing", c)
			}
			im.Versions = slices.Delete(im.Versions, i, i+1)
		}
		return nil
	}
	field := map[string]string{EntityPool: "Pools", EntityHost: "Hosts", EntityBootServer: "BootServers",
		EntityMode: "Modes", EntityImage: "Images", EntityException: "Exceptions", EntityRole: "Roles"}[c.Kind]
	if field == "" {
		return fmt.Errorf("unknown kind in %v", c)
	}
	list := reflect.ValueOf(state).Elem().FieldByName(field)
	find := func(v reflect.Value) int {
		for i := 0; i < v.Len(); i++ {
			if v.Index(i).FieldByName("Name").String() == c.Name {
				return i
			}
		}
		return -1
	}
	i := find(list)
	src := reflect.ValueOf(next).Elem().FieldByName(field)
	switch c.Op {
	case OpAdd:
		if i >= 0 {
			return fmt.Errorf("%v: exists", c)
		}
		e := reflect.New(list.Type().Elem()).Elem()
		e.Set(src.Index(find(src)))
		if c.Kind == EntityImage {
			e.FieldByName("Versions").Set(reflect.Zero(e.FieldByName("Versions").Type()))
		}
		list.Set(reflect.Append(list, e))
	case OpModify:
		if i < 0 {
			return fmt.Errorf("%v: missing", c)
		}
		copyFields(list.Index(i), src.Index(find(src)), c.Fields)
	case OpDelete:
		if i < 0 {
			return fmt.Errorf("%v: missing", c)
		}
		if c.Kind == EntityImage && len(state.Images[i].Versions) > 0 {
			return fmt.Errorf("%v: image still has versions (not a leaf)", c)
		}
		list.Set(reflect.AppendSlice(list.Slice(0, i), list.Slice(i+1, list.Len())))
	}
	return nil
}

// copyFields copies the struct fields whose JSON names are listed.
func copyFields(dst, src reflect.Value, names []string) {
	for i := 0; i < dst.NumField(); i++ {
		tag, _, _ := strings.Cut(dst.Type().Field(i).Tag.Get("json"), ",")
		if slices.Contains(names, tag) {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

// refsOK checks that every reference in a (possibly half-written) site points to an
// existing entity; with unique it also checks that MACs and IPs are unique.
func refsOK(s *Site, unique bool) error {
	mode := func(what, m string) error {
		if m != "" && s.Mode(m) == nil {
			return fmt.Errorf("%s references missing mode %q", what, m)
		}
		return nil
	}
	weekly := func(what string, rules []string) error {
		for _, r := range rules {
			f := strings.Fields(r)
			if err := mode(what+" weekly rule", f[len(f)-1]); err != nil {
				return err
			}
		}
		return nil
	}
	bs := func(what, b string) error {
		if b != "" && s.BootServer(b) == nil {
			return fmt.Errorf("%s references missing boot server %q", what, b)
		}
		return nil
	}
	pool := func(what, p string) error {
		if p != "" && s.Pool(p) == nil {
			return fmt.Errorf("%s references missing pool %q", what, p)
		}
		return nil
	}
	var errs []error
	errs = append(errs, mode("site default", s.DefaultMode), mode("site unknown", s.UnknownMode))
	for _, m := range s.Modes {
		if m.VM != "" && s.Image(m.VM) == nil {
			errs = append(errs, fmt.Errorf("mode %s references missing VM image %q", m.Name, m.VM))
		}
		if g := m.Guest; g != nil {
			if im := s.Image(g.Image); im == nil {
				errs = append(errs, fmt.Errorf("mode %s references missing guest image %q", m.Name, g.Image))
			} else if g.Version != "" && im.Version(g.Version) == nil {
				errs = append(errs, fmt.Errorf("mode %s references missing guest version %s/%s", m.Name, g.Image, g.Version))
			}
		}
		if m.Image == "" {
			continue
		}
		im := s.Image(m.Image)
		if im == nil {
			errs = append(errs, fmt.Errorf("mode %s references missing image %q", m.Name, m.Image))
		} else if m.ImageVersion != "" && im.Version(m.ImageVersion) == nil {
			errs = append(errs, fmt.Errorf("mode %s references missing version %s/%s", m.Name, m.Image, m.ImageVersion))
		}
	}
	for _, p := range s.Pools {
		errs = append(errs, bs("pool "+p.Name, p.BootServer), weekly("pool "+p.Name, p.Weekly))
	}
	macs, ips := map[string]bool{}, map[string]bool{}
	for _, h := range s.Hosts {
		if h.Pool == "" {
			errs = append(errs, fmt.Errorf("host %s has no pool", h.Name))
		}
		errs = append(errs, pool("host "+h.Name, h.Pool), bs("host "+h.Name, h.BootServer), weekly("host "+h.Name, h.Weekly))
		if unique && macs[h.MAC] {
			errs = append(errs, fmt.Errorf("duplicate MAC %s", h.MAC))
		}
		if unique && h.IP != "" && ips[h.IP] {
			errs = append(errs, fmt.Errorf("duplicate IP %s", h.IP))
		}
		macs[h.MAC], ips[h.IP] = true, true
	}
	for _, e := range s.Exceptions {
		errs = append(errs, mode("exception "+e.Name, e.Mode))
		for _, t := range e.Targets {
			errs = append(errs, pool("exception "+e.Name, t.Pool))
			if t.Host != "" && s.Host(t.Host) == nil {
				errs = append(errs, fmt.Errorf("exception %s references missing host %q", e.Name, t.Host))
			}
		}
	}
	for _, r := range s.Roles {
		errs = append(errs, pool("role "+r.Name, r.Pool))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// replay applies Diff(cur, next) step by step to a copy of cur, checking references (and
// optionally uniqueness) after every step, and returns the final state.
func replay(t *testing.T, cur, next *Site, unique bool) (*Site, []Change) {
	t.Helper()
	changes := Diff(cur, next)
	state := cur.Clone()
	for i, c := range changes {
		if err := simApply(state, cur, next, c); err != nil {
			t.Fatalf("step %d %v: %v\nchanges: %v", i, c, err, changes)
		}
		if err := refsOK(state, unique); err != nil {
			t.Fatalf("after step %d %v: %v\nchanges: %v", i, c, err, changes)
		}
	}
	return state, changes
}

// normalize makes sites comparable with reflect.DeepEqual: sorted, empty slices nil,
// targets sorted, times in UTC.
func normalize(s *Site) *Site {
	s = s.Clone()
	s.Sort()
	nilIfEmpty := func(v []string) []string {
		if len(v) == 0 {
			return nil
		}
		return v
	}
	for i := range s.Pools {
		s.Pools[i].Weekly = nilIfEmpty(s.Pools[i].Weekly)
	}
	for i := range s.Hosts {
		s.Hosts[i].Weekly = nilIfEmpty(s.Hosts[i].Weekly)
	}
	for i := range s.Images {
		if len(s.Images[i].Versions) == 0 {
			s.Images[i].Versions = nil
		}
		for j := range s.Images[i].Versions {
			s.Images[i].Versions[j].Created = s.Images[i].Versions[j].Created.UTC()
		}
	}
	for i := range s.Exceptions {
		e := &s.Exceptions[i]
		e.Start, e.End = e.Start.UTC(), e.End.UTC()
		sort.Slice(e.Targets, func(a, b int) bool {
			return e.Targets[a].Pool+"\x00"+e.Targets[a].Host < e.Targets[b].Pool+"\x00"+e.Targets[b].Host
		})
	}
	for i := range s.Roles {
		s.Roles[i].Members = nilIfEmpty(s.Roles[i].Members)
	}
	lists := []any{&s.Pools, &s.Hosts, &s.BootServers, &s.Modes, &s.Images, &s.Exceptions, &s.Roles}
	for _, l := range lists {
		if v := reflect.ValueOf(l).Elem(); v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
		}
	}
	return s
}

func strs(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// --- fixtures -----------------------------------------------------------------------------

var t0 = time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)

func sha(c byte) string { return strings.Repeat(string(c), 64) }

func fullSite() *Site {
	return &Site{
		Name: "uni", Timezone: "Europe/Berlin", DefaultMode: "local", UnknownMode: "local",
		BootServers: []BootServer{{Name: "bs1", IP: "10.0.0.1", HTTPURL: "http://10.0.0.1:8080", DHCP: DHCPProxy, Subnet: "10.0.0.0/24"}},
		Images: []Image{
			{Name: "desk", Kind: ImageDesktop, Versions: []ImageVersion{
				{Version: "1", SHA256: sha('a'), Path: "desk/1", Created: t0},
				{Version: "2", SHA256: sha('b'), Path: "desk/2", Created: t0.Add(time.Hour)},
			}},
			{Name: "vm", Kind: ImageCourseVM, Pool: "lab-a", Versions: []ImageVersion{{Version: "1", SHA256: sha('c'), Path: "vm/1", Created: t0}}},
		},
		Modes: []Mode{
			{Name: "local", Kind: KindLocalDisk},
			{Name: "desktop", Kind: KindDesktop, Image: "desk"},
			{Name: "cluster", Kind: KindCluster, Image: "desk", ImageVersion: "1"},
			{Name: "course", Kind: KindCourseVM, Image: "desk", VM: "vm"},
		},
		Pools: []Pool{
			{Name: "lab-a", Room: "A1", BootServer: "bs1", Weekly: []string{"mon-fri 08:00-18:00 desktop"}},
			{Name: "lab-b", Room: "B1", Weekly: []string{"sat-sun 00:00-00:00 cluster"}},
		},
		Hosts: []Host{
			{Name: "a1", MAC: "52:54:00:00:00:01", IP: "10.0.0.11", Pool: "lab-a"},
			{Name: "a2", MAC: "52:54:00:00:00:02", Pool: "lab-a", Weekly: []string{"mon 08:00-10:00 course"}},
			{Name: "b1", MAC: "52:54:00:00:00:03", Pool: "lab-b", BootServer: "bs1"},
		},
		Exceptions: []Exception{{Name: "exam", Kind: "exam", Start: t0, End: t0.Add(2 * time.Hour), Mode: "course",
			Targets: []Target{{Pool: "lab-b"}, {Host: "a2"}}, Allow: []string{"exam.uni.example:443", "10.0.5.0/24"}}},
		Roles: []RoleGrant{
			{Name: "admins", Role: RoleSiteAdmin, Members: []string{"admin"}},
			{Name: "lab-a-admins", Role: RolePoolAdmin, Pool: "lab-a", Members: []string{"alice", "bob"}},
		},
	}
}

func minimalSite() *Site {
	return &Site{Name: "uni", Timezone: "Europe/Berlin", DefaultMode: "local2",
		Modes: []Mode{{Name: "local2", Kind: KindLocalDisk}}}
}

// --- tests -------------------------------------------------------------------------------

func TestFixturesValid(t *testing.T) {
	for _, s := range []*Site{fullSite(), minimalSite()} {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDiffNoChange(t *testing.T) {
	s := fullSite()
	n := s.Clone()
	// Order of targets, of list entries and time zones of instants are not changes.
	n.Exceptions[0].Targets = []Target{{Host: "a2"}, {Pool: "lab-b"}}
	slices.Reverse(n.Exceptions[0].Allow)
	n.Exceptions[0].Start = n.Exceptions[0].Start.In(time.FixedZone("x", 3600))
	slices.Reverse(n.Hosts)
	if d := Diff(s, n); len(d) != 0 {
		t.Fatalf("Diff of equal sites: %v", d)
	}
}

func TestChangeString(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want string
	}{
		{Change{Op: OpAdd, Kind: EntityHost, Name: "pc009"}, "+ host pc009"},
		{Change{Op: OpModify, Kind: EntityPool, Name: "lab-a", Fields: []string{"weekly", "room"}}, "~ pool lab-a (weekly, room)"},
		{Change{Op: OpDelete, Kind: EntityException, Name: "exam-1"}, "- exception exam-1"},
		{Change{Op: OpAdd, Kind: EntityImageVersion, Name: ImageVersionName("desk", "2026.1")}, "+ image-version desk/2026.1"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%#v: got %q want %q", tc.c, got, tc.want)
		}
	}
}

// kindRank is the position of a change's step in the documented order.
func kindRank(c Change) int {
	adds := []string{EntityBootServer, EntityImage, EntityImageVersion, EntityMode, EntityPool, EntityHost, EntityException, EntityRole}
	dels := []string{EntityRole, EntityException, EntityHost, EntityPool, EntityMode, EntityImageVersion, EntityImage, EntityBootServer}
	if c.Op == OpDelete {
		return 100 + slices.Index(dels, c.Kind)
	}
	if c.Kind == EntitySite {
		return -1 // checked separately
	}
	return slices.Index(adds, c.Kind)
}

// Building a full site from an empty one: only adds (and the site), in dependency order.
func TestDiffOrderAdds(t *testing.T) {
	cur, next := &Site{Name: "uni", Timezone: "Europe/Berlin"}, fullSite()
	state, changes := replay(t, cur, next, true)
	if !reflect.DeepEqual(normalize(state), normalize(next)) {
		t.Fatalf("replay does not reach next:\n%+v\n%+v", normalize(state), normalize(next))
	}
	last := -1
	for _, c := range changes {
		if c.Op == OpDelete {
			t.Fatalf("unexpected delete %v", c)
		}
		if r := kindRank(c); r >= 0 {
			if r < last {
				t.Fatalf("%v out of order in %v", c, strs(changes))
			}
			last = r
		}
	}
	// The default mode is new: the site change comes after the modes, before the pools.
	want := []string{
		"+ bootserver bs1", "+ image desk", "+ image vm",
		"+ image-version desk/1", "+ image-version desk/2", "+ image-version vm/1",
		"+ mode cluster", "+ mode course", "+ mode desktop", "+ mode local",
		"~ site uni (defaultMode, unknownMode)",
		"+ pool lab-a", "+ pool lab-b", "+ host a1", "+ host a2", "+ host b1",
		"+ exception exam", "+ role admins", "+ role lab-a-admins",
	}
	if got := strs(changes); !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// Tearing a full site down to a minimal one: deletes in reverse dependency order, after
// the adds and modifies that move references away.
func TestDiffOrderDeletes(t *testing.T) {
	cur, next := fullSite(), minimalSite()
	state, changes := replay(t, cur, next, true)
	if !reflect.DeepEqual(normalize(state), normalize(next)) {
		t.Fatalf("replay does not reach next")
	}
	want := []string{
		"~ site uni (unknownMode)", "+ mode local2", "~ site uni (defaultMode)",
		"- role admins", "- role lab-a-admins", "- exception exam",
		"- host a1", "- host a2", "- host b1", "- pool lab-a", "- pool lab-b",
		"- mode cluster", "- mode course", "- mode desktop", "- mode local",
		"- image-version desk/1", "- image-version desk/2", "- image-version vm/1",
		"- image desk", "- image vm", "- bootserver bs1",
	}
	if got := strs(changes); !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	seenDelete := false
	last := 0
	for _, c := range changes {
		if c.Op == OpDelete {
			seenDelete = true
			if r := kindRank(c); r < last {
				t.Fatalf("%v out of order", c)
			} else {
				last = r
			}
		} else if seenDelete {
			t.Fatalf("%v after a delete", c)
		}
	}
}

// A site change whose new default mode already exists goes first (nothing new needed).
func TestDiffSiteEarly(t *testing.T) {
	cur := fullSite()
	next := cur.Clone()
	next.DefaultMode, next.Timezone = "desktop", "UTC"
	next.Modes = append(next.Modes, Mode{Name: "maint", Kind: KindMaintenance})
	next.UnknownMode = "maint"
	_, changes := replay(t, cur, next, true)
	want := []string{"~ site uni (timezone, defaultMode)", "+ mode maint", "~ site uni (unknownMode)"}
	if got := strs(changes); !slices.Equal(got, want) {
		t.Fatalf("got %q want %q", got, want)
	}
}

// Addresses moving between hosts never exist twice, where an order can avoid it.
func TestDiffHostAddressMoves(t *testing.T) {
	cur := fullSite()

	// Rename (delete + add with the same MAC and IP): the old host goes first.
	next := cur.Clone()
	next.Hosts[0].Name = "a1-new"
	_, changes := replay(t, cur, next, true)
	if err := CheckAddressOrder(cur, next, changes); err != nil {
		t.Fatal(err)
	}
	if got := strs(changes); !slices.Equal(got, []string{"- host a1", "+ host a1-new"}) {
		t.Fatalf("rename: %q", got)
	}

	// Chain: b1 takes a1's MAC, a1 takes a new one; a "z" host takes b1's old MAC.
	next = cur.Clone()
	next.Hosts[2].MAC = "52:54:00:00:00:01"
	next.Hosts[0].MAC = "52:54:00:00:00:09"
	next.Hosts = append(next.Hosts, Host{Name: "a0", MAC: "52:54:00:00:00:03", Pool: "lab-a"})
	_, changes = replay(t, cur, next, true)
	if got := strs(changes); !slices.Equal(got, []string{"~ host a1 (mac)", "~ host b1 (mac)", "+ host a0"}) {
		t.Fatalf("chain: %q", got)
	}

	// A released host that an exception still names cannot go first: the old order stays
	// (writers detect the clash; see ldapstore).
	next = cur.Clone()
	next.Hosts[1].Name = "a2-new" // a2 is an exception target
	next.Exceptions[0].Targets = []Target{{Pool: "lab-b"}, {Host: "a2-new"}}
	_, changes = replay(t, cur, next, false)
	if got := strs(changes); !slices.Equal(got, []string{"+ host a2-new", "~ exception exam (targets)", "- host a2"}) {
		t.Fatalf("named: %q", got)
	}
	var inv *InvalidError
	if err := CheckAddressOrder(cur, next, changes); !errors.As(err, &inv) || !inv.Conflict {
		t.Fatalf("CheckAddressOrder(named): %v", err)
	}

	// A swap cannot be ordered either.
	next = cur.Clone()
	next.Hosts[0].MAC, next.Hosts[2].MAC = next.Hosts[2].MAC, next.Hosts[0].MAC
	if err := CheckAddressOrder(cur, next, Diff(cur, next)); !errors.As(err, &inv) || !inv.Conflict {
		t.Fatalf("CheckAddressOrder(swap): %v", err)
	}
	// Nor an IP swap.
	next = cur.Clone()
	next.Hosts[1].IP, next.Hosts[0].IP = next.Hosts[0].IP, "10.0.0.99"
	if err := CheckAddressOrder(cur, next, Diff(cur, next)); err != nil {
		t.Fatalf("IP moved on: %v", err)
	}
	if got := strs(Diff(cur, next)); !slices.Equal(got, []string{"~ host a1 (ip)", "~ host a2 (ip)"}) {
		t.Fatalf("IP chain: %q", got)
	}
}

func TestDiffImageVersionModify(t *testing.T) {
	cur := fullSite()
	next := cur.Clone()
	next.Images[0].Versions[0].SHA256 = sha('f')
	next.Images[0].Versions[0].Size = 7
	got := strs(Diff(cur, next))
	if !slices.Equal(got, []string{"~ image-version desk/1 (sha256, size)"}) {
		t.Fatalf("%q", got)
	}
}

// Random pairs of valid sites drawn from a small universe of entities (so that names,
// references and addresses overlap): replaying Diff keeps every reference valid after
// every step and ends at next.
func TestDiffRandomReplay(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	n, checkedUnique := 0, 0
	defer func() {
		t.Logf("%d pairs, %d with addresses checked unique at every step", n, checkedUnique)
		if checkedUnique < n/2 {
			t.Errorf("too few pairs pass CheckAddressOrder: %d of %d", checkedUnique, n)
		}
	}()
	for n < 400 {
		cur, next := randomSite(r), randomSite(r)
		if cur.Validate() != nil || next.Validate() != nil {
			continue
		}
		n++
		// Where CheckAddressOrder accepts the order, no step may duplicate an address.
		unique := CheckAddressOrder(cur, next, Diff(cur, next)) == nil
		if unique {
			checkedUnique++
		}
		state, _ := replay(t, cur, next, unique)
		if !reflect.DeepEqual(normalize(state), normalize(next)) {
			t.Fatalf("replay %d does not reach next:\n%+v\n%+v", n, normalize(state), normalize(next))
		}
		if d := Diff(state, next); len(d) != 0 {
			t.Fatalf("after replay, Diff is %v", d)
		}
	}
}

func randomSite(r *rand.Rand) *Site {
	pick := func(p float64) bool { return r.Float64() < p }
	one := func(xs []string) string {
		if len(xs) == 0 {
			return ""
		}
		return xs[r.Intn(len(xs))]
	}
	s := &Site{Name: "uni", Timezone: "UTC"}
	var bss []string
	for i, name := range []string{"bs1", "bs2"} {
		if pick(0.6) {
			b := BootServer{Name: name, IP: fmt.Sprintf("10.0.%d.1", i), HTTPURL: "http://10.0.0.1", DHCP: DHCPProxy, Subnet: fmt.Sprintf("10.0.%d.0/24", i)}
			if pick(0.5) {
				b.Router = fmt.Sprintf("10.0.%d.254", i)
			}
			if pick(0.4) {
				b.DNSServers = []string{fmt.Sprintf("10.0.%d.53", i), "192.0.2.53"}[:1+r.Intn(2)]
				b.Domain = one([]string{"", "lab.example.org"})
			}
			s.BootServers = append(s.BootServers, b)
			bss = append(bss, name)
		}
	}
	for i, name := range []string{"img-a", "img-b", "vm-c"} {
		if !pick(0.6) {
			continue
		}
		im := Image{Name: name, Kind: ImageDesktop}
		if name == "vm-c" {
			im.Kind = ImageCourseVM
		}
		if pick(0.3) {
			im.Description = "described"
		}
		for j, v := range []string{"v1", "v2", "v3"} {
			if pick(0.6) {
				// Same name, same content: versions are immutable.
				im.Versions = append(im.Versions, ImageVersion{Version: v, SHA256: sha("abcdef0123"[i*3+j]), Path: name + "/" + v, Created: t0.Add(time.Duration(j) * time.Hour)})
			}
		}
		s.Images = append(s.Images, im)
	}
	s.Modes = append(s.Modes, Mode{Name: "local", Kind: KindLocalDisk})
	modes := []string{"local"}
	var desktops []string
	for _, im := range s.Images {
		if im.Kind == ImageDesktop {
			desktops = append(desktops, im.Name)
		}
	}
	for _, im := range s.Images {
		for _, mn := range []string{"m-" + im.Name, "m2-" + im.Name} {
			if !pick(0.6) {
				continue
			}
			m := Mode{Name: mn, Kind: KindDesktop, Image: im.Name}
			if im.Kind == ImageCourseVM {
				if len(desktops) == 0 {
					continue
				}
				m.Kind, m.VM = KindCourseVM, im.Name
				im = *s.Image(one(desktops))
				m.Image = im.Name
			}
			if len(im.Versions) > 0 && pick(0.5) {
				m.ImageVersion = im.Versions[r.Intn(len(im.Versions))].Version
			}
			s.Modes = append(s.Modes, m)
			modes = append(modes, mn)
		}
	}
	if pick(0.5) {
		s.Modes = append(s.Modes, Mode{Name: "maint", Kind: KindMaintenance})
		modes = append(modes, "maint")
	}
	s.DefaultMode = one(modes)
	if pick(0.5) {
		s.UnknownMode = one(modes)
	}
	var pools []string
	for _, name := range []string{"p1", "p2", "p3"} {
		if !pick(0.7) {
			continue
		}
		p := Pool{Name: name, BootServer: one(append([]string{""}, bss...)), Room: one([]string{"", "A", "B"})}
		if pick(0.6) {
			p.Weekly = []string{"mon 08:00-10:00 " + one(modes)}
		}
		s.Pools = append(s.Pools, p)
		pools = append(pools, name)
	}
	var hosts []string
	if len(pools) > 0 {
		macs := r.Perm(6)
		ips := r.Perm(6)
		for i, name := range []string{"h1", "h2", "h3", "h4", "h5"} {
			if !pick(0.7) {
				continue
			}
			h := Host{Name: name, MAC: fmt.Sprintf("52:54:00:00:00:%02x", macs[i]), Pool: one(pools), BootServer: one(append([]string{""}, bss...))}
			if pick(0.6) {
				h.IP = fmt.Sprintf("10.1.0.%d", ips[i]+1)
			}
			if pick(0.3) {
				h.Weekly = []string{"tue 08:00-10:00 " + one(modes)}
			}
			s.Hosts = append(s.Hosts, h)
			hosts = append(hosts, name)
		}
	}
	for _, name := range []string{"e1", "e2"} {
		if !pick(0.6) || len(pools)+len(hosts) == 0 {
			continue
		}
		e := Exception{Name: name, Kind: "exam", Start: t0, End: t0.Add(time.Hour), Mode: one(modes)}
		for _, p := range pools {
			if pick(0.4) {
				e.Targets = append(e.Targets, Target{Pool: p})
			}
		}
		for _, h := range hosts {
			if pick(0.4) {
				e.Targets = append(e.Targets, Target{Host: h})
			}
		}
		if len(e.Targets) == 0 {
			continue
		}
		s.Exceptions = append(s.Exceptions, e)
	}
	if pick(0.7) {
		s.Roles = append(s.Roles, RoleGrant{Name: "admins", Role: RoleSiteAdmin, Members: []string{"admin"}})
	}
	if len(pools) > 0 && pick(0.7) {
		s.Roles = append(s.Roles, RoleGrant{Name: "padm", Role: RolePoolAdmin, Pool: one(pools), Members: []string{"alice"}})
	}
	return s
}
