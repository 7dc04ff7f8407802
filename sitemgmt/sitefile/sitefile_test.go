package sitefile

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

const example = `name: s
timezone: Europe/Berlin
defaultMode: local-disk
modes:
  - {name: local-disk, kind: local-disk}
pools:
  - {name: lab, weekly: ["mon-fri 08:00-18:00 local-disk"]}
hosts:
  - {name: pc1, mac: "52-54-00-AA-BB-CC", pool: lab}
bootServers:
  - name: bs1
    ip: 10.0.0.1
    httpURL: http://10.0.0.1:8080
    dhcp: full
    subnet: 10.0.0.0/24
    dnsServers: [10.0.0.53, 192.0.2.53]
    domain: lab.example.org
exceptions:
  - name: x
    kind: exam
    start: 2026-12-09T08:00:00+01:00
    end: 2026-12-09T13:00:00+01:00
    mode: local-disk
    targets: [{pool: lab}]
`

func TestReadWriteRoundTrip(t *testing.T) {
	s, err := Read(strings.NewReader(example))
	if err != nil {
		t.Fatal(err)
	}
	// MACs are kept as written; the site manager canonicalises them (model.Site.Normalize).
	if s.Hosts[0].MAC != "52-54-00-AA-BB-CC" {
		t.Fatalf("MAC changed by Read: %s", s.Hosts[0].MAC)
	}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, s); err != nil {
		t.Fatal(err)
	}
	// The DNS servers keep their order (the first is asked first).
	if b := s.BootServers[0]; !reflect.DeepEqual(b.DNSServers, []string{"10.0.0.53", "192.0.2.53"}) || b.Domain != "lab.example.org" {
		t.Fatalf("boot server DNS read as %q, domain %q", b.DNSServers, b.Domain)
	}
	// Exported times are shown in the site's zone.
	if !strings.Contains(buf.String(), "2026-12-09T08:00:00+01:00") {
		t.Fatalf("export does not show local times:\n%s", buf.String())
	}
	back, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, back) {
		t.Fatalf("round trip differs:\n%+v\n%+v", s, back)
	}
}

// A file may open with "---" or close with "..." (what YAML tools write): still one document.
func TestReadOneDocumentMarkers(t *testing.T) {
	for _, in := range []string{"---\nname: s\n", "name: s\n...\n", "---\nname: s\n...\n", "# header\n---\nname: s\n"} {
		s, err := Read(strings.NewReader(in))
		if err != nil || s.Name != "s" {
			t.Errorf("%q: %+v, %v", in, s, err)
		}
	}
}

func TestReadRejects(t *testing.T) {
	for name, tc := range map[string]struct{ in, msg string }{
		"unknown key":                         {"name: s\ntimezone: UTC\ndefaultMode: x\npoolz: []\n", "poolz"},
		"empty":                               {"", "empty"},
		"not yaml map":                        {"- a\n- b\n", "site file"},
		"two documents":                       {"name: s\ntimezone: UTC\ndefaultMode: x\n---\nname: t\n", "the site file holds more than one YAML document (the second starts at line 4)"},
		"second document after an end marker": {"name: s\n...\n---\npools: []\n", "more than one YAML document"},
		"second document malformed":           {"name: s\n---\n[\n", "site file"},
	} {
		_, err := Read(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want error containing %q", name, err, tc.msg)
		}
	}
}

const agentExample = `name: s
timezone: Europe/Berlin
defaultMode: desktop
images:
  - name: desk
    kind: desktop
  - name: compute
    kind: compute
    versions:
      - {version: "1", sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, path: compute/1, created: 2026-11-20T09:00:00Z}
modes:
  - name: desktop
    kind: desktop
    image: desk
    guest:
      image: compute
      version: "1"
      backend: qemu
      network: nat
      ports: ["6818:6818"]
      memoryMB: 4096
pools:
  - name: lab
    policy:
      actions:
        owner-active: freeze
        no-user: run
      idleAfter: 10m
      throttleCPU: 30
      freezePressure: 15.5
      thawPressure: 3
      evictAfter: 4m
      remoteActive: false
`

func TestAgentFieldsRoundTrip(t *testing.T) {
	s, err := Read(strings.NewReader(agentExample))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	p := s.Pools[0].Policy
	if p == nil || p.Actions["owner-active"] != "freeze" || p.IdleAfter.String() != "10m0s" || p.ThrottleCPU != 30 ||
		p.FreezePressure != 15.5 || p.RemoteActive == nil || *p.RemoteActive {
		t.Fatalf("policy %+v", p)
	}
	g := s.Modes[0].Guest
	if g == nil || g.Image != "compute" || g.Network != "nat" || len(g.Ports) != 1 || g.MemoryMB != 4096 {
		t.Fatalf("guest %+v", g)
	}
	var buf bytes.Buffer
	if err := Write(&buf, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"idleAfter: 10m0s", "owner-active: freeze", "remoteActive: false", "guest:\n", "- 6818:6818"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("export lacks %q:\n%s", want, buf.String())
		}
	}
	back, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, back) {
		t.Fatalf("round trip differs:\n%+v\n%+v", s, back)
	}
}

func TestAgentFieldsRejected(t *testing.T) {
	for name, tc := range map[string]struct{ edit, msg string }{
		"unknown policy key":    {"      idleAftr: 5m\n", "idleAftr"},
		"unknown guest key":     {"GUEST      vcpu: 2\n", "vcpu"},
		"duration without unit": {"      hold: 300\n", "invalid duration"},
		"duration as words":     {"      hold: five minutes\n", "invalid duration"},
	} {
		in := agentExample
		if strings.HasPrefix(tc.edit, "GUEST") {
			in = strings.Replace(in, "      memoryMB: 4096\n", "      memoryMB: 4096\n"+strings.TrimPrefix(tc.edit, "GUEST"), 1)
		} else {
			in += tc.edit
		}
		_, err := Read(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want error containing %q", name, err, tc.msg)
		}
	}
	// Values that parse but are out of range are refused by validation, with the pool named.
	s, err := Read(strings.NewReader(agentExample + "      guestMemory: 120\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err == nil || err.Error() != "pool lab: policy: guestMemory 120 out of range (1-100 percent)" {
		t.Fatalf("validate: %v", err)
	}
}
