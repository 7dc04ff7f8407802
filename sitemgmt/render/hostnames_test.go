package render

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Host names are written as the name field of dnsmasq's dhcp-host lines and as Slurm node
// names. Names that dnsmasq or Slurm would read as a keyword are refused at write time
// (names.ReservedHostname); the names below look like keywords but are accepted, so they
// must mean "this host" in every file.

// trickySite is the fixture with one more host per names.TrickyHostnames in pool lab-a
// (boot server boot1, full DHCP), each with a fixed address.
func trickySite(t *testing.T) *model.Site {
	t.Helper()
	site := testSite()
	for i, n := range names.TrickyHostnames {
		site.Hosts = append(site.Hosts, model.Host{Name: n, MAC: fmt.Sprintf("52:54:00:0d:00:%02x", i+1),
			IP: fmt.Sprintf("10.0.0.%d", 100+i), Pool: "lab-a"})
		testModes[n] = "desktop"
		t.Cleanup(func() { delete(testModes, n) })
	}
	if err := site.Validate(); err != nil {
		t.Fatalf("site with the tricky host names does not validate: %v", err)
	}
	return site
}

// dhcpHostField is how dnsmasq 2.90 classifies one field of a dhcp-host line (option.c,
// case 'G'): by its form, not its position.
func dhcpHostField(f string) string {
	switch {
	case strings.HasPrefix(f, "id:"):
		return "client id"
	case strings.HasPrefix(f, "set:") || strings.HasPrefix(f, "net:") || strings.HasPrefix(f, "tag:"):
		return "tag"
	case strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]"):
		return "IPv6 address"
	case strings.Contains(f, ":"):
		return "MAC"
	case strings.Contains(f, "."):
		if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
			return "IPv4 address"
		}
	}
	digits := f
	if len(f) > 1 && strings.ContainsRune("smhdwSMHDW", rune(f[len(f)-1])) {
		digits = f[:len(f)-1]
	}
	if strings.Trim(digits, "0123456789 ") == "" && strings.Trim(digits, " ") != "" {
		return "lease time"
	}
	switch f {
	case "infinite":
		return "lease time"
	case "ignore":
		return "ignore"
	}
	return "name"
}

func TestDhcpHostFieldModel(t *testing.T) {
	// The model must see the misreadings the refused names would cause, or the test
	// below proves nothing.
	for f, want := range map[string]string{"12h": "lease time", "3600": "lease time", "1w": "lease time", "infinite": "lease time",
		"ignore": "ignore", "set:x": "tag", "tag:x": "tag", "id:x": "client id", "52:54:00:0a:00:01": "MAC",
		"10.0.0.1": "IPv4 address", "pc-a01": "name", "h12": "name", "12a": "name", "1.2": "name"} {
		if got := dhcpHostField(f); got != want {
			t.Errorf("dhcpHostField(%q) = %s, want %s", f, got, want)
		}
	}
}

// TestDnsmasqHostNamesUnambiguous: every line of the hosts file is MAC, IP (full DHCP)
// and a field dnsmasq takes for the host's name, and nothing else.
func TestDnsmasqHostNamesUnambiguous(t *testing.T) {
	site := trickySite(t)
	for _, srv := range site.BootServers {
		var buf bytes.Buffer
		if err := testDnsmasq(site, srv.Name, "/h", "/t").Hosts(&buf); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if strings.HasPrefix(l, "#") {
				continue
			}
			f := strings.Split(l, ",")
			kinds := make([]string, len(f))
			for i := range f {
				kinds[i] = dhcpHostField(f[i])
			}
			name := f[len(f)-1]
			if site.Host(name) == nil || kinds[0] != "MAC" || kinds[len(f)-1] != "name" ||
				(len(f) == 3 && kinds[1] != "IPv4 address") || len(f) < 2 || len(f) > 3 {
				t.Errorf("hosts line %q reads as %v", l, kinds)
			}
		}
	}
}

// The renderers re-check: a reserved name that got past validation (a hand-edited
// directory) is refused, not written.
func TestRenderRefusesReservedHostnames(t *testing.T) {
	for _, n := range []string{"ignore", "infinite", "12h", "3600", "default", "all"} {
		site := testSite()
		site.Hosts[0].Name = n
		testModes[n] = "desktop"
		if err := testDnsmasq(site, "boot1", "/h", "/t").Hosts(&bytes.Buffer{}); err == nil {
			t.Errorf("dnsmasq hosts file written with host %q", n)
		}
		if err := SlurmNodes(&bytes.Buffer{}, site, modeOf(site)); err == nil {
			t.Errorf("slurm nodes written with host %q", n)
		}
		delete(testModes, n)
	}
}

// TestDnsmasqRealToolTrickyNames: dnsmasq accepts the hosts file with every tricky name,
// as options (--test) and as its hosts file (a real start and a SIGHUP re-read).
func TestDnsmasqRealToolTrickyNames(t *testing.T) {
	dnsmasq := lookTool(t, "dnsmasq", "dnsmasq-base")
	unshare := lookTool(t, "unshare", "util-linux")
	site := trickySite(t)
	dir := t.TempDir()
	hostsFile, tftp := filepath.Join(dir, "hosts"), filepath.Join(dir, "tftp")
	if err := os.Mkdir(tftp, 0o755); err != nil {
		t.Fatal(err)
	}
	d := testDnsmasq(site, "boot1", hostsFile, tftp)
	conf := filepath.Join(dir, "dnsmasq.conf")
	writeRendered(t, conf, d.Config)
	writeRendered(t, hostsFile, d.Hosts)
	if out, err := dnsmasqTest(dnsmasq, hostsAsOptions(t, dir, conf, hostsFile)); err != nil {
		t.Fatalf("hosts file lines: %v\n%s", err, out)
	}
	hosts, err := os.ReadFile(hostsFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dnsmasqRun(t, unshare, dnsmasq, dir, conf, hostsFile, hosts); err != nil {
		t.Fatalf("dnsmasq run: %v\n%s", err, out)
	}
}

// TestSlurmRealToolTrickyNames: slurmctld starts with every tricky name as a node and
// knows each of them as a node of the right partitions.
func TestSlurmRealToolTrickyNames(t *testing.T) {
	site := trickySite(t)
	for i := range site.Hosts {
		site.Hosts[i].IP = fmt.Sprintf("127.0.100.%d", i+1)
	}
	var buf bytes.Buffer
	if err := SlurmNodes(&buf, site, modeOf(site)); err != nil {
		t.Fatal(err)
	}
	scontrol := slurmctldWith(t, buf.String())
	var want []string
	for _, h := range site.Hosts {
		want = append(want, h.Name)
		out, err := scontrol("-o", "show", "node", h.Name)
		if err != nil {
			t.Errorf("scontrol show node %s: %v\n%s", h.Name, err, out)
			continue
		}
		if f := fields(out); f["NodeName"] != h.Name || f["NodeAddr"] != h.IP {
			t.Errorf("node %s: slurmctld has NodeName=%s NodeAddr=%s", h.Name, f["NodeName"], f["NodeAddr"])
		}
	}
	sort.Strings(want)
	out, err := scontrol("-o", "show", "partition", SlurmPartition)
	if err != nil {
		t.Fatalf("scontrol show partition: %v\n%s", err, out)
	}
	exp, err := scontrol("show", "hostnames", fields(out)["Nodes"])
	if err != nil {
		t.Fatalf("scontrol show hostnames: %v\n%s", err, exp)
	}
	got := strings.Fields(exp)
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("partition %s has nodes\n%v\nwant\n%v", SlurmPartition, got, want)
	}
}
