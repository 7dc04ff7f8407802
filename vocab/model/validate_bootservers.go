package model

import (
	"net/netip"

	"github.com/overtime-hpc/overtime/vocab/names"
)

// The validators of boot servers (see Site.Validate for their order).

// validateBootServers checks every boot server and collects their names for the pools,
// hosts and roles that name one.
func (s *Site) validateBootServers(ix *siteIndex) error {
	ix.servers = map[string]bool{}
	for _, b := range s.BootServers {
		if err := ValidName("boot server", b.Name); err != nil {
			return err
		}
		if ix.servers[b.Name] {
			return conflict("duplicate boot server %q", b.Name)
		}
		ix.servers[b.Name] = true
		for _, validate := range []func(BootServer) error{validateBootServerAddresses, validateDHCPRange, validDNS} {
			if err := validate(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateBootServerAddresses checks where a boot server is and what it serves from: its
// IP, HTTP URL, NFS server and root, DHCP kind and interface.
func validateBootServerAddresses(b BootServer) error {
	if err := ValidIP(b.IP); err != nil {
		return invalid("boot server %s: %v", b.Name, err)
	}
	// The renderers' own definitions (names.BootURL, names.NFSServer): whatever is
	// accepted here renders into every file of this boot server.
	if err := names.BootURL(b.HTTPURL); err != nil {
		return invalid("boot server %s: %v", b.Name, err)
	}
	if b.APIURL != "" {
		if err := names.APIURL(b.APIURL); err != nil {
			return invalid("boot server %s: apiURL: %v", b.Name, err)
		}
	}
	if b.NFSServer != "" {
		if err := names.NFSServer(b.NFSServer); err != nil {
			return invalid("boot server %s: %v", b.Name, err)
		}
	}
	if b.NFSRoot != "" && names.AbsPath("NFS root", b.NFSRoot) != nil {
		return invalid("boot server %s: invalid NFS root %q (expected an absolute path)", b.Name, b.NFSRoot)
	}
	if b.DHCP != DHCPFull && b.DHCP != DHCPProxy {
		return invalid("boot server %s: dhcp must be %q or %q, not %q", b.Name, DHCPFull, DHCPProxy, b.DHCP)
	}
	if b.Interface != "" && names.Interface(b.Interface) != nil {
		return invalid("boot server %s: invalid interface %q", b.Name, b.Interface)
	}
	return nil
}

// validateDHCPRange checks a boot server's subnet, and that its address range and router
// lie in it and are handed out only by a full DHCP server.
func validateDHCPRange(b BootServer) error {
	pfx, err := ValidCIDR(b.Subnet)
	if err != nil {
		return invalid("boot server %s: %v", b.Name, err)
	}
	for _, a := range []struct{ what, v string }{{"range start", b.RangeFrom}, {"range end", b.RangeTo}, {"router", b.Router}} {
		if a.v == "" {
			continue
		}
		if err := ValidIP(a.v); err != nil {
			return invalid("boot server %s %s: %v", b.Name, a.what, err)
		}
		if !pfx.Contains(netip.MustParseAddr(a.v)) {
			return invalid("boot server %s: %s %s is outside subnet %s", b.Name, a.what, a.v, b.Subnet)
		}
	}
	if (b.RangeFrom == "") != (b.RangeTo == "") {
		return invalid("boot server %s: give both range start and range end, or neither", b.Name)
	}
	if b.DHCP == DHCPProxy && b.RangeFrom != "" {
		return invalid("boot server %s: a proxy-DHCP server hands out no addresses; remove the range", b.Name)
	}
	if b.DHCP == DHCPProxy && b.Router != "" {
		return invalid("boot server %s: a proxy-DHCP server hands out no router (%s); remove it", b.Name, b.Router)
	}
	return nil
}

// validDNS checks the DNS servers and domain a boot server hands out. The servers may lie
// outside the segment (resolvers usually do), but must be addresses a PC can ask: not
// 0.0.0.0 (dnsmasq reads it as "this server", which runs no DNS), broadcast, multicast or
// loopback. A proxy-DHCP server hands out neither: the segment's DHCP server does.
func validDNS(b BootServer) error {
	if len(b.DNSServers) > MaxDNSServers {
		return invalid("boot server %s: %d DNS servers, at most %d (resolvers use only the first %d)", b.Name, len(b.DNSServers), MaxDNSServers, MaxDNSServers)
	}
	seen := map[string]bool{}
	for _, d := range b.DNSServers {
		if err := ValidIP(d); err != nil {
			return invalid("boot server %s DNS server: %v", b.Name, err)
		}
		a := netip.MustParseAddr(d)
		if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return invalid("boot server %s: DNS server %s is not an address a PC can ask", b.Name, d)
		}
		if seen[d] {
			return invalid("boot server %s: DNS server %s given twice", b.Name, d)
		}
		seen[d] = true
	}
	if b.Domain != "" {
		if err := names.Domain(b.Domain); err != nil {
			return invalid("boot server %s: %v", b.Name, err)
		}
	}
	if b.DHCP == DHCPProxy && (len(b.DNSServers) > 0 || b.Domain != "") {
		return invalid("boot server %s: a proxy-DHCP server hands out no DNS servers or domain (the segment's DHCP server does); remove them", b.Name)
	}
	return nil
}
