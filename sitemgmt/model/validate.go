package model

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// InvalidError is a one-line, user-facing validation error. The API maps it to HTTP 400
// (or 409 for conflicts) with a JSON body; the CLI prints it and exits non-zero.
type InvalidError struct {
	Conflict bool // true for duplicates and overlaps (HTTP 409)
	Msg      string
}

func (e *InvalidError) Error() string { return e.Msg }

func invalid(format string, a ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, a...)}
}

func conflict(format string, a ...any) error {
	return &InvalidError{Conflict: true, Msg: fmt.Sprintf(format, a...)}
}

// Invalid and Conflict build errors of this type for other packages.
func Invalid(format string, a ...any) error  { return invalid(format, a...) }
func Conflict(format string, a ...any) error { return conflict(format, a...) }

// Names of pools, modes, images, boot servers, exceptions and roles: they end up in LDAP
// RDNs, dnsmasq tags, Slurm features and file paths, so they are kept to a conservative
// alphabet. Nothing here can carry a space, quote, newline, '=' or ',' into a rendered file.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidName checks an entity name.
func ValidName(what, s string) error {
	if !nameRE.MatchString(s) || strings.Contains(s, "..") {
		return invalid("invalid %s name %q: use 1-63 characters a-z 0-9 . _ - starting with a letter or digit", what, s)
	}
	return nil
}

// hostname: one DNS label (RFC 1123) — Slurm NodeName and dnsmasq dhcp-host use it as is.
var hostRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidHostname checks a host name (a single lower-case DNS label).
func ValidHostname(s string) error {
	if !hostRE.MatchString(s) {
		return invalid("invalid hostname %q: use one DNS label of 1-63 characters a-z 0-9 - (no dots, spaces or quotes)", s)
	}
	return nil
}

// NormalizeMAC accepts aa:bb:cc:dd:ee:ff, AA-BB-CC-DD-EE-FF or aabb.ccdd.eeff and returns the
// canonical lower-case colon form. Only 48-bit Ethernet addresses are accepted; multicast
// addresses cannot belong to a NIC and are rejected.
func NormalizeMAC(s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 || strings.TrimSpace(s) != s {
		return "", invalid("invalid MAC address %q: expected six hex octets like 52:54:00:12:34:56", s)
	}
	if hw[0]&1 == 1 {
		return "", invalid("invalid MAC address %q: multicast address", s)
	}
	return hw.String(), nil
}

// ValidIP checks an IPv4 address (PXE/DHCPv4 is what pool PCs boot with).
func ValidIP(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return invalid("invalid IPv4 address %q", s)
	}
	return nil
}

// ValidCIDR checks an IPv4 prefix such as 10.0.0.0/24.
func ValidCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() || p.Masked() != p {
		return netip.Prefix{}, invalid("invalid IPv4 subnet %q: expected a network like 10.0.0.0/24", s)
	}
	return p, nil
}

// Kernel arguments are rendered into iPXE scripts and PXELINUX APPEND lines. Tokens are
// separated by single spaces; no quotes, backslashes, '$' (iPXE expansion), '#' or control
// characters may appear, so an argument can never end a line or open a new directive.
var kargRE = regexp.MustCompile(`^[A-Za-z0-9_./:=,+@%\-]+$`)

// ValidKernelArgs checks a kernel command line fragment.
func ValidKernelArgs(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > 1024 {
		return invalid("kernel arguments too long (%d bytes, at most 1024)", len(s))
	}
	for _, tok := range strings.Split(s, " ") {
		if !kargRE.MatchString(tok) {
			return invalid("invalid kernel argument %q: arguments are separated by single spaces and may use only A-Z a-z 0-9 _ . / : = , + @ %% -", tok)
		}
	}
	return nil
}

// A relative path under the boot server's HTTP or NFS tree.
var pathRE = regexp.MustCompile(`^[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*$`)

