package names

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Endpoint is one thing a PC in an exam may reach (model.Exception.Allow, the node
// agent's nftables ruleset): a DNS name, an address or a network, and one port or every
// port. Exactly one of Name and Prefix is set; a single address is a full-length prefix.
type Endpoint struct {
	Name   string       // a DNS name the node agent resolves when the exam starts
	Prefix netip.Prefix // an address (/32, /128) or network, masked, never a zone
	Port   uint16       // 0: every port (and every protocol)
}

// String is the endpoint in the form ParseEndpoint reads: name[:port], addr[:port],
// prefix[:port], IPv6 in brackets when a port follows.
func (e Endpoint) String() string {
	host := e.Name
	if host == "" {
		host = e.Prefix.String()
		if e.Prefix.IsSingleIP() {
			host = e.Prefix.Addr().String()
		}
	}
	if e.Port == 0 {
		return host
	}
	if e.Prefix.IsValid() && e.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(e.Port))
}

// ParseEndpoint reads what an exam may reach: a host name or an IPv4/IPv6 address or
// network, optionally with :port (IPv6 in brackets then: [2001:db8::1]:443,
// [2001:db8::/64]:443), e.g. exam.uni.example:443, 10.0.5.0/24. Names are lower-case DNS
// names (Domain's alphabet); a network may not have host bits set (10.0.5.1/24 is
// refused, so that what was meant is written); zones and IPv4-mapped IPv6 addresses are
// refused. Only what parses here is ever rendered into a firewall rule.
func ParseEndpoint(s string) (Endpoint, error) {
	bad := func(why string) (Endpoint, error) {
		return Endpoint{}, fmt.Errorf("invalid endpoint %q: %s", s, why)
	}
	if s == "" {
		return bad("empty (give a host name, an address or a network, optionally with :port)")
	}
	if len(s) > 300 {
		return bad("too long")
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("no ']' after an IPv6 address in brackets")
		}
		host, port = s[1:end], s[end+1:]
		if port != "" {
			if !strings.HasPrefix(port, ":") {
				return bad("after ']' comes :port or nothing")
			}
			port = port[1:]
			if port == "" {
				return bad("':' without a port")
			}
		}
		if !strings.Contains(host, ":") {
			return bad("brackets are for IPv6 addresses only")
		}
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
		if port == "" {
			return bad("':' without a port")
		}
	}
	var e Endpoint
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || port[0] == '0' || port[0] == '+' {
			return bad("port must be 1-65535")
		}
		e.Port = uint16(n)
	}
	switch {
	case strings.Contains(host, "/"):
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return bad("not an address/length network like 10.0.5.0/24 or 2001:db8::/64")
		}
		if p.Addr().Is4In6() {
			return bad("an IPv4-mapped IPv6 network: write the IPv4 network")
		}
		if p.Masked() != p {
			return bad(fmt.Sprintf("host bits set: the network is %s", p.Masked()))
		}
		e.Prefix = p
	case strings.Contains(host, ":") || isIPv4Like(host):
		a, err := netip.ParseAddr(host)
		if err != nil {
			return bad("not an IPv4 or IPv6 address")
		}
		if a.Zone() != "" {
			return bad("an address with a zone (%...) names an interface of one PC")
		}
		if a.Is4In6() {
			return bad("an IPv4-mapped IPv6 address: write the IPv4 address")
		}
		e.Prefix = netip.PrefixFrom(a, a.BitLen())
	default:
		if err := Domain(host); err != nil {
			return bad("expected a lower-case host name like exam.uni.example, an address or a network")
		}
		e.Name = host
	}
	if e.Prefix.IsValid() && e.Prefix.Addr().Is6() && port != "" && !strings.HasPrefix(s, "[") {
		return bad("an IPv6 address with a port goes in brackets: [2001:db8::1]:443")
	}
	return e, nil
}

// isIPv4Like: digits and dots only, which a DNS name never is (its last label is not
// all digits), so it must parse as an address.
func isIPv4Like(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == ""
}
