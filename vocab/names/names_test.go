package names

import (
	"strings"
	"testing"
)

// Values that must never pass any alphabet that ends up in a rendered file, an LDAP DN or
// filter, or a command line: they would end a line, open a comment or directive, expand a
// variable, or change the meaning of a DN or filter.
var injections = []string{
	"",
	"a b",
	"a\nb",
	"a\rb",
	"a\tb",
	"a;b",
	"a#b",
	"a${x}",
	"a$b",
	"a\"b",
	"a'b",
	"a\\b",
	"a`b`",
	"a,b",  // LDAP DN separator, dnsmasq field separator
	"a=b",  // LDAP attribute=value
	"a+b",  // LDAP multi-valued RDN (allowed in versions and paths only, see below)
	"a*b",  // LDAP filter wildcard
	"a(b)", // LDAP filter grouping
	"a<b",
	"a>b",
	"a|b",
	"a&b",
	"a\x00b",
	"ä",
}

// mayContain lists, per alphabet, the injection strings it deliberately accepts because the
// format needs those characters; every other injection must be refused.
type alphabet struct {
	name       string
	check      func(string) error
	accept     []string
	refuse     []string
	mayContain []string
}

func mac(s string) error { _, err := MAC(s); return err }
func cidr(s string) error {
	_, err := CIDR(s)
	return err
}

var alphabets = []alphabet{
	{name: "Name", check: func(s string) error { return Name("pool", s) },
		accept: []string{"lab-a", "a", "0", "pool_1.x", strings.Repeat("a", 63)},
		refuse: []string{"Lab", "-a", ".a", "_a", "a..b", strings.Repeat("a", 64), "a/b", "a:b"}},
	{name: "Hostname", check: Hostname,
		accept: append([]string{"pc-a01", "a", "overtime-pc-a01", strings.Repeat("a", 63)}, TrickyHostnames...),
		// Keywords and lease times of dnsmasq's dhcp-host and Slurm's node lines.
		refuse: []string{"PC1", "a-", "-a", "a.b", "a_b", strings.Repeat("a", 64),
			"0", "3600", "12h", "45m", "30s", "1d", "2w", "007", "infinite", "ignore", "default", "all"}},
	{name: "MAC", check: mac,
		accept: []string{"52:54:00:12:34:56", "52-54-00-AA-BB-CC", "5254.00aa.bbcc"},
		refuse: []string{"01:00:5e:00:00:01", " 52:54:00:12:34:56", "52:54:00:12:34:56\n", "52:54:00:12:34", "00:00:00:00:00:00:00:01", "nope",
			"00:00:00:00:00:00", "0000.0000.0000", "ff:ff:ff:ff:ff:ff", "FF-FF-FF-FF-FF-FF", "33:33:00:00:00:01"}},
	{name: "IPv4", check: IPv4,
		accept: []string{"10.0.0.1", "192.168.1.254"},
		refuse: []string{"10.0.0", "::1", "10.0.0.1/24", "010.0.0.1", "10.0.0.256"}},
	{name: "CIDR", check: cidr,
		accept: []string{"10.0.0.0/24", "0.0.0.0/0"},
		refuse: []string{"10.0.0.1/24", "10.0.0.0", "fd00::/8"}},
	{name: "KernelArgs", check: KernelArgs,
		accept: []string{"", "quiet", "console=ttyS0,115200 ip=dhcp", "root=/dev/nfs nfsroot=10.0.0.1:/srv/x,vers=4 a+b@c%d"},
		refuse: []string{"a  b", " a", "a ", strings.Repeat("a", 1025)},
		// ' ' separates arguments, ',' '=' '+' values inside one; "" is no arguments.
		mayContain: []string{"", "a b", "a,b", "a=b", "a+b"}},
	{name: "RelPath", check: func(s string) error { return RelPath("image", s) },
		accept:     []string{"a", "desktop/2026.1/root.squashfs", "a+b/c_d-e.f"},
		refuse:     []string{"/a", "a/", "a//b", "../a", "a/../b", "./a", "a/.", "..", "a:b"},
		mayContain: []string{"a+b"}},
	{name: "AbsPath", check: func(s string) error { return AbsPath("NFS root", s) },
		accept: []string{"/srv/overtime/images", "/a"},
		refuse: []string{"srv", "/", "//a", "/a/../b", "/a/"}},
	{name: "Version", check: Version,
		accept:     []string{"2026.1", "v1.2.3+build_4", "A", strings.Repeat("a", 63)},
		refuse:     []string{".1", "-1", "1/2", "1..2/x", strings.Repeat("a", 64)},
		mayContain: []string{"a+b"}},
	{name: "SHA256", check: SHA256,
		accept: []string{strings.Repeat("0f", 32)},
		refuse: []string{strings.Repeat("0F", 32), strings.Repeat("0", 63), strings.Repeat("0", 65), strings.Repeat("g", 64)}},
	{name: "Interface", check: Interface,
		accept: []string{"eth0", "br0", "enp0s31f6", "vlan.10", "a_b-c", strings.Repeat("a", 15)},
		refuse: []string{strings.Repeat("a", 16), "a/b", "a:b"}},
	{name: "UID", check: UID,
		accept: []string{"alice", "_svc", "a.b-c_1", strings.Repeat("a", 32)},
		refuse: []string{"Alice", "1alice", "-a", strings.Repeat("a", 33), "a@b"}},
	{name: "JobID", check: JobID,
		accept: []string{"1", "123_4", "4294967295"},
		refuse: []string{"a", "12345678901", "1_", "_1", "1_2_3", "-1"}},
	{name: "Text", check: func(s string) error { return Text("description", s) },
		accept: []string{"", "Room 1.23, lab A (ground floor)", "a;b#c=d*e+f<g>|h&i'j"},
		refuse: []string{strings.Repeat("a", 201)},
		// Free text only fills comments and menu titles (sanitised again by the
		// renderers): it may hold punctuation, not line breaks, quotes, '\' or '$'.
		mayContain: []string{"", "a b", "a;b", "a#b", "a,b", "a=b", "a+b", "a*b", "a(b)", "a<b", "a>b", "a|b", "a&b", "a'b", "a`b`", "ä"}},
	{name: "BootURL", check: BootURL,
		accept: []string{"http://10.0.0.1:8080", "https://boot.example.org/overtime/", "http://bs1"},
		refuse: []string{"ftp://a", "http://", "http://a:8080:1", "http://a/..", "http://a/b?c", "http://user@a", "10.0.0.1"}},
	{name: "NFSServer", check: NFSServer,
		accept: []string{"10.0.0.1", "nfs.example.org", "a"},
		refuse: []string{"a.", ".a", "A", "a:b", "a..b", "a.-b", "-a", "a-.b", strings.Repeat("a", 64)}},
	{name: "Domain", check: Domain,
		accept: []string{"lab.example.org", "example", "cs.uni-x.de", "a1.b2", "x.0a", strings.Repeat("a", 63) + ".org"},
		// Trailing or doubled dots, upper case, IPv4 addresses (all-numeric last label),
		// dnsmasq's option separators and anything that ends a line.
		refuse: []string{"lab.example.org.", ".org", "a..b", "Lab.example.org", "10.0.0.1", "a.123", "-a.org", "a-.org",
			"a_b.org", "lab.example.org,evil.org", "lab.example.org\ndhcp-boot=x", "lab example.org", `"lab.example.org"`,
			strings.Repeat("a", 64) + ".org", strings.Repeat("a.", 126) + "ab"}},
	{name: "NFSClients", check: NFSClients,
		accept:     []string{"*", "10.0.0.0/24", "@lab", "pc-?.example.org", "fd00::/8"},
		refuse:     []string{strings.Repeat("a", 256)},
		mayContain: []string{"a*b"}},
}

