package vmware

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/overtime-hpc/overtime/node-agent/guest"
)

// NAT port forwards are not part of a VM's .vmx: VMware's NAT device (vmnet-natd on vmnet8)
// is host-wide. On Linux Workstation/Player its settings live in /etc/vmware/networking
// (the file vmware-netcfg writes and `vmware-networks --start` reads), from which
// /etc/vmware/vmnet8/nat/nat.conf ([incomingtcp] section) and the vmnet8 dhcpd.conf are
// generated. A forward targets an IP address, so the guest needs a fixed vmnet8 address:
// a DHCP reservation for its MAC (add_dhcp_mac_to_ip) plus one add_nat_portfwd per port.

// vmnetNAT is the VMware network NAT guests use.
const vmnetNAT = 8

// NATNetworking returns the /etc/vmware/networking lines a NAT guest with this (VMware) MAC
// and vmnet8 address needs: its DHCP reservation and one TCP forward per port.
func NATNetworking(mac string, ip netip.Addr, ports []guest.PortForward) ([]string, error) {
	vmac, err := VMwareMAC(mac)
	if err != nil {
		return nil, err
	}
	if !ip.Is4() {
		return nil, fmt.Errorf("vmware: NAT guest address %v is not IPv4", ip)
	}
	lines := []string{fmt.Sprintf("add_dhcp_mac_to_ip %d %s %s", vmnetNAT, vmac, ip)}
	for _, p := range ports {
		if p.HostPort < 1 || p.HostPort > 65535 || p.GuestPort < 1 || p.GuestPort > 65535 {
			return nil, fmt.Errorf("vmware: port forward %d:%d out of range", p.HostPort, p.GuestPort)
		}
		lines = append(lines, fmt.Sprintf("add_nat_portfwd %d tcp %d %s %d", vmnetNAT, p.HostPort, ip, p.GuestPort))
	}
	return lines, nil
}

// NATConf returns the same forwards as an [incomingtcp] section of vmnet-natd's nat.conf
// (/etc/vmware/vmnet8/nat/nat.conf), for hosts whose networking is configured there directly.
func NATConf(ip netip.Addr, ports []guest.PortForward) (string, error) {
	if !ip.Is4() {
		return "", fmt.Errorf("vmware: NAT guest address %v is not IPv4", ip)
	}
	var b strings.Builder
	b.WriteString("[incomingtcp]\n")
	for _, p := range ports {
		if p.HostPort < 1 || p.HostPort > 65535 || p.GuestPort < 1 || p.GuestPort > 65535 {
			return "", fmt.Errorf("vmware: port forward %d:%d out of range", p.HostPort, p.GuestPort)
		}
		fmt.Fprintf(&b, "%d = %s:%d\n", p.HostPort, ip, p.GuestPort)
	}
	return b.String(), nil
}

// normLine canonicalizes a networking line for comparison: fields separated by one space,
// lower case (MACs are compared case-insensitively).
func normLine(l string) string { return strings.ToLower(strings.Join(strings.Fields(l), " ")) }

// missingNetworking returns the lines of want that content lacks.
func missingNetworking(content string, want []string) []string {
	have := map[string]bool{}
	for l := range strings.SplitSeq(content, "\n") {
		have[normLine(l)] = true
	}
	var miss []string
	for _, w := range want {
		if !have[normLine(w)] {
			miss = append(miss, w)
		}
	}
	return miss
}

// mergeNetworking returns content with want added, after dropping the lines want replaces:
// other forwards of the same vmnet8 host ports and other reservations of the same MAC.
func mergeNetworking(content string, want []string) string {
	replaced := map[string]bool{}
	for _, w := range want {
		f := strings.Fields(normLine(w))
		switch {
		case len(f) == 6 && f[0] == "add_nat_portfwd":
			replaced[strings.Join(f[:4], " ")] = true // add_nat_portfwd 8 tcp PORT
		case len(f) == 4 && f[0] == "add_dhcp_mac_to_ip":
			replaced[strings.Join(f[:3], " ")] = true // add_dhcp_mac_to_ip 8 MAC
		}
	}
	var out []string
	for l := range strings.SplitSeq(strings.TrimRight(content, "\n"), "\n") {
		f := strings.Fields(normLine(l))
		if len(f) >= 4 && f[0] == "add_nat_portfwd" && replaced[strings.Join(f[:4], " ")] {
			continue
		}
		if len(f) >= 3 && f[0] == "add_dhcp_mac_to_ip" && replaced[strings.Join(f[:3], " ")] {
			continue
		}
		if l != "" || len(out) > 0 {
			out = append(out, l)
		}
	}
	out = append(out, want...)
	return strings.Join(out, "\n") + "\n"
}

// bridgeMapping returns the host interface /etc/vmware/networking maps vmnet0 to
// ("add_bridge_mapping IFACE 0"), or "" when vmnet0 bridges automatically.
func bridgeMapping(content string) string {
	for l := range strings.SplitSeq(content, "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "add_bridge_mapping" && f[2] == "0" {
			return f[1]
		}
	}
	return ""
}
