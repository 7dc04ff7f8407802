package vmware

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Regenerate the golden files with: go test ./node-agent/guest/vmware -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current generators")

func baseSpec() guest.Spec {
	return guest.Spec{
		Name:       "overtime-pc-a01",
		VCPUs:      2,
		MemoryMB:   2048,
		BaseImage:  "/srv/overtime/images/compute/3/root.img",
		BaseFormat: "raw",
		StateDir:   "/run/overtime/guest/overtime-pc-a01",
		Network:    model.NetBridged,
		Bridge:     "br0",
		MAC:        "52:54:00:12:34:56",
		CPUIdle:    true,
	}
}

type vmxCase struct {
	name string
	spec func() guest.Spec
	opts VMXOptions
}

func vmxCases() []vmxCase {
	return []vmxCase{
		{"bridged-raw", baseSpec, VMXOptions{HostMHz: 2600}},
		{"bridged-cpulimit", func() guest.Spec {
			s := baseSpec()
			s.CPULimit = 0.5
			return s
		}, VMXOptions{HostMHz: 2600}},
		{"cpulimit-unknown-mhz", func() guest.Spec {
			s := baseSpec()
			s.CPULimit = 1.5
			return s
		}, VMXOptions{}},
		{"nat-vmdk", func() guest.Spec {
			s := baseSpec()
			s.Name, s.StateDir = "overtime-pc-b07", "/run/overtime/guest/overtime-pc-b07"
			s.BaseImage, s.BaseFormat = "/srv/overtime/images/course-ml/1/disk.vmdk", "vmdk"
			s.VCPUs, s.MemoryMB = 4, 4099 // rounded down to 4096
			s.Network, s.Bridge, s.MAC = model.NetNAT, "", "02:00:00:ab:cd:ef"
			s.Ports = []guest.PortForward{{HostPort: 6818, GuestPort: 6818}, {HostPort: 2222, GuestPort: 22}}
			return s
		}, VMXOptions{HostMHz: 3400}},
		{"no-network", func() guest.Spec {
			s := baseSpec()
			s.Network, s.Bridge, s.MAC = model.NetNone, "", ""
			s.BaseImage, s.BaseFormat = "/srv/overtime/images/compute/3/root.vmdk", ""
			return s
		}, VMXOptions{HostMHz: 2600}},
		{"options", func() guest.Spec {
			s := baseSpec()
			s.MAC = "00:50:56:3F:FF:FE" // already a VMware static address: kept
			return s
		}, VMXOptions{HWVersion: 19, GuestOS: "debian12-64", NIC: "vmxnet3", HostMHz: 2600}},
	}
}

type goldenCase struct {
	name   string
	render func() ([]byte, error)
}

func goldenCases() []goldenCase {
	var cs []goldenCase
	for _, c := range vmxCases() {
		c := c
		cs = append(cs, goldenCase{c.name + ".vmx", func() ([]byte, error) { return GenerateVMX(c.spec(), c.opts) }})
	}
	ports := []guest.PortForward{{HostPort: 6818, GuestPort: 6818}, {HostPort: 2222, GuestPort: 22}}
	ip := netip.MustParseAddr("192.168.77.10")
	cs = append(cs,
		goldenCase{"nat-networking", func() ([]byte, error) {
			l, err := NATNetworking("02:00:00:ab:cd:ef", ip, ports)
			return []byte(strings.Join(l, "\n") + "\n"), err
		}},
		goldenCase{"nat.conf", func() ([]byte, error) {
			s, err := NATConf(ip, ports)
			return []byte(s), err
		}},
		goldenCase{"raw-descriptor.vmdk", func() ([]byte, error) {
			return RawDescriptor("/srv/overtime/images/compute/3/root.img", 8<<30)
		}},
	)
	return cs
}

// TestGolden generates every case and compares it with testdata/NAME.golden.
func TestGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			if seen[c.name] {
				t.Fatalf("duplicate case %s", c.name)
			}
			seen[c.name] = true
			got, err := c.render()
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			again, err := c.render()
			if err != nil || !bytes.Equal(got, again) {
				t.Fatalf("two renders of the same input differ (%v)", err)
			}
			file := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test ./node-agent/guest/vmware -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run with -update after checking the change):\n--- want\n%s--- got\n%s", file, want, got)
			}
		})
	}
	if !*update {
		files, _ := filepath.Glob(filepath.Join("testdata", "*.golden"))
		for _, f := range files {
			if !seen[strings.TrimSuffix(filepath.Base(f), ".golden")] {
				t.Errorf("golden file %s belongs to no case; delete it", f)
			}
		}
	}
}

