// Package authz decides who may change what. Roles come from the directory (role grants in
// the site); authorisation is computed on the entity-level difference between the current
// and the proposed site, so a single-host PUT and a whole-site apply are judged by the same
// rules and nothing can be changed "around" a check.
//
//	site-admin  everything
//	pool-admin  hosts in their pool (before and after the change), their pool's weekly rules,
//	            description and room, exceptions whose every target is in their pool
//	lecturer    in their pool: weekly rules and exceptions whose mode is a course-vm mode,
//	            course-vm images owned by the pool (and their versions), course-vm modes on them
//	viewer      reads only
//
// Any role allows reading; a user with no role gets nothing.
//
// Pool admins also set their pool's sharing policy (model.Pool.Policy), and site admins
// and the host's pool admins issue and revoke node agent credentials (CheckHostCredential).
//
// A node agent authenticates as its host (a bearer token, see sitemgmt/hostcred): such a
// principal has no role at all. It may only fetch its own agent configuration and post its
// own heartbeats (AgentHost); everything else refuses it.
package authz

import (
	"fmt"
	"sort"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
)

// Principal is an authenticated user and the roles the directory grants them, or an
// authenticated host (Host set, no roles).
type Principal struct {
	UID       string
	SiteAdmin bool
	Viewer    bool
	PoolAdmin map[string]bool
	Lecturer  map[string]bool
	// Host is set for a node agent authenticated by its host credential; UID is then
	// "host:" + Host (for messages and logs) and the principal holds no role.
	Host string
}

// ForHost is the principal of a node agent that proved to be host.
func ForHost(host string) Principal {
	return Principal{UID: "host:" + host, Host: host, PoolAdmin: map[string]bool{}, Lecturer: map[string]bool{}}
}

// IsHost reports whether the principal is a host (node agent), not a user.
func (p Principal) IsHost() bool { return p.Host != "" }

// AgentHost decides which host's agent configuration or heartbeat a request may concern.
// A host principal concerns only itself: requested must be empty (then it is filled) or
// its own name. A user may read the configuration of any host (it is made from the site,
// which every role may read) but never posts heartbeats (forPost).
func (p Principal) AgentHost(requested string, forPost bool) (string, error) {
	if p.IsHost() {
		if requested != "" && requested != p.Host {
			return "", &Forbidden{Msg: fmt.Sprintf("host %s may act only for itself, not for host %s", p.Host, requested)}
		}
		return p.Host, nil
	}
	if forPost {
		return "", &Forbidden{Msg: fmt.Sprintf("user %s may not post heartbeats: only a host's own credential may", p.UID)}
	}
	if !p.CanRead() {
		return "", &Forbidden{Msg: fmt.Sprintf("user %s has no role in this site", p.UID)}
	}
	return requested, nil
}

// CheckHostCredential authorises issuing or revoking host h's node agent credential:
// a site admin, or an admin of the host's pool.
func (p Principal) CheckHostCredential(h *model.Host) error {
	if p.adminsHost(h) {
		return nil
	}
	return &Forbidden{Msg: fmt.Sprintf("user %s may not manage the credential of host %s: only a site admin or an admin of pool %s may", p.UID, h.Name, h.Pool)}
}

// CheckPowerSave authorises Slurm's power saving calls for host h (waking it for jobs,
// giving it back): a site admin or an admin of the host's pool — the account slurmctld's
// ResumeProgram and SuspendProgram use. Checked even when the call changes nothing in
// the site, because it also has PCs woken.
func (p Principal) CheckPowerSave(h *model.Host) error {
	if p.adminsHost(h) {
		return nil
	}
	return &Forbidden{Msg: fmt.Sprintf("user %s may not wake or release host %s for Slurm: only a site admin or an admin of pool %s may", p.UID, h.Name, h.Pool)}
}

// adminsHost: a site admin, or a user administering h's pool.
func (p Principal) adminsHost(h *model.Host) bool {
	return p.SiteAdmin || (!p.IsHost() && p.PoolAdmin[h.Pool])
}

