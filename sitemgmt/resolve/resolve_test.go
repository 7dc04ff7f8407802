package resolve

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// testSite: lab-a (boot server bs-a, throttled policy) and lab-b (no boot server) are
// desktops on weekdays 08:00-18:00 and local disk otherwise; pc-a2 names its own boot
// server bs-b; pc-b2 is in cluster mode at night. The site boots unknown PCs into local
// disk. 2026-12-02 is a Wednesday.
func testSite(t *testing.T) *model.Site {
	t.Helper()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	return &model.Site{
		Name: "t", Timezone: "Europe/Berlin", DefaultMode: "local",
		BootServers: []model.BootServer{
			{Name: "bs-a", IP: "10.1.0.1", HTTPURL: "http://10.1.0.1:8080", DHCP: model.DHCPFull, Subnet: "10.1.0.0/24"},
			{Name: "bs-b", IP: "10.2.0.1", HTTPURL: "http://10.2.0.1:8080", NFSRoot: "/exports/img", DHCP: model.DHCPProxy, Subnet: "10.2.0.0/24"},
		},
		Images: []model.Image{
			{Name: "desk", Kind: model.ImageDesktop, Versions: []model.ImageVersion{
				{Version: "1", SHA256: sha, Path: "desk/1", Created: day(1)},
				{Version: "2", SHA256: sha, Path: "desk/2", Created: day(2)},
			}},
			{Name: "compute", Kind: model.ImageCompute, Versions: []model.ImageVersion{
				{Version: "7", SHA256: sha, Path: "compute/7", Created: day(3)},
				{Version: "8", SHA256: sha, Path: "compute/8", Created: day(4)},
			}},
			{Name: "compute-next", Kind: model.ImageCompute},
		},
		Modes: []model.Mode{
			{Name: "desktop", Kind: model.KindDesktop, Image: "desk", Guest: &model.Guest{Image: "compute"}},
			{Name: "cluster", Kind: model.KindCluster, Image: "desk", ImageVersion: "1", Guest: &model.Guest{Image: "compute", Version: "7"}},
			{Name: "local", Kind: model.KindLocalDisk},
			{Name: "maint", Kind: model.KindMaintenance},
		},
		Pools: []model.Pool{
			{Name: "lab-a", BootServer: "bs-a", Weekly: []string{"mon-fri 08:00-18:00 desktop"}, Policy: &model.Policy{ThrottleCPU: 50}},
			{Name: "lab-b", Weekly: []string{"mon-fri 08:00-18:00 desktop"}},
		},
		Hosts: []model.Host{
			{Name: "pc-a1", MAC: "52:54:00:00:0a:01", Pool: "lab-a"},
			{Name: "pc-a2", MAC: "52:54:00:00:0a:02", Pool: "lab-a", BootServer: "bs-b"},
			{Name: "pc-b1", MAC: "52:54:00:00:0b:01", Pool: "lab-b"},
			{Name: "pc-b2", MAC: "52:54:00:00:0b:02", Pool: "lab-b", Weekly: []string{"daily 20:00-06:00 cluster"}},
		},
	}
}

func newResolver(t *testing.T, site *model.Site) *Resolver {
	t.Helper()
	if err := site.Validate(); err != nil {
		t.Fatal(err)
	}
	eng, err := schedule.Compile(site)
	if err != nil {
		t.Fatal(err)
	}
	return New(site, eng)
}

