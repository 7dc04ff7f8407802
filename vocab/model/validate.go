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
//
// One validator per entity, called in the order below; each reports the first error it
// finds, so Validate reports the first error of the site in this order (the API and the
// CLI show that one message). An entity's references are checked against the names its
// predecessors collected in the siteIndex: modes and images first (each mode's name
// before any mode's references, as a mode may boot an image listed after it), then the
// site's mode choices, boot servers, pools (which name boot servers), hosts (pools, boot
// servers), exceptions (modes, pools, hosts), roles (pools, boot servers), and last the
// ownership records of bookings.
func (s *Site) Validate() error {
	ix, err := s.validateSiteFields()
	if err != nil {
		return err
	}
	for _, validate := range []func(*siteIndex) error{
		s.validateModeNames,
		s.validateImages,
		s.validateModes,
		s.validateModeChoices,
		s.validateBootServers,
		s.validatePools,
		s.validateHosts,
		s.validateExceptions,
		s.validateRoles,
	} {
		if err := validate(ix); err != nil {
			return err
		}
	}
	return s.validateOwners()
}

// siteIndex holds what the validators collect for the ones after them: the site's time
// zone and the names of its entities, to check references against.
type siteIndex struct {
	loc     *time.Location
	modes   map[string]*Mode
	images  map[string]*Image
	servers map[string]bool
	pools   map[string]bool
	hosts   map[string]bool
}

// validateSiteFields checks the site's own fields and returns the index the entity
// validators fill in.
func (s *Site) validateSiteFields() (*siteIndex, error) {
	if err := ValidName("site", s.Name); err != nil {
		return nil, err
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil || s.Timezone == "" || s.Timezone == "Local" {
		return nil, invalid("invalid timezone %q: use an IANA name like Europe/Berlin", s.Timezone)
	}
	if s.DesktopLogin != nil {
		if err := s.DesktopLogin.Validate("desktopLogin"); err != nil {
			return nil, err
		}
	}
	if s.Printing != nil {
		if err := s.Printing.Validate("printing"); err != nil {
			return nil, err
		}
	}
	if s.Homes != nil {
		if err := s.Homes.Validate("homes"); err != nil {
			return nil, err
		}
	}
	return &siteIndex{loc: loc}, nil
}

// validateModeChoices checks the modes the site falls back to.
func (s *Site) validateModeChoices(ix *siteIndex) error {
	if ix.modes[s.DefaultMode] == nil {
		return invalid("site default mode %q is not a defined mode", s.DefaultMode)
	}
	if s.UnknownMode != "" && ix.modes[s.UnknownMode] == nil {
		return invalid("site unknown-host mode %q is not a defined mode", s.UnknownMode)
	}
	return nil
}

func oneOf[T comparable](v T, set []T) bool {
	for _, x := range set {
		if x == v {
			return true
		}
	}
	return false
}
