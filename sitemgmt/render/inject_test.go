package render

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Defence in depth: the renderers get validated data, but a value that slipped past
// validation (a bug, a hand-edited LDAP entry, a caller that forgot Validate) must not
// reach a file. Every mutation below puts a line break, quote, '$', directive or path
// escape into one field; the renderer must return an error and write nothing.

func TestBootRejectsUnvalidatedData(t *testing.T) {
	site := testSite()
	for name, mutate := range map[string]func(b *Boot){
		"host name newline":     func(b *Boot) { b.Host.Name = "pc-a01\nLABEL evil" },
		"host name space":       func(b *Boot) { b.Host.Name = "pc-a01 init=/bin/sh" },
		"host pool":             func(b *Boot) { b.Host.Pool = "lab a" },
		"host MAC mismatch":     func(b *Boot) { b.Host.MAC = "52:54:00:0a:00:02" },
		"MAC newline":           func(b *Boot) { b.MAC = "52:54:00:0a:00:01\n"; b.Host = nil },
		"MAC upper case":        func(b *Boot) { b.MAC = "52:54:00:0A:00:01"; b.Host = nil },
		"mode name":             func(b *Boot) { b.Mode.Name = "desktop\nboot" },
		"mode kind":             func(b *Boot) { b.Mode.Kind = "desktop\n" },
		"mode image":            func(b *Boot) { b.Mode.Image = "desk top" },
		"mode vm":               func(b *Boot) { b.Mode.VM = "vm$x" },
		"kernel args newline":   func(b *Boot) { b.Mode.KernelArgs = "quiet\ninit=/bin/sh" },
		"kernel args dollar":    func(b *Boot) { b.Mode.KernelArgs = "x=${ip}" },
		"kernel args quote":     func(b *Boot) { b.Mode.KernelArgs = `x="y"` },
		"kernel path escape":    func(b *Boot) { b.Mode.Kernel = "../../etc/shadow" },
		"initrd path space":     func(b *Boot) { b.Mode.Initrd = "a b" },
		"image path newline":    func(b *Boot) { b.Image.Path = "desktop/1\nAPPEND x" },
		"image path absolute":   func(b *Boot) { b.Image.Path = "/etc" },
		"image sha":             func(b *Boot) { b.Image.SHA256 = "abc def" },
		"image version":         func(b *Boot) { b.Image.Version = "1 2" },
		"wrong pinned version":  func(b *Boot) { b.Mode.ImageVersion = "2026.10.01-1" },
		"url quote":             func(b *Boot) { b.Server.HTTPURL = `http://10.0.0.1:8080/"x` },
		"url dollar":            func(b *Boot) { b.Server.HTTPURL = "http://10.0.0.1/${ip}" },
		"url newline":           func(b *Boot) { b.Server.HTTPURL = "http://10.0.0.1/\nx" },
		"url comma":             func(b *Boot) { b.Server.HTTPURL = "http://10.0.0.1/a,b" },
		"url dotdot":            func(b *Boot) { b.Server.HTTPURL = "http://10.0.0.1/a/../b" },
		"url scheme":            func(b *Boot) { b.Server.HTTPURL = "tftp://10.0.0.1" },
		"nfs server":            func(b *Boot) { b.Server.NFSServer = "nfs server" },
		"nfs root":              func(b *Boot) { b.Server.NFSRoot = "/srv/x\ny" },
		"nfs root relative":     func(b *Boot) { b.Server.NFSRoot = "srv/x" },
		"server ip":             func(b *Boot) { b.Server.IP = "10.0.0.1 x" },
		"server name":           func(b *Boot) { b.Server.Name = "Boot1" },
		"other mode name":       func(b *Boot) { b.Others[0].Mode.Name = "local\nkernel x" },
		"other mode kernel arg": func(b *Boot) { b.Others[1].Mode.KernelArgs = "a\tb" },
		"nil server":            func(b *Boot) { b.Server = nil },
		"nil mode":              func(b *Boot) { b.Mode = nil },
		"nil other mode":        func(b *Boot) { b.Others[0].Mode = nil },
		"image for no-image":    func(b *Boot) { b.Others[0].Image = b.Image },
	} {
		for _, r := range []struct {
			name string
			fn   func(io.Writer, Boot) error
		}{{"ipxe", IPXE}, {"pxelinux", PXELinux}} {
			t.Run(r.name+"/"+name, func(t *testing.T) {
				s := site.Clone()
				b := testBoot(t, s, "pc-a01", "", "desktop", "r", "local", "maint")
				// Own copies, so that one mutation does not leak into the next case.
				h, srv, m, v := *b.Host, *b.Server, *b.Mode, *b.Image
				b.Host, b.Server, b.Mode, b.Image = &h, &srv, &m, &v
				for i := range b.Others {
					om := *b.Others[i].Mode
					b.Others[i].Mode = &om
				}
				mutate(&b)
				var buf bytes.Buffer
				if err := r.fn(&buf, b); err == nil {
					t.Fatalf("rendered without error:\n%s", buf.String())
				}
				if buf.Len() != 0 {
					t.Fatalf("wrote %d bytes despite the error", buf.Len())
				}
			})
		}
	}
	if err := IPXEChain(io.Discard, "http://10.0.0.1:8080/${x}"); err == nil {
		t.Error("IPXEChain accepted a URL with '$'")
	}
}

