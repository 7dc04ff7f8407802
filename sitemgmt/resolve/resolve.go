// Package resolve answers the one question every consumer of the schedule asks: what does
// host H get at instant T? Boot scripts, the node agent's configuration, the slurm.conf
// render and Slurm power saving all take their answer from here, so that a host is never
// told one boot server (or one image version) by its boot menu and another by its agent.
//
// It is pure: no I/O, no HTTP, no clock. Everything that depends on who asks (the boot
// server this site-manager instance answers for, the address a boot request came in on)
// and when (the instant) is an explicit input (Query).
package resolve

import (
	"fmt"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/examallow"
	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Resolver answers for one validated site and its compiled schedule (a snapshot). It is
// immutable after New and safe for any number of goroutines.
type Resolver struct {
	site  *model.Site
	eng   *schedule.Engine
	byMAC map[string]*model.Host
	// byName: every heartbeat and agent request looks its host up by name; a scan of
	// 10,000 names per request was a fifth of a replica's CPU samples (perf) under a
	// site's heartbeats (test/bench/agentscale).
	byName map[string]*model.Host
	// pools by name: Site.Pool is a linear scan, 2,000 compares per boot script at the
	// issue-18 scale.
	pools map[string]*model.Pool
}

// New indexes site (which must have passed Validate) and eng (compiled from it). Build it
// once per snapshot: indexing is linear in the number of hosts, answering is not.
func New(site *model.Site, eng *schedule.Engine) *Resolver {
	r := &Resolver{site: site, eng: eng, byMAC: make(map[string]*model.Host, len(site.Hosts)),
		byName: make(map[string]*model.Host, len(site.Hosts)), pools: make(map[string]*model.Pool, len(site.Pools))}
	for i := range site.Hosts {
		r.byMAC[site.Hosts[i].MAC] = &site.Hosts[i]
		r.byName[site.Hosts[i].Name] = &site.Hosts[i]
	}
	for i := range site.Pools {
		r.pools[site.Pools[i].Name] = &site.Pools[i]
	}
	return r
}

// pool is site.Pool by the index.
func (r *Resolver) pool(name string) *model.Pool { return r.pools[name] }

// Site is the site the resolver answers for. Read it, never modify it.
func (r *Resolver) Site() *model.Site { return r.site }

// Location is the site's time zone.
func (r *Resolver) Location() *time.Location { return r.eng.Location() }

// HostByMAC finds a host by canonical MAC (nil: not in the directory).
func (r *Resolver) HostByMAC(mac string) *model.Host { return r.byMAC[mac] }

// HostByName finds a host by name (nil: not in the directory); Site().Host, indexed.
func (r *Resolver) HostByName(name string) *model.Host { return r.byName[name] }

// Query is the context of a question besides the host.
type Query struct {
	At time.Time
	// BootServer is the boot server this site-manager instance answers for (`overtime
	// serve --boot-server`); "" for none. It serves hosts whose own and pool's boot
	// server are unset, before the site's first one.
	BootServer string
	// Self is the address (host[:port]) a boot script request came in on. On a site
	// without boot servers, boot scripts point there, so that their URLs reach something
	// that answers. "" (the node agent, renders): no such fallback.
	Self string
	// Held is what the boot servers reported holding verified: a host whose boot server
	// reported is only given versions it holds (pick). nil: nothing is gated.
	Held Held
	// Interference gives a host's last calibration (runtime state the service keeps from
	// its heartbeats: service.InterferenceProfile); AgentConfig hands it back to the
	// host. nil, or nil for the host: none.
	Interference func(host string) *wire.InterferenceProfile
}

// ServerSource says which step of the fallback rule chose Assignment.Server.
type ServerSource int

const (
	ServerNone     ServerSource = iota // no boot server: the site has none and Query.Self is empty
	ServerHost                         // the host's own boot server
	ServerPool                         // its pool's
	ServerInstance                     // the one this instance answers for (Query.BootServer)
	ServerFirst                        // the site's first
	ServerSelf                         // the request's own address (Query.Self)
)

// Homed reports whether the boot server was named for the host (its own or its pool's)
// rather than a fallback: only then is its subnet the host's network (Wake-on-LAN).
func (s ServerSource) Homed() bool { return s == ServerHost || s == ServerPool }

// SelfServerName is the name of the boot server made up from Query.Self.
const SelfServerName = "self"

// Assignment is everything a host gets at an instant.
type Assignment struct {
	At   time.Time
	Loc  *time.Location // the site's zone
	Host *model.Host    // nil: a MAC not in the directory (or none given)
	MAC  string         // canonical; "" when the question named no MAC and no known host
	Pool *model.Pool    // nil for unknown hosts
	// Mode is the scheduled mode (nil only on a site that does not validate) and Decision
	// why (deciding rule and level), until when and what comes next.
	Mode     *model.Mode
	Decision schedule.Decision
	// Image is the version Mode boots: the pinned one, else the image's current (else
	// newest), or on a gated boot server the newest older version it holds (ImageNote says
	// so); nil when the mode boots no image or its image has no (such) version yet.
	Image *model.ImageVersion
	// ImageUnavailable says why Image may not be given out: Server has not verified it
	// (nor, for an unpinned mode, an older version). The menu shows the entry unavailable.
	ImageUnavailable string
	ImageNote        string
	// unavailable: the same for every menu entry, by mode name.
	unavailable map[string]string
	// Server is the boot server that answers the host and serves its images, chosen by
	// the one fallback rule (BootServer); nil only with ServerNone.
	Server     *model.BootServer
	ServerFrom ServerSource
	// Others are the boot menu's other selectable entries, each with its resolved image:
	// the site's local-disk modes, and its maintenance modes only while an administrator
	// has opened maintenance for the host (MaintenanceOpen); none in an exam.
	Others []render.MenuEntry
	// Exam: the mode in force comes from an exam exception (the deciding rule's kind).
	// The boot script then has no menu and no escape, and the agent is told (wire).
	Exam bool
	// MaintenanceOpen: an exception of kind maintenance decides the host's mode now
	// (whatever mode it sets), so its menu offers the maintenance modes.
	MaintenanceOpen bool
	// Guest is Mode's guest with defaults filled, its version resolved and located on
	// Server; nil when the mode runs none or it cannot run, and then GuestUnavailable says
	// why if the mode names a guest. Only known hosts get a guest.
	Guest            *wire.AgentGuest
	GuestUnavailable string
	// CourseVM is a course-vm mode's VM (Mode.VM, its newest version) located on Server;
	// nil for other modes or when it cannot run, and then CourseVMUnavailable says why.
	// Only known hosts get one.
	CourseVM            *wire.AgentCourseVM
	CourseVMUnavailable string
	Policy              model.Policy // the pool's effective policy (defaults for unknown hosts)
}

// UnknownHostError is the answer for a host name the site does not have.
type UnknownHostError struct{ Name string }

func (e *UnknownHostError) Error() string { return fmt.Sprintf("host %q not found", e.Name) }

// NotFound marks the error for callers that map "not found" to a status code.
func (e *UnknownHostError) NotFound() bool { return true }

// Host answers for the named host.
func (r *Resolver) Host(name string, q Query) (*Assignment, error) {
	h := r.byName[name]
	if h == nil {
		return nil, &UnknownHostError{Name: name}
	}
	return r.For(h, q), nil
}

// MAC answers for a canonical MAC. A MAC not in the directory, or "" (a request that
// names none, like pxelinux.cfg/default), gets the site's unknown-host mode: a PC in PXE
// must always be told something bootable.
func (r *Resolver) MAC(mac string, q Query) *Assignment {
	if h := r.byMAC[mac]; h != nil && mac != "" {
		return r.For(h, q)
	}
	return r.resolve(nil, mac, q)
}

// For answers for h, a host of the resolver's site.
func (r *Resolver) For(h *model.Host, q Query) *Assignment { return r.resolve(h, h.MAC, q) }

// ModeAt is the schedule part of an assignment alone (no boot server, image or guest),
// for callers that walk many hosts or instants: the mode h is in at t and why. A nil h
// is an unknown host.
func (r *Resolver) ModeAt(h *model.Host, t time.Time) (*model.Mode, schedule.Decision) {
	var d schedule.Decision
	if h == nil {
		d = r.eng.AtUnknown(t)
	} else {
		d = r.eng.AtHost(h, t)
	}
	return r.site.Mode(d.Mode), d
}

// BootServer is the one fallback rule for "which boot server answers h" (h nil: an
// unknown host): its own, else its pool's; else the one this instance answers for
// (q.BootServer); else the site's first; else, on a site without boot servers, the
// request's own address (q.Self); else none.
func (r *Resolver) BootServer(h *model.Host, q Query) (*model.BootServer, ServerSource) {
	site := r.site
	if h != nil {
		if h.BootServer != "" {
			if b := site.BootServer(h.BootServer); b != nil {
				return b, ServerHost
			}
		} else if p := r.pool(h.Pool); p != nil {
			// Site.HostBootServer without its linear pool look-up.
			if b := site.BootServer(p.BootServer); b != nil {
				return b, ServerPool
			}
		}
	}
	if q.BootServer != "" {
		if b := site.BootServer(q.BootServer); b != nil {
			return b, ServerInstance
		}
	}
	if len(site.BootServers) > 0 {
		return &site.BootServers[0], ServerFirst
	}
	if q.Self != "" {
		return &model.BootServer{Name: SelfServerName, HTTPURL: "http://" + q.Self, DHCP: model.DHCPFull}, ServerSelf
	}
	return nil, ServerNone
}

// ImageOf is the version m boots: its pinned version, else the image's current (else
// newest); nil when m boots no image or there is no such version. Not gated by any boot
// server's holdings (an assignment is).
func (r *Resolver) ImageOf(m *model.Mode) *model.ImageVersion {
	if m == nil || m.Image == "" {
		return nil
	}
	im := r.site.Image(m.Image)
	if im == nil {
		return nil
	}
	return im.Version(m.ImageVersion)
}

func (r *Resolver) resolve(h *model.Host, mac string, q Query) *Assignment {
	a := &Assignment{At: q.At, Loc: r.eng.Location(), Host: h, MAC: mac, Policy: model.DefaultPolicy()}
	a.Mode, a.Decision = r.ModeAt(h, q.At)
	a.Server, a.ServerFrom = r.BootServer(h, q)
	a.Image, a.ImageUnavailable, a.ImageNote = r.imageFor(a.Mode, a.Server, q.Held)
	if a.ImageUnavailable != "" {
		a.unavailable = map[string]string{a.Mode.Name: a.ImageUnavailable}
	}
	a.Exam = a.Decision.ExceptionKind == model.ExceptionExam
	a.MaintenanceOpen = a.Decision.ExceptionKind == model.ExceptionMaintenance
	for i := range r.site.Modes {
		m := &r.site.Modes[i]
		if a.Exam || m == a.Mode || !offered(m.Kind, a.MaintenanceOpen) {
			continue
		}
		v, why, _ := r.imageFor(m, a.Server, q.Held)
		if why != "" {
			if a.unavailable == nil {
				a.unavailable = map[string]string{}
			}
			a.unavailable[m.Name] = why
		}
		a.Others = append(a.Others, render.MenuEntry{Mode: m, Image: v})
	}
	if h == nil {
		return a
	}
	a.Pool = r.pool(h.Pool)
	if a.Pool != nil && a.Pool.Policy != nil {
		a.Policy = a.Pool.Policy.Effective()
	}
	if a.Mode != nil && a.Mode.Guest != nil {
		a.Guest, a.GuestUnavailable = r.guest(h, a.Mode, a.Server, q.Held)
	}
	if a.Mode != nil && a.Mode.Kind == model.KindCourseVM {
		a.CourseVM, a.CourseVMUnavailable = r.courseVM(h, a.Mode, a.Server, q.Held)
	}
	return a
}

// offered says whether a mode of kind k is a boot menu entry besides the scheduled mode.
// The local disk always is (a PC's own system is no privilege). A maintenance system is
// a root shell over the network for whoever sits at the PC, so it is offered only where
// and while an administrator opened it: an exception of kind maintenance decides the
// host's mode (authz lets pool admins book those for their pools, never lecturers).
func offered(k model.ModeKind, maintenanceOpen bool) bool {
	return k == model.KindLocalDisk || k == model.KindMaintenance && maintenanceOpen
}

// courseVM locates course-vm mode m's VM for h on srv: the image's newest version (what
// Mode.VM promises; the version choice is Image.Version's), or why it cannot run.
func (r *Resolver) courseVM(h *model.Host, m *model.Mode, srv *model.BootServer, held Held) (*wire.AgentCourseVM, string) {
	im := r.site.Image(m.VM)
	if im == nil {
		return nil, fmt.Sprintf("mode %s: course VM image %q is not defined", m.Name, m.VM)
	}
	// The current version, or the newest its boot server verified (as for every image).
	v, why, _ := pick(im, "", srv, held)
	switch {
	case why != "":
		return nil, why
	case v == nil:
		return nil, fmt.Sprintf("course VM image %s has no published version", im.Name)
	}
	resolved, url, nfs, why := locate(h, srv, v)
	if why != "" {
		return nil, why
	}
	return &wire.AgentCourseVM{Image: im.Name, Resolved: resolved, ImageURL: url, NFS: nfs}, ""
}

// locate is version v on the host's boot server srv: the version (its time in UTC), its
// directory's HTTP base and NFS location, or why it cannot be reached.
func locate(h *model.Host, srv *model.BootServer, v *model.ImageVersion) (resolved model.ImageVersion, url, nfs, why string) {
	if srv == nil {
		return resolved, "", "", "no boot server serves host " + h.Name + " (the site has none)"
	}
	url, err := render.ImageURL(srv, v)
	if err != nil {
		return resolved, "", "", fmt.Sprintf("boot server %s: %v", srv.Name, err)
	}
	resolved = *v
	resolved.Created = resolved.Created.UTC()
	return resolved, url, render.NFSImageDir(srv, v), ""
}

// guest resolves m's guest for h, located on srv, or says why it cannot run.
func (r *Resolver) guest(h *model.Host, m *model.Mode, srv *model.BootServer, held Held) (*wire.AgentGuest, string) {
	g := m.Guest.WithDefaults()
	im := r.site.Image(g.Image)
	if im == nil {
		// Site.Validate refuses this; said rather than crashed on if it slips through.
		return nil, fmt.Sprintf("mode %s: guest image %q is not defined", m.Name, g.Image)
	}
	v, why, _ := pick(im, g.Version, srv, held)
	switch {
	case why != "":
		return nil, why
	case v == nil && g.Version != "":
		return nil, fmt.Sprintf("image %s version %s is not published", im.Name, g.Version)
	case v == nil:
		return nil, fmt.Sprintf("image %s has no published version", im.Name)
	}
	resolved, url, nfs, why := locate(h, srv, v)
	if why != "" {
		return nil, why
	}
	return &wire.AgentGuest{
		Guest: g, Name: "overtime-" + h.Name, ImageKind: im.Kind, Resolved: resolved,
		ImageURL: url, NFS: nfs,
	}, ""
}

// Boot is the assignment as the boot script renderers take it. The caller adds what is
// about its own presentation (menu timeout, the image-file check of the server it runs on:
// chain it after Check, which shows entries whose version the boot server has not
// verified as unavailable).
func (a *Assignment) Boot() render.Boot {
	b := render.Boot{
		MAC: a.MAC, Host: a.Host, Server: a.Server, Mode: a.Mode, Image: a.Image,
		Reason: a.Decision.Rule, Until: a.Decision.Next, Loc: a.Loc, Others: a.Others,
		Exam: a.Exam && a.Host != nil,
	}
	if len(a.unavailable) > 0 {
		un := a.unavailable
		b.Check = func(m *model.Mode, _ *model.ImageVersion) string { return un[m.Name] }
	}
	return b
}

// AgentConfig is the node agent's configuration document for h at q.At: the assignment,
// whether it is an exam, what the coming change asks of the running PC, and what the
// present asks of a PC that booted b (zero: not said).
func (r *Resolver) AgentConfig(h *model.Host, q Query, b Running) (*wire.AgentConfig, error) {
	a := r.For(h, q)
	cfg, err := a.AgentConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Exam {
		// What the PC may reach during the exam: one answer, examallow's, from the
		// exception that holds the host now and the boot server that answers it.
		cfg.ExamNetwork = examallow.For(r.site, a.Pool, a.Server, r.Exception(h, q.At, a.Decision))
	}
	if sw := r.RebootFrom(a, b, q); sw != nil {
		cfg.Reboot, cfg.RebootSwitch, cfg.Label = sw.Reboot, sw.Rule, sw.Label
	}
	if sw := r.NextSwitch(a, q); sw != nil {
		cfg.NextChange, cfg.NextMode = sw.At, sw.Mode
		cfg.NextReboot, cfg.NextSwitch, cfg.NextLabel = sw.Reboot, sw.Rule, sw.Label
	}
	if q.Interference != nil {
		// The agent stops sending a new profile once this carries it back, and
		// calibrates again when it is missing or stale (node-agent/interference/calibrate).
		cfg.Interference = q.Interference(h.Name)
	}
	return cfg, nil
}

// AgentConfig is the assignment as the node agent's configuration document, without
// what needs the resolver (Resolver.AgentConfig adds it).
func (a *Assignment) AgentConfig() (*wire.AgentConfig, error) {
	if a.Host == nil {
		return nil, fmt.Errorf("an agent configuration needs a host in the directory (MAC %q is not)", a.MAC)
	}
	if a.Mode == nil {
		return nil, fmt.Errorf("host %s: scheduled mode %q is not defined", a.Host.Name, a.Decision.Mode)
	}
	cfg := &wire.AgentConfig{
		Host: a.Host.Name, MAC: a.Host.MAC, Pool: a.Host.Pool,
		Generated: a.At.In(a.Loc).Truncate(time.Second),
		Mode:      a.Mode.Name, Kind: a.Mode.Kind,
		NextMode:         a.Decision.NextMode,
		Policy:           a.Policy,
		Guest:            a.Guest,
		GuestUnavailable: a.GuestUnavailable,

		CourseVM:            a.CourseVM,
		CourseVMUnavailable: a.CourseVMUnavailable,
	}
	if !a.Decision.Next.IsZero() {
		cfg.NextChange = a.Decision.Next.In(a.Loc)
	}
	if a.Exam {
		// No compute guest beside an exam, decided here rather than left to each agent.
		cfg.Exam = true
		if cfg.Guest != nil {
			cfg.Guest, cfg.GuestUnavailable = nil, "no compute guest during an exam"
		}
	}
	return cfg, nil
}
