package examfw

import (
	"context"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current renderer")

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestRenderGolden: the rulesets of the docs' examples, byte for byte. The netns test
// loads the same renderer's output into the real nft.
func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		targets []Target
	}{
		{"nothing", nil},
		{"seat-and-exam", []Target{
			{pfx("10.0.0.1/32"), 0, wire.ExamForBootServer},
			{pfx("10.0.0.2/32"), 8080, wire.ExamForSiteManager},
			{pfx("10.0.0.53/32"), 53, wire.ExamForDNS},
			{pfx("192.0.2.10/32"), 636, wire.ExamForLogin},
			{pfx("192.0.2.11/32"), 88, wire.ExamForKDC},
			{pfx("192.0.2.20/32"), 631, wire.ExamForPrint},
			{pfx("198.51.100.7/32"), 443, wire.ExamForExam},
			{pfx("2001:db8::7/128"), 443, wire.ExamForExam},
			{pfx("10.0.5.0/24"), 0, wire.ExamForExam},
			{pfx("2001:db8:5::/48"), 0, wire.ExamForExam},
			{pfx("198.51.100.7/32"), 443, wire.ExamForExam}, // a name and an address that are the same: once
		}},
	} {
		got := Render(tc.targets)
		file := filepath.Join("testdata", tc.name+".golden")
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (go test ./node-agent/examfw -update)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, want)
		}
	}
}

// Render writes no rule for what is not an address or carries a purpose not on the
// fixed list: nothing but addresses, ports and our own words reach the ruleset.
func TestRenderInert(t *testing.T) {
	out := string(Render([]Target{
		{netip.Prefix{}, 0, wire.ExamForExam},
		{pfx("10.0.0.9/32"), 0, `exam" accept; #`},
	}))
	if strings.Contains(out, "10.0.0.9") || strings.Contains(out, "accept;") || strings.Contains(out, "invalid") {
		t.Errorf("rendered what it must not:\n%s", out)
	}
}

type fakeLookup map[string][]netip.Addr

func (f fakeLookup) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// Resolve: addresses and networks as they are, names to every address they have; a
// name that does not resolve is skipped and reported, never widened.
func TestResolve(t *testing.T) {
	lookup := fakeLookup{
		"exam.uni.example":  {netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")},
		"boot.uni.example":  {netip.MustParseAddr("::ffff:10.0.0.2")},
		"empty.uni.example": {},
	}
	n := &wire.ExamNetwork{Allow: []wire.ExamEndpoint{
		{Endpoint: "10.0.0.1", For: wire.ExamForBootServer},
		{Endpoint: "boot.uni.example:8080", For: wire.ExamForSiteManager},
		{Endpoint: "gone.uni.example:443", For: wire.ExamForExam},
		{Endpoint: "empty.uni.example", For: wire.ExamForExam},
		{Endpoint: "exam.uni.example:443", For: wire.ExamForExam},
		{Endpoint: "10.0.5.0/24", For: wire.ExamForExam},
		{Endpoint: "0.0.0.0/0; flush ruleset", For: wire.ExamForExam},
	}}
	got, skipped := Resolve(context.Background(), lookup, n)
	want := []Target{
		{pfx("10.0.0.1/32"), 0, wire.ExamForBootServer},
		{pfx("10.0.0.2/32"), 8080, wire.ExamForSiteManager},
		{pfx("198.51.100.7/32"), 443, wire.ExamForExam},
		{pfx("2001:db8::7/128"), 443, wire.ExamForExam},
		{pfx("10.0.5.0/24"), 0, wire.ExamForExam},
	}
	if !slices.Equal(got, want) {
		t.Errorf("targets\n%v\nwant\n%v", got, want)
	}
	var gone []string
	for _, s := range skipped {
		gone = append(gone, s.Endpoint)
	}
	if !slices.Equal(gone, []string{"gone.uni.example:443", "empty.uni.example", "0.0.0.0/0; flush ruleset"}) {
		t.Errorf("skipped %v", skipped)
	}
}

// Resolvers: the name servers of the PC's resolv.conf files, loopback (the systemd-resolved
// stub) left out, each once, on port 53.
func TestResolvers(t *testing.T) {
	dir := t.TempDir()
	etc := filepath.Join(dir, "resolv.conf")
	resolved := filepath.Join(dir, "resolved.conf")
	os.WriteFile(etc, []byte("# stub\nnameserver 127.0.0.53\noptions edns0\nsearch uni.example\n"), 0o644)
	os.WriteFile(resolved, []byte("nameserver 10.0.0.53\nnameserver 2001:db8::53\nnameserver fe80::1%eth0\nnameserver 10.0.0.53\n"), 0o644)
	got := Resolvers(etc, resolved, filepath.Join(dir, "missing"))
	want := []Target{{pfx("10.0.0.53/32"), 53, wire.ExamForDNS}, {pfx("2001:db8::53/128"), 53, wire.ExamForDNS}}
	if !slices.Equal(got, want) {
		t.Errorf("Resolvers = %v, want %v", got, want)
	}
}
