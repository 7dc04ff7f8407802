// Package model holds the site manager's data: the site, its pools (rooms), hosts,
// boot servers, boot modes, images, weekly schedules, dated exceptions and role grants.
//
// The types are plain data. LDAP (sitemgmt/ldapstore) is the only store; the schedule
// engine (sitemgmt/schedule) and the renderers (sitemgmt/render) read these types.
// Validation of single fields lives in validate.go; whole-site consistency (references,
// uniqueness) in Site.Validate. Schedule overlap checks need the rule parser and live in
// the schedule package.
package model

import (
	"sort"
	"time"
)

// ModeKind is what a boot mode does with the PC.
type ModeKind string

const (
	KindDesktop     ModeKind = "desktop"     // stateless desktop image, compute guest harvests idle cycles
	KindCluster     ModeKind = "cluster"     // same image, dedicated compute target, all resources to the guest
	KindCourseVM    ModeKind = "course-vm"   // desktop that starts a lecturer's VM full screen, non-persistent
	KindLocalDisk   ModeKind = "local-disk"  // boot the local disk (BIOS LOCALBOOT, UEFI exit)
	KindMaintenance ModeKind = "maintenance" // maintenance system for administrators
)

// ModeKinds lists every kind, in documentation order.
var ModeKinds = []ModeKind{KindDesktop, KindCluster, KindCourseVM, KindLocalDisk, KindMaintenance}

// NeedsImage reports whether a mode of this kind boots a network image (maintenance may,
// or may boot a kernel of its own).
func (k ModeKind) NeedsImage() bool {
	return k == KindDesktop || k == KindCluster || k == KindCourseVM || k == KindMaintenance
}

// ImageKind says what an image is for.
type ImageKind string

const (
	ImageDesktop  ImageKind = "desktop"   // the stateless desktop (also booted in cluster mode)
	ImageCompute  ImageKind = "compute"   // the compute guest run by the node agent
	ImageCourseVM ImageKind = "course-vm" // a lecturer's course VM, started read-only
)

var ImageKinds = []ImageKind{ImageDesktop, ImageCompute, ImageCourseVM}

// ExceptionKind classifies a dated exception. It is informational to the schedule, except
// for ExceptionPowerSave; boot menus depend on ExceptionExam and ExceptionMaintenance.
type ExceptionKind string

var ExceptionKinds = []ExceptionKind{ExceptionExam, "lecture", "holiday", ExceptionMaintenance, "other", ExceptionPowerSave}

// ExceptionExam locks the hosts it decides into its mode: a boot script without menu or
// escape, the desktop told it is in an exam (docs/boot.md, docs/operations.md).
const ExceptionExam ExceptionKind = "exam"

// ExceptionMaintenance opens the maintenance entries of the boot menu on the hosts it
// decides, whatever mode it sets; without one no menu offers maintenance. Pool admins
// may book it for their pools, lecturers may not (sitemgmt/authz).
const ExceptionMaintenance ExceptionKind = "maintenance"

// ExceptionPowerSave marks the exceptions Slurm's power saving makes (`overtime slurm
// resume`). Unlike every other kind it changes precedence: it targets hosts only, names
// a cluster mode, and applies only to slots the rest of the schedule gives to a
// local-disk mode, so a lecture, an exam or desktop hours always win over it, also ones
// added after it.
const ExceptionPowerSave ExceptionKind = "power-save"

// RoleKind is a role a user can hold.
type RoleKind string

const (
	RoleSiteAdmin RoleKind = "site-admin" // everything
	RolePoolAdmin RoleKind = "pool-admin" // hosts, schedule and exceptions of one pool
	RoleLecturer  RoleKind = "lecturer"   // course-vm rules/exceptions and course-vm images of one pool
	RoleViewer    RoleKind = "viewer"     // read only
	// RoleBootServer is the account `overtime bootserver run` of one boot server logs in
	// with: it reads like a viewer and reports which image versions that boot server
	// holds verified (docs/publishing.md).
	RoleBootServer RoleKind = "boot-server"
)

var RoleKinds = []RoleKind{RoleSiteAdmin, RolePoolAdmin, RoleLecturer, RoleViewer, RoleBootServer}