func TestBootServerFallback(t *testing.T) {
	noServers := func(s *model.Site) {
		s.BootServers = nil
		s.Pools[0].BootServer = ""
		s.Hosts[1].BootServer = ""
	}
	for _, tc := range []struct {
		name   string
		edit   func(*model.Site)
		host   string // "" = unknown host
		q      Query
		server string // "" = none
		url    string // checked when set
		from   ServerSource
	}{
		{"the host's own", nil, "pc-a2", Query{BootServer: "bs-a"}, "bs-b", "", ServerHost},
		{"its pool's", nil, "pc-a1", Query{BootServer: "bs-b"}, "bs-a", "", ServerPool},
		{"a pool without one: this instance's", nil, "pc-b1", Query{BootServer: "bs-b"}, "bs-b", "", ServerInstance},
		{"a pool without one: the site's first", nil, "pc-b1", Query{}, "bs-a", "", ServerFirst},
		{"an instance name the site lacks: the site's first", nil, "pc-b1", Query{BootServer: "gone"}, "bs-a", "", ServerFirst},
		{"self is only for sites without boot servers", nil, "pc-b1", Query{Self: "192.0.2.1:8080"}, "bs-a", "", ServerFirst},
		{"unknown host: this instance's", nil, "", Query{BootServer: "bs-b"}, "bs-b", "", ServerInstance},
		{"unknown host: the site's first", nil, "", Query{}, "bs-a", "", ServerFirst},
		{"no boot servers: the request's address", noServers, "pc-a1", Query{Self: "192.0.2.1:8080"}, SelfServerName, "http://192.0.2.1:8080", ServerSelf},
		{"no boot servers, unknown host: the request's address", noServers, "", Query{Self: "192.0.2.1:8080"}, SelfServerName, "http://192.0.2.1:8080", ServerSelf},
		{"no boot servers and no request address: none", noServers, "pc-a1", Query{BootServer: "bs-a"}, "", "", ServerNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := testSite(t)
			if tc.edit != nil {
				tc.edit(site)
			}
			r := newResolver(t, site)
			var h *model.Host
			if tc.host != "" {
				h = site.Host(tc.host)
			}
			srv, from := r.BootServer(h, tc.q)
			name := ""
			if srv != nil {
				name = srv.Name
			}
			if name != tc.server || from != tc.from || tc.url != "" && srv.HTTPURL != tc.url {
				t.Fatalf("got %+v from %d, want %s (%s) from %d", srv, from, tc.server, tc.url, tc.from)
			}
			if from.Homed() != (tc.from == ServerHost || tc.from == ServerPool) {
				t.Fatalf("Homed() = %v for %d", from.Homed(), from)
			}
			// Every question about the host answers with the same boot server.
			var a *Assignment
			if h != nil {
				a = r.For(h, tc.q)
			} else {
				a = r.MAC("02:00:00:00:00:99", tc.q)
			}
			if a.Server != srv && (a.Server == nil || srv == nil || !reflect.DeepEqual(*a.Server, *srv)) || a.ServerFrom != from {
				t.Fatalf("assignment's server %+v from %d, BootServer's %+v from %d", a.Server, a.ServerFrom, srv, from)
			}
		})
	}
}

func TestAssignment(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	wed := time.Date(2026, 12, 2, 10, 0, 0, 0, berlin)
	wedNight := time.Date(2026, 12, 2, 22, 0, 0, 0, berlin)
	r := newResolver(t, testSite(t))
	type want struct {
		host, pool, mode, rule string
		next                   time.Time
		nextMode               string
		image                  string // version Mode boots ("" = none)
		server                 string
		guestVersion           string // "" = no guest
		guestURL, guestNFS     string
		throttle               int
	}
	for _, tc := range []struct {
		name string
		a    *Assignment
		want want
	}{
		{"by name, desktop hours: newest desktop image, newest guest, pool policy", must(r.Host("pc-a1", Query{At: wed})),
			want{"pc-a1", "lab-a", "desktop", `pool lab-a weekly "mon-fri 08:00-18:00 desktop"`, time.Date(2026, 12, 2, 18, 0, 0, 0, berlin), "local",
				"2", "bs-a", "8", "http://10.1.0.1:8080/images/compute/8", "10.1.0.1:/srv/overtime/images/compute/8", 50}},
		{"by MAC, own boot server: the guest is located there", r.MAC("52:54:00:00:0a:02", Query{At: wed}),
			want{"pc-a2", "lab-a", "desktop", `pool lab-a weekly "mon-fri 08:00-18:00 desktop"`, time.Date(2026, 12, 2, 18, 0, 0, 0, berlin), "local",
				"2", "bs-b", "8", "http://10.2.0.1:8080/images/compute/8", "10.2.0.1:/exports/img/compute/8", 50}},
		{"cluster at night: pinned image and guest versions, default policy", must(r.Host("pc-b2", Query{At: wedNight, BootServer: "bs-b"})),
			want{"pc-b2", "lab-b", "cluster", `host pc-b2 weekly "daily 20:00-06:00 cluster"`, time.Date(2026, 12, 3, 6, 0, 0, 0, berlin), "local",
				"1", "bs-b", "7", "http://10.2.0.1:8080/images/compute/7", "10.2.0.1:/exports/img/compute/7", model.DefaultPolicy().ThrottleCPU}},
		{"local disk: no image, no guest", must(r.Host("pc-b1", Query{At: wedNight})),
			want{"pc-b1", "lab-b", "local", "site default", time.Date(2026, 12, 3, 8, 0, 0, 0, berlin), "desktop",
				"", "bs-a", "", "", "", model.DefaultPolicy().ThrottleCPU}},
		{"unknown MAC: the unknown-host mode, for ever", r.MAC("02:00:00:00:00:01", Query{At: wed, BootServer: "bs-b"}),
			want{"", "", "local", "site default (unknown host)", time.Time{}, "", "", "bs-b", "", "", "", model.DefaultPolicy().ThrottleCPU}},
		{"no MAC at all (pxelinux.cfg/default)", r.MAC("", Query{At: wed}),
			want{"", "", "local", "site default (unknown host)", time.Time{}, "", "", "bs-a", "", "", "", model.DefaultPolicy().ThrottleCPU}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, w := tc.a, tc.want
			got := want{rule: a.Decision.Rule, next: a.Decision.Next, nextMode: a.Decision.NextMode, throttle: a.Policy.ThrottleCPU}
			if a.Host != nil {
				got.host = a.Host.Name
			}
			if a.Pool != nil {
				got.pool = a.Pool.Name
			}
			if a.Mode != nil {
				got.mode = a.Mode.Name
			}
			if a.Image != nil {
				got.image = a.Image.Version
			}
			if a.Server != nil {
				got.server = a.Server.Name
			}
			if a.Guest != nil {
				got.guestVersion, got.guestURL, got.guestNFS = a.Guest.Resolved.Version, a.Guest.ImageURL, a.Guest.NFS
			}
			if !got.next.Equal(w.next) {
				t.Errorf("next change %s, want %s", got.next, w.next)
			}
			got.next = w.next
			if got != w {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
			if a.Guest != nil && (a.Guest.Name != "overtime-"+w.host || a.Guest.Backend != model.BackendQEMU || a.GuestUnavailable != "") {
				t.Errorf("guest %+v (unavailable %q)", a.Guest, a.GuestUnavailable)
			}
			// The boot menu offers the site's local-disk modes besides the scheduled one;
			// maintenance only where it was opened (TestMenuOffers).
			var others []string
			for _, o := range a.Others {
				others = append(others, o.Mode.Name)
			}
			wantOthers := "local"
			if w.mode == "local" {
				wantOthers = ""
			}
			if strings.Join(others, ",") != wantOthers {
				t.Errorf("other menu entries %v, want %s", others, wantOthers)
			}
		})
	}
}