func TestAlphabet(t *testing.T) {
	for _, a := range alphabets {
		t.Run(a.name, func(t *testing.T) {
			for _, s := range a.accept {
				if err := a.check(s); err != nil {
					t.Errorf("refused %q: %v", s, err)
				}
			}
			for _, s := range a.refuse {
				if err := a.check(s); err == nil {
					t.Errorf("accepted %q", s)
				}
			}
			allowed := map[string]bool{}
			for _, s := range a.mayContain {
				allowed[s] = true
			}
			for _, s := range injections {
				if err := a.check(s); err == nil && !allowed[s] {
					t.Errorf("accepted injection %q", s)
				}
			}
		})
	}
}

func TestMACCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"52:54:00:12:34:56": "52:54:00:12:34:56",
		"52-54-00-AA-BB-CC": "52:54:00:aa:bb:cc",
		"5254.00aa.bbcc":    "52:54:00:aa:bb:cc",
		"52:54:00:AA:bb:Cc": "52:54:00:aa:bb:cc",
	} {
		got, err := MAC(in)
		if err != nil || got != want {
			t.Errorf("MAC(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// The messages are part of the API (tests and users match on them); pin the ones other
// packages pass through unchanged.
func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Name("pool", "A"), `invalid pool name "A": use 1-63 characters a-z 0-9 . _ - starting with a letter or digit`},
		{Hostname("a b"), `invalid hostname "a b": use one DNS label of 1-63 characters a-z 0-9 - (no dots, spaces or quotes)`},
		{mac("nope"), `invalid MAC address "nope": expected six hex octets like 52:54:00:12:34:56`},
		{mac("01:00:5e:00:00:01"), `invalid MAC address "01:00:5e:00:00:01": multicast address`},
		{mac("00:00:00:00:00:00"), `invalid MAC address "00:00:00:00:00:00": the all-zero address belongs to no NIC`},
		{mac("ff:ff:ff:ff:ff:ff"), `invalid MAC address "ff:ff:ff:ff:ff:ff": broadcast address`},
		{KernelArgs("a;b"), `invalid kernel argument "a;b": arguments are separated by single spaces and may use only A-Z a-z 0-9 _ . / : = , + @ % -`},
		{RelPath("image", "a/../b"), `invalid image path "a/../b": '.' and '..' are not allowed`},
		{UID("A"), `invalid user id "A": use 1-32 characters a-z 0-9 _ . - starting with a letter or _`},
		{JobID("x"), `job id "x": must be a Slurm job id (digits, optionally _N)`},
		{Domain("a b"), `invalid DNS domain "a b": expected lower-case labels a-z 0-9 - separated by dots, like lab.example.org`},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("got %v, want %s", tc.err, tc.want)
		}
	}
}