// PoolScoped reports whether a role of this kind is granted per pool.
func (k RoleKind) PoolScoped() bool { return k == RolePoolAdmin || k == RoleLecturer }

// Site is the whole configuration of one site.
type Site struct {
	Name        string `json:"name" yaml:"name"`
	Timezone    string `json:"timezone" yaml:"timezone"`                           // IANA name, e.g. Europe/Berlin
	DefaultMode string `json:"defaultMode" yaml:"defaultMode"`                     // mode when no rule applies
	UnknownMode string `json:"unknownMode,omitempty" yaml:"unknownMode,omitempty"` // mode served to MACs not in the directory; default: DefaultMode
	// DesktopLogin: how the desktops find and authenticate the people at the seat; nil =
	// no directory logins (the desktops say so at the login screen).
	DesktopLogin *DesktopLogin `json:"desktopLogin,omitempty" yaml:"desktopLogin,omitempty"`
	// Printing: the print server the desktops use; nil = none configured.
	Printing *Printing `json:"printing,omitempty" yaml:"printing,omitempty"`
	// Homes: the file server of the users' home directories; nil = temporary homes in
	// the PC's memory.
	Homes *Homes `json:"homes,omitempty" yaml:"homes,omitempty"`

	Pools       []Pool       `json:"pools" yaml:"pools"`
	Hosts       []Host       `json:"hosts" yaml:"hosts"`
	BootServers []BootServer `json:"bootServers" yaml:"bootServers"`
	Modes       []Mode       `json:"modes" yaml:"modes"`
	Images      []Image      `json:"images" yaml:"images"`
	Exceptions  []Exception  `json:"exceptions" yaml:"exceptions"`
	Roles       []RoleGrant  `json:"roles" yaml:"roles"`
}

// Pool is a room or group of PCs administered together.
type Pool struct {
	Name        string     `json:"name" yaml:"name"`
	Description string     `json:"description,omitempty" yaml:"description,omitempty"`
	Room        string     `json:"room,omitempty" yaml:"room,omitempty"`
	BootServer  string     `json:"bootServer,omitempty" yaml:"bootServer,omitempty"` // default for the pool's hosts
	Weekly      []string   `json:"weekly,omitempty" yaml:"weekly,omitempty"`         // weekly rules, e.g. "mon-fri 08:00-18:00 desktop"
	RuleOwners  RuleOwners `json:"ruleOwners,omitempty" yaml:"ruleOwners,omitempty"` // bookings: rule of Weekly -> user who booked it (see RuleOwners)
	Policy      *Policy    `json:"policy,omitempty" yaml:"policy,omitempty"`         // how desktops share with the compute guest; nil = DefaultPolicy
	// DesktopLogin overrides the site's for this pool's desktops (a room of another
	// faculty with its own directory); nil = the site's.
	DesktopLogin *DesktopLogin `json:"desktopLogin,omitempty" yaml:"desktopLogin,omitempty"`
	// Printing overrides the site's for this pool's desktops (the room's own print
	// server); nil = the site's.
	Printing *Printing `json:"printing,omitempty" yaml:"printing,omitempty"`
	// Homes overrides the site's for this pool's desktops (a faculty's own file
	// server); nil = the site's.
	Homes *Homes `json:"homes,omitempty" yaml:"homes,omitempty"`
}

// Host is one PC.
type Host struct {
	Name       string     `json:"name" yaml:"name"`
	MAC        string     `json:"mac" yaml:"mac"` // canonical: lower case, colon separated
	IP         string     `json:"ip,omitempty" yaml:"ip,omitempty"`
	Pool       string     `json:"pool" yaml:"pool"`
	BootServer string     `json:"bootServer,omitempty" yaml:"bootServer,omitempty"` // overrides the pool's
	Weekly     []string   `json:"weekly,omitempty" yaml:"weekly,omitempty"`
	RuleOwners RuleOwners `json:"ruleOwners,omitempty" yaml:"ruleOwners,omitempty"`
}

// RuleOwners records which weekly rules of a pool or host are bookings: rules added
// through the API (`overtime schedule add`) by a user, who then owns them. A rule without
// an entry is managed by the site file: `overtime site apply` deletes it when the file no
// longer lists it, but leaves every booking alone (docs/site-file.md, "Ownership").
// Keys are rules exactly as they appear in Weekly; values are user ids.
type RuleOwners map[string]string