// The documented .vmx format, checked independently of the package's own parser: every line
// is `key = "value"`, the value has no '"', '|' or control character.
var vmxLineRE = regexp.MustCompile(`^(\.?[A-Za-z][A-Za-z0-9_]*(?:[.:][A-Za-z0-9_]+)*) = "([^"|\x00-\x1f\x7f]*)"$`)

// knownKeys is every key the generator may write.
var knownKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`.encoding config.version virtualHW.version displayName annotation
		guestinfo.overtime.name guestOS numvcpus memsize MemTrimRate mainMem.useNamedFile workingDir
		msg.autoAnswer uuid.action scsi0.present scsi0.virtualDev scsi0:0.present scsi0:0.deviceType
		scsi0:0.fileName scsi0:0.mode ethernet0.present ethernet0.virtualDev ethernet0.connectionType
		ethernet0.addressType ethernet0.address ethernet0.startConnected
		ethernet0.allowGuestConnectionControl ethernet0.wakeOnPcktRcv serial0.present serial0.fileType
		serial0.fileName serial0.yieldOnMsrRead isolation.tools.hgfs.disable sharedFolder.maxNum
		isolation.tools.copy.disable isolation.tools.paste.disable isolation.tools.dnd.disable
		isolation.tools.setGUIOptions.enable isolation.tools.unity.disable
		isolation.device.connectable.disable isolation.device.edit.disable RemoteDisplay.vnc.enabled
		usb.present sound.present floppy0.present sched.cpu.shares sched.cpu.max`) {
		knownKeys[k] = true
	}
}

// validateVMX checks a generated file against the format and the backend's invariants and
// returns its keys.
func validateVMX(t *testing.T, data []byte, s guest.Spec) map[string]string {
	t.Helper()
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Errorf("does not end with a newline")
	}
	kv := map[string]string{}
	for i, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		m := vmxLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %d is not key = \"value\": %q", i+1, l)
			continue
		}
		if !knownKeys[m[1]] {
			t.Errorf("line %d: unknown key %q", i+1, m[1])
		}
		if _, dup := kv[m[1]]; dup {
			t.Errorf("line %d: duplicate key %q", i+1, m[1])
		}
		kv[m[1]] = m[2]
	}
	for k, want := range map[string]string{
		".encoding": "UTF-8", "config.version": "8", "displayName": s.Name, "numvcpus": strconv.Itoa(s.VCPUs),
		"memsize": strconv.Itoa(s.MemoryMB / 4 * 4), "workingDir": s.StateDir, "scsi0:0.mode": "independent-nonpersistent",
		"scsi0:0.present": "TRUE", "serial0.present": "TRUE", "serial0.fileType": "file",
		"serial0.fileName":             filepath.Join(s.StateDir, "console.log"),
		"isolation.tools.hgfs.disable": "TRUE", "isolation.tools.copy.disable": "TRUE",
		"isolation.tools.paste.disable": "TRUE", "isolation.tools.dnd.disable": "TRUE",
		"sharedFolder.maxNum": "0", "RemoteDisplay.vnc.enabled": "FALSE", "sched.cpu.shares": "low",
		"msg.autoAnswer": "TRUE",
	} {
		if got, ok := kv[k]; !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, want)
		}
	}
	for _, k := range []string{"virtualHW.version", "guestOS", "scsi0:0.fileName", "ethernet0.present"} {
		if _, ok := kv[k]; !ok {
			t.Errorf("required key %s missing", k)
		}
	}
	// The disk is the base itself (VMDK) or the descriptor in the state directory (raw).
	disk := kv["scsi0:0.fileName"]
	if disk != s.BaseImage && disk != filepath.Join(s.StateDir, RawDescriptorFile) {
		t.Errorf("disk %q is neither the base nor its descriptor", disk)
	}
	if s.Network == model.NetNone {
		if kv["ethernet0.present"] != "FALSE" {
			t.Errorf("guest without network has a NIC")
		}
	} else {
		want := map[model.GuestNetwork]string{model.NetBridged: "bridged", model.NetNAT: "nat"}[s.Network]
		if kv["ethernet0.connectionType"] != want || kv["ethernet0.addressType"] != "static" {
			t.Errorf("ethernet0: connectionType %q addressType %q, want %s static", kv["ethernet0.connectionType"], kv["ethernet0.addressType"], want)
		}
		if !vmwareStaticMAC(kv["ethernet0.address"]) {
			t.Errorf("ethernet0.address %q outside 00:50:56:00:00:00-00:50:56:3f:ff:ff", kv["ethernet0.address"])
		}
	}
	if _, ok := kv["sched.cpu.max"]; ok && s.CPULimit <= 0 {
		t.Errorf("sched.cpu.max without a CPU limit")
	}
	// The package's own parser reads the same pairs back.
	v, err := ParseVMX(data)
	if err != nil {
		t.Fatalf("ParseVMX: %v", err)
	}
	if len(v) != len(kv) {
		t.Errorf("ParseVMX found %d pairs, the format check %d", len(v), len(kv))
	}
	for _, p := range v {
		if kv[p.Key] != p.Value {
			t.Errorf("ParseVMX %s = %q, want %q", p.Key, p.Value, kv[p.Key])
		}
	}
	return kv
}

