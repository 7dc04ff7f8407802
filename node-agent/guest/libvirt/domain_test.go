package libvirt

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func baseSpec() guest.Spec {
	return guest.Spec{
		Name: "overtime-pc-a01", VCPUs: 2, MemoryMB: 1024,
		Kernel: "/run/overtime/images/compute/1/vmlinuz", Initrd: "/run/overtime/images/compute/1/initrd.img",
		Cmdline:   "root=/dev/vda rootfstype=squashfs ro console=ttyS0",
		BaseImage: "/run/overtime/images/compute/1/root.squashfs", BaseFormat: "squashfs",
		StateDir: "/run/overtime/guest/overtime-pc-a01",
		Network:  model.NetBridged, Bridge: "br0", MAC: "52:54:00:aa:bb:01",
		CPUIdle: true,
	}
}

// validate runs libvirt's own schema check (virt-xml-validate, domain.rng).
func validate(t *testing.T, x []byte) {
	t.Helper()
	needs.Servers(t, "virt-xml-validate (Debian package libvirt-clients)")
	f := filepath.Join(t.TempDir(), "domain.xml")
	if err := os.WriteFile(f, x, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("virt-xml-validate", f, "domain").CombinedOutput()
	if err != nil {
		t.Fatalf("virt-xml-validate: %v\n%s\n%s", err, out, x)
	}
}

func TestDomainXML(t *testing.T) {
	tests := []struct {
		name    string
		kind    model.GuestBackend
		domType string
		mod     func(*guest.Spec)
		want    []string // substrings
		absent  []string
	}{
		{"qemu tcg bridged idle", model.BackendQEMU, "qemu", func(*guest.Spec) {}, []string{
			`<domain type="qemu">`, `<shares>2</shares>`, `<emulatorsched scheduler="idle">`,
			`<vcpusched vcpus="0-1" scheduler="idle">`, `<interface type="bridge">`, `<source bridge="br0">`,
			`<mac address="52:54:00:aa:bb:01">`, `<source file="/run/overtime/guest/overtime-pc-a01/overlay.qcow2">`,
			`<weight>100</weight>`, `<tb-cache unit="MiB">128</tb-cache>`,
			`<on_crash>destroy</on_crash>`, `<log file="/run/overtime/guest/overtime-pc-a01/console.log" append="off">`,
		}, []string{"host-passthrough", "global_quota", "<filesystem", "<graphics"}},
		{"qemu kvm with a cap from the start", model.BackendQEMU, "kvm", func(s *guest.Spec) { s.CPULimit = 0.5 }, []string{
			`<domain type="kvm">`, `<cpu mode="host-passthrough">`, `<global_period>100000</global_period>`, `<global_quota>50000</global_quota>`,
		}, []string{"tb-cache"}},
		{"qemu nat with port forwards through passt", model.BackendQEMU, "qemu", func(s *guest.Spec) {
			s.Network, s.Bridge = model.NetNAT, ""
			s.Ports = []guest.PortForward{{HostPort: 6818, GuestPort: 6818}, {HostPort: 2222, GuestPort: 22}}
		}, []string{`<interface type="user">`, `<backend type="passt">`, `<portForward proto="tcp">`, `<range start="2222" to="22">`}, []string{`type="bridge"`}},
		{"qemu disk boot, no network", model.BackendQEMU, "qemu", func(s *guest.Spec) {
			s.Kernel, s.Initrd, s.Cmdline = "", "", ""
			s.Network = model.NetNone
		}, []string{`<boot dev="hd">`}, []string{"<kernel>", "<interface"}},
		{"qemu compute guest with its configuration disk", model.BackendQEMU, "qemu", func(s *guest.Spec) {
			s.Host, s.AgentURL = "pc-a01", "http://10.0.0.2:9101"
			s.Secrets = map[string][]byte{"munge.key": []byte("k")}
		}, []string{`<source file="/run/overtime/guest/overtime-pc-a01/guest-config.tar">`, `<target dev="vdb" bus="virtio">`,
			`<driver name="qemu" type="raw">`, `<readonly>`}, []string{"munge", "10.0.0.2"}},
		{"xen pv", model.BackendXen, "xen", func(*guest.Spec) {}, []string{
			`<domain type="xen">`, `machine="xenpv">linux</type>`, `<target dev="xvda" bus="xen">`, `<shares>1</shares>`, `<console type="pty">`,
		}, []string{"vcpusched", "memtune", "tb-cache"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mod(&s)
			x, err := DomainXML(tc.kind, tc.domType, s)
			if err != nil {
				t.Fatal(err)
			}
			validate(t, x)
			for _, w := range tc.want {
				if !strings.Contains(string(x), w) {
					t.Errorf("missing %s in\n%s", w, x)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(string(x), a) {
					t.Errorf("unexpected %s in\n%s", a, x)
				}
			}
			// Exactly one disk, the overlay, and for a compute guest its configuration
			// disk: the guest sees no other host file.
			want := 1
			if hasConfig(s) {
				want = 2
			}
			if n := strings.Count(string(x), "<disk "); n != want {
				t.Errorf("%d disks, want %d", n, want)
			}
		})
	}
}

// Values from the site manager cannot add elements: they are escaped, and the parsed
// domain has the same single disk.
func TestDomainXMLInjection(t *testing.T) {
	s := baseSpec()
	s.Cmdline = `quiet</cmdline></os><devices><disk type="file"><source file="/home"/></disk></devices><os><cmdline>`
	x, err := DomainXML(model.BackendQEMU, "qemu", s)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, x)
	var back domainXML
	if err := xml.Unmarshal(x, &back); err != nil {
		t.Fatal(err)
	}
	if back.OS.Cmdline != s.Cmdline || len(back.Devices.Disks) != 1 {
		t.Fatalf("cmdline %q, %d disks", back.OS.Cmdline, len(back.Devices.Disks))
	}
	bad := []func(*guest.Spec){
		func(s *guest.Spec) { s.Name = "a'b" },
		func(s *guest.Spec) { s.Name = "Overtime PC" },
		func(s *guest.Spec) { s.VCPUs = 0 },
		func(s *guest.Spec) { s.MemoryMB = 8 },
		func(s *guest.Spec) { s.StateDir = "relative/dir" },
		func(s *guest.Spec) { s.BaseImage = "" },
		func(s *guest.Spec) { s.Bridge = "" },
	}
	for i, mod := range bad {
		s := baseSpec()
		mod(&s)
		if _, err := DomainXML(model.BackendQEMU, "qemu", s); err == nil {
			t.Errorf("bad spec %d accepted", i)
		}
	}
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		line  string
		state guest.State
		ok    bool
	}{
		{"event 'lifecycle' for domain 'overtime-pc-a01': Stopped Failed", guest.StateCrashed, true},
		{"event 'lifecycle' for domain 'overtime-pc-a01': Stopped Destroyed", guest.StateShutoff, true},
		{"event 'lifecycle' for domain 'overtime-pc-a01': Suspended Paused", guest.StatePaused, true},
		{"event 'lifecycle' for domain 'overtime-pc-a01': Resumed Unpaused", guest.StateRunning, true},
		{"event 'reboot' for domain 'overtime-pc-a01'", "", false},
		{"events received: 3", "", false},
	}
	for _, tc := range tests {
		ev, ok := parseEvent(tc.line)
		if ok != tc.ok || ev.State != tc.state || (ok && ev.Name != "overtime-pc-a01") {
			t.Errorf("%q: %+v %v", tc.line, ev, ok)
		}
	}
}

