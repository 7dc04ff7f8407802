package powersave

import (
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// site: lab's PCs are desktops on weekdays 08:00-18:00, local disk otherwise; pc-lec has
// a Wednesday course VM slot, pc-maint is in maintenance all Tuesday, pc-night is in
// cluster mode at night. 2026-12-01 is a Tuesday.
func site(t *testing.T) (*model.Site, *time.Location) {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	guest := &model.Guest{Image: "compute", Backend: "container", VCPUs: 1, MemoryMB: 256, Network: "bridged", Bridge: "br0"}
	s := &model.Site{
		Name: "t", Timezone: "Europe/Berlin", DefaultMode: "local",
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
			{Name: "course", Kind: model.KindCourseVM, Image: "desk", VM: "bio"},
		},
		Pools: []model.Pool{{Name: "lab", BootServer: "bs1", Weekly: []string{"mon-fri 08:00-18:00 desktop"}}},
		Hosts: []model.Host{
			{Name: "pc1", MAC: "52:54:00:00:00:01", Pool: "lab"},
			{Name: "pc-lec", MAC: "52:54:00:00:00:02", Pool: "lab", Weekly: []string{"wed 18:00-20:00 course"}},
			{Name: "pc-maint", MAC: "52:54:00:00:00:03", Pool: "lab", Weekly: []string{"tue 00:00-24:00 maint"}},
			{Name: "pc-night", MAC: "52:54:00:00:00:04", Pool: "lab", Weekly: []string{"daily 20:00-06:00 cluster"}},
			{Name: "pc-always", MAC: "52:54:00:00:00:05", Pool: "lab", Weekly: []string{"daily 00:00-24:00 cluster"}},
		},
	}
	return s, loc
}

// resume runs a whole resume the way the API does: plan, apply to a clone, validate,
// compile, describe.
func resume(t *testing.T, s *model.Site, req wire.PowerRequest, now time.Time) (*model.Site, *schedule.Engine, []wire.PowerResult) {
	t.Helper()
	eng, err := schedule.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Resume(resolve.New(s, eng), req, now)
	if err != nil {
		t.Fatal(err)
	}
	return apply(t, s, p, now)
}

func apply(t *testing.T, s *model.Site, p *Plan, now time.Time) (*model.Site, *schedule.Engine, []wire.PowerResult) {
	t.Helper()
	next := s.Clone()
	p.Apply(next)
	next.Sort()
	if err := next.Validate(); err != nil {
		t.Fatalf("site after the change: %v", err)
	}
	eng, err := schedule.Compile(next)
	if err != nil {
		t.Fatalf("schedule after the change: %v", err)
	}
	Describe(resolve.New(next, eng), p.Results, now)
	return next, eng, p.Results
}

func TestResume(t *testing.T) {
	s, loc := site(t)
	at := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, loc) }
	tests := []struct {
		name       string
		host       string
		now        time.Time
		action     wire.PowerAction
		mode       string // after
		until      time.Time
		exception  bool   // a power-save exception was made
		reasonPart string // refused
	}{
		{"local-disk night: into the cluster for 12 h", "pc1", at(1, 19, 7), wire.PowerCluster, "cluster", at(2, 7, 0), true, ""},
		{"desktop hours: wake only, but keep the evening", "pc1", at(1, 17, 0), wire.PowerWake, "desktop", at(1, 18, 0), true, ""},
		{"a lecture slot always wins", "pc-lec", at(2, 18, 30), wire.PowerRefused, "course", at(2, 20, 0), false, "a lecture slot always wins"},
		{"maintenance", "pc-maint", at(1, 12, 0), wire.PowerRefused, "maint", at(2, 0, 0), false, "maintenance mode maint"},
		{"cluster hours: wake, the morning's local slot filled", "pc-night", at(1, 21, 0), wire.PowerWake, "cluster", at(2, 8, 0), true, ""},
		{"cluster all week: wake, no exception", "pc-always", at(1, 21, 0), wire.PowerWake, "cluster", time.Time{}, false, ""},
		{"unknown host", "nope", at(1, 19, 0), wire.PowerRefused, "", time.Time{}, false, `"nope" is not a host`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, _, res := resume(t, s, wire.PowerRequest{Hosts: []string{tc.host}}, tc.now)
			if len(res) != 1 {
				t.Fatalf("results: %+v", res)
			}
			r := res[0]
			if r.Action != tc.action || r.Mode != tc.mode || !r.Until.Equal(tc.until) || !strings.Contains(r.Reason, tc.reasonPart) {
				t.Errorf("got %s mode %s until %s reason %q; want %s mode %s until %s reason ~%q",
					r.Action, r.Mode, r.Until, r.Reason, tc.action, tc.mode, tc.until, tc.reasonPart)
			}
			x := next.Exception(ExceptionName(tc.host))
			if (x != nil) != tc.exception {
				t.Fatalf("power-save exception: got %+v, want one: %v", x, tc.exception)
			}
			if x != nil {
				if x.Kind != model.ExceptionPowerSave || x.Mode != "cluster" || !x.Start.Equal(slotFloor(tc.now, loc)) ||
					!x.End.Equal(slotFloor(tc.now, loc).Add(12*time.Hour)) {
					t.Errorf("exception: %+v", x)
				}
			}
			wake := tc.action == wire.PowerWake || tc.action == wire.PowerCluster
			if wake && (r.WakeAddr != "10.31.0.255:9" || r.MAC == "") || !wake && r.MAC != "" {
				t.Errorf("wake: mac %q addr %q", r.MAC, r.WakeAddr)
			}
		})
	}
}