// Free text is shown, not parsed: it is sanitized rather than refused, and nothing in it
// survives that could end a line or start a directive.
func TestBootSanitizesFreeText(t *testing.T) {
	site := testSite()
	b := testBoot(t, site, "pc-a01", "", "desktop", "rule \"x\"\nUI evil.c32\r\n${ip} \\ || shell", "local")
	m := *b.Mode
	m.Description = "Desktop && shell || reboot # 'q' \"$x\"\tend"
	b.Mode = &m
	for _, r := range []struct {
		name string
		fn   func(io.Writer, Boot) error
	}{{"ipxe", IPXE}, {"pxelinux", PXELinux}} {
		var buf bytes.Buffer
		if err := r.fn(&buf, b); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		out := buf.String()
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "UI evil") {
				t.Errorf("%s: injected directive on its own line: %q", r.name, l)
			}
		}
		if strings.Contains(out, "${ip}") || strings.ContainsAny(out, "\r\\\"") {
			t.Errorf("%s: unsanitized text in output:\n%s", r.name, out)
		}
		for _, l := range strings.Split(out, "\n") {
			// Comments are never executed; every other line must not chain commands.
			if r.name == "ipxe" && !strings.HasPrefix(l, "#") && (strings.Contains(l, "|| shell") || strings.Contains(l, "&& shell")) {
				t.Errorf("ipxe: command chaining survived in menu text: %q", l)
			}
		}
	}
}