func TestUnknownHostName(t *testing.T) {
	r := newResolver(t, testSite(t))
	_, err := r.Host("nope", Query{})
	var u *UnknownHostError
	if !errors.As(err, &u) || !u.NotFound() || err.Error() != `host "nope" not found` {
		t.Fatalf("got %v", err)
	}
}

// A mode that names a guest which cannot run gives no guest and says why.
func TestGuestUnavailable(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	wed := time.Date(2026, 12, 2, 10, 0, 0, 0, berlin)
	for _, tc := range []struct {
		name string
		edit func(*model.Site)
		q    Query
		want string
	}{
		{"image without versions", func(s *model.Site) { s.Modes[0].Guest.Image = "compute-next" }, Query{},
			"image compute-next has no published version"},
		{"pinned version not published", func(s *model.Site) { s.Modes[0].Guest.Version = "9" }, Query{},
			"image compute version 9 is not published"},
		{"image not defined", func(s *model.Site) { s.Modes[0].Guest.Image = "gone" }, Query{},
			`mode desktop: guest image "gone" is not defined`},
		{"no boot server", func(s *model.Site) { s.BootServers, s.Pools[0].BootServer, s.Hosts[1].BootServer = nil, "", "" }, Query{BootServer: "bs-a"},
			"no boot server serves host pc-a1 (the site has none)"},
		{"boot server with an unusable URL", func(s *model.Site) { s.BootServers[0].HTTPURL = "ftp://x" }, Query{},
			"boot server bs-a: render: invalid boot server HTTP URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := testSite(t)
			tc.edit(site)
			eng, err := schedule.Compile(site) // some edits do not validate; the resolver copes
			if err != nil {
				t.Fatal(err)
			}
			q := tc.q
			q.At = wed
			a := must(New(site, eng).Host("pc-a1", q))
			if a.Guest != nil || !strings.HasPrefix(a.GuestUnavailable, tc.want) {
				t.Fatalf("guest %+v, unavailable %q, want %q", a.Guest, a.GuestUnavailable, tc.want)
			}
			cfg, err := a.AgentConfig()
			if err != nil || cfg.Guest != nil || cfg.GuestUnavailable != a.GuestUnavailable {
				t.Fatalf("agent config %+v %v", cfg, err)
			}
		})
	}
}

