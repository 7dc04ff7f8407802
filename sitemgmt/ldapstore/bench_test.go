package ldapstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// largeSite has pools×perPool hosts, every host with an IP, every pool with weekly rules,
// a tenth of the hosts with their own rule, plus exceptions and pool-admin roles.
func largeSite(pools, perPool int) *model.Site {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s := &model.Site{
		Name: "uni", Timezone: "Europe/Berlin", DefaultMode: "local-disk",
		BootServers: []model.BootServer{{Name: "rbs1", IP: "10.0.0.1", HTTPURL: "http://10.0.0.1:8080", DHCP: model.DHCPProxy, Subnet: "10.0.0.0/8"}},
		Images: []model.Image{{Name: "desktop", Kind: model.ImageDesktop, Versions: []model.ImageVersion{
			{Version: "1", SHA256: sha('a'), Path: "desktop/1", Created: created}}}},
		Modes: []model.Mode{
			{Name: "local-disk", Kind: model.KindLocalDisk, Description: "boot the local disk"},
			{Name: "desktop", Kind: model.KindDesktop, Image: "desktop"},
			{Name: "cluster", Kind: model.KindCluster, Image: "desktop"},
		},
		Roles: []model.RoleGrant{{Name: InitAdminRole, Role: model.RoleSiteAdmin, Members: []string{"admin"}}},
	}
	n := 0
	for p := 0; p < pools; p++ {
		pool := fmt.Sprintf("pool-%03d", p)
		s.Pools = append(s.Pools, model.Pool{Name: pool, Room: fmt.Sprintf("R.%03d", p), BootServer: "rbs1",
			Weekly: []string{"mon-fri 08:00-18:00 desktop", "mon-fri 18:00-08:00 cluster", "sat,sun 00:00-00:00 cluster"}})
		if p%10 == 0 {
			s.Roles = append(s.Roles, model.RoleGrant{Name: pool + "-admins", Role: model.RolePoolAdmin, Pool: pool, Members: []string{"alice", "bob"}})
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "exam-" + pool, Kind: "exam", Mode: "desktop",
				Start: time.Date(2026, 12, 9, 8, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 9, 12, 0, 0, 0, time.UTC),
				Targets: []model.Target{{Pool: pool}}})
		}
		for h := 0; h < perPool; h++ {
			host := model.Host{
				Name: fmt.Sprintf("pc-%03d-%03d", p, h),
				MAC:  fmt.Sprintf("52:54:00:%02x:%02x:%02x", n>>16&0xff, n>>8&0xff, n&0xff),
				IP:   fmt.Sprintf("10.%d.%d.%d", 1+n>>16&0xff, n>>8&0xff, n&0xff),
				Pool: pool,
			}
			if n%10 == 0 {
				host.Weekly = []string{"wed 10:00-12:00 desktop"}
			}
			s.Hosts = append(s.Hosts, host)
			n++
		}
	}
	return s
}

// BenchmarkLoad10k: 10,000 hosts in 200 pools, written once, then loaded repeatedly.
// The initial Apply's duration is logged.
func BenchmarkLoad10k(b *testing.B) {
	st, _ := initStore(b)
	next := largeSite(200, 50)
	if err := next.Validate(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	changes := mustApply(b, st, mustLoad(b, st), next)
	b.Logf("initial Apply: %d changes (%d hosts) in %v", len(changes), len(next.Hosts), time.Since(start).Round(time.Millisecond))
	for b.Loop() {
		s, err := st.Load(bg)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Hosts) != 10000 || len(s.Pools) != 200 {
			b.Fatalf("loaded %d hosts, %d pools", len(s.Hosts), len(s.Pools))
		}
	}
}

// TestLoad10kRoundTrip: a university-sized site (10,000 hosts in 200 pools) comes back
// from LDAP equal to what was written (paging, attribute mapping at scale). The time it
// takes is measured by BenchmarkLoad10k and `make bench`, not asserted here.
func TestLoad10kRoundTrip(t *testing.T) {
	st, _ := initStore(t)
	next := largeSite(200, 50)
	mustApply(t, st, mustLoad(t, st), next)
	assertSameSite(t, mustLoad(t, st), next)
}
