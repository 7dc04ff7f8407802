// Package names is the alphabet of Overtime: what a name, host name, MAC address, version,
// digest, interface, user id, job id, path or kernel argument may be. Each pattern is
// defined here once and used by the site model (which turns the errors into
// model.InvalidError for the API), the wire formats, the renderers (which re-check what they
// write because they must not trust that validation ran) and the node agent's guest
// backends.
//
// Values checked here end up in LDAP RDNs and filters, dnsmasq and PXELINUX/iPXE lines,
// Slurm node names and features, exports(5), VMX and libvirt XML and file paths. So the
// alphabets are conservative: none lets a space, quote, newline, '#', ';', '$', '=' or ','
// through, except where a format needs one and says so (kernel arguments allow '=' and ',').
//
// The package imports nothing of Overtime's, so that every layer may use it.
package names

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
)

// nameRE: names of sites, pools, modes, images, boot servers, exceptions and roles.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Name checks an entity name; what says which kind ("pool", "mode", ...) for the message.
func Name(what, s string) error {
	if !nameRE.MatchString(s) || strings.Contains(s, "..") {
		return fmt.Errorf("invalid %s name %q: use 1-63 characters a-z 0-9 . _ - starting with a letter or digit", what, s)
	}
	return nil
}

// hostRE: one DNS label (RFC 1123). Slurm NodeName and dnsmasq dhcp-host use host names as
// they are, and guest names (libvirt domains, containers, VMware VMs) are host names too.
var hostRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Hostname checks a host name: a single lower-case DNS label that no configuration it is
// rendered into reads as anything but a host name (see ReservedHostname).
func Hostname(s string) error {
	if !hostRE.MatchString(s) {
		return fmt.Errorf("invalid hostname %q: use one DNS label of 1-63 characters a-z 0-9 - (no dots, spaces or quotes)", s)
	}
	if why := ReservedHostname(s); why != "" {
		return fmt.Errorf("invalid hostname %q: %s", s, why)
	}
	return nil
}

// leaseTimeRE: what dnsmasq's dhcp-host parser takes for a lease time rather than a host
// name: digits with an optional unit s, m, h, d or w (dnsmasq 2.90, option.c, dhcp-host).
var leaseTimeRE = regexp.MustCompile(`^[0-9]+[smhdw]?$`)

// ReservedHostname says why a syntactically valid host name would be read as something
// else by a configuration Overtime renders it into, or "" if it would not.
//
// A host name is written as a field of a dnsmasq dhcp-host line (MAC,IP,NAME) and as a
// Slurm NodeName and hostlist entry. dnsmasq classifies each dhcp-host field by its form,
// not its position: a field that looks like a lease time ("3600", "12h", "infinite") sets
// the lease time, "ignore" makes dnsmasq ignore the MAC, and only what is left is the
// name; there is no quoting that forces a field to be a name. Slurm reads NodeName=DEFAULT
// as the defaults for later lines (not a node) and Nodes=ALL as every node; both compare
// case-insensitively. Fields with ':' (set:, tag:, id:, net:, MACs) or '.' (IPv4
// addresses) are already outside the host name alphabet.
func ReservedHostname(s string) string {
	switch {
	case leaseTimeRE.MatchString(s):
		return "dnsmasq reads it as a lease time (digits with an optional s/m/h/d/w unit); add a letter, e.g. pc-" + s
	case s == "infinite" || s == "ignore":
		return "dnsmasq reads it as a keyword of dhcp-host, not a host name"
	case s == "default" || s == "all":
		return "Slurm reads it as a keyword (NodeName=DEFAULT, Nodes=ALL), not a node name"
	}
	return ""
}

// MAC accepts aa:bb:cc:dd:ee:ff, AA-BB-CC-DD-EE-FF or aabb.ccdd.eeff and returns the
// canonical lower-case colon form. Only 48-bit Ethernet addresses are accepted. No NIC
// has the all-zero address (what a blank inventory cell or a broken firmware reports),
// the broadcast address or a multicast one (group bit set): a host given one would
// never be told apart or would catch every PC's DHCP request, so they are refused. Where
// the site manager canonicalises is a rule of its own: see model.Site.Normalize.
func MAC(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 || strings.TrimSpace(s) != s {
		return "", fmt.Errorf("invalid MAC address %q: expected six hex octets like 52:54:00:12:34:56", s)
	}
	switch {
	case string(hw) == "\x00\x00\x00\x00\x00\x00":
		return "", fmt.Errorf("invalid MAC address %q: the all-zero address belongs to no NIC", s)
	case string(hw) == "\xff\xff\xff\xff\xff\xff":
		return "", fmt.Errorf("invalid MAC address %q: broadcast address", s)
	case hw[0]&1 == 1:
		return "", fmt.Errorf("invalid MAC address %q: multicast address", s)
	}
	return hw.String(), nil
}