// For derives a principal's roles from the site's role grants.
func For(site *model.Site, uid string) Principal {
	p := Principal{UID: uid, PoolAdmin: map[string]bool{}, Lecturer: map[string]bool{}}
	for _, g := range site.Roles {
		member := false
		for _, m := range g.Members {
			if m == uid {
				member = true
				break
			}
		}
		if !member {
			continue
		}
		switch g.Role {
		case model.RoleSiteAdmin:
			p.SiteAdmin = true
		case model.RoleViewer:
			p.Viewer = true
		case model.RolePoolAdmin:
			p.PoolAdmin[g.Pool] = true
		case model.RoleLecturer:
			p.Lecturer[g.Pool] = true
		}
	}
	return p
}

// Roles lists the principal's roles for display, e.g. ["pool-admin:lab-a", "viewer"].
func (p Principal) Roles() []string {
	var r []string
	if p.SiteAdmin {
		r = append(r, string(model.RoleSiteAdmin))
	}
	for pool := range p.PoolAdmin {
		r = append(r, string(model.RolePoolAdmin)+":"+pool)
	}
	for pool := range p.Lecturer {
		r = append(r, string(model.RoleLecturer)+":"+pool)
	}
	if p.Viewer {
		r = append(r, string(model.RoleViewer))
	}
	sort.Strings(r)
	return r
}

// CanRead reports whether the principal holds any role (a host never does).
func (p Principal) CanRead() bool {
	return !p.IsHost() && (p.SiteAdmin || p.Viewer || len(p.PoolAdmin) > 0 || len(p.Lecturer) > 0)
}

// Forbidden is returned when a change is not allowed (HTTP 403).
type Forbidden struct{ Msg string }

func (e *Forbidden) Error() string { return e.Msg }

func forbid(p Principal, c model.Change, why string) error {
	return &Forbidden{Msg: fmt.Sprintf("user %s may not %s %s %s: %s", p.UID, verb(c.Op), c.Kind, c.Name, why)}
}

func verb(op model.Op) string {
	switch op {
	case model.OpAdd:
		return "add"
	case model.OpDelete:
		return "delete"
	}
	return "modify"
}

// Check authorises every change between cur and next.
func (p Principal) Check(cur, next *model.Site, changes []model.Change) error {
	if p.IsHost() {
		if len(changes) == 0 {
			return nil
		}
		return forbid(p, changes[0], "a host credential may only fetch its agent configuration and post heartbeats")
	}
	if p.SiteAdmin {
		return nil
	}
	for _, c := range changes {
		if err := p.check(cur, next, c); err != nil {
			return err
		}
	}
	return nil
}