func TestParseCap(t *testing.T) {
	qemu := "Scheduler      : posix\ncpu_shares     : 2\nglobal_period  : 100000\nglobal_quota   : 25000\n"
	if c := parseCap(model.BackendQEMU, qemu); c != 0.25 {
		t.Errorf("qemu cap %g", c)
	}
	if c := parseCap(model.BackendQEMU, strings.Replace(qemu, "25000", "-1", 1)); c != 0 {
		t.Errorf("no cap: %g", c)
	}
	if c := parseCap(model.BackendXen, "Scheduler      : credit\nweight         : 1\ncap            : 50\n"); c != 0.5 {
		t.Errorf("xen cap %g", c)
	}
}

// Where libvirt refuses an I/O weight (no bfq or cfq on the host's disks), Start renders
// the domain without one; everything else stays.
func TestDomainXMLWithoutIOWeight(t *testing.T) {
	with, err := DomainXML(model.BackendQEMU, "qemu", baseSpec())
	if err != nil {
		t.Fatal(err)
	}
	without, err := domainXMLOf(model.BackendQEMU, "qemu", baseSpec(), false)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, without)
	if !strings.Contains(string(with), "<blkiotune>") || strings.Contains(string(without), "<blkiotune>") {
		t.Fatalf("blkiotune: with %v, without %v", strings.Contains(string(with), "<blkiotune>"), strings.Contains(string(without), "<blkiotune>"))
	}
	for _, keep := range []string{`<emulatorsched scheduler="idle">`, `<shares>2</shares>`} {
		if !strings.Contains(string(without), keep) {
			t.Errorf("without the I/O weight the domain lost %s", keep)
		}
	}
}