func TestDnsmasqRejectsUnvalidatedData(t *testing.T) {
	for name, mutate := range map[string]func(d *Dnsmasq){
		"host name newline": func(d *Dnsmasq) { d.Site.Hosts[0].Name = "pc-a01\ndhcp-option=3,1.2.3.4" },
		"host name comma":   func(d *Dnsmasq) { d.Site.Hosts[0].Name = "pc-a01,ignore" },
		"host MAC":          func(d *Dnsmasq) { d.Site.Hosts[0].MAC = "52:54:00:0a:00:01,set:x" },
		"host IP":           func(d *Dnsmasq) { d.Site.Hosts[0].IP = "10.0.0.11\nx" },
		"interface":         func(d *Dnsmasq) { d.Server.Interface = "eth1\ndhcp-range=0.0.0.0,proxy" },
		"hosts file":        func(d *Dnsmasq) { d.HostsFile = "/var/lib/x\nport=53" },
		"hosts file rel":    func(d *Dnsmasq) { d.HostsFile = "hosts" },
		"tftp root":         func(d *Dnsmasq) { d.TFTPRoot = "/srv/tftp /" },
		"url":               func(d *Dnsmasq) { d.Server.HTTPURL = `http://10.0.0.1:8080/",x` },
		"server ip":         func(d *Dnsmasq) { d.Server.IP = "" },
		"subnet":            func(d *Dnsmasq) { d.Server.Subnet = "10.0.0.0/24\nx" },
		"router":            func(d *Dnsmasq) { d.Server.Router = "10.0.0.254,8.8.8.8" },
		"dns server comma":  func(d *Dnsmasq) { d.Server.DNSServers = []string{"10.0.0.53,8.8.8.8"} },
		"dns server line":   func(d *Dnsmasq) { d.Server.DNSServers = []string{"10.0.0.53\nport=53"} },
		"dns server self":   func(d *Dnsmasq) { d.Server.DNSServers = []string{"0.0.0.0"} },
		"dns servers 4":     func(d *Dnsmasq) { d.Server.DNSServers = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"} },
		"domain comma":      func(d *Dnsmasq) { d.Server.Domain = "lab.example.org,8.8.8.8" },
		"domain newline":    func(d *Dnsmasq) { d.Server.Domain = "lab.example.org\nport=53" },
		"domain space":      func(d *Dnsmasq) { d.Server.Domain = "lab.example.org port=53" },
		"domain quote":      func(d *Dnsmasq) { d.Server.Domain = `"lab.example.org"` },
		"range outside":     func(d *Dnsmasq) { d.Server.RangeFrom = "10.9.0.1" },
		"half range":        func(d *Dnsmasq) { d.Server.RangeTo = "" },
		"dhcp mode":         func(d *Dnsmasq) { d.Server.DHCP = "full\n" },
		"site name":         func(d *Dnsmasq) { d.Site.Name = "site\nport=53" },
	} {
		t.Run(name, func(t *testing.T) {
			site := testSite()
			d := testDnsmasq(site, "boot1", "/var/lib/overtime/hosts", "/srv/tftp")
			mutate(&d)
			var conf, hosts bytes.Buffer
			errConf, errHosts := d.Config(&conf), d.Hosts(&hosts)
			if errConf == nil && errHosts == nil {
				t.Fatalf("rendered without error:\n%s\n%s", conf.String(), hosts.String())
			}
			if (errConf != nil && conf.Len() != 0) || (errHosts != nil && hosts.Len() != 0) {
				t.Fatalf("wrote output despite the error")
			}
			for _, out := range []string{conf.String(), hosts.String()} {
				if strings.Contains(out, "8.8.8.8") || strings.Contains(out, "port=53") || strings.Contains(out, "set:evil") {
					t.Fatalf("injected value reached the output:\n%s", out)
				}
			}
		})
	}
	// Proxy DHCP hands out no router and no addresses.
	site := testSite()
	d := testDnsmasq(site, "boot2", "/h", "/t")
	d.Server.Router = "10.0.1.254"
	if err := d.Config(io.Discard); err == nil {
		t.Error("proxy server with a router rendered")
	}
	// ... and no DNS: the segment's own DHCP server does.
	for name, edit := range map[string]func(b *model.BootServer){
		"dns servers": func(b *model.BootServer) { b.DNSServers = []string{"10.0.1.53"} },
		"domain":      func(b *model.BootServer) { b.Domain = "lab-b.example.org" },
	} {
		d := testDnsmasq(testSite(), "boot2", "/h", "/t")
		edit(d.Server)
		if err := d.Config(io.Discard); err == nil {
			t.Errorf("proxy server with %s rendered", name)
		}
	}
}

func TestSlurmRejectsUnvalidatedData(t *testing.T) {
	for name, mutate := range map[string]func(s *model.Site, modeOf *func(*model.Host) *model.Mode){
		"host name": func(s *model.Site, _ *func(*model.Host) *model.Mode) { s.Hosts[0].Name = "pc-a01 Weight=0" },
		"host pool": func(s *model.Site, _ *func(*model.Host) *model.Mode) { s.Hosts[0].Pool = "lab-a\nNodeName=evil" },
		"host IP":   func(s *model.Site, _ *func(*model.Host) *model.Mode) { s.Hosts[0].IP = "10.0.0.11 Weight=0" },
		"site name": func(s *model.Site, _ *func(*model.Host) *model.Mode) { s.Name = "x\nPartitionName=evil" },
		"mode kind": func(_ *model.Site, m *func(*model.Host) *model.Mode) {
			*m = func(*model.Host) *model.Mode { return &model.Mode{Name: "m", Kind: "x Weight=0"} }
		},
		"no mode": func(_ *model.Site, m *func(*model.Host) *model.Mode) {
			*m = func(*model.Host) *model.Mode { return nil }
		},
		"nil modeOf": func(_ *model.Site, m *func(*model.Host) *model.Mode) { *m = nil },
	} {
		t.Run(name, func(t *testing.T) {
			site := testSite()
			mo := modeOf(site)
			mutate(site, &mo)
			var buf bytes.Buffer
			if err := SlurmNodes(&buf, site, mo); err == nil || buf.Len() != 0 {
				t.Fatalf("err %v, %d bytes written:\n%s", err, buf.Len(), buf.String())
			}
		})
	}
}

func TestNFSRejectsUnvalidatedData(t *testing.T) {
	const both, ganesha, exports = 3, 1, 2
	for name, c := range map[string]struct {
		mutate     func(s *model.Site)
		exportRoot string
		clients    string
		which      int // the renderers that read the mutated value
	}{
		"path quote":         {func(s *model.Site) { s.Images[1].Versions[0].Path = `desktop/"x` }, "", "*", both},
		"path newline":       {func(s *model.Site) { s.Images[1].Versions[0].Path = "desktop/x\n}" }, "", "*", both},
		"path escape":        {func(s *model.Site) { s.Images[1].Versions[0].Path = "../etc" }, "", "*", both},
		"duplicate path":     {func(s *model.Site) { s.Images[1].Versions[1].Path = s.Images[1].Versions[0].Path }, "", "*", both},
		"image name":         {func(s *model.Site) { s.Images[1].Name = "desk top" }, "", "*", both},
		"version":            {func(s *model.Site) { s.Images[1].Versions[0].Version = "a;b" }, "", "*", both},
		"sha256":             {func(s *model.Site) { s.Images[1].Versions[0].SHA256 = "x" }, "", "*", both},
		"export root rel":    {func(*model.Site) {}, "srv/images", "*", both},
		"export root brace":  {func(*model.Site) {}, "/srv/}images", "*", both},
		"site name newline":  {func(s *model.Site) { s.Name = "x\n}" }, "", "*", both},
		"clients options":    {func(*model.Site) {}, "", "10.0.0.0/24(rw,no_root_squash)", exports},
		"clients two":        {func(*model.Site) {}, "", "10.0.0.0/24 *", exports},
		"clients newline":    {func(*model.Site) {}, "", "*\n/ *(rw)", exports},
		"clients empty":      {func(*model.Site) {}, "", "", exports},
		"nfs root of server": {func(s *model.Site) { s.BootServers[1].NFSRoot = "/x y" }, "", "*", ganesha},
	} {
		t.Run(name, func(t *testing.T) {
			site := testSite()
			c.mutate(site)
			var g, e bytes.Buffer
			errG := Ganesha(&g, site, site.BootServer("boot2"), c.exportRoot)
			errE := Exports(&e, site, c.exportRoot, c.clients)
			if c.which&ganesha != 0 && (errG == nil || g.Len() != 0) {
				t.Errorf("ganesha: err %v, %d bytes written:\n%s", errG, g.Len(), g.String())
			}
			if c.which&exports != 0 && (errE == nil || e.Len() != 0) {
				t.Errorf("exports: err %v, %d bytes written:\n%s", errE, e.Len(), e.String())
			}
		})
	}
}