// Clone copies the map (nil stays nil).
func (o RuleOwners) Clone() RuleOwners {
	if len(o) == 0 {
		return nil
	}
	c := make(RuleOwners, len(o))
	for k, v := range o {
		c[k] = v
	}
	return c
}

// DHCPMode says whether a boot server's dnsmasq hands out addresses or only PXE options.
type DHCPMode string

const (
	DHCPFull  DHCPMode = "full"  // dnsmasq is the DHCP server for the segment
	DHCPProxy DHCPMode = "proxy" // a central DHCP server hands out addresses; dnsmasq adds PXE (proxy-DHCP)
)

// BootServer is a "Remote Boot Service": it answers DHCP/PXE for the hosts assigned to it
// and serves kernel, initrd and boot scripts over HTTP, root images over NFS.
type BootServer struct {
	Name    string `json:"name" yaml:"name"`
	IP      string `json:"ip" yaml:"ip"`
	HTTPURL string `json:"httpURL" yaml:"httpURL"` // base URL of `overtime serve` as seen by clients, e.g. http://10.0.0.1:8080
	// APIURL is the site manager's API over HTTPS for this boot server's PCs (node
	// agents, seats), when HTTPURL is plain HTTP for the firmware: the PCs' credentials
	// pin the site's CA, so they talk TLS only. Empty: HTTPURL.
	APIURL    string   `json:"apiURL,omitempty" yaml:"apiURL,omitempty"`
	NFSServer string   `json:"nfsServer,omitempty" yaml:"nfsServer,omitempty"` // host or IP exporting images; default IP
	NFSRoot   string   `json:"nfsRoot,omitempty" yaml:"nfsRoot,omitempty"`     // export path holding published images; default /srv/overtime/images
	DHCP      DHCPMode `json:"dhcp" yaml:"dhcp"`
	Interface string   `json:"interface,omitempty" yaml:"interface,omitempty"` // dnsmasq interface=
	Subnet    string   `json:"subnet" yaml:"subnet"`                           // CIDR served, e.g. 10.0.0.0/24
	RangeFrom string   `json:"rangeFrom,omitempty" yaml:"rangeFrom,omitempty"` // dynamic range (full DHCP only); optional
	RangeTo   string   `json:"rangeTo,omitempty" yaml:"rangeTo,omitempty"`
	Router    string   `json:"router,omitempty" yaml:"router,omitempty"`
	// DNS handed out in full DHCP (a proxy-DHCP segment's own DHCP server gives DNS):
	// at most MaxDNSServers resolvers and the domain (DHCP options 6, 15 and 119).
	DNSServers []string `json:"dnsServers,omitempty" yaml:"dnsServers,omitempty"`
	Domain     string   `json:"domain,omitempty" yaml:"domain,omitempty"`
}

// MaxDNSServers is how many DNS servers a boot server hands out: the resolver of glibc
// and musl uses the first three (MAXNS) and ignores the rest.
const MaxDNSServers = 3

// Mode is a boot mode: what a host boots into during a slot.
type Mode struct {
	Name         string   `json:"name" yaml:"name"`
	Kind         ModeKind `json:"kind" yaml:"kind"`
	Description  string   `json:"description,omitempty" yaml:"description,omitempty"`
	Image        string   `json:"image,omitempty" yaml:"image,omitempty"`               // image booted (a desktop image for desktop, cluster and course-vm modes)
	ImageVersion string   `json:"imageVersion,omitempty" yaml:"imageVersion,omitempty"` // pinned version; empty = newest
	VM           string   `json:"vm,omitempty" yaml:"vm,omitempty"`                     // course-vm modes: the course-vm image started full screen (newest version)
	Kernel       string   `json:"kernel,omitempty" yaml:"kernel,omitempty"`             // path under the boot server's HTTP base, or empty = the image's
	Initrd       string   `json:"initrd,omitempty" yaml:"initrd,omitempty"`
	KernelArgs   string   `json:"kernelArgs,omitempty" yaml:"kernelArgs,omitempty"`
	Guest        *Guest   `json:"guest,omitempty" yaml:"guest,omitempty"` // desktop and cluster modes: the compute guest the node agent runs
}