// The night that pc-night is in cluster mode until 06:00 and local from then: resumed
// at 21:00 for 12 h, it stays in the cluster until the desktop hours at 08:00.
func TestResumeCoversComingLocalSlots(t *testing.T) {
	s, loc := site(t)
	at := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, loc) }
	_, eng, _ := resume(t, s, wire.PowerRequest{Hosts: []string{"pc-night"}}, at(1, 21))
	d, _ := eng.At("pc-night", at(2, 7))
	if d.Mode != "cluster" || d.Level != schedule.LevelPowerSave || !d.Next.Equal(at(2, 8)) || d.NextMode != "desktop" {
		t.Fatalf("07:00 next morning: %+v", d)
	}
}

func TestResumeRenewsAndSuspendReleases(t *testing.T) {
	s, loc := site(t)
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, loc) }
	s1, _, _ := resume(t, s, wire.PowerRequest{Hosts: []string{"pc1", "pc1"}, ForMinutes: 60}, at(19, 0))
	if n := countPowerSave(s1); n != 1 {
		t.Fatalf("%d power-save exceptions, want 1", n)
	}
	// Renewed an hour later: still one exception, from the new slot on.
	s2, _, res := resume(t, s1, wire.PowerRequest{Hosts: []string{"pc1"}, ForMinutes: 60}, at(19, 55))
	x := s2.Exception(ExceptionName("pc1"))
	if countPowerSave(s2) != 1 || !x.Start.Equal(at(19, 50)) || !x.End.Equal(at(20, 50)) || res[0].Action != wire.PowerCluster {
		t.Fatalf("renewed: %+v %+v", x, res)
	}
	eng2, _ := schedule.Compile(s2)
	p, err := Suspend(resolve.New(s2, eng2), wire.PowerRequest{Hosts: []string{"pc1", "ghost"}})
	if err != nil {
		t.Fatal(err)
	}
	s3, _, res := apply(t, s2, p, at(20, 0))
	if countPowerSave(s3) != 0 {
		t.Fatalf("suspend left %d power-save exceptions", countPowerSave(s3))
	}
	if res[0].Action != wire.PowerReleased || res[0].Mode != "local" || res[1].Action != wire.PowerRefused {
		t.Fatalf("suspend results: %+v", res)
	}
	if d, _ := eng2.At("pc1", at(20, 0)); d.Mode != "cluster" {
		t.Fatalf("before suspend pc1 is %s", d.Mode)
	}
}

// An administrator's multi-host power-save exception loses only the suspended host.
func TestSuspendSharedException(t *testing.T) {
	s, loc := site(t)
	s.Exceptions = append(s.Exceptions, model.Exception{Name: "night-run", Kind: model.ExceptionPowerSave, Mode: "cluster",
		Start: time.Date(2026, 12, 1, 18, 0, 0, 0, loc), End: time.Date(2026, 12, 2, 8, 0, 0, 0, loc),
		Targets: []model.Target{{Host: "pc1"}, {Host: "pc-lec"}}})
	eng, err := schedule.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := Suspend(resolve.New(s, eng), wire.PowerRequest{Hosts: []string{"pc1"}})
	next, _, _ := apply(t, s, p, time.Date(2026, 12, 1, 19, 0, 0, 0, loc))
	x := next.Exception("night-run")
	if x == nil || len(x.Targets) != 1 || x.Targets[0].Host != "pc-lec" {
		t.Fatalf("night-run after suspend: %+v", x)
	}
}

func TestResumeRequestErrors(t *testing.T) {
	s, loc := site(t)
	eng, _ := schedule.Compile(s)
	now := time.Date(2026, 12, 1, 19, 0, 0, 0, loc)
	for _, tc := range []struct {
		name string
		req  wire.PowerRequest
		want string
	}{
		{"no hosts", wire.PowerRequest{}, "no hosts"},
		{"too long", wire.PowerRequest{Hosts: []string{"pc1"}, ForMinutes: wire.MaxPowerSaveMinutes + 1}, "out of range"},
		{"unknown mode", wire.PowerRequest{Hosts: []string{"pc1"}, Mode: "nope"}, "no such mode"},
		{"not a cluster mode", wire.PowerRequest{Hosts: []string{"pc1"}, Mode: "desktop"}, "not a cluster mode"},
	} {
		if _, err := Resume(resolve.New(s, eng), tc.req, now); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	s.Modes[1].Guest = nil // the only cluster mode has no guest
	if _, err := Resume(resolve.New(s, eng), wire.PowerRequest{Hosts: []string{"pc1"}}, now); err == nil || !strings.Contains(err.Error(), "no cluster mode with a compute guest") {
		t.Errorf("no cluster mode: %v", err)
	}
}

func TestExceptionName(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, h := range []string{"pc1", long} {
		if err := model.ValidName("exception", ExceptionName(h)); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if ExceptionName(long) == ExceptionName(long[:62]+"b") {
		t.Error("long names collide")
	}
}

func countPowerSave(s *model.Site) int {
	n := 0
	for _, x := range s.Exceptions {
		if x.Kind == model.ExceptionPowerSave {
			n++
		}
	}
	return n
}
