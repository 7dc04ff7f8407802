package render

import (
	"fmt"
	"io"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Whatever validation accepts must render: a boot server field that Site.Validate lets
// through but a renderer refuses would fail every PC of that boot server (each boot script
// request a 500) and the boot server's dnsmasq and NFS configuration.

var trickyBootURLs = []string{
	"http://10.0.0.1:8080", "https://boot.example.org/overtime/", "http://bs1", "http://10.0.0.1/~u/a_b-c.d",
	"http://10.0.0.1:8080/a,b", "http://10.0.0.1/a;b", "http://10.0.0.1/a|b", "http://10.0.0.1/a&b", "http://10.0.0.1/a'b",
	"http://10.0.0.1/%41", "http://10.0.0.1/a%20b", "http://user@10.0.0.1", "http://user:pw@10.0.0.1", "http://[fd00::1]:8080",
	"http://10.0.0.1/a/../b", "http://10.0.0.1/?", "http://10.0.0.1/#", "http://10.0.0.1/a#b", "http://10.0.0.1/a=b",
	"http://10.0.0.1/a+b", "http://10.0.0.1/a:b", "http://10.0.0.1/a!b", "http://10.0.0.1/a*b", "http://10.0.0.1/a(b)",
	"http://10.0.0.1/a^b", "http://10.0.0.1/a{b}", "http://10.0.0.1/a[b]", "http://10.0.0.1/a@b", "http://10.0.0.1/a~b",
	"HTTP://10.0.0.1", "http://10.0.0.1//x", "http://10.0.0.1/.", "http://a_b", "http://10.0.0.1:8080/a b",
	"http://10.0.0.1/${x}", "http://10.0.0.1/a\"b", "http://10.0.0.1/a\\b", "http://10.0.0.1/a\nb", "http://10.0.0.1/ä",
	"ftp://10.0.0.1", "http://", "http:10.0.0.1", "//10.0.0.1", "http://10.0.0.1:", "http://-x", "http://x.",
}

var trickyDNSServers = [][]string{
	nil, {"10.0.0.53"}, {"10.0.0.53", "192.0.2.1", "10.9.9.9"}, {"1", "2", "3", "4"}, {"0.0.0.0"}, {"127.0.0.1"},
	{"255.255.255.255"}, {"224.0.0.1"}, {"10.0.0.53", "10.0.0.53"}, {""}, {"10.0.0.53,8.8.8.8"}, {"10.0.0.53 8.8.8.8"},
	{"fd00::53"}, {"10.0.0.53\n"}, {"010.0.0.53"},
}

var trickyDomains = []string{
	"", "lab.example.org", "example", "a-b.c", "x.0a", "10.0.0.1", "a.123", "Lab.example.org", "lab.example.org.",
	"a..b", "a,b", "a b", "a\"b", "a'b", "a\nb", "a#b", "a;b", "_srv.example.org", "ä.example.org",
}

var trickyNFSServers = []string{
	"", "10.0.0.1", "nfs.example.org", "nfs", "a..b", "a.-b", "a-.b", "1.2.3", "x-", "-x", "nfs_1", "NFS", "a.b.", "[fd00::1]",
	"10.0.0.1:2049", "a,b", "a b",
}

// checkRendersIfValid renders every file of every boot server of site, if site validates.
func checkRendersIfValid(t *testing.T, site *model.Site, what string) {
	t.Helper()
	if site.Validate() != nil {
		return
	}
	fail := func(file string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: accepted by validation, but %s does not render: %v", what, file, err)
		}
	}
	for _, srv := range site.BootServers {
		d := testDnsmasq(site, srv.Name, "/var/lib/overtime/dnsmasq.hosts", "/srv/tftp")
		fail("dnsmasq config", d.Config(io.Discard))
		fail("dnsmasq hosts", d.Hosts(io.Discard))
		fail("ganesha", Ganesha(io.Discard, site, site.BootServer(srv.Name), DefaultNFSRoot))
		fail("iPXE chain", IPXEChain(io.Discard, srv.HTTPURL))
	}
	fail("exports", Exports(io.Discard, site, DefaultNFSRoot, "10.0.0.0/16"))
	fail("slurm", SlurmNodes(io.Discard, site, modeOf(site)))
	var all []string
	for _, m := range site.Modes {
		all = append(all, m.Name)
	}
	for _, h := range site.Hosts {
		b := testBoot(t, site, h.Name, "", testModes[h.Name], "r", all...)
		fail("iPXE of "+h.Name, IPXE(io.Discard, b))
		fail("PXELINUX of "+h.Name, PXELinux(io.Discard, b))
	}
	for _, srv := range site.BootServers {
		b := testBoot(t, site, "", "52:54:00:ff:00:01", "desktop", "unknown", all...)
		b.Server = site.BootServer(srv.Name)
		fail("iPXE of an unknown MAC", IPXE(io.Discard, b))
		fail("PXELINUX of an unknown MAC", PXELinux(io.Discard, b))
	}
}