// IPv4 checks an IPv4 address (PXE/DHCPv4 is what pool PCs boot with).
func IPv4(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return fmt.Errorf("invalid IPv4 address %q", s)
	}
	return nil
}

// CIDR checks an IPv4 network such as 10.0.0.0/24 (no host bits set) and returns it.
func CIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() || p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("invalid IPv4 subnet %q: expected a network like 10.0.0.0/24", s)
	}
	return p, nil
}

// kargRE: one kernel argument. Arguments are rendered into iPXE scripts and PXELINUX
// APPEND lines; no quotes, backslashes, '$' (iPXE expansion), '#' or control characters,
// so an argument can never end a line or open a new directive.
var kargRE = regexp.MustCompile(`^[A-Za-z0-9_./:=,+@%\-]+$`)

// KernelArgs checks a kernel command line fragment: tokens separated by single spaces.
func KernelArgs(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > 1024 {
		return fmt.Errorf("kernel arguments too long (%d bytes, at most 1024)", len(s))
	}
	for _, tok := range strings.Split(s, " ") {
		if !kargRE.MatchString(tok) {
			return fmt.Errorf("invalid kernel argument %q: arguments are separated by single spaces and may use only A-Z a-z 0-9 _ . / : = , + @ %% -", tok)
		}
	}
	return nil
}

// pathRE: a relative path under the boot server's HTTP or NFS tree.
var pathRE = regexp.MustCompile(`^[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*$`)

// RelPath checks a relative path: no "..", no "." segments, no leading '/', conservative
// alphabet.
func RelPath(what, s string) error {
	if !pathRE.MatchString(s) {
		return fmt.Errorf("invalid %s path %q: use a relative path of A-Z a-z 0-9 _ . + - and /", what, s)
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("invalid %s path %q: '.' and '..' are not allowed", what, s)
		}
	}
	return nil
}

// AbsPath checks an absolute path whose components use the relative-path alphabet.
func AbsPath(what, s string) error {
	if !strings.HasPrefix(s, "/") || RelPath(what, strings.TrimPrefix(s, "/")) != nil {
		return fmt.Errorf("invalid %s %q: expected an absolute path of A-Z a-z 0-9 _ . + - and /", what, s)
	}
	return nil
}

var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$`)

// Version checks an image version (a path segment of the image tree).
func Version(s string) error {
	if !versionRE.MatchString(s) {
		return fmt.Errorf("invalid version %q: use 1-63 characters A-Z a-z 0-9 _ . + - starting with a letter or digit", s)
	}
	return nil
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// SHA256 checks a SHA-256 digest in lower-case hex.
func SHA256(s string) error {
	if !sha256RE.MatchString(s) {
		return fmt.Errorf("sha256 %q is not 64 lower-case hex digits", s)
	}
	return nil
}

// ifaceRE: a Linux network interface name (IFNAMSIZ-1 = 15 bytes).
var ifaceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// Interface checks a network interface (or bridge) name.
func Interface(s string) error {
	if !ifaceRE.MatchString(s) {
		return fmt.Errorf("invalid interface name %q: use 1-15 characters A-Z a-z 0-9 _ . -", s)
	}
	return nil
}

// uidRE: a POSIX-style user name, as stored in LDAP uid.
var uidRE = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`)

// UID checks a user id.
func UID(s string) error {
	if !uidRE.MatchString(s) {
		return fmt.Errorf("invalid user id %q: use 1-32 characters a-z 0-9 _ . - starting with a letter or _", s)
	}
	return nil
}

var jobIDRe = regexp.MustCompile(`^[0-9]{1,10}(_[0-9]{1,10})?$`)

// JobID checks a Slurm job id (or an array task id like 123_4).
func JobID(s string) error {
	if !jobIDRe.MatchString(s) {
		return fmt.Errorf("job id %q: must be a Slurm job id (digits, optionally _N)", s)
	}
	return nil
}

