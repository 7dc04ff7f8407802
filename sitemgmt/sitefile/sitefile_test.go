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
	if s.Hosts[0].MAC != "52:54:00:aa:bb:cc" {
		t.Fatalf("MAC not normalised: %s", s.Hosts[0].MAC)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, s); err != nil {
		t.Fatal(err)
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

func TestReadRejects(t *testing.T) {
	for name, tc := range map[string]struct{ in, msg string }{
		"unknown key":  {"name: s\ntimezone: UTC\ndefaultMode: x\npoolz: []\n", "poolz"},
		"bad MAC":      {"name: s\nhosts:\n  - {name: a, mac: nope, pool: p}\n", "invalid MAC"},
		"empty":        {"", "empty"},
		"not yaml map": {"- a\n- b\n", "site file"},
	} {
		_, err := Read(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want error containing %q", name, err, tc.msg)
		}
	}
}
