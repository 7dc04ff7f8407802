package trustproxy

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

func TestClientAndTLS(t *testing.T) {
	p, err := Parse("10.0.0.0/24, 192.0.2.5,2001:db8::/32")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "10.0.0.0/24,192.0.2.5/32,2001:db8::/32" {
		t.Fatalf("String: %s", got)
	}
	for _, tc := range []struct {
		name, remote, xff, proto string
		tlsConn                  bool
		client                   string
		isTLS                    bool
	}{
		{"direct client", "198.51.100.9:4000", "", "", false, "198.51.100.9", false},
		{"direct TLS", "198.51.100.9:4000", "", "", true, "198.51.100.9", true},
		{"untrusted peer's headers are ignored", "198.51.100.9:4000", "203.0.113.1", "https", false, "198.51.100.9", false},
		{"trusted proxy", "10.0.0.3:4000", "203.0.113.1", "https", false, "203.0.113.1", true},
		{"trusted proxy, http", "10.0.0.3:4000", "203.0.113.1", "http", false, "203.0.113.1", false},
		{"trusted proxy without headers", "10.0.0.3:4000", "", "", false, "10.0.0.3", false},
		{"client-written hops left of the real client are ignored", "10.0.0.3:4000", "1.2.3.4, 203.0.113.1", "http,https", false, "203.0.113.1", true},
		{"chain of trusted proxies", "10.0.0.3:4000", "203.0.113.1, 192.0.2.5", "https", false, "203.0.113.1", true},
		{"malformed hop ends the walk", "10.0.0.3:4000", "203.0.113.1, junk", "", false, "10.0.0.3", false},
		{"hop with a port", "10.0.0.3:4000", "203.0.113.1:5555", "", false, "203.0.113.1", false},
		{"IPv6 hop", "[2001:db8::1]:443", "[2001:db8:ffff::1]:5", "HTTPS", false, "2001:db8:ffff::1", true},
		{"client's own proto is not the proxy's", "10.0.0.3:4000", "203.0.113.1", "https, http", false, "203.0.113.1", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if tc.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		if tc.tlsConn {
			r.TLS = &tls.ConnectionState{}
		} else {
			r.TLS = nil
		}
		if got := p.Client(r).String(); got != tc.client {
			t.Errorf("%s: client %s, want %s", tc.name, got, tc.client)
		}
		if got := p.TLS(r); got != tc.isTLS {
			t.Errorf("%s: TLS %v, want %v", tc.name, got, tc.isTLS)
		}
		var nobody Proxies
		if got := nobody.Client(r).String(); got != Peer(r).String() {
			t.Errorf("%s: trusting nobody, client %s, want the peer", tc.name, got)
		}
	}
	if _, err := Parse("10.0.0.0/33"); err == nil {
		t.Error("Parse accepted 10.0.0.0/33")
	}
}
