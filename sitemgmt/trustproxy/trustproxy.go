// Package trustproxy answers two questions about an HTTP request for both front ends
// (sitemgmt/api, sitemgmt/web): which address the client has (for the login throttle,
// sitemgmt/loginguard) and whether the client's connection is TLS (for Secure cookies).
//
// Behind a reverse proxy that terminates TLS, the connection the server sees comes from
// the proxy, in clear text; the proxy says who the client was and how it came in with
// X-Forwarded-For and X-Forwarded-Proto. Those headers are believed only from peers the
// administrator named (`overtime serve --trusted-proxy CIDR[,CIDR...]`): from anyone
// else they are whatever the client chose to write, and are ignored.
package trustproxy

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the networks whose requests may state the client's address and scheme.
// The zero value trusts nobody.
type Proxies struct{ nets []netip.Prefix }

// Parse reads "CIDR[,CIDR...]" (a bare address is a /32 or /128; "" is nobody).
func Parse(s string) (Proxies, error) {
	var p Proxies
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if pre, err := netip.ParsePrefix(f); err == nil {
			p.nets = append(p.nets, pre.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return Proxies{}, fmt.Errorf("trusted proxy %q: not an address or CIDR network (e.g. 10.0.0.5 or 10.0.0.0/24)", f)
		}
		a = a.Unmap()
		p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// String is the list as Parse reads it.
func (p Proxies) String() string {
	s := make([]string, len(p.nets))
	for i, n := range p.nets {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

func (p Proxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Peer is the address of the connection's other end (invalid if RemoteAddr is not one).
func Peer(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// Client is the client's address: the peer's, unless the peer is a trusted proxy; then
// the X-Forwarded-For hops are read from the right (the nearest proxy's entry) and the
// first that is not itself a trusted proxy is the client. Entries left of it were
// written by the client and prove nothing. A malformed entry ends the walk at the last
// trusted hop.
func (p Proxies) Client(r *http.Request) netip.Addr {
	a := Peer(r)
	if !p.trusts(a) {
		return a
	}
	hops := forwardedList(r.Header.Values("X-Forwarded-For"))
	for i := len(hops) - 1; i >= 0; i-- {
		h, ok := parseHop(hops[i])
		if !ok {
			return a
		}
		a = h
		if !p.trusts(a) {
			return a
		}
	}
	return a
}

// TLS reports whether the client's connection is TLS: this server's own (r.TLS), or a
// trusted proxy's that says so with X-Forwarded-Proto: https (its last entry, the one
// the nearest proxy wrote).
func (p Proxies) TLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !p.trusts(Peer(r)) {
		return false
	}
	protos := forwardedList(r.Header.Values("X-Forwarded-Proto"))
	return len(protos) > 0 && strings.EqualFold(protos[len(protos)-1], "https")
}

// parseHop reads one X-Forwarded-For entry: an address, some proxies' "addr:port" or
// "[v6]:port", or a bracketed IPv6 address.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// forwardedList splits the header lines into their comma-separated entries.
func forwardedList(lines []string) []string {
	var out []string
	for _, l := range lines {
		for _, f := range strings.Split(l, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}