func siteWithServers(edit func(s *model.BootServer)) *model.Site {
	site := testSite()
	for i := range site.BootServers {
		edit(&site.BootServers[i])
	}
	return site
}

func TestAcceptedBootServerRenders(t *testing.T) {
	for _, u := range trickyBootURLs {
		checkRendersIfValid(t, siteWithServers(func(s *model.BootServer) { s.HTTPURL = u }), "HTTP URL "+u)
	}
	for _, n := range trickyNFSServers {
		checkRendersIfValid(t, siteWithServers(func(s *model.BootServer) { s.NFSServer = n }), "NFS server "+n)
	}
	// A router on a proxy-DHCP server.
	checkRendersIfValid(t, siteWithServers(func(s *model.BootServer) { s.Router = s.IP }), "router on every server")
	// DNS servers and domains on the full-DHCP servers (and, refused, on the proxy one).
	for _, dns := range trickyDNSServers {
		for _, dom := range trickyDomains {
			checkRendersIfValid(t, siteWithServers(func(s *model.BootServer) { s.DNSServers, s.Domain = dns, dom }), "DNS on every server")
			checkRendersIfValid(t, siteWithServers(func(s *model.BootServer) {
				if s.DHCP == model.DHCPFull {
					s.DNSServers, s.Domain = dns, dom
				}
			}), fmt.Sprintf("DNS servers %q domain %q", dns, dom))
		}
	}
	if err := siteWithServers(func(s *model.BootServer) {
		if s.DHCP == model.DHCPFull {
			s.DNSServers, s.Domain = []string{"10.0.0.53", "192.0.2.53", "198.51.100.53"}, "lab.example.org"
		}
	}).Validate(); err != nil {
		t.Errorf("plain DNS servers and domain refused: %v", err)
	}
	// The fixture's own URLs and a plain one must stay accepted: the test must not pass
	// by refusing everything.
	for _, u := range []string{"http://10.0.0.1:8080", "https://boot.example.org/overtime/"} {
		if err := siteWithServers(func(s *model.BootServer) { s.HTTPURL = u }).Validate(); err != nil {
			t.Errorf("HTTP URL %s refused: %v", u, err)
		}
	}
}

// FuzzAcceptedBootServerRenders: go test -fuzz FuzzAcceptedBootServerRenders
// ./sitemgmt/render. Without -fuzz the seeds run as a test.
func FuzzAcceptedBootServerRenders(f *testing.F) {
	for _, u := range trickyBootURLs {
		f.Add(u, "")
	}
	for _, n := range trickyNFSServers {
		f.Add("http://10.0.0.1:8080", n)
	}
	f.Fuzz(func(t *testing.T, url, nfs string) {
		checkRendersIfValid(t, siteWithServers(func(s *model.BootServer) { s.HTTPURL, s.NFSServer = url, nfs }), "HTTP URL "+url+" NFS server "+nfs)
	})
}