func (p Principal) check(cur, next *model.Site, c model.Change) error {
	switch c.Kind {
	case "pool":
		if c.Op != model.OpModify {
			return forbid(p, c, "only a site admin adds or removes pools")
		}
		a, b := cur.Pool(c.Name), next.Pool(c.Name)
		if p.PoolAdmin[c.Name] {
			if a.BootServer != b.BootServer {
				return forbid(p, c, "only a site admin assigns boot servers")
			}
			return nil
		}
		if p.Lecturer[c.Name] {
			// Judged on the changed fields, so that a field the model grows (the sharing
			// policy) is not open to lecturers by omission.
			for _, f := range c.Fields {
				if f != "weekly" {
					return forbid(p, c, "a lecturer may change only course-vm rules")
				}
			}
			return courseRulesOnly(p, c, cur, next, a.Weekly, b.Weekly)
		}
		return forbid(p, c, "not an admin of pool "+c.Name)
	case "host":
		a, b := cur.Host(c.Name), next.Host(c.Name)
		for _, h := range []*model.Host{a, b} {
			if h != nil && !p.PoolAdmin[h.Pool] {
				if p.Lecturer[h.Pool] && a != nil && b != nil && lecturerHostEdit(a, b) {
					continue
				}
				return forbid(p, c, "not an admin of pool "+h.Pool)
			}
		}
		if a != nil && b != nil && !p.PoolAdmin[b.Pool] {
			return courseRulesOnly(p, c, cur, next, a.Weekly, b.Weekly)
		}
		return nil
	case "exception":
		for _, pair := range []struct {
			site *model.Site
			e    *model.Exception
		}{{cur, cur.Exception(c.Name)}, {next, next.Exception(c.Name)}} {
			if pair.e == nil {
				continue
			}
			for _, pool := range targetPools(pair.site, pair.e) {
				if p.PoolAdmin[pool] {
					continue
				}
				if p.Lecturer[pool] && isCourseMode(pair.site, pair.e.Mode) {
					continue
				}
				if p.Lecturer[pool] {
					return forbid(p, c, "a lecturer may schedule only course-vm modes")
				}
				return forbid(p, c, "it targets pool "+pool+", which the user does not administer")
			}
		}
		return nil
	case "image", "image-version":
		name := c.Name
		if c.Kind == "image-version" {
			name, _ = model.SplitImageVersionName(c.Name)
		}
		for _, im := range []*model.Image{cur.Image(name), next.Image(name)} {
			if im == nil {
				continue
			}
			if im.Kind != model.ImageCourseVM || im.Pool == "" || !(p.Lecturer[im.Pool] || p.PoolAdmin[im.Pool]) {
				return forbid(p, c, "only a site admin manages this image; lecturers and pool admins manage course-vm images of their pool")
			}
		}
		return nil
	case "mode":
		for _, pair := range []struct {
			site *model.Site
			m    *model.Mode
		}{{cur, cur.Mode(c.Name)}, {next, next.Mode(c.Name)}} {
			if pair.m == nil {
				continue
			}
			im := pair.site.Image(pair.m.VM)
			if pair.m.Kind != model.KindCourseVM || im == nil || im.Pool == "" || !(p.Lecturer[im.Pool] || p.PoolAdmin[im.Pool]) {
				return forbid(p, c, "only a site admin manages boot modes other than course-vm modes of the user's pool images")
			}
		}
		return nil
	}
	return forbid(p, c, "only a site admin may")
}

// lecturerHostEdit: the only host field a lecturer may touch is the weekly rule list.
func lecturerHostEdit(a, b *model.Host) bool {
	return a.Name == b.Name && a.MAC == b.MAC && a.IP == b.IP && a.Pool == b.Pool && a.BootServer == b.BootServer
}

// courseRulesOnly checks that every added or removed weekly rule names a course-vm mode.
func courseRulesOnly(p Principal, c model.Change, cur, next *model.Site, before, after []string) error {
	in := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	check := func(site *model.Site, rules, other []string) error {
		for _, r := range rules {
			if in(other, r) {
				continue
			}
			rule, err := schedule.ParseRule(r)
			if err != nil || !isCourseMode(site, rule.Mode) {
				return forbid(p, c, fmt.Sprintf("a lecturer may add or remove only course-vm rules, not %q", r))
			}
		}
		return nil
	}
	if err := check(cur, before, after); err != nil {
		return err
	}
	return check(next, after, before)
}

func isCourseMode(site *model.Site, mode string) bool {
	m := site.Mode(mode)
	return m != nil && m.Kind == model.KindCourseVM
}

// targetPools lists the pools an exception touches: its pool targets and its hosts' pools.
func targetPools(site *model.Site, e *model.Exception) []string {
	var pools []string
	for _, t := range e.Targets {
		switch {
		case t.Pool != "":
			pools = append(pools, t.Pool)
		case t.Host != "":
			if h := site.Host(t.Host); h != nil {
				pools = append(pools, h.Pool)
			} else {
				pools = append(pools, "?unknown-host:"+t.Host)
			}
		}
	}
	return pools
}
