// Package examfw limits a PC's network during an exam: the site manager says what the PC
// may reach (wire.ExamNetwork, sitemgmt/examallow); this package resolves its names,
// renders it into an nftables ruleset of its own table (inet overtime_exam: output and
// input chains, policy drop) and loads or deletes that table with nft. Rendering is pure
// (Render); resolving and applying sit behind small interfaces (Lookup, Firewall) so that
// the agent's use of them can be tested without nft, while the rules themselves are
// tested with the real nft in network namespaces.
//
// Only what names.ParseEndpoint accepted and a resolver returned as an address reaches
// the ruleset, each rule's comment is a word of wire.ExamPurposes: nothing of the site's
// free text is ever written into it.
package examfw

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Table is the nftables table (family inet) the exam's rules live in: a table of its
// own, so that loading and deleting it touches no other ruleset of the PC (libvirt's,
// an image's own firewall), and an administrator finds it by name.
const Table = "overtime_exam"

// Target is one resolved entry of the ruleset: a network (a single address is a
// full-length prefix), one port or every port (0), and why.
type Target struct {
	Prefix netip.Prefix
	Port   uint16
	For    wire.ExamPurpose
}

// Lookup resolves a host name to addresses (net.Resolver's LookupNetIP).
type Lookup interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Skipped is an entry that did not become a rule, and why (logged by the agent).
type Skipped struct {
	Endpoint string
	For      wire.ExamPurpose
	Err      error
}

// LookupTimeout bounds the resolution of one name: a dead resolver must not hold the
// exam's rules back for long (the name is skipped, the rest is loaded).
const LookupTimeout = 5 * time.Second

// Resolve turns the document's endpoints into targets: addresses and networks as they
// are, names by lookup (every address it returns). A name that does not resolve is
// skipped and reported, never widened: a rule is only ever written for an address.
func Resolve(ctx context.Context, lookup Lookup, n *wire.ExamNetwork) ([]Target, []Skipped) {
	// Names are looked up at once, each within LookupTimeout: a list of dead names costs
	// the agent one timeout, not one per name.
	type result struct {
		targets []Target
		err     error
	}
	results := make([]result, len(n.Allow))
	var wg sync.WaitGroup
	for i, e := range n.Allow {
		ep, err := names.ParseEndpoint(e.Endpoint)
		if err == nil && !slices.Contains(wire.ExamPurposes, e.For) {
			err = fmt.Errorf("unknown purpose %q", e.For)
		}
		switch {
		case err != nil:
			results[i].err = err
		case ep.Name == "":
			results[i].targets = []Target{{ep.Prefix, ep.Port, e.For}}
		case lookup == nil:
			results[i].err = fmt.Errorf("no resolver")
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				lctx, cancel := context.WithTimeout(ctx, LookupTimeout)
				defer cancel()
				addrs, err := lookup.LookupNetIP(lctx, "ip", ep.Name)
				for _, a := range addrs {
					if a = a.Unmap(); a.IsValid() && a.Zone() == "" {
						results[i].targets = append(results[i].targets, Target{netip.PrefixFrom(a, a.BitLen()), ep.Port, e.For})
					}
				}
				if err == nil && len(results[i].targets) == 0 {
					err = fmt.Errorf("no address")
				}
				if err != nil {
					results[i] = result{err: err}
				}
			}()
		}
	}
	wg.Wait()
	var out []Target
	var skipped []Skipped
	for i, r := range results {
		if r.err != nil {
			skipped = append(skipped, Skipped{n.Allow[i].Endpoint, n.Allow[i].For, r.err})
			continue
		}
		out = append(out, r.targets...)
	}
	return out, skipped
}

// Resolvers reads the name servers of resolv.conf files (the PC's resolvers as DHCP gave
// them; with systemd-resolved, /run/systemd/resolve/resolv.conf holds the upstream ones
// while /etc/resolv.conf names the local stub). Loopback servers are left out (the
// loopback is always allowed), as are unreadable files. Each becomes a DNS target.
func Resolvers(files ...string) []Target {
	var out []Target
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 || fields[0] != "nameserver" {
				continue
			}
			a, err := netip.ParseAddr(fields[1])
			if err != nil || a.IsLoopback() || a.Zone() != "" {
				continue
			}
			a = a.Unmap()
			t := Target{netip.PrefixFrom(a, a.BitLen()), 53, wire.ExamForDNS}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// DefaultResolvConf are the files Resolvers reads on a PC.
var DefaultResolvConf = []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"}

// Render is the ruleset for targets: one nft -f transaction that replaces the table
// inet overtime_exam whole (created empty first so that the delete never fails), with
//
//   - output: loopback, packets of connections the PC made or was answered on
//     (established, related: ICMP errors too), DHCPv4/DHCPv6 requests, IPv6 neighbour
//     and router discovery, then one rule per target; policy drop;
//   - input: loopback, established and related, DHCP answers, neighbour and router
//     discovery; policy drop: nothing may connect to an exam PC.
//
// A target without a port allows every protocol to it; one with a port allows TCP and
// UDP to that port. Targets are written in the order given, each once.
func Render(targets []Target) []byte {
	var b strings.Builder
	b.WriteString("# The Overtime node agent's exam network (node-agent/examfw): what this PC may reach\n")
	b.WriteString("# during the exam. Loaded with nft -f as one transaction; deleted when the exam ends.\n")
	fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\n", Table, Table)
	fmt.Fprintf(&b, "table inet %s {\n", Table)
	b.WriteString("\tchain output {\n")
	b.WriteString("\t\ttype filter hook output priority filter; policy drop;\n")
	b.WriteString("\t\toifname \"lo\" accept\n")
	b.WriteString("\t\tct state established,related accept\n")
	b.WriteString("\t\tudp sport 68 udp dport 67 accept comment \"dhcp\"\n")
	b.WriteString("\t\tudp sport 546 udp dport 547 accept comment \"dhcpv6\"\n")
	b.WriteString("\t\ticmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept comment \"ipv6 neighbours\"\n")
	seen := map[[2]string]bool{}
	for _, t := range targets {
		if !t.Prefix.IsValid() || !slices.Contains(wire.ExamPurposes, t.For) {
			continue // not an address, or a comment that is not one of ours: never written
		}
		p := t.Prefix.Masked()
		k := [2]string{p.String(), strconv.Itoa(int(t.Port))}
		if seen[k] {
			continue
		}
		seen[k] = true
		fam := "ip"
		if p.Addr().Is6() {
			fam = "ip6"
		}
		dst := p.String()
		if p.IsSingleIP() {
			dst = p.Addr().String()
		}
		port := ""
		if t.Port != 0 {
			port = " meta l4proto { tcp, udp } th dport " + strconv.Itoa(int(t.Port))
		}
		fmt.Fprintf(&b, "\t\t%s daddr %s%s accept comment %q\n", fam, dst, port, string(t.For))
	}
	b.WriteString("\t}\n")
	b.WriteString("\tchain input {\n")
	b.WriteString("\t\ttype filter hook input priority filter; policy drop;\n")
	b.WriteString("\t\tiifname \"lo\" accept\n")
	b.WriteString("\t\tct state established,related accept\n")
	b.WriteString("\t\tudp sport 67 udp dport 68 accept comment \"dhcp\"\n")
	b.WriteString("\t\tudp sport 547 udp dport 546 accept comment \"dhcpv6\"\n")
	b.WriteString("\t\ticmpv6 type { nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert } accept comment \"ipv6 neighbours\"\n")
	b.WriteString("\t}\n")
	b.WriteString("}\n")
	return []byte(b.String())
}
