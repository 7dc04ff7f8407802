package model

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/overtime-hpc/overtime/vocab/names"
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

// NotFoundError: an operation named an entity the site does not have (HTTP 404).
type NotFoundError struct{ What, Name string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %q not found", e.What, e.Name) }

// NotFound builds a NotFoundError: what is the kind of entity ("image", "host").
func NotFound(what, name string) error { return &NotFoundError{What: what, Name: name} }

// Invalid and Conflict build errors of this type for other packages.
func Invalid(format string, a ...any) error  { return invalid(format, a...) }
func Conflict(format string, a ...any) error { return conflict(format, a...) }

// The alphabets (what a name, host name, MAC, path ... may be) are defined once in package
// names. The functions below are their site-model form: the same checks and messages, as
// *InvalidError so that the API answers 400.

// asInvalid turns an error of package names into an *InvalidError.
func asInvalid(err error) error {
	if err == nil {
		return nil
	}
	return &InvalidError{Msg: err.Error()}
}

// ValidName checks an entity name (names.Name).
func ValidName(what, s string) error { return asInvalid(names.Name(what, s)) }

// ValidHostname checks a host name, a single lower-case DNS label (names.Hostname).
func ValidHostname(s string) error { return asInvalid(names.Hostname(s)) }

// NormalizeMAC returns the canonical lower-case colon form of a MAC address (names.MAC).
func NormalizeMAC(s string) (string, error) {
	mac, err := names.MAC(s)
	return mac, asInvalid(err)
}

// ValidIP checks an IPv4 address (names.IPv4).
func ValidIP(s string) error { return asInvalid(names.IPv4(s)) }

// ValidCIDR checks an IPv4 prefix such as 10.0.0.0/24 (names.CIDR).
func ValidCIDR(s string) (netip.Prefix, error) {
	p, err := names.CIDR(s)
	return p, asInvalid(err)
}

// ValidKernelArgs checks a kernel command line fragment (names.KernelArgs).
func ValidKernelArgs(s string) error { return asInvalid(names.KernelArgs(s)) }

// ValidRelPath checks a relative path (names.RelPath).
func ValidRelPath(what, s string) error { return asInvalid(names.RelPath(what, s)) }

// validText checks free text such as descriptions and rooms (names.Text).
func validText(what, s string) error { return asInvalid(names.Text(what, s)) }

// ValidUID checks a user id (LDAP uid) (names.UID).
func ValidUID(s string) error { return asInvalid(names.UID(s)) }

// ValidateSlotTime checks that an instant lies on the 10-minute grid in loc.
func ValidateSlotTime(what string, t time.Time, loc *time.Location) error {
	lt := t.In(loc)
	if lt.Second() != 0 || lt.Nanosecond() != 0 || lt.Minute()%10 != 0 {
		return invalid("%s %s is not on the 10-minute grid (use :00, :10, ... :50)", what, lt.Format(time.RFC3339))
	}
	return nil
}

// Normalize canonicalises what users may type in several forms: host MACs become
// lower-case colon form (names.MAC); a version written without a path gets its derived
// one (VersionPath).
//
// The rule: MACs are canonicalised once, on the way in, by service.Update, which calls
// Normalize on every site it is about to validate and write, whatever the entry point
// (PUT /site from a site file, host PUT/POST, CSV import). Validate then refuses any
// MAC not in canonical form, so the store, the renderers and the agent only ever see
// canonical MACs and compare them as strings. Reads by MAC (the boot endpoints'
// /boot/MAC.ipxe and PXELINUX 01-MAC names, the agent naming its own MAC) canonicalise
// their request with names.MAC before they look up.
func (s *Site) Normalize() error {
	for i := range s.Hosts {
		mac, err := NormalizeMAC(s.Hosts[i].MAC)
		if err != nil {
			return invalid("host %s: %v", s.Hosts[i].Name, err)
		}
		s.Hosts[i].MAC = mac
	}
	s.normalizeVersionPaths()
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
			if names.Version(v.Version) != nil {
				return invalid("image %s: invalid version %q", im.Name, v.Version)
			}
			if seen[v.Version] {
				return conflict("image %s: duplicate version %q", im.Name, v.Version)
			}
			seen[v.Version] = true
			if names.SHA256(v.SHA256) != nil {
				return invalid("image %s version %s: sha256 must be 64 lower-case hex digits", im.Name, v.Version)
			}
			if err := ValidRelPath("image "+im.Name+" version "+v.Version, v.Path); err != nil {
				return err
			}
			if v.Size < 0 {
				return invalid("image %s version %s: negative size", im.Name, v.Version)
			}
		}
		if im.Current != "" && !seen[im.Current] {
			return invalid("image %s: current version %q is not a version of it", im.Name, im.Current)
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
		// The renderers' own definitions (names.BootURL, names.NFSServer): whatever is
		// accepted here renders into every file of this boot server.
		if err := names.BootURL(b.HTTPURL); err != nil {
			return invalid("boot server %s: %v", b.Name, err)
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
		if err := validDNS(b); err != nil {
			return err
		}
	}
	pools := make(map[string]bool, len(s.Pools))
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
	hosts := make(map[string]bool, len(s.Hosts))
	macs := make(map[string]string, len(s.Hosts))
	ips := make(map[string]string, len(s.Hosts)) // sized: growing them was a third of validating 100,000 hosts
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
		switch {
		case r.Role == RoleBootServer && r.BootServer == "":
			return invalid("role %s: a %s role needs a boot server", r.Name, r.Role)
		case r.Role != RoleBootServer && r.BootServer != "":
			return invalid("role %s: only a %s role names a boot server", r.Name, RoleBootServer)
		case r.BootServer != "" && !servers[r.BootServer]:
			return invalid("role %s: unknown boot server %q", r.Name, r.BootServer)
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
