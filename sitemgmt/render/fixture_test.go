package render

import (
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// testSite is the site every render test uses. It passes model.Site.Validate (checked by
// TestFixtureValid), so the tests exercise the renderers on exactly the data they get in
// production.
func testSite() *model.Site {
	day := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	sha := func(c byte) string {
		b := make([]byte, 64)
		for i := range b {
			b[i] = "0123456789abcdef"[(int(c)+i)%16]
		}
		return string(b)
	}
	return &model.Site{
		Name:        "example-uni",
		Timezone:    "Europe/Berlin",
		DefaultMode: "desktop",
		UnknownMode: "desktop",
		Pools: []model.Pool{
			{Name: "lab-a", Description: "Pool room A", Room: "E1.01", BootServer: "boot1",
				Weekly: []string{"mon-fri 08:00-18:00 desktop", "mon-sun 18:00-24:00 cluster"}},
			{Name: "lab-b", Description: "Pool room B (proxy DHCP)", BootServer: "boot2"},
			{Name: "lab-c", Description: "Seminar room", BootServer: "boot3"},
		},
		Hosts: []model.Host{
			{Name: "pc-a01", MAC: "52:54:00:0a:00:01", IP: "10.0.0.11", Pool: "lab-a"},
			{Name: "pc-a02", MAC: "52:54:00:0a:00:02", IP: "10.0.0.12", Pool: "lab-a"},
			{Name: "pc-a03", MAC: "52:54:00:0a:00:03", Pool: "lab-a"},
			{Name: "pc-a04", MAC: "52:54:00:0a:00:04", IP: "10.0.0.14", Pool: "lab-a", BootServer: "boot2"},
			{Name: "pc-a10", MAC: "52:54:00:0a:00:10", IP: "10.0.0.20", Pool: "lab-a"},
			{Name: "pc-b1", MAC: "52:54:00:0b:00:01", IP: "10.0.1.21", Pool: "lab-b"},
			{Name: "pc-b2", MAC: "52:54:00:0b:00:02", Pool: "lab-b"},
			{Name: "seminar", MAC: "52:54:00:0c:00:01", IP: "10.0.2.30", Pool: "lab-c"},
		},
		BootServers: []model.BootServer{
			{Name: "boot1", IP: "10.0.0.1", HTTPURL: "http://10.0.0.1:8080", DHCP: model.DHCPFull,
				Interface: "eth1", Subnet: "10.0.0.0/24", RangeFrom: "10.0.0.200", RangeTo: "10.0.0.249", Router: "10.0.0.254",
				DNSServers: []string{"10.0.0.53", "192.0.2.53"}, Domain: "lab-a.example.org"},
			{Name: "boot2", IP: "10.0.1.1", HTTPURL: "http://boot2.example.org:8080/overtime/", NFSServer: "nfs.example.org",
				NFSRoot: "/export/overtime", DHCP: model.DHCPProxy, Subnet: "10.0.1.0/24"},
			{Name: "boot3", IP: "10.0.2.1", HTTPURL: "https://boot3.example.org", DHCP: model.DHCPFull,
				Subnet: "10.0.2.0/24", Router: "10.0.2.254"},
		},
		Modes: []model.Mode{
			{Name: "cluster", Kind: model.KindCluster, Description: "Dedicated compute node", Image: "desktop",
				KernelArgs: "overtime.guest=dedicated mitigations=auto"},
			{Name: "course-ml", Kind: model.KindCourseVM, Description: "Machine learning course VM", Image: "desktop", VM: "course-ml"},
			{Name: "desktop", Kind: model.KindDesktop, Description: "Stateless desktop (Debian 13)", Image: "desktop"},
			{Name: "desktop-next", Kind: model.KindDesktop, Description: "Next desktop release", Image: "desktop-next"},
			{Name: "desktop-old", Kind: model.KindDesktop, Description: "Desktop as of October", Image: "desktop",
				ImageVersion: "2026.10.01-1"},
			{Name: "local", Kind: model.KindLocalDisk, Description: "Boot the local disk"},
			{Name: "maint", Kind: model.KindMaintenance, Description: "Maintenance system",
				Kernel: "maintenance/vmlinuz-6.12", Initrd: "maintenance/initrd.img-6.12", KernelArgs: "console=ttyS0,115200n8"},
		},
		Images: []model.Image{
			{Name: "course-ml", Kind: model.ImageCourseVM, Description: "ML course", Pool: "lab-a", Versions: []model.ImageVersion{
				{Version: "2026.11.02-1", SHA256: sha('c'), Size: 4 << 30, Path: "course-ml/2026.11.02-1", Created: day("2026-11-02T09:00:00Z")},
			}},
			{Name: "desktop", Kind: model.ImageDesktop, Description: "Pool desktop", Versions: []model.ImageVersion{
				{Version: "2026.10.01-1", SHA256: sha('a'), Size: 6 << 30, Path: "desktop/2026.10.01-1", Created: day("2026-10-01T12:00:00Z")},
				{Version: "2026.11.21-1", SHA256: sha('b'), Size: 6 << 30, Path: "desktop/2026.11.21-1", Created: day("2026-11-21T12:00:00Z")},
			}},
			{Name: "desktop-next", Kind: model.ImageDesktop, Description: "Not built yet"},
		},
	}
}

// berlin is the fixture site's zone.
func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// testModes is the effective mode of each fixture host at render time.
var testModes = map[string]string{
	"pc-a01":  "desktop",
	"pc-a02":  "cluster",
	"pc-a03":  "course-ml",
	"pc-a04":  "cluster",
	"pc-a10":  "local",
	"pc-b1":   "maint",
	"pc-b2":   "desktop",
	"seminar": "desktop-old",
}

func modeOf(site *model.Site) func(h *model.Host) *model.Mode {
	return func(h *model.Host) *model.Mode { return site.Mode(testModes[h.Name]) }
}

// resolve is what the schedule engine hands the renderers: the version a mode boots, nil
// when it boots no image or its image has no (such) version.
func resolve(site *model.Site, m *model.Mode) *model.ImageVersion {
	if m.Image == "" {
		return nil
	}
	return site.Image(m.Image).Version(m.ImageVersion)
}

func entry(site *model.Site, name string) MenuEntry {
	m := site.Mode(name)
	return MenuEntry{Mode: m, Image: resolve(site, m)}
}

// testBoot builds the Boot of a fixture host (or of an unknown MAC when host is "").
func testBoot(t *testing.T, site *model.Site, host, mac, mode, reason string, others ...string) Boot {
	t.Helper()
	b := Boot{
		MAC:     mac,
		Mode:    site.Mode(mode),
		Reason:  reason,
		Until:   time.Date(2026, 11, 23, 17, 0, 0, 0, time.UTC),
		Loc:     berlin(t),
		Timeout: 5 * time.Second,
	}
	if b.Mode == nil {
		t.Fatalf("no mode %s", mode)
	}
	b.Image = resolve(site, b.Mode)
	server := "boot1"
	if host != "" {
		b.Host = site.Host(host)
		b.MAC = b.Host.MAC
		server = site.HostBootServer(b.Host)
	}
	b.Server = site.BootServer(server)
	for _, o := range others {
		b.Others = append(b.Others, entry(site, o))
	}
	return b
}

func TestFixtureValid(t *testing.T) {
	if err := testSite().Validate(); err != nil {
		t.Fatalf("fixture site does not validate: %v", err)
	}
}
