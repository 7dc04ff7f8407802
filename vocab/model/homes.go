package model

import (
	"regexp"
	"strings"
)

// Homes is where the home directories of the people at the desktops live: a file server
// of the site, or of one pool where it differs, whose per-user directory the PC mounts
// over ~ at login (pam_mount) and unmounts at logout, so that what a student saves
// outlives the stateless PC (docs/desktop.md "Homes"). The site manager renders it into
// the PC's /etc/security/pam_mount.conf.xml.
type Homes struct {
	// Type is the file system: HomesNFS or HomesCIFS (SMB, for Active Directory sites).
	Type string `json:"type" yaml:"type"`
	// Server is the file server, a DNS name or IPv4 address (no port, no URL).
	Server string `json:"server" yaml:"server"`
	// Path is the user's directory on the server with HomesUser where the user's name
	// goes: the export path for nfs (/export/homes/%(USER)), share/subdir for cifs
	// (homes/%(USER)).
	Path string `json:"path" yaml:"path"`
	// Options are extra mount options, a comma list (vers=4.2,sec=sys); nosuid and
	// nodev are always added.
	Options string `json:"options,omitempty" yaml:"options,omitempty"`
}

// The file systems a home may come from.
const (
	HomesNFS  = "nfs"
	HomesCIFS = "cifs"
)

// HomesUser is pam_mount's placeholder for the name of the user logging in.
const HomesUser = "%(USER)"

// homesPathRE: what a path may hold besides HomesUser. The path is written into an XML
// attribute and handed to mount as one argument: no XML specials (<>&"'), no white
// space, no other pam_mount variable. '$' is for AD's hidden shares (users$).
var homesPathRE = regexp.MustCompile(`^[A-Za-z0-9._/$+@~-]*$`)

// homesOptionRE: one mount option, a word or key=value.
var homesOptionRE = regexp.MustCompile(`^[a-z0-9_.-]+(=[a-z0-9_.-]+)?$`)

// refusedHomesOptions are options the site may not give: nosuid and nodev are always
// set (a file server's setuid binary must not run as root on the PC), a password would
// sit in a world-readable file, and pam_mount names the user itself.
var refusedHomesOptions = map[string]string{
	"suid":        "nosuid is always set",
	"dev":         "nodev is always set",
	"password":    "a password would be readable by everyone on the PC; pam_mount passes the user's own",
	"pass":        "a password would be readable by everyone on the PC; pam_mount passes the user's own",
	"credentials": "a credentials file would have to be on every PC; pam_mount passes the user's password",
	"user":        "pam_mount sets the user logging in",
	"username":    "pam_mount sets the user logging in",
}

// Clone copies the homes configuration (nil stays nil).
func (h *Homes) Clone() *Homes {
	if h == nil {
		return nil
	}
	c := *h
	return &c
}

// SameHomes compares two (possibly nil) homes configurations.
func SameHomes(a, b *Homes) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// HomesFor is the homes configuration of a pool's desktops: the pool's own, else the
// site's; nil when neither has one (homes are temporary, in the PC's memory).
func (s *Site) HomesFor(pool string) *Homes {
	if p := s.Pool(pool); p != nil && p.Homes != nil {
		return p.Homes
	}
	return s.Homes
}

// Validate checks a homes configuration; what names it in messages.
func (h *Homes) Validate(what string) error {
	switch h.Type {
	case HomesNFS, HomesCIFS:
	case "":
		return invalid("%s.type: missing (nfs, or cifs for an SMB server)", what)
	default:
		return invalid("%s.type: %q: expected nfs or cifs", what, h.Type)
	}
	switch {
	case h.Server == "":
		return invalid("%s.server: missing (the file server, e.g. files.uni.example)", what)
	case strings.Contains(h.Server, "://"):
		return invalid("%s.server: %q: give the host, not a URL", what, h.Server)
	case strings.Contains(h.Server, ":"):
		return invalid("%s.server: %q: give the host without a port (a port goes into options)", what, h.Server)
	case len(h.Server) > 253 || !hostRE.MatchString(h.Server):
		return invalid("%s.server: invalid host %q: expected a DNS name or IPv4 address", what, h.Server)
	}
	if err := validHomesPath(h.Type, h.Path); err != "" {
		return invalid("%s.path: %s", what, err)
	}
	if h.Options != "" {
		if len(h.Options) > 255 {
			return invalid("%s.options: longer than 255 characters", what)
		}
		for _, o := range strings.Split(h.Options, ",") {
			if !homesOptionRE.MatchString(o) {
				return invalid("%s.options: invalid option %q: a comma list of lower-case words or key=value (e.g. vers=4.2,sec=sys)", what, o)
			}
			key, _, _ := strings.Cut(o, "=")
			if why, ok := refusedHomesOptions[key]; ok {
				return invalid("%s.options: %q is not allowed: %s", what, o, why)
			}
		}
	}
	return nil
}

// validHomesPath says what is wrong with path for a home of type typ ("" when nothing).
func validHomesPath(typ, path string) string {
	eg := "/export/homes/%(USER)"
	if typ == HomesCIFS {
		eg = "homes/%(USER)"
	}
	switch {
	case path == "":
		return "missing (e.g. " + eg + ")"
	case len(path) > 255:
		return "longer than 255 characters"
	case !strings.Contains(path, HomesUser):
		return "\"" + path + "\" lacks %(USER), where the user's name goes (e.g. " + eg + ")"
	case !homesPathRE.MatchString(strings.ReplaceAll(path, HomesUser, "")):
		return "\"" + path + "\": only letters, digits, %(USER) and . _ / $ + @ ~ - (no spaces, quotes or <>&)"
	case typ == HomesNFS && !strings.HasPrefix(path, "/"):
		return "\"" + path + "\": an NFS export path starts with / (e.g. " + eg + ")"
	case typ == HomesCIFS && strings.HasPrefix(path, "/"):
		return "\"" + path + "\": give share/directory without a leading / (e.g. " + eg + ")"
	}
	for _, c := range strings.Split(path, "/") {
		if c == ".." {
			return "\"" + path + "\": no .. components"
		}
	}
	return ""
}
