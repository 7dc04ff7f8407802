// Package examallow answers one question: what may a PC reach while an exam holds it?
// The exam's own allow list (model.Exception.Allow), and what the PC needs to keep
// running, which only the site knows: the boot server its root file system is mounted
// from, the site manager its agent talks to, the resolvers the boot server hands out, the
// seat's login directory and KDCs and its print server. The resolver puts the answer
// into the agent's configuration (wire.AgentConfig.ExamNetwork); the node agent turns it
// into an nftables ruleset (node-agent/examfw). Pure: no I/O, no clock.
package examallow

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Default ports of what a seat's configuration names without one.
const (
	portDNS      = 53
	portKerberos = 88
	portLDAP     = 389
	portLDAPS    = 636
	portADGC     = 3268 // Active Directory's global catalogue, which sssd's ad provider asks
	portIPP      = 631
)

// For is what a PC of pool (nil: none) answered by boot server srv (nil: none) may reach
// during exam x (nil: an exam the caller could not find, which then allows only what the
// PC needs). site gives the login and printing configuration a pool does not override.
//
// The boot server's address is allowed on every port: the root file system is NFS from
// it (NFSv3 asks rpcbind for mountd's port, which is not fixed), and it answers DHCP,
// TFTP and, with dnsmasq, DNS. The site manager is the boot server's HTTP URL (the
// kernel command line's overtime.url=, the agent's OVERTIME_URL), on its port only.
// Entries come in a fixed order (boot server, site manager, DNS, login, KDCs, printing,
// the exam's), each once.
func For(site *model.Site, pool *model.Pool, srv *model.BootServer, x *model.Exception) *wire.ExamNetwork {
	n := &wire.ExamNetwork{Allow: []wire.ExamEndpoint{}}
	seen := map[wire.ExamEndpoint]bool{}
	put := func(why wire.ExamPurpose, ep names.Endpoint) {
		e := wire.ExamEndpoint{Endpoint: ep.String(), For: why}
		if !seen[e] {
			seen[e] = true
			n.Allow = append(n.Allow, e)
		}
	}
	add := func(why wire.ExamPurpose, host string, port uint16) {
		// A validated site names only hosts that parse; what does not is left out
		// rather than widened (never "everything").
		if ep, ok := endpoint(host, port); ok {
			put(why, ep)
		}
	}
	if srv != nil {
		add(wire.ExamForBootServer, srv.IP, 0)
		if srv.NFSServer != "" {
			add(wire.ExamForBootServer, srv.NFSServer, 0)
		}
		if host, port, ok := urlHostPort(srv.HTTPURL); ok {
			add(wire.ExamForSiteManager, host, port)
		}
		for _, d := range srv.DNSServers {
			add(wire.ExamForDNS, d, portDNS)
		}
	}
	login, printing := site.DesktopLogin, site.Printing
	if pool != nil && pool.DesktopLogin != nil {
		login = pool.DesktopLogin
	}
	if pool != nil && pool.Printing != nil {
		printing = pool.Printing
	}
	if login != nil {
		for _, u := range login.URIs {
			if host, port, ok := urlHostPort(u); ok {
				add(wire.ExamForLogin, host, port)
			}
		}
		for _, k := range login.KDCs {
			host, port := splitHostPort(k, portKerberos)
			add(wire.ExamForKDC, host, port)
		}
		if login.Provider == model.LoginAD {
			// Without URIs or KDCs sssd finds the domain controllers by DNS; the domain's
			// own name resolves to them (every AD DC registers it).
			dom := login.ADDomain()
			if len(login.URIs) == 0 {
				add(wire.ExamForLogin, dom, portLDAP)
				add(wire.ExamForLogin, dom, portADGC)
			}
			if len(login.KDCs) == 0 {
				add(wire.ExamForKDC, dom, portKerberos)
			}
		}
	}
	if printing != nil {
		host, port := splitHostPort(printing.Server, portIPP)
		add(wire.ExamForPrint, host, port)
	}
	if x != nil {
		for _, a := range x.Allow {
			if ep, err := names.ParseEndpoint(a); err == nil {
				put(wire.ExamForExam, ep)
			}
		}
	}
	return n
}

// endpoint is host (a name in any case, an address) and port as a names.Endpoint, or
// false when it is not one.
func endpoint(host string, port uint16) (names.Endpoint, bool) {
	if host == "" {
		return names.Endpoint{}, false
	}
	s := strings.ToLower(host)
	if strings.Contains(s, ":") && port != 0 {
		s = "[" + s + "]"
	}
	if port != 0 {
		s += ":" + strconv.Itoa(int(port))
	}
	e, err := names.ParseEndpoint(s)
	return e, err == nil
}

// urlHostPort is the host and port of an http(s):// or ldap(s):// URL, the scheme's
// default port when it names none.
func urlHostPort(raw string) (string, uint16, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", 0, false
	}
	def := map[string]uint16{"http": 80, "https": 443, "ldap": portLDAP, "ldaps": portLDAPS}[u.Scheme]
	if def == 0 {
		return "", 0, false
	}
	port := def
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return "", 0, false
		}
		port = uint16(n)
	}
	return u.Hostname(), port, true
}

// splitHostPort is host[:port] (IPv6 in brackets) with def for a missing port.
func splitHostPort(s string, def uint16) (string, uint16) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		if n, err := strconv.ParseUint(p, 10, 16); err == nil && n > 0 {
			return h, uint16(n)
		}
		return "", 0
	}
	return s, def
}