// ValidRelPath checks a relative path (no "..", no absolute paths, conservative alphabet).
func ValidRelPath(what, s string) error {
	if !pathRE.MatchString(s) {
		return invalid("invalid %s path %q: use a relative path of A-Z a-z 0-9 _ . + - and /", what, s)
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return invalid("invalid %s path %q: '.' and '..' are not allowed", what, s)
		}
	}
	return nil
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$`)

// Free text (descriptions, rooms): one line, printable, bounded. It is rendered only into
// comments and menu titles, where a newline would start a directive.
func validText(what, s string) error {
	if len(s) > 200 {
		return invalid("%s too long (%d bytes, at most 200)", what, len(s))
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == '$' {
			return invalid("invalid %s %q: one line of text without quotes, backslashes or '$'", what, s)
		}
	}
	return nil
}

var uidRE = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`)
var ifaceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// ValidUID checks a user id (LDAP uid).
func ValidUID(s string) error {
	if !uidRE.MatchString(s) {
		return invalid("invalid user id %q: use 1-32 characters a-z 0-9 _ . - starting with a letter or _", s)
	}
	return nil
}

// ValidateSlotTime checks that an instant lies on the 10-minute grid in loc.
func ValidateSlotTime(what string, t time.Time, loc *time.Location) error {
	lt := t.In(loc)
	if lt.Second() != 0 || lt.Nanosecond() != 0 || lt.Minute()%10 != 0 {
		return invalid("%s %s is not on the 10-minute grid (use :00, :10, ... :50)", what, lt.Format(time.RFC3339))
	}
	return nil
}

