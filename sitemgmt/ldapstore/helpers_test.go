package ldapstore

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

var bg = context.Background()

const adminPW = "admin-secret"

// newStore starts a slapd and opens a store on it as the service account.
func newStore(t testing.TB) (*Store, *slapdenv.Server) {
	t.Helper()
	srv := slapdtest.StartT(t)
	st, err := Open(Config{URL: srv.URL, BaseDN: srv.BaseDN, BindDN: srv.ServiceDN, BindPassword: srv.ServicePW})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, srv
}

// initStore is newStore plus Init.
func initStore(t testing.TB) (*Store, *slapdenv.Server) {
	t.Helper()
	st, srv := newStore(t)
	if err := st.Init(bg, InitOptions{SiteName: "uni", Timezone: "Europe/Berlin", AdminUID: "admin", AdminPassword: adminPW}); err != nil {
		t.Fatal(err)
	}
	return st, srv
}

func mustLoad(t testing.TB, st *Store) *model.Site {
	t.Helper()
	s, err := st.Load(bg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustApply(t testing.TB, st *Store, cur, next *model.Site) []model.Change {
	t.Helper()
	ch, err := st.Apply(bg, cur, next)
	if err != nil {
		t.Fatalf("apply: %v (written: %v)", err, ch)
	}
	return ch
}

var berlin = func() *time.Location {
	l, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	return l
}()

func sha(c byte) string { return strings.Repeat(string(c), 64) }

// exampleSite is a small but complete site: 2 pools, 8 hosts, a boot server, the five
// kinds of mode, images with versions, weekly rules, an exception with pool and host
// targets, roles (including the grant Init created), a pool policy and mode guests.
func exampleSite() *model.Site {
	created := time.Date(2026, 11, 21, 9, 30, 15, 123456789, time.UTC) // sub-second: must round-trip
	s := &model.Site{
		Name: "uni", Timezone: "Europe/Berlin", DefaultMode: "local-disk", UnknownMode: "maintenance",
		BootServers: []model.BootServer{{
			Name: "rbs1", IP: "10.0.0.1", HTTPURL: "http://10.0.0.1:8080", NFSServer: "10.0.0.2", NFSRoot: "/srv/overtime/images",
			DHCP: model.DHCPFull, Interface: "eth1", Subnet: "10.0.0.0/24", RangeFrom: "10.0.0.200", RangeTo: "10.0.0.250", Router: "10.0.0.254",
			DNSServers: []string{"192.0.2.53", "10.0.0.53"}, Domain: "lab.example.org", // not in sorted order: the order is kept
			APIURL: "https://overtime.example.org:8443",
		}},
		Images: []model.Image{
			{Name: "desktop", Kind: model.ImageDesktop, Description: "Debian desktop (Übungsraum)", Versions: []model.ImageVersion{
				{Version: "2026.11.01-1", SHA256: sha('a'), Size: 8 << 30, Path: "desktop/2026.11.01-1", Created: created.Add(-20 * 24 * time.Hour)},
				{Version: "2026.11.21-1", SHA256: sha('b'), Size: 9 << 30, Path: "desktop/2026.11.21-1", Created: created},
			}},
			{Name: "compute", Kind: model.ImageCompute, Versions: []model.ImageVersion{
				{Version: "1.0", SHA256: sha('c'), Path: "compute/1.0", Created: created},
			}},
			{Name: "stats-vm", Kind: model.ImageCourseVM, Pool: "lab-a", Versions: []model.ImageVersion{
				{Version: "ws2026", SHA256: sha('d'), Size: 1, Path: "vm/stats/ws2026", Created: created.In(berlin)},
			}},
		},
		Modes: []model.Mode{
			{Name: "local-disk", Kind: model.KindLocalDisk, Description: "boot the local disk"},
			{Name: "desktop", Kind: model.KindDesktop, Image: "desktop", Description: "stateless desktop",
				Guest: &model.Guest{Image: "compute", MemoryMB: 4096}},
			{Name: "cluster", Kind: model.KindCluster, Image: "desktop", ImageVersion: "2026.11.01-1", KernelArgs: "quiet overtime.role=compute",
				Guest: &model.Guest{Image: "compute", Version: "1.0", Backend: model.BackendQEMU, Network: model.NetNAT, Ports: []string{"6818:6818"}, KernelArgs: "console=ttyS0"}},
			{Name: "course-vm", Kind: model.KindCourseVM, Image: "desktop", VM: "stats-vm"},
			{Name: "maintenance", Kind: model.KindMaintenance, Kernel: "maint/vmlinuz", Initrd: "maint/initrd.img"},
		},
		Pools: []model.Pool{
			{Name: "lab-a", Description: "Computer lab A", Room: "E.101", BootServer: "rbs1",
				Weekly: []string{"mon-fri 08:00-18:00 desktop", "mon-fri 18:00-08:00 cluster", "sat,sun 00:00-00:00 cluster"},
				Policy: &model.Policy{Actions: map[model.OwnerState]model.GuestAction{model.StateOwnerActive: model.ActionFreeze},
					IdleAfter: model.Duration(10 * time.Minute), FreezePressure: 12.5, ThawPressure: 2.5, RemoteActive: new(false)}},
			{Name: "lab-b", Room: "E.102", Weekly: []string{"mon-fri 08:00-20:00 desktop"}},
		},
		Exceptions: []model.Exception{{
			Name: "exam-stats", Kind: "exam", Description: "Statistics exam", Mode: "course-vm",
			Start: time.Date(2026, 12, 9, 10, 0, 0, 0, berlin), End: time.Date(2026, 12, 9, 12, 0, 0, 0, berlin),
			Targets: []model.Target{{Pool: "lab-a"}, {Host: "pc-b01"}, {Host: "pc-b02"}},
			Allow:   []string{"exam.uni.example:443", "10.0.5.0/24", "[2001:db8::1]:8443"},
		}},
		Roles: []model.RoleGrant{
			{Name: InitAdminRole, Role: model.RoleSiteAdmin, Members: []string{"admin"}},
			{Name: "lab-a-admins", Role: model.RolePoolAdmin, Pool: "lab-a", Members: []string{"alice", "bob"}},
			{Name: "stats-lecturers", Role: model.RoleLecturer, Pool: "lab-a", Members: []string{"carol"}},
			{Name: "viewers", Role: model.RoleViewer}, // no members yet
		},
	}
	for i := 1; i <= 4; i++ {
		s.Hosts = append(s.Hosts,
			model.Host{Name: fmt.Sprintf("pc-a%02d", i), MAC: fmt.Sprintf("52:54:00:0a:00:%02x", i), IP: fmt.Sprintf("10.0.0.%d", 10+i), Pool: "lab-a"},
			model.Host{Name: fmt.Sprintf("pc-b%02d", i), MAC: fmt.Sprintf("52:54:00:0b:00:%02x", i), Pool: "lab-b", BootServer: "rbs1"},
		)
	}
	s.Hosts[0].Weekly = []string{"wed 10:00-12:00 course-vm"}
	return s
}

// normalize makes two sites comparable with reflect.DeepEqual: sorted (which also makes
// empty lists nil), exception targets sorted (the store keeps pools before hosts), all
// instants in UTC (instants are compared, not zones).
func normalize(s *model.Site) *model.Site {
	s = s.Clone()
	s.Sort()
	for i := range s.Images {
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
	return s
}

// assertSameSite fails unless the sites are equal up to normalize, and checks that the
// instants are Equal (the brief's definition) besides.
func assertSameSite(t testing.TB, got, want *model.Site) {
	t.Helper()
	g, w := normalize(got), normalize(want)
	if reflect.DeepEqual(g, w) {
		return
	}
	if d := model.Diff(w, g); len(d) > 0 {
		t.Fatalf("sites differ: %v\ngot  %+v\nwant %+v", d, g, w)
	}
	t.Fatalf("sites differ beyond Diff:\ngot  %+v\nwant %+v", g, w)
}

func changeStrings(cs []model.Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}