// Image is a named series of immutable versions.
type Image struct {
	Name        string    `json:"name" yaml:"name"`
	Kind        ImageKind `json:"kind" yaml:"kind"`
	Description string    `json:"description,omitempty" yaml:"description,omitempty"`
	Pool        string    `json:"pool,omitempty" yaml:"pool,omitempty"` // course-vm images: pool whose lecturers manage it
	// Current is the version that modes, guests and course VMs without a pin boot
	// (`overtime image current`); empty: the newest. Switching it is one attribute write,
	// and a rollback is the same switch back (docs/publishing.md).
	Current  string         `json:"current,omitempty" yaml:"current,omitempty"`
	Versions []ImageVersion `json:"versions,omitempty" yaml:"versions,omitempty"`
}

// ImageVersion is one immutable, published build of an image. Once written it is never
// modified; a new build is a new version.
// Names of the files inside a published image version directory (ImageVersion.Path):
// boot scripts point PCs at them, boot servers export them, node agents run them.
const (
	ImageKernel = "vmlinuz"
	ImageInitrd = "initrd.img"
	ImageRoot   = "root.squashfs"
)

type ImageVersion struct {
	Version string    `json:"version" yaml:"version"` // e.g. 2026.11.21-1
	SHA256  string    `json:"sha256" yaml:"sha256"`   // of the root image file
	Size    int64     `json:"size,omitempty" yaml:"size,omitempty"`
	Path    string    `json:"path" yaml:"path"` // directory under the boot server's NFS root / HTTP images path
	Created time.Time `json:"created" yaml:"created"`
}

// Target names what an exception applies to.
type Target struct {
	Pool string `json:"pool,omitempty" yaml:"pool,omitempty"`
	Host string `json:"host,omitempty" yaml:"host,omitempty"`
}

// Exception overrides the weekly schedule between two instants (exam, lecture, holiday).
type Exception struct {
	Name        string        `json:"name" yaml:"name"`
	Kind        ExceptionKind `json:"kind" yaml:"kind"`
	Description string        `json:"description,omitempty" yaml:"description,omitempty"`
	Start       time.Time     `json:"start" yaml:"start"`
	End         time.Time     `json:"end" yaml:"end"`
	Mode        string        `json:"mode" yaml:"mode"`
	Targets     []Target      `json:"targets" yaml:"targets"`
	// Allow is what the PCs of an exam may reach besides what they need to keep running
	// (their boot server, the site manager, DNS, the seat's login directory and print
	// server): host names, IPv4/IPv6 addresses or networks, each optionally with :port
	// (names.ParseEndpoint), at most MaxExamAllow. Only exceptions of kind exam have it;
	// the node agent turns it into the exam's nftables ruleset (docs/operations.md).
	Allow []string `json:"allow,omitempty" yaml:"allow,omitempty"`
	// Owner is the user who booked the exception through the API; empty: managed by the
	// site file. `overtime site apply` never deletes an exception that has an owner.
	Owner string `json:"owner,omitempty" yaml:"owner,omitempty"`
}

// RoleGrant gives a role (for pool-scoped roles: in one pool) to users, by uid.
type RoleGrant struct {
	Name string   `json:"name" yaml:"name"`
	Role RoleKind `json:"role" yaml:"role"`
	Pool string   `json:"pool,omitempty" yaml:"pool,omitempty"`
	// BootServer is the boot server a boot-server role speaks for (and only for it).
	BootServer string   `json:"bootServer,omitempty" yaml:"bootServer,omitempty"`
	Members    []string `json:"members" yaml:"members"`
}