func vmwareStaticMAC(s string) bool {
	var a, b, c, d, e, f int
	if n, _ := fmt.Sscanf(s, "%02x:%02x:%02x:%02x:%02x:%02x", &a, &b, &c, &d, &e, &f); n != 6 {
		return false
	}
	return a == 0 && b == 0x50 && c == 0x56 && d <= 0x3f && s == strings.ToLower(s)
}

func TestVMXFormat(t *testing.T) {
	for _, c := range vmxCases() {
		t.Run(c.name, func(t *testing.T) {
			data, err := GenerateVMX(c.spec(), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			kv := validateVMX(t, data, c.spec())
			s := c.spec()
			switch {
			case s.CPULimit > 0 && c.opts.HostMHz > 0:
				want := strconv.Itoa(int(s.CPULimit*float64(c.opts.HostMHz) + 0.999))
				if kv["sched.cpu.max"] != want {
					t.Errorf("sched.cpu.max = %q, want %s", kv["sched.cpu.max"], want)
				}
			default:
				if _, ok := kv["sched.cpu.max"]; ok {
					t.Errorf("sched.cpu.max written without a limit or the host's MHz")
				}
			}
		})
	}
}

func TestVMXSpecRejected(t *testing.T) {
	for _, c := range []struct {
		name, want string
		mod        func(*guest.Spec)
	}{
		{"name upper case", "invalid guest name", func(s *guest.Spec) { s.Name = "Overtime" }},
		{"name empty", "invalid guest name", func(s *guest.Spec) { s.Name = "" }},
		{"vcpus 0", "vcpus 0 out of range", func(s *guest.Spec) { s.VCPUs = 0 }},
		{"vcpus 33", "vcpus 33 out of range", func(s *guest.Spec) { s.VCPUs = 33 }},
		{"memory 8", "below 16 MB", func(s *guest.Spec) { s.MemoryMB = 8 }},
		{"direct kernel", "cannot boot a kernel directly", func(s *guest.Spec) { s.Kernel = "/srv/vmlinuz" }},
		{"qcow2", `base format "qcow2" cannot be attached`, func(s *guest.Spec) { s.BaseFormat = "qcow2" }},
		{"squashfs", `base format "squashfs" cannot be attached`, func(s *guest.Spec) { s.BaseFormat = "squashfs" }},
		{"format unknown", "base format not set", func(s *guest.Spec) { s.BaseFormat = "" }},
		{"relative base", "must be a clean absolute path", func(s *guest.Spec) { s.BaseImage = "images/root.img" }},
		{"unclean state dir", "must be a clean absolute path", func(s *guest.Spec) { s.StateDir = "/run/overtime/../etc" }},
		{"no state dir", "must be a clean absolute path", func(s *guest.Spec) { s.StateDir = "" }},
		{"network unset", "unknown network", func(s *guest.Spec) { s.Network = "" }},
		{"bridge missing", "needs a host interface", func(s *guest.Spec) { s.Bridge = "" }},
		{"bridge bad", "needs a host interface", func(s *guest.Spec) { s.Bridge = "br0\nx" }},
		{"ports bridged", "port forwards need network nat", func(s *guest.Spec) { s.Ports = []guest.PortForward{{HostPort: 1, GuestPort: 1}} }},
		{"port range", "out of range", func(s *guest.Spec) {
			s.Network, s.Ports = model.NetNAT, []guest.PortForward{{HostPort: 70000, GuestPort: 22}}
		}},
		{"mac missing", "guest MAC not set", func(s *guest.Spec) { s.MAC = "" }},
		{"mac bad", "invalid MAC", func(s *guest.Spec) { s.MAC = "52:54:00:12:34" }},
		{"mac multicast", "multicast", func(s *guest.Spec) { s.MAC = "01:00:5e:00:00:01" }},
		{"cpu limit negative", "invalid CPU limit", func(s *guest.Spec) { s.CPULimit = -1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := baseSpec()
			c.mod(&s)
			data, err := GenerateVMX(s, VMXOptions{HostMHz: 2600})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q (output %q)", err, c.want, data)
			}
		})
	}
	for _, c := range []struct {
		name string
		o    VMXOptions
		want string
	}{
		{"guestOS", VMXOptions{GuestOS: `x" evil = "1`}, "invalid guestOS"},
		{"nic", VMXOptions{NIC: "rtl8139"}, "unknown NIC"},
		{"hw", VMXOptions{HWVersion: 3}, "out of range"},
	} {
		t.Run("option "+c.name, func(t *testing.T) {
			if _, err := GenerateVMX(baseSpec(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestVMXInjection feeds every value that reaches the file a payload that would end the
// value and add a key (or use VMware's |XX escape); each must be refused, never escaped.
func TestVMXInjection(t *testing.T) {
	payloads := map[string]string{
		"quote":       `" evil.key = "1`,
		"newline":     "\nisolation.tools.hgfs.disable = \"FALSE",
		"cr":          "\risolation.tools.hgfs.disable = \"FALSE",
		"nul":         "\x00",
		"pipe escape": "|22 evil = |22",
		"escape char": "\x1b[31m",
		"tab":         "\t",
		"del":         "\x7f",
		"bad utf8":    "\xff",
	}
	fields := map[string]func(*guest.Spec, string){
		"BaseImage": func(s *guest.Spec, p string) { s.BaseImage = "/srv/images/root" + p + ".img" },
		"StateDir":  func(s *guest.Spec, p string) { s.StateDir = "/run/overtime/guest/x" + p },
		"Name":      func(s *guest.Spec, p string) { s.Name = "overtime" + p },
		"Bridge":    func(s *guest.Spec, p string) { s.Bridge = "br0" + p },
		"MAC":       func(s *guest.Spec, p string) { s.MAC = "52:54:00:12:34:56" + p },
	}
	for fname, set := range fields {
		for pname, p := range payloads {
			t.Run(fname+"/"+pname, func(t *testing.T) {
				s := baseSpec()
				set(&s, p)
				data, err := GenerateVMX(s, VMXOptions{})
				if err == nil {
					t.Fatalf("accepted; generated:\n%s", data)
				}
			})
		}
	}
	// The encoder refuses them too, whatever builds the pairs.
	for pname, p := range payloads {
		if _, err := (VMX{{"displayName", "a" + p}}).Encode(); err == nil {
			t.Errorf("Encode accepted value with %s", pname)
		}
		if CheckValue("a"+p) == nil {
			t.Errorf("CheckValue accepted %s", pname)
		}
	}
	for _, k := range []string{"a = b", "a\nb", `a"`, "", "1abc", "a..b", "a b"} {
		if _, err := (VMX{{k, "x"}}).Encode(); err == nil {
			t.Errorf("Encode accepted key %q", k)
		}
	}
	if _, err := (VMX{{"memsize", "1"}, {"MEMSIZE", "2"}}).Encode(); err == nil {
		t.Errorf("Encode accepted a duplicate key (keys are case-insensitive)")
	}
	// Harmless characters stay: spaces, '#', '=', non-ASCII letters.
	for _, ok := range []string{"/srv/my images/root #1=a.img", "/srv/bilder/grüße.vmdk"} {
		if err := CheckValue(ok); err != nil {
			t.Errorf("CheckValue(%q) = %v", ok, err)
		}
	}
	if _, err := RawDescriptor("/srv/a\"b.img", 512); err == nil {
		t.Errorf("RawDescriptor accepted a quote in the path")
	}
}

func TestVMwareMAC(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"52:54:00:12:34:56", "00:50:56:12:34:56", ""},
		{"52:54:00:ff:34:56", "00:50:56:3f:34:56", ""},
		{"02:00:00:AB:CD:EF", "00:50:56:2b:cd:ef", ""},
		{"00:50:56:3F:FF:FF", "00:50:56:3f:ff:ff", ""},
		{"00-50-56-00-00-01", "00:50:56:00:00:01", ""},
		{"00:50:56:40:00:01", "00:50:56:00:00:01", ""}, // generated range: translated
		{"01:00:5e:00:00:01", "", "multicast"},
		{"52:54:00:12:34", "", "invalid MAC"},
		{"", "", "invalid MAC"},
	} {
		got, err := VMwareMAC(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("VMwareMAC(%q) = %q, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("VMwareMAC(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		if !vmwareStaticMAC(got) {
			t.Errorf("VMwareMAC(%q) = %q outside VMware's static range", c.in, got)
		}
	}
}

func TestParseVMX(t *testing.T) {
	// A .vmx as VMware leaves it after power-on: shebang comment, CRLF, keys it added.
	in := "#!/usr/bin/vmware\r\n.encoding = \"UTF-8\"\r\ndisplayName = \"overtime-pc-a01\"\r\n\r\n" +
		"uuid.bios = \"56 4d 12 34 56 78 9a bc-de f0 12 34 56 78 9a bc\"\r\nethernet0.generatedAddressOffset = \"0\"\r\n" +
		"scsi0:0.redo = \"\"\r\n"
	v, err := ParseVMX([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 5 {
		t.Fatalf("got %d pairs: %v", len(v), v)
	}
	if dn, _ := v.Get("DISPLAYNAME"); dn != "overtime-pc-a01" {
		t.Errorf("displayName = %q", dn)
	}
	if r, ok := v.Get("scsi0:0.redo"); !ok || r != "" {
		t.Errorf("empty value: %q %v", r, ok)
	}
	for _, bad := range []string{
		"displayName overtime\n",
		"displayName = overtime\n",
		"displayName = \"a\" b = \"c\"\n",
		"displayName = \"a\n",
		"9x = \"a\"\n",
	} {
		if _, err := ParseVMX([]byte(bad)); err == nil {
			t.Errorf("ParseVMX accepted %q", bad)
		}
	}
}

func TestRawDescriptor(t *testing.T) {
	d, err := RawDescriptor("/srv/images/root.img", 10*1024*1024)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d), "RW 20480 FLAT \"/srv/images/root.img\" 0\n") || !strings.Contains(string(d), `createType="monolithicFlat"`) {
		t.Errorf("descriptor:\n%s", d)
	}
	for _, c := range []struct {
		path string
		size int64
	}{{"/a.img", 0}, {"/a.img", 1000}, {"a.img", 512}, {"/a\nb.img", 512}} {
		if _, err := RawDescriptor(c.path, c.size); err == nil {
			t.Errorf("RawDescriptor(%q, %d) accepted", c.path, c.size)
		}
	}
}

func TestNATFragments(t *testing.T) {
	ip := netip.MustParseAddr("192.168.77.10")
	if _, err := NATNetworking("52:54:00:12:34:56", netip.MustParseAddr("fd00::1"), nil); err == nil {
		t.Errorf("IPv6 NAT address accepted")
	}
	if _, err := NATConf(ip, []guest.PortForward{{HostPort: 0, GuestPort: 22}}); err == nil {
		t.Errorf("port 0 accepted")
	}
	want, _ := NATNetworking("52:54:00:12:34:56", ip, []guest.PortForward{{HostPort: 6818, GuestPort: 6818}})
	existing := "VERSION=1,0\nanswer VNET_8_NAT yes\nadd_nat_portfwd 8 tcp 6818 192.168.77.99 6818\n" +
		"add_nat_portfwd 8 tcp 80 192.168.77.99 80\nadd_dhcp_mac_to_ip 8 00:50:56:12:34:56 192.168.77.99\n"
	if miss := missingNetworking(existing, want); len(miss) != 2 {
		t.Errorf("missing = %q, want both lines", miss)
	}
	merged := mergeNetworking(existing, want)
	wantMerged := "VERSION=1,0\nanswer VNET_8_NAT yes\nadd_nat_portfwd 8 tcp 80 192.168.77.99 80\n" +
		"add_dhcp_mac_to_ip 8 00:50:56:12:34:56 192.168.77.10\nadd_nat_portfwd 8 tcp 6818 192.168.77.10 6818\n"
	if merged != wantMerged {
		t.Errorf("merged:\n%s\nwant:\n%s", merged, wantMerged)
	}
	if miss := missingNetworking(strings.ToUpper(merged), want); len(miss) != 0 {
		t.Errorf("after merge still missing %q", miss)
	}
	if m := bridgeMapping("add_bridge_mapping eth1 2\nadd_bridge_mapping br0 0\n"); m != "br0" {
		t.Errorf("bridgeMapping = %q", m)
	}
}