// Text checks free text (descriptions, rooms): one line, printable, at most 200 bytes. It
// may hold punctuation that means something in a rendered format (';' '||' '#' '^'), so
// the renderers never write it as it is: each output format reduces it to a literal of
// that format where it is written (sitemgmt/render, text.go).
func Text(what, s string) error {
	if len(s) > 200 {
		return fmt.Errorf("%s too long (%d bytes, at most 200)", what, len(s))
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == '$' {
			return fmt.Errorf("invalid %s %q: one line of text without quotes, backslashes or '$'", what, s)
		}
	}
	return nil
}

// httpURLRE: a boot server's base URL as the renderers write it. Stricter than a URL
// parser on purpose: it ends up unquoted in dnsmasq options (where ',' separates fields),
// iPXE commands (where '$' expands and whitespace separates) and PXELINUX lines, so only
// the characters a host, port and plain path need are allowed.
var httpURLRE = regexp.MustCompile(`^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~-]+)*/?$`)

// BootURL checks a boot server's HTTP base URL. It is the one definition: the site model
// validates with it and the renderers re-check with it, so a URL that validates renders
// into every file (dnsmasq, iPXE, PXELINUX, kernel command lines).
func BootURL(s string) error {
	if !httpURLRE.MatchString(s) || strings.Contains(s, "..") {
		return fmt.Errorf("invalid boot server HTTP URL %q: expected like http://10.0.0.1:8080 (host, port and a plain path only)", s)
	}
	return nil
}

// APIURL checks the HTTPS base URL of the site manager's API as a boot server's PCs reach
// it (their node agents pin the site's CA): a BootURL that is https.
func APIURL(s string) error {
	if !strings.HasPrefix(s, "https://") || BootURL(s) != nil {
		return fmt.Errorf("invalid API URL %q: expected like https://overtime.example.org:8443 (https, host, port and a plain path only)", s)
	}
	return nil
}

// nfsServerRE: an NFS server as written into a kernel command line: an IPv4 address or a
// DNS name of lower-case labels (RFC 1123) separated by single dots.
var nfsServerRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// NFSServer checks an NFS server address or DNS name. The site model and the renderers
// both use it, so a boot server that validates always renders.
func NFSServer(s string) error {
	if len(s) > 253 || !nfsServerRE.MatchString(s) {
		return fmt.Errorf("invalid NFS server %q: expected an IPv4 address or a DNS name like nfs.example.org", s)
	}
	return nil
}

// domainRE: a DNS domain as handed out by DHCP (option 15, domain name, and 119, domain
// search): lower-case labels (RFC 1123) separated by single dots, no trailing dot. It is
// written unquoted into a dnsmasq dhcp-option line, where ',' separates values and a
// space, quote or newline would end or change the option.
var domainRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// allDigitsRE: a label of digits only. A top-level label is never all-numeric (RFC 3696
// section 2), which also keeps an IPv4 address from passing as a domain.
var allDigitsRE = regexp.MustCompile(`^[0-9]+$`)

// Domain checks a DNS domain name such as lab.example.org, as a boot server hands it out
// to the PCs of its segment. The site model and the dnsmasq renderer both use it.
func Domain(s string) error {
	last := s[strings.LastIndexByte(s, '.')+1:]
	if len(s) > 253 || !domainRE.MatchString(s) || allDigitsRE.MatchString(last) {
		return fmt.Errorf("invalid DNS domain %q: expected lower-case labels a-z 0-9 - separated by dots, like lab.example.org", s)
	}
	return nil
}

// nfsClientsRE: an exports(5) client specification: a host, network, wildcard or
// @netgroup.
var nfsClientsRE = regexp.MustCompile(`^[A-Za-z0-9.*?/@_:-]{1,255}$`)

// NFSClients checks an exports(5) client specification.
func NFSClients(s string) error {
	if !nfsClientsRE.MatchString(s) {
		return fmt.Errorf("invalid NFS clients %q: one host, network, wildcard or @netgroup", s)
	}
	return nil
}

// TrickyHostnames are host names that resemble what dnsmasq or Slurm read as keywords,
// lease times, tags or addresses, but are accepted: they must render into working
// configurations. The names and render tests (including the real dnsmasq and slurmctld)
// use this one list.
var TrickyHostnames = []string{
	"infinite1", "ignore-me", "x-infinite", "h12", "12a", "1h1", "1-2", "12-h", "0x1",
	"s", "m", "h", "d", "w", "hh", "1hw",
	"set-a", "tag-a", "id-a", "net-a", "set", "tag", "id",
	"localhost", "default1", "all-pcs", "alla", "none", "future", "idle", "down",
	"52-54-00-12-34-56", "5254-0012-3456", "10-0-0-1",
}