// Sort puts every list in name order so that output (exports, renders) is stable, and
// makes empty lists nil so that a site read from YAML, JSON or LDAP compares equal
// whichever way an empty list was spelled.
func (s *Site) Sort() {
	s.canonicalEmpty()
	sort.Slice(s.Pools, func(i, j int) bool { return s.Pools[i].Name < s.Pools[j].Name })
	sort.Slice(s.Hosts, func(i, j int) bool { return s.Hosts[i].Name < s.Hosts[j].Name })
	sort.Slice(s.BootServers, func(i, j int) bool { return s.BootServers[i].Name < s.BootServers[j].Name })
	sort.Slice(s.Modes, func(i, j int) bool { return s.Modes[i].Name < s.Modes[j].Name })
	sort.Slice(s.Images, func(i, j int) bool { return s.Images[i].Name < s.Images[j].Name })
	for i := range s.Images {
		v := s.Images[i].Versions
		sort.SliceStable(v, func(a, b int) bool { return v[a].Created.Before(v[b].Created) })
	}
	sort.Slice(s.Exceptions, func(i, j int) bool { return s.Exceptions[i].Name < s.Exceptions[j].Name })
	sort.Slice(s.Roles, func(i, j int) bool { return s.Roles[i].Name < s.Roles[j].Name })
}

// Clone returns a deep copy, so that a change can be built and validated without touching
// the snapshot that is being served.
func (s *Site) Clone() *Site {
	c := *s
	c.DesktopLogin = s.DesktopLogin.Clone()
	c.Printing = s.Printing.Clone()
	c.Homes = s.Homes.Clone()
	c.Pools = append([]Pool(nil), s.Pools...)
	for i := range c.Pools {
		c.Pools[i].Weekly = append([]string(nil), c.Pools[i].Weekly...)
		c.Pools[i].RuleOwners = c.Pools[i].RuleOwners.Clone()
		c.Pools[i].Policy = c.Pools[i].Policy.Clone()
		c.Pools[i].DesktopLogin = c.Pools[i].DesktopLogin.Clone()
		c.Pools[i].Printing = c.Pools[i].Printing.Clone()
		c.Pools[i].Homes = c.Pools[i].Homes.Clone()
	}
	c.Hosts = append([]Host(nil), s.Hosts...)
	for i := range c.Hosts {
		c.Hosts[i].Weekly = append([]string(nil), c.Hosts[i].Weekly...)
		c.Hosts[i].RuleOwners = c.Hosts[i].RuleOwners.Clone()
	}
	c.BootServers = append([]BootServer(nil), s.BootServers...)
	for i := range c.BootServers {
		c.BootServers[i].DNSServers = append([]string(nil), c.BootServers[i].DNSServers...)
	}
	c.Modes = append([]Mode(nil), s.Modes...)
	for i := range c.Modes {
		c.Modes[i].Guest = c.Modes[i].Guest.Clone()
	}
	c.Images = append([]Image(nil), s.Images...)
	for i := range c.Images {
		c.Images[i].Versions = append([]ImageVersion(nil), c.Images[i].Versions...)
	}
	c.Exceptions = append([]Exception(nil), s.Exceptions...)
	for i := range c.Exceptions {
		c.Exceptions[i].Targets = append([]Target(nil), c.Exceptions[i].Targets...)
		c.Exceptions[i].Allow = append([]string(nil), c.Exceptions[i].Allow...)
	}
	c.Roles = append([]RoleGrant(nil), s.Roles...)
	for i := range c.Roles {
		c.Roles[i].Members = append([]string(nil), c.Roles[i].Members...)
	}
	return &c
}

// Lookup helpers. They are linear; callers that need many look-ups build an Index.

func (s *Site) Pool(name string) *Pool {
	for i := range s.Pools {
		if s.Pools[i].Name == name {
			return &s.Pools[i]
		}
	}
	return nil
}

func (s *Site) Host(name string) *Host {
	for i := range s.Hosts {
		if s.Hosts[i].Name == name {
			return &s.Hosts[i]
		}
	}
	return nil
}

func (s *Site) Mode(name string) *Mode {
	for i := range s.Modes {
		if s.Modes[i].Name == name {
			return &s.Modes[i]
		}
	}
	return nil
}

func (s *Site) Image(name string) *Image {
	for i := range s.Images {
		if s.Images[i].Name == name {
			return &s.Images[i]
		}
	}
	return nil
}

func (s *Site) BootServer(name string) *BootServer {
	for i := range s.BootServers {
		if s.BootServers[i].Name == name {
			return &s.BootServers[i]
		}
	}
	return nil
}

func (s *Site) Exception(name string) *Exception {
	for i := range s.Exceptions {
		if s.Exceptions[i].Name == name {
			return &s.Exceptions[i]
		}
	}
	return nil
}

