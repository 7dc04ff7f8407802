package names

import (
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "exam.uni.example", want: "exam.uni.example"},
		{in: "exam.uni.example:443", want: "exam.uni.example:443"},
		{in: "exam", want: "exam"},
		{in: "10.0.5.7", want: "10.0.5.7"},
		{in: "10.0.5.7:8443", want: "10.0.5.7:8443"},
		{in: "10.0.5.0/24", want: "10.0.5.0/24"},
		{in: "10.0.5.0/24:443", want: "10.0.5.0/24:443"},
		{in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{in: "2001:db8::1", want: "2001:db8::1"},
		{in: "2001:DB8::1", want: "2001:db8::1"},
		{in: "[2001:db8::1]:443", want: "[2001:db8::1]:443"},
		{in: "2001:db8::/64", want: "2001:db8::/64"},
		{in: "[2001:db8::/64]:443", want: "[2001:db8::/64]:443"},
		{in: "", err: "empty"},
		{in: "Exam.Uni.Example", err: "lower-case host name"},
		{in: "exam.uni.example:", err: "without a port"},
		{in: "exam.uni.example:0", err: "1-65535"},
		{in: "exam.uni.example:65536", err: "1-65535"},
		{in: "exam.uni.example:044", err: "1-65535"},
		{in: "exam.uni.example:+44", err: "1-65535"},
		{in: "exam.uni.example:http", err: "1-65535"},
		{in: "10.0.5.1/24", err: "host bits set: the network is 10.0.5.0/24"},
		{in: "10.0.5.300", err: "not an IPv4"},
		{in: "10.0.5", err: "not an IPv4"},
		{in: "10.0.5.0/33", err: "network"},
		{in: "fe80::1%eth0", err: "zone"},
		{in: "::ffff:10.0.0.1", err: "IPv4-mapped"},
		{in: "[10.0.0.1]:80", err: "IPv6 addresses only"},
		{in: "[2001:db8::1]443", err: "after ']'"},
		{in: "[2001:db8::1", err: "no ']'"},
		{in: "exam.uni.example;drop", err: "host name"},
		{in: "exam uni", err: "host name"},
		{in: `exam"}`, err: "host name"},
		{in: "a.b.c:1:2", err: "not an IPv4 or IPv6"},
		{in: "*", err: "host name"},
	} {
		e, err := ParseEndpoint(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseEndpoint(%q) = %v, %v; want error with %q", tc.in, e, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseEndpoint(%q): %v", tc.in, err)
			continue
		}
		if got := e.String(); got != tc.want {
			t.Errorf("ParseEndpoint(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		// The canonical form reads back as itself.
		if again, err := ParseEndpoint(e.String()); err != nil || again != e {
			t.Errorf("ParseEndpoint(%q) round trip: %v, %v", e.String(), again, err)
		}
	}
}