// The renderers' and the agent's documents carry the assignment unchanged.
func TestDocuments(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := time.Date(2026, 12, 2, 9, 30, 15, 500, time.UTC)
	r := newResolver(t, testSite(t))
	a := must(r.Host("pc-a1", Query{At: at}))

	cfg, err := a.AgentConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "pc-a1" || cfg.MAC != "52:54:00:00:0a:01" || cfg.Pool != "lab-a" || cfg.Mode != "desktop" || cfg.Kind != model.KindDesktop ||
		cfg.NextMode != "local" || !cfg.NextChange.Equal(time.Date(2026, 12, 2, 18, 0, 0, 0, berlin)) || cfg.NextChange.Location().String() != "Europe/Berlin" ||
		!cfg.Generated.Equal(at.Truncate(time.Second)) || cfg.Generated.Location().String() != "Europe/Berlin" ||
		cfg.Policy.ThrottleCPU != 50 || cfg.Guest != a.Guest || cfg.Guest.Resolved.Created.Location() != time.UTC {
		t.Fatalf("agent config %+v", cfg)
	}

	b := a.Boot()
	if b.MAC != "52:54:00:00:0a:01" || b.Host != a.Host || b.Server.Name != "bs-a" || b.Mode != a.Mode || b.Image != a.Image ||
		b.Reason != a.Decision.Rule || !b.Until.Equal(a.Decision.Next) || b.Loc.String() != "Europe/Berlin" || len(b.Others) != 1 || b.Exam {
		t.Fatalf("boot %+v", b)
	}

	// Unknown PCs boot, but have no agent configuration.
	u := r.MAC("02:00:00:00:00:01", Query{At: at})
	if _, err := u.AgentConfig(); err == nil {
		t.Fatal("agent configuration for an unknown MAC")
	}
	if b := u.Boot(); b.Host != nil || b.MAC != "02:00:00:00:00:01" || b.Mode.Name != "local" || !b.Until.IsZero() {
		t.Fatalf("unknown boot %+v", b)
	}
}

func must(a *Assignment, err error) *Assignment {
	if err != nil {
		panic(err)
	}
	return a
}

// TestCourseVM: a course-vm mode's VM reaches the agent's configuration located on the
// host's boot server (newest version), or says why it cannot run; other modes carry none.
func TestCourseVM(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	wed := time.Date(2026, 12, 2, 10, 0, 0, 0, berlin)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	course := func(s *model.Site) {
		s.Images = append(s.Images, model.Image{Name: "bio", Kind: model.ImageCourseVM, Pool: "lab-a", Versions: []model.ImageVersion{
			{Version: "ws-1", SHA256: sha, Path: "bio/ws-1", Created: day(1)},
			{Version: "ws-2", SHA256: sha, Path: "bio/ws-2", Created: day(5)},
		}})
		s.Modes = append(s.Modes, model.Mode{Name: "course-bio", Kind: model.KindCourseVM, Image: "desk", VM: "bio"})
		s.Pools[0].Weekly = []string{"wed 09:00-12:00 course-bio"}
	}
	site := testSite(t)
	course(site)
	r := newResolver(t, site)
	a := must(r.Host("pc-a1", Query{At: wed}))
	cfg, err := a.AgentConfig()
	if err != nil {
		t.Fatal(err)
	}
	vm := cfg.CourseVM
	if cfg.Kind != model.KindCourseVM || vm == nil || vm.Image != "bio" || vm.Resolved.Version != "ws-2" || vm.Resolved.Path != "bio/ws-2" ||
		vm.ImageURL != "http://10.1.0.1:8080/images/bio/ws-2" || vm.NFS != "10.1.0.1:/srv/overtime/images/bio/ws-2" || cfg.Guest != nil {
		t.Fatalf("course VM %+v (config %+v)", vm, cfg)
	}
	// The desktop image the mode boots keeps its own version choice.
	if a.Image == nil || a.Image.Version != "2" {
		t.Errorf("booted image %+v", a.Image)
	}
	// Another mode: no course VM.
	if b := must(r.Host("pc-b1", Query{At: wed})); b.CourseVM != nil || b.CourseVMUnavailable != "" {
		t.Errorf("desktop mode got a course VM: %+v %q", b.CourseVM, b.CourseVMUnavailable)
	}
	// No published version: unavailable, with the reason.
	site = testSite(t)
	course(site)
	site.Images[len(site.Images)-1].Versions = nil
	a = must(newResolver(t, site).Host("pc-a1", Query{At: wed}))
	if a.CourseVM != nil || a.CourseVMUnavailable != "course VM image bio has no published version" {
		t.Errorf("unpublished: %+v %q", a.CourseVM, a.CourseVMUnavailable)
	}
}

// The agent configuration hands each host back its own last calibration, which the
// service keeps from the heartbeats (Query.Interference); without one it has none.
func TestAgentConfigInterference(t *testing.T) {
	site := testSite(t)
	r := newResolver(t, site)
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	p := &wire.InterferenceProfile{Measured: at, Kernel: "6.8.0", CPUs: 8, CPUSlowdown: 0.02}
	q := Query{At: at, Interference: func(host string) *wire.InterferenceProfile {
		if host == "pc-a1" {
			return p
		}
		return nil
	}}
	for _, tc := range []struct {
		host string
		q    Query
		want *wire.InterferenceProfile
	}{{"pc-a1", q, p}, {"pc-b1", q, nil}, {"pc-a1", Query{At: at}, nil}} {
		cfg, err := r.AgentConfig(site.Host(tc.host), tc.q, Running{})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Interference != tc.want {
			t.Errorf("%s: interference %+v, want %+v", tc.host, cfg.Interference, tc.want)
		}
	}
}