func (s *Site) Role(name string) *RoleGrant {
	for i := range s.Roles {
		if s.Roles[i].Name == name {
			return &s.Roles[i]
		}
	}
	return nil
}

// HostBootServer is the boot server that answers a host: its own, else its pool's.
func (s *Site) HostBootServer(h *Host) string {
	if h.BootServer != "" {
		return h.BootServer
	}
	if p := s.Pool(h.Pool); p != nil {
		return p.BootServer
	}
	return ""
}

// Version returns the named version of an image, or when v is empty what an unpinned
// reference boots: the current version (Image.Current), else the newest.
func (im *Image) Version(v string) *ImageVersion {
	if len(im.Versions) == 0 {
		return nil
	}
	if v == "" && im.Current != "" {
		if c := im.Version(im.Current); c != nil {
			return c
		}
	}
	if v == "" {
		newest := &im.Versions[0]
		for i := range im.Versions {
			if im.Versions[i].Created.After(newest.Created) {
				newest = &im.Versions[i]
			}
		}
		return newest
	}
	for i := range im.Versions {
		if im.Versions[i].Version == v {
			return &im.Versions[i]
		}
	}
	return nil
}

// Location loads the site's time zone.
func (s *Site) Location() (*time.Location, error) {
	return time.LoadLocation(s.Timezone)
}

func nilIfEmpty[T any](v []T) []T {
	if len(v) == 0 {
		return nil
	}
	return v
}

func (s *Site) canonicalEmpty() {
	s.Pools, s.Hosts, s.BootServers = nilIfEmpty(s.Pools), nilIfEmpty(s.Hosts), nilIfEmpty(s.BootServers)
	s.Modes, s.Images, s.Exceptions, s.Roles = nilIfEmpty(s.Modes), nilIfEmpty(s.Images), nilIfEmpty(s.Exceptions), nilIfEmpty(s.Roles)
	for i := range s.Pools {
		s.Pools[i].Weekly = ownedLast(nilIfEmpty(s.Pools[i].Weekly), s.Pools[i].RuleOwners)
		if len(s.Pools[i].RuleOwners) == 0 {
			s.Pools[i].RuleOwners = nil
		}
		// An empty policy means the default policy, like none at all.
		if p := s.Pools[i].Policy; p != nil {
			if p.IsZero() {
				s.Pools[i].Policy = nil
			} else if len(p.Actions) == 0 {
				p.Actions = nil
			}
		}
	}
	for i := range s.Hosts {
		s.Hosts[i].Weekly = ownedLast(nilIfEmpty(s.Hosts[i].Weekly), s.Hosts[i].RuleOwners)
		if len(s.Hosts[i].RuleOwners) == 0 {
			s.Hosts[i].RuleOwners = nil
		}
	}
	for i := range s.BootServers {
		s.BootServers[i].DNSServers = nilIfEmpty(s.BootServers[i].DNSServers)
	}
	for i := range s.Modes {
		if g := s.Modes[i].Guest; g != nil {
			g.Ports = nilIfEmpty(g.Ports)
			g.Storage = nilIfEmpty(g.Storage)
		}
	}
	for i := range s.Images {
		s.Images[i].Versions = nilIfEmpty(s.Images[i].Versions)
	}
	for i := range s.Exceptions {
		s.Exceptions[i].Targets = nilIfEmpty(s.Exceptions[i].Targets)
		s.Exceptions[i].Allow = nilIfEmpty(s.Exceptions[i].Allow)
	}
	for i := range s.Roles {
		s.Roles[i].Members = nilIfEmpty(s.Roles[i].Members)
	}
}

// ownedLast moves booked rules behind the site file's rules, keeping the order within
// each group. The store keeps the two groups in two attributes and reads them back in
// this order, so a site compares equal to itself after a round trip through LDAP.
func ownedLast(rules []string, owners RuleOwners) []string {
	if len(owners) == 0 {
		return rules
	}
	sort.SliceStable(rules, func(i, j int) bool {
		_, oi := owners[rules[i]]
		_, oj := owners[rules[j]]
		return !oi && oj
	})
	return rules
}