// Validate checks every field and every reference of the site, and uniqueness of names,
// MACs and IPs. It does not check schedule rules for overlaps (see schedule.Compile).
func (s *Site) Validate() error {
	if err := ValidName("site", s.Name); err != nil {
		return err
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil || s.Timezone == "" || s.Timezone == "Local" {
		return invalid("invalid timezone %q: use an IANA name like Europe/Berlin", s.Timezone)
	}
	modes := map[string]*Mode{}
	for i := range s.Modes {
		m := &s.Modes[i]
		if err := ValidName("mode", m.Name); err != nil {
			return err
		}
		if modes[m.Name] != nil {
			return conflict("duplicate mode %q", m.Name)
		}
		modes[m.Name] = m
	}
	images := map[string]*Image{}
	for i := range s.Images {
		im := &s.Images[i]
		if err := ValidName("image", im.Name); err != nil {
			return err
		}
		if images[im.Name] != nil {
			return conflict("duplicate image %q", im.Name)
		}
		images[im.Name] = im
		if !oneOf(im.Kind, ImageKinds) {
			return invalid("image %s: unknown kind %q (use one of %v)", im.Name, im.Kind, ImageKinds)
		}
		if err := validText("image description", im.Description); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, v := range im.Versions {
			if !versionRE.MatchString(v.Version) {
				return invalid("image %s: invalid version %q", im.Name, v.Version)
			}
			if seen[v.Version] {
				return conflict("image %s: duplicate version %q", im.Name, v.Version)
			}
			seen[v.Version] = true
			if !sha256RE.MatchString(v.SHA256) {
				return invalid("image %s version %s: sha256 must be 64 lower-case hex digits", im.Name, v.Version)
			}
			if err := ValidRelPath("image "+im.Name+" version "+v.Version, v.Path); err != nil {
				return err
			}
			if v.Size < 0 {
				return invalid("image %s version %s: negative size", im.Name, v.Version)
			}
		}
	}
	for _, m := range s.Modes {
		if !oneOf(m.Kind, ModeKinds) {
			return invalid("mode %s: unknown kind %q (use one of %v)", m.Name, m.Kind, ModeKinds)
		}
		if err := validText("mode description", m.Description); err != nil {
			return err
		}
		if err := ValidKernelArgs(m.KernelArgs); err != nil {
			return invalid("mode %s: %v", m.Name, err)
		}
		for _, p := range []struct{ what, v string }{{"kernel", m.Kernel}, {"initrd", m.Initrd}} {
			if p.v != "" {
				if err := ValidRelPath("mode "+m.Name+" "+p.what, p.v); err != nil {
					return err
				}
			}
		}
		if m.Kind.NeedsImage() && (m.Image != "" || m.Kind != KindMaintenance) {
			im := images[m.Image]
			if im == nil {
				return invalid("mode %s: unknown image %q", m.Name, m.Image)
			}
			if im.Kind != ImageDesktop {
				return invalid("mode %s: boots image %s, which is a %s image, not a desktop image", m.Name, im.Name, im.Kind)
			}
			if m.ImageVersion != "" && im.Version(m.ImageVersion) == nil {
				return invalid("mode %s: image %s has no version %q", m.Name, m.Image, m.ImageVersion)
			}
		} else if m.Image != "" {
			return invalid("mode %s: a %s mode boots no image", m.Name, m.Kind)
		}
		if m.Kind == KindCourseVM {
			vm := images[m.VM]
			if vm == nil {
				return invalid("mode %s: unknown course VM image %q", m.Name, m.VM)
			}
			if vm.Kind != ImageCourseVM {
				return invalid("mode %s: vm %s is a %s image, not a course-vm image", m.Name, vm.Name, vm.Kind)
			}
		} else if m.VM != "" {
			return invalid("mode %s: only course-vm modes start a VM", m.Name)
		}
		if m.Kind == KindLocalDisk && (m.Kernel != "" || m.Initrd != "" || m.KernelArgs != "") {
			return invalid("mode %s: a local-disk mode takes no kernel, initrd or kernel arguments", m.Name)
		}
		if g := m.Guest; g != nil {
			if m.Kind != KindDesktop && m.Kind != KindCluster {
				return invalid("mode %s: only desktop and cluster modes run a compute guest, not a %s mode", m.Name, m.Kind)
			}
			if err := g.Validate(); err != nil {
				return invalid("mode %s: %v", m.Name, err)
			}
			im := images[g.Image]
			if im == nil {
				return invalid("mode %s: guest: unknown image %q", m.Name, g.Image)
			}
			if im.Kind != ImageCompute && im.Kind != ImageCourseVM {
				return invalid("mode %s: guest: image %s is a %s image, not a compute (or course-vm) image", m.Name, im.Name, im.Kind)
			}
			if g.Version != "" && im.Version(g.Version) == nil {
				return invalid("mode %s: guest: image %s has no version %q", m.Name, g.Image, g.Version)
			}
		}
	}
	if modes[s.DefaultMode] == nil {
		return invalid("site default mode %q is not a defined mode", s.DefaultMode)
	}
	if s.UnknownMode != "" && modes[s.UnknownMode] == nil {
		return invalid("site unknown-host mode %q is not a defined mode", s.UnknownMode)
	}
	servers := map[string]bool{}
	for _, b := range s.BootServers {
		if err := ValidName("boot server", b.Name); err != nil {
			return err
		}
		if servers[b.Name] {
			return conflict("duplicate boot server %q", b.Name)
		}
		servers[b.Name] = true
		if err := ValidIP(b.IP); err != nil {
			return invalid("boot server %s: %v", b.Name, err)
		}
		u, err := url.Parse(b.HTTPURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(b.HTTPURL, " \"'\\$\n\r\t") {
			return invalid("boot server %s: invalid HTTP URL %q (expected like http://10.0.0.1:8080)", b.Name, b.HTTPURL)
		}
		if b.NFSServer != "" {
			if ValidIP(b.NFSServer) != nil && ValidHostname(strings.ReplaceAll(b.NFSServer, ".", "-")) != nil {
				return invalid("boot server %s: invalid NFS server %q", b.Name, b.NFSServer)
			}
		}
		if b.NFSRoot != "" && (!strings.HasPrefix(b.NFSRoot, "/") || ValidRelPath("NFS root", strings.TrimPrefix(b.NFSRoot, "/")) != nil) {
			return invalid("boot server %s: invalid NFS root %q (expected an absolute path)", b.Name, b.NFSRoot)
		}
		if b.DHCP != DHCPFull && b.DHCP != DHCPProxy {
			return invalid("boot server %s: dhcp must be %q or %q, not %q", b.Name, DHCPFull, DHCPProxy, b.DHCP)
		}
		if b.Interface != "" && !ifaceRE.MatchString(b.Interface) {
			return invalid("boot server %s: invalid interface %q", b.Name, b.Interface)
		}
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
	}
	pools := map[string]bool{}
	for _, p := range s.Pools {
		if err := ValidName("pool", p.Name); err != nil {
			return err
		}
		if pools[p.Name] {
			return conflict("duplicate pool %q", p.Name)
		}
		pools[p.Name] = true
		if err := validText("pool description", p.Description); err != nil {
			return err
		}
		if err := validText("pool room", p.Room); err != nil {
			return err
		}
		if p.BootServer != "" && !servers[p.BootServer] {
			return invalid("pool %s: unknown boot server %q", p.Name, p.BootServer)
		}
		if p.Policy != nil {
			if err := p.Policy.Validate(); err != nil {
				return invalid("pool %s: %v", p.Name, err)
			}
		}
	}
	hosts := map[string]bool{}
	macs := map[string]string{}
	ips := map[string]string{}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		if err := ValidHostname(h.Name); err != nil {
			return err
		}
		if hosts[h.Name] {
			return conflict("duplicate host %q", h.Name)
		}
		hosts[h.Name] = true
		mac, err := NormalizeMAC(h.MAC)
		if err != nil {
			return invalid("host %s: %v", h.Name, err)
		}
		if mac != h.MAC {
			return invalid("host %s: MAC %q is not in canonical form %q", h.Name, h.MAC, mac)
		}
		if other, ok := macs[mac]; ok {
			return conflict("duplicate MAC %s: hosts %s and %s", mac, other, h.Name)
		}
		macs[mac] = h.Name
		if h.IP != "" {
			if err := ValidIP(h.IP); err != nil {
				return invalid("host %s: %v", h.Name, err)
			}
			if other, ok := ips[h.IP]; ok {
				return conflict("duplicate IP %s: hosts %s and %s", h.IP, other, h.Name)
			}
			ips[h.IP] = h.Name
		}
		if !pools[h.Pool] {
			return invalid("host %s: unknown pool %q", h.Name, h.Pool)
		}
		if h.BootServer != "" && !servers[h.BootServer] {
			return invalid("host %s: unknown boot server %q", h.Name, h.BootServer)
		}
	}
	exc := map[string]bool{}
	for _, e := range s.Exceptions {
		if err := ValidName("exception", e.Name); err != nil {
			return err
		}
		if exc[e.Name] {
			return conflict("duplicate exception %q", e.Name)
		}
		exc[e.Name] = true
		if !oneOf(e.Kind, ExceptionKinds) {
			return invalid("exception %s: unknown kind %q (use one of %v)", e.Name, e.Kind, ExceptionKinds)
		}
		if err := validText("exception description", e.Description); err != nil {
			return err
		}
		if modes[e.Mode] == nil {
			return invalid("exception %s: unknown mode %q", e.Name, e.Mode)
		}
		if err := ValidateSlotTime("exception "+e.Name+" start", e.Start, loc); err != nil {
			return err
		}
		if err := ValidateSlotTime("exception "+e.Name+" end", e.End, loc); err != nil {
			return err
		}
		if !e.End.After(e.Start) {
			return invalid("exception %s: end %s is not after start %s", e.Name, e.End.Format(time.RFC3339), e.Start.Format(time.RFC3339))
		}
		if len(e.Targets) == 0 {
			return invalid("exception %s: no targets (give pools or hosts)", e.Name)
		}
		for _, t := range e.Targets {
			switch {
			case t.Pool != "" && t.Host != "":
				return invalid("exception %s: a target is a pool or a host, not both", e.Name)
			case t.Pool != "":
				if !pools[t.Pool] {
					return invalid("exception %s: unknown pool %q", e.Name, t.Pool)
				}
			case t.Host != "":
				if !hosts[t.Host] {
					return invalid("exception %s: unknown host %q", e.Name, t.Host)
				}
			default:
				return invalid("exception %s: empty target", e.Name)
			}
		}
	}
	roles := map[string]bool{}
	for _, r := range s.Roles {
		if err := ValidName("role", r.Name); err != nil {
			return err
		}
		if roles[r.Name] {
			return conflict("duplicate role %q", r.Name)
		}
		roles[r.Name] = true
		if !oneOf(r.Role, RoleKinds) {
			return invalid("role %s: unknown role %q (use one of %v)", r.Name, r.Role, RoleKinds)
		}
		if r.Role.PoolScoped() != (r.Pool != "") {
			if r.Pool == "" {
				return invalid("role %s: a %s role needs a pool", r.Name, r.Role)
			}
			return invalid("role %s: a %s role is site-wide and takes no pool", r.Name, r.Role)
		}
		if r.Pool != "" && !pools[r.Pool] {
			return invalid("role %s: unknown pool %q", r.Name, r.Pool)
		}
		for _, m := range r.Members {
			if err := ValidUID(m); err != nil {
				return invalid("role %s: %v", r.Name, err)
			}
		}
	}
	return s.validateOwners()
}

func oneOf[T comparable](v T, set []T) bool {
	for _, x := range set {
		if x == v {
			return true
		}
	}
	return false
}
