// Package synth generates large, realistic sites for benchmarks and scale tests: pools
// shaped like university pool rooms (weekday desktop hours with a lecture slot, cluster
// after hours), a few hosts with rules of their own, exams and holidays, several boot
// servers. Deterministic for a given seed.
package synth

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Site builds a site with n hosts spread over pools pools (pools <= 4096, n <= 16M), one
// boot server for every 20 pools.
func Site(n, pools int, seed int64) *model.Site {
	return SiteOn(n, pools, (pools+19)/20, seed)
}

// SiteOn is Site with the number of boot servers given (1 <= servers <= 200, each
// serving a contiguous block of pools, at most 62,500 hosts each).
func SiteOn(n, pools, servers int, seed int64) *model.Site {
	servers = max(1, min(servers, pools, 200))
	rng := rand.New(rand.NewSource(seed))
	loc, _ := time.LoadLocation("Europe/Berlin")
	s := &model.Site{Name: "synthetic", Timezone: "Europe/Berlin", DefaultMode: "cluster", UnknownMode: "local-disk"}
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	s.Images = []model.Image{
		{Name: "debian-desktop", Kind: model.ImageDesktop, Versions: []model.ImageVersion{
			{Version: "2026.11.01-1", SHA256: fmt.Sprintf("%064x", 1), Path: "debian-desktop/2026.11.01-1", Size: 2 << 30, Created: created},
			{Version: "2026.11.15-1", SHA256: fmt.Sprintf("%064x", 2), Path: "debian-desktop/2026.11.15-1", Size: 2 << 30, Created: created.Add(14 * 24 * time.Hour)},
		}},
		{Name: "course-vm", Kind: model.ImageCourseVM, Pool: "pool-000", Versions: []model.ImageVersion{
			{Version: "ws2026-1", SHA256: fmt.Sprintf("%064x", 3), Path: "course-vm/ws2026-1", Size: 1 << 30, Created: created},
		}},
	}
	s.Modes = []model.Mode{
		{Name: "desktop", Kind: model.KindDesktop, Image: "debian-desktop"},
		{Name: "cluster", Kind: model.KindCluster, Image: "debian-desktop", KernelArgs: "systemd.unit=overtime-cluster.target"},
		{Name: "course", Kind: model.KindCourseVM, Image: "debian-desktop", VM: "course-vm"},
		{Name: "local-disk", Kind: model.KindLocalDisk},
		{Name: "maintenance", Kind: model.KindMaintenance, Image: "debian-desktop", KernelArgs: "systemd.unit=rescue.target"},
	}
	for i := 0; i < servers; i++ {
		s.BootServers = append(s.BootServers, model.BootServer{
			Name: fmt.Sprintf("bs%02d", i), IP: fmt.Sprintf("10.%d.0.1", 16+i), HTTPURL: fmt.Sprintf("http://10.%d.0.1:8080", 16+i),
			DHCP: model.DHCPFull, Subnet: fmt.Sprintf("10.%d.0.0/16", 16+i),
		})
	}
	days := []string{"mon", "tue", "wed", "thu", "fri"}
	for p := 0; p < pools; p++ {
		name := fmt.Sprintf("pool-%03d", p)
		open := 7 + rng.Intn(2)   // opens 07:00 or 08:00
		close := 18 + rng.Intn(3) // closes 18:00-20:00
		lday := rng.Intn(5)
		lstart := 9 + rng.Intn(6)
		var weekly []string
		for d, day := range days {
			if d == lday {
				weekly = append(weekly,
					fmt.Sprintf("%s %02d:00-%02d:00 desktop", day, open, lstart),
					fmt.Sprintf("%s %02d:00-%02d:00 course", day, lstart, lstart+2),
					fmt.Sprintf("%s %02d:00-%02d:00 desktop", day, lstart+2, close))
			} else {
				weekly = append(weekly, fmt.Sprintf("%s %02d:00-%02d:00 desktop", day, open, close))
			}
		}
		if rng.Intn(3) == 0 {
			weekly = append(weekly, "sat 09:00-14:00 desktop")
		}
		s.Pools = append(s.Pools, model.Pool{Name: name, Room: fmt.Sprintf("Building %d room %d", p/10, p%10),
			BootServer: fmt.Sprintf("bs%02d", p*servers/pools), Weekly: weekly})
		// An exam in week 49 for every fifth pool.
		if p%5 == 0 {
			start := time.Date(2026, 12, 1+rng.Intn(5), 8+rng.Intn(4), 0, 0, 0, loc)
			s.Exceptions = append(s.Exceptions, model.Exception{Name: "exam-" + name, Kind: "exam",
				Start: start, End: start.Add(3 * time.Hour), Mode: "desktop", Targets: []model.Target{{Pool: name}}})
		}
	}
	holidays := model.Exception{Name: "winter-break", Kind: "holiday",
		Start: time.Date(2026, 12, 23, 0, 0, 0, 0, loc), End: time.Date(2027, 1, 4, 0, 0, 0, 0, loc), Mode: "cluster"}
	for p := 0; p < pools; p++ {
		if p%5 != 0 { // pools with an exam get the holiday too, but as a separate target list is fine
			holidays.Targets = append(holidays.Targets, model.Target{Pool: fmt.Sprintf("pool-%03d", p)})
		}
	}
	if len(holidays.Targets) > 0 {
		s.Exceptions = append(s.Exceptions, holidays)
	}
	onServer := make([]int, servers) // hosts numbered so far on each boot server's subnet
	for i := 0; i < n; i++ {
		p := i % pools
		srv := p * servers / pools
		k := onServer[srv]
		onServer[srv]++
		h := model.Host{
			Name: fmt.Sprintf("pc%05d", i),
			MAC:  fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", (i>>24)&0xff, (i>>16)&0xff, (i>>8)&0xff, i&0xff),
			IP:   fmt.Sprintf("10.%d.%d.%d", 16+srv, 1+(k/250)%250, 1+k%250),
			Pool: fmt.Sprintf("pool-%03d", p),
		}
		if rng.Intn(20) == 0 { // a lecturer console or a special machine
			h.Weekly = []string{"daily 00:00-24:00 desktop"}
		}
		s.Hosts = append(s.Hosts, h)
	}
	s.Roles = []model.RoleGrant{{Name: "site-admins", Role: model.RoleSiteAdmin, Members: []string{"admin"}}}
	s.Sort()
	return s
}
