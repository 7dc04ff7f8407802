package slurmres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// The lab: desktops on weekdays 08:00-18:00, cluster otherwise (both run a guest).
// 2026-12-01 is a Tuesday; the site is in Europe/Berlin (UTC+1 in December).
func testSite(t *testing.T) (*model.Site, *time.Location) {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	guest := &model.Guest{Image: "compute", Backend: "container", VCPUs: 1, MemoryMB: 256, Network: "bridged", Bridge: "br0"}
	at := func(d, hm string) time.Time {
		x, err := time.ParseInLocation("2006-01-02 15:04", d+" "+hm, loc)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	s := &model.Site{
		Name: "t", Timezone: "Europe/Berlin", DefaultMode: "cluster",
		BootServers: []model.BootServer{{Name: "bs1", IP: "10.31.0.1", HTTPURL: "http://10.31.0.1:8080", DHCP: model.DHCPFull, Subnet: "10.31.0.0/24"}},
		Images: []model.Image{
			{Name: "desk", Kind: model.ImageDesktop}, {Name: "compute", Kind: model.ImageCompute},
			{Name: "bio", Kind: model.ImageCourseVM, Pool: "lab"},
		},
		Modes: []model.Mode{
			{Name: "desktop", Kind: model.KindDesktop, Image: "desk", Guest: guest.Clone()},
			{Name: "cluster", Kind: model.KindCluster, Image: "desk", Guest: guest.Clone()},
			{Name: "local", Kind: model.KindLocalDisk},
			{Name: "maint", Kind: model.KindMaintenance},
			{Name: "course-bio", Kind: model.KindCourseVM, Image: "desk", VM: "bio"},
		},
		Pools: []model.Pool{{Name: "lab", BootServer: "bs1", Weekly: []string{"mon-fri 08:00-18:00 desktop"}}},
		Hosts: []model.Host{
			{Name: "pc1", MAC: "52:54:00:00:00:01", Pool: "lab"},
			// A lecture Wednesday 10:00-12:00, maintenance right after until 13:00.
			{Name: "pc-lec", MAC: "52:54:00:00:00:02", Pool: "lab", Weekly: []string{"wed 10:00-12:00 course-bio", "wed 12:00-13:00 maint"}},
			{Name: "pc-local", MAC: "52:54:00:00:00:03", Pool: "lab", Weekly: []string{"daily 00:00-24:00 local"}},
			{Name: "pc-exam", MAC: "52:54:00:00:00:04", Pool: "exam"},
			{Name: "pc-powersave", MAC: "52:54:00:00:00:05", Pool: "lab", Weekly: []string{"tue 20:00-24:00 local"}},
		},
		Exceptions: []model.Exception{
			// An exam in the desktop mode the pool has anyway: no mode change, but no guest.
			{Name: "exam-1", Kind: "exam", Mode: "desktop", Start: at("2026-12-02", "08:00"), End: at("2026-12-02", "10:00"),
				Targets: []model.Target{{Pool: "exam"}}},
			// pc-exam's pool also has a lecture on Thursday (a pool exception of kind lecture).
			{Name: "bio-extra", Kind: "lecture", Mode: "course-bio", Start: at("2026-12-03", "14:00"), End: at("2026-12-03", "16:00"),
				Targets: []model.Target{{Pool: "exam"}}},
			// Power saving keeps pc-powersave in the cluster Tuesday evening: not a window.
			{Name: "powersave-pc-powersave", Kind: model.ExceptionPowerSave, Mode: "cluster", Start: at("2026-12-01", "20:00"), End: at("2026-12-01", "23:00"),
				Targets: []model.Target{{Host: "pc-powersave"}}},
		},
	}
	s.Pools = append(s.Pools, model.Pool{Name: "exam", BootServer: "bs1", Weekly: []string{"mon-fri 08:00-18:00 desktop"}})
	return s, loc
}

func TestWindows(t *testing.T) {
	s, loc := testSite(t)
	eng, err := schedule.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	r := resolve.New(s, eng)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, loc) // Tuesday 09:00
	day := 24 * time.Hour
	for _, c := range []struct {
		host    string
		from    time.Time
		horizon time.Duration
		want    []string // "start-end mode exception | reason [(power save)]", site time "Mon 15:04"
	}{
		{"pc1", now, 7 * day, nil},
		{"pc-lec", now, 7 * day, []string{
			"Wed 10:00-Wed 13:00 course-bio  | overtime: course-bio at Wed 10:00",
		}},
		{"pc-lec", now, 25 * time.Hour, nil}, // the horizon ends before the lecture
		{"pc-lec", now, 26*time.Hour + 30*time.Minute, []string{
			"Wed 10:00-Wed 11:30 course-bio  | overtime: course-bio at Wed 10:00", // clipped at the horizon
		}},
		{"pc-lec", now.Add(25*time.Hour + 30*time.Minute), 2 * day, []string{ // from inside the lecture
			"Wed 10:30-Wed 13:00 course-bio  | overtime: course-bio now",
		}},
		{"pc-lec", now.Add(25*time.Hour + 30*time.Minute), 7 * day, []string{ // a week ahead: next Wednesday's, clipped
			"Wed 10:30-Wed 13:00 course-bio  | overtime: course-bio now",
			"Wed 10:00-Wed 10:30 course-bio  | overtime: course-bio at Wed 10:00",
		}},
		{"pc-local", now, 2 * day, []string{
			"Tue 09:00-Thu 09:00 local  | overtime: local now (power save)",
		}},
		{"pc-exam", now, 7 * day, []string{
			"Wed 08:00-Wed 10:00 desktop exam-1 | overtime: desktop (exception exam-1) at Wed 08:00",
			"Thu 14:00-Thu 16:00 course-bio bio-extra | overtime: course-bio (exception bio-extra) at Thu 14:00",
		}},
		{"pc-powersave", now, 20 * time.Hour, []string{
			"Tue 23:00-Wed 00:00 local  | overtime: local at 23:00 (power save)",
		}},
	} {
		t.Run(fmt.Sprintf("%s from %s for %s", c.host, c.from.Format("Mon 15:04"), c.horizon), func(t *testing.T) {
			var got []string
			for _, w := range Windows(r, s.Host(c.host), c.from, c.horizon) {
				if w.Node != c.host || !w.End.After(w.Start) || w.Start.Location() != time.UTC || !strings.HasPrefix(w.Reason, "overtime: ") {
					t.Errorf("malformed window %+v", w)
				}
				ps := ""
				if w.PowerSave {
					ps = " (power save)"
				}
				got = append(got, fmt.Sprintf("%s-%s %s %s | %s%s", w.Start.In(loc).Format("Mon 15:04"), w.End.In(loc).Format("Mon 15:04"), w.Mode, w.Exception, w.Reason, ps))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("windows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestAll(t *testing.T) {
	s, loc := testSite(t)
	eng, err := schedule.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 9, 0, 0, 123, loc)
	all := All(resolve.New(s, eng), now, wire.DefaultReservationHorizon)
	if !all.Now.Equal(now.Truncate(time.Second)) || all.HorizonSeconds != 7*86400 {
		t.Fatalf("now %s horizon %d", all.Now, all.HorizonSeconds)
	}
	var nodes []string
	for i, w := range all.Windows {
		nodes = append(nodes, w.Node)
		if i > 0 && w.Node == all.Windows[i-1].Node && !w.Start.After(all.Windows[i-1].End) {
			t.Errorf("windows of %s overlap or touch (not merged): %+v %+v", w.Node, all.Windows[i-1], w)
		}
	}
	if got := strings.Join(nodes, ","); got != "pc-exam,pc-exam,pc-lec,pc-local,pc-powersave" {
		t.Errorf("nodes %s", got)
	}
}
