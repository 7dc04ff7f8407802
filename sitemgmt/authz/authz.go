// Package authz decides who may change what. Roles come from the directory (role grants in
// the site); authorisation is computed on the entity-level difference between the current
// and the proposed site, so a single-host PUT and a whole-site apply are judged by the same
// rules and nothing can be changed "around" a check.
//
//	site-admin  everything
//	pool-admin  hosts in their pool (before and after the change; not their boot server),
//	            their pool's weekly rules, description, room and sharing policy, exceptions
//	            whose every target is in their pool, course-vm images of their pool (and
//	            their versions), the description and VM of course-vm modes of their pool
//	lecturer    in their pool: their own bookings (weekly rules and exceptions recorded
//	            with their uid) whose mode is a course-vm mode of their pool, course-vm
//	            images of their pool (and their versions), the description and VM of
//	            course-vm modes of their pool. The rest of the schedule (the site file's
//	            rules and exceptions, other users' bookings) is read-only to them
//	viewer      reads only
//
// A course-vm mode belongs to the pool owning the course-vm image it starts (Mode.VM,
// Image.Pool). What a role may change is decided per entity and field (fieldRights): how
// a PC boots (a mode's kind, image, version pin, kernel, initrd, kernel arguments and
// guest; boot servers) is the site admin's alone.
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
	"slices"
	"sort"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Principal is an authenticated user and the roles the directory grants them, or an
// authenticated host (Host set, no roles).
type Principal struct {
	UID       string
	SiteAdmin bool
	Viewer    bool
	PoolAdmin map[string]bool
	Lecturer  map[string]bool
	// External is set for a user of the external directory (sitemgmt/extdir), whose
	// password and account are managed there, not in Overtime.
	External bool
	// Host is set for a node agent authenticated by its host credential; UID is then
	// "host:" + Host (for messages and logs) and the principal holds no role.
	Host string
	// BootServer: the boot servers whose `overtime bootserver run` this user is (reads,
	// and reports the image versions it holds: CheckBootServerReport).
	BootServer map[string]bool
}

// CheckBootServerReport authorises a report of the image versions boot server name
// holds verified: only the account of that boot server (a boot-server role for it).
// Not even a site admin: a report is a statement about files on that machine, which only
// its own process has checked.
func (p Principal) CheckBootServerReport(name string) error {
	if !p.IsHost() && p.BootServer[name] {
		return nil
	}
	return &Forbidden{Msg: fmt.Sprintf("user %s may not report the images of boot server %s: only its own account (a %s role for %s) may", p.UID, name, model.RoleBootServer, name)}
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

// CheckGuestSecrets authorises handing a compute guest's secrets (the cluster's munge
// key) to a node agent: only a host's own credential, for itself. Users never get them
// through the API, whatever their role: an administrator has the key file where the site
// manager runs, and a viewer's password must not open the cluster.
func (p Principal) CheckGuestSecrets() (string, error) {
	if !p.IsHost() {
		return "", &Forbidden{Msg: fmt.Sprintf("user %s may not fetch guest secrets: only a host's own credential may", p.UID)}
	}
	return p.Host, nil
}

// CheckSeatConfig authorises handing a desktop its login stack (sssd.conf with the
// directory's bind password, its keytab): only a host's own credential, for itself, like
// the guest secrets. An administrator has the secrets where the site manager runs.
func (p Principal) CheckSeatConfig() (string, error) {
	if !p.IsHost() {
		return "", &Forbidden{Msg: fmt.Sprintf("user %s may not fetch a desktop's login configuration: only a host's own credential may", p.UID)}
	}
	return p.Host, nil
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

// CheckSlurmReport authorises a report of the Slurm controller's version (the sync
// daemon's slurmctld= on the feed): a site admin or a viewer, the accounts
// overtime-slurm-sync reads the feed with (docs/slurm.md). Not a pool admin or a
// lecturer: the version decides whether every PC's compute guest may start, in every
// pool, so a lecturer's password must not be able to keep the site's guests from
// starting. Hosts and boot servers are refused.
func (p Principal) CheckSlurmReport() error {
	if !p.IsHost() && (p.SiteAdmin || p.Viewer) {
		return nil
	}
	return &Forbidden{Msg: fmt.Sprintf("user %s may not report the Slurm controller's version (slurmctld=): only a site admin or a viewer (the sync daemon's account) may", p.UID)}
}

// CheckPower authorises a power command (reboot, power-off, wake) for host h: a site
// admin, or an admin of h's pool. Lecturers are refused although they book their pool's
// slots: a lecturer never changes how a PC boots, and switching a room off or restarting
// it under its users is that and more. Viewers and hosts are refused.
func (p Principal) CheckPower(h *model.Host, op string) error {
	if p.adminsHost(h) {
		return nil
	}
	why := "only a site admin or an admin of pool " + h.Pool + " may"
	if !p.IsHost() && p.Lecturer[h.Pool] {
		why += " (a lecturer books slots but never changes how a PC boots or runs)"
	}
	return &Forbidden{Msg: fmt.Sprintf("user %s may not %s host %s: %s", p.UID, op, h.Name, why)}
}

// CheckUpload authorises uploading artefacts of a new version of image im (and
// publishing them: PUT .../versions/{v}/files/{name}, POST .../publish) before a byte of
// the upload is read: a site admin for any image; an admin or lecturer of the pool that
// owns a course-vm image for that image. It is the rule fieldRights gives an added image
// version, decided from the image alone; the publication itself is judged again on its
// diff.
func (p Principal) CheckUpload(im *model.Image) error {
	if p.SiteAdmin {
		return nil
	}
	if !p.IsHost() && im.Kind == model.ImageCourseVM && im.Pool != "" && (p.PoolAdmin[im.Pool] || p.Lecturer[im.Pool]) {
		return nil
	}
	if im.Kind == model.ImageCourseVM && im.Pool != "" {
		return &Forbidden{Msg: fmt.Sprintf("user %s may not upload versions of image %s: it belongs to pool %s, where the user is neither pool admin nor lecturer", p.UID, im.Name, im.Pool)}
	}
	return &Forbidden{Msg: fmt.Sprintf("user %s may not upload versions of image %s: only a site admin may (pool admins and lecturers upload only course-vm images of their pool)", p.UID, im.Name)}
}

// adminsHost: a site admin, or a user administering h's pool.
func (p Principal) adminsHost(h *model.Host) bool {
	return p.SiteAdmin || (!p.IsHost() && p.PoolAdmin[h.Pool])
}

// For derives a principal's roles from the site's role grants that name uid, plus the
// grants in extra, which the caller has established are uid's own (the roles an external
// directory's groups map to): their Members are not looked at. The result is the union.
func For(site *model.Site, uid string, extra ...model.RoleGrant) Principal {
	p := Principal{UID: uid, PoolAdmin: map[string]bool{}, Lecturer: map[string]bool{}}
	var mine []model.RoleGrant
	for _, g := range site.Roles {
		if slices.Contains(g.Members, uid) {
			mine = append(mine, g)
		}
	}
	for _, g := range append(mine, extra...) {
		switch g.Role {
		case model.RoleSiteAdmin:
			p.SiteAdmin = true
		case model.RoleViewer:
			p.Viewer = true
		case model.RolePoolAdmin:
			p.PoolAdmin[g.Pool] = true
		case model.RoleLecturer:
			p.Lecturer[g.Pool] = true
		case model.RoleBootServer:
			if p.BootServer == nil {
				p.BootServer = map[string]bool{}
			}
			p.BootServer[g.BootServer] = true
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
	for bs := range p.BootServer {
		r = append(r, string(model.RoleBootServer)+":"+bs)
	}
	sort.Strings(r)
	return r
}

// CanRead reports whether the principal holds any role (a host never does).
func (p Principal) CanRead() bool {
	return !p.IsHost() && (p.SiteAdmin || p.Viewer || len(p.PoolAdmin) > 0 || len(p.Lecturer) > 0 || len(p.BootServer) > 0)
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

// Check authorises every change between cur and next: a site admin may make any change;
// everyone else is judged change by change against fieldRights.
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

// The questions below let a page show only the controls its user can use, answered by
// the same rules as Check (the write itself is judged again by Check on its diff).

// CheckDelete judges deleting the entity kind/name of site, as Check judges that
// change: e.g. whether the schedule page offers "Delete" on an exception.
func (p Principal) CheckDelete(site *model.Site, kind, name string) error {
	return p.Check(site, site, []model.Change{{Op: model.OpDelete, Kind: kind, Name: name}})
}

// CheckRemoveRule judges removing rule from the weekly rules of the pool or host (kind
// model.EntityPool or model.EntityHost) name of site, as Check judges that change: a
// lecturer may cancel their own course booking, nothing else.
func (p Principal) CheckRemoveRule(site *model.Site, kind, name, rule string) error {
	drop := func(rules []string, owners model.RuleOwners) ([]string, model.RuleOwners) {
		out := make([]string, 0, len(rules))
		for _, r := range rules {
			if r != rule {
				out = append(out, r)
			}
		}
		o := owners.Clone()
		delete(o, rule)
		return out, o
	}
	// The next state differs only in this one entity; check looks at nothing else of
	// it but the modes and images, which it shares with site.
	next := *site
	switch kind {
	case model.EntityPool:
		pl := site.Pool(name)
		if pl == nil {
			return &Forbidden{Msg: fmt.Sprintf("no pool %s", name)}
		}
		np := *pl
		np.Weekly, np.RuleOwners = drop(pl.Weekly, pl.RuleOwners)
		next.Pools = []model.Pool{np}
	case model.EntityHost:
		h := site.Host(name)
		if h == nil {
			return &Forbidden{Msg: fmt.Sprintf("no host %s", name)}
		}
		nh := *h
		nh.Weekly, nh.RuleOwners = drop(h.Weekly, h.RuleOwners)
		next.Hosts = []model.Host{nh}
	default:
		return &Forbidden{Msg: fmt.Sprintf("%s %s has no weekly rules", kind, name)}
	}
	return p.Check(site, &next, []model.Change{{Op: model.OpModify, Kind: kind, Name: name, Fields: []string{"weekly"}}})
}

// MayChangeAll reports whether p may change field of the entity kind/name of site
// whatever the values and whoever owns them: a site admin, or a role whose fieldRights
// entry is "always" in every pool the entity belongs to. It decides whether a page
// offers an editor of the whole field (the schedule grid: a lecturer, who may change
// only their own course bookings among the rules, gets none).
func (p Principal) MayChangeAll(site *model.Site, kind, name, field string) bool {
	if p.IsHost() {
		return false
	}
	if p.SiteAdmin {
		return true
	}
	r, ok := fieldRights[kind].fields[field]
	if !ok {
		return false
	}
	pools := entityPools(site, model.Change{Kind: kind, Name: name})
	for _, pool := range pools {
		if !(p.PoolAdmin[pool] && r.poolAdmin == always) && !(p.Lecturer[pool] && r.lecturer == always) {
			return false
		}
	}
	return len(pools) > 0
}

// may is what a pool-scoped role may do with one field (or with adding or deleting an
// entity): never, always, or under a condition on the values.
type may int

const (
	never may = iota
	always
	// ownCourseRules: only the user's own bookings among the weekly rules (rules
	// RuleOwners records with their uid) whose mode is a course-vm mode of the entity's
	// pool may be added, removed or changed; every other rule must stay as it is, with
	// its owner (a lecturer books their courses, not the room, and cancels only what they
	// booked).
	ownCourseRules
	// asSelf: only when adding, and only the user's own uid (a booking's owner: the API
	// keeps it on changes; a lecturer does not hand bookings around).
	asSelf
)

// right is what a pool's admins and a pool's lecturers may do.
type right struct{ poolAdmin, lecturer may }

// entityRights is the rights table of one kind of entity: adding, deleting, and changing
// each field (by the JSON names model.Diff reports). A field the table does not name is
// the site admin's, so a field the model grows is closed until it is given here.
type entityRights struct {
	add, del right
	fields   map[string]right
}

// fieldRights is who, besides the site admin, may change what. Every entity belongs to
// pools (entityPools); a user needs, in every pool the entity belongs to before and after
// the change, a role that this table allows to make the change. Kinds it does not list
// (site settings, boot servers, roles) are the site admin's alone.
//
// In short: a lecturer books (course-vm rules and exceptions with course-vm modes of
// their pool), describes (descriptions of their pool's course-vm modes, images and the
// exceptions they may touch), publishes course-vm image versions of their pool and picks
// which of their pool's course-vm images a course-vm mode starts. A pool admin
// additionally manages the pool's hosts, room, description, sharing policy and any rule
// or exception in the pool. How a PC boots — a mode's kind, desktop image, version pin,
// kernel, initrd, kernel arguments and guest, an image's kind and pool, any boot server
// assignment — is the site admin's: it decides what runs as root on every PC of a room.
// So are the directory a pool's desktops trust for logins and the file server of its
// homes, which gets its users' files and logins; its print server is its pool admin's.
var fieldRights = map[string]entityRights{
	model.EntityPool: {
		fields: map[string]right{
			"description": {always, never},
			"room":        {always, never},
			"bootServer":  {never, never},
			"weekly":      {always, ownCourseRules},
			"policy":      {always, never},
			// Which directory the pool's desktops trust for logins: a site admin's, like
			// everything else that decides what a PC runs and who may use it.
			"desktopLogin": {never, never},
			// The room's print server: the pool admin's, like its room and description.
			"printing": {always, never},
			// The file server of the pool's homes: a site admin's, like desktopLogin, not
			// the pool admin's like printing. It gets every file the pool's users save
			// and, for cifs, their password (pam_mount hands the login password to
			// mount.cifs, which answers the server's NTLM challenge with it: enough to
			// crack or relay it) or their Kerberos ticket (sec=krb5); it also serves the
			// dotfiles that run as them. A pool admin could otherwise point their pool at
			// a server of their own and collect the password of everyone who logs in at
			// the pool's PCs.
			"homes": {never, never},
		},
	},
	model.EntityHost: {
		add: right{always, never},
		del: right{always, never},
		fields: map[string]right{
			"mac":        {always, never},
			"ip":         {always, never},
			"pool":       {always, never}, // both pools must be the user's (entityPools before and after)
			"bootServer": {never, never},  // a new host inherits its pool's
			"weekly":     {always, ownCourseRules},
		},
	},
	model.EntityException: {
		add: right{always, always},
		del: right{always, always},
		fields: map[string]right{
			"kind":        {always, always},
			"description": {always, always},
			"start":       {always, always},
			"end":         {always, always},
			"mode":        {always, always}, // a lecturer's: lecturerMay, before and after
			"targets":     {always, always}, // every target pool is checked, before and after
			// What an exam's PCs may reach: whoever books the exam sets it (a lecturer
			// their own course-vm exam), like its times and targets.
			"allow": {always, always},
			"owner": {always, asSelf},
		},
	},
	model.EntityMode: {
		// A new mode is judged against the existing course-vm mode it boots like
		// (addTemplate): it may differ only in the fields below.
		add: right{always, always},
		del: right{always, always},
		fields: map[string]right{
			"kind":         {never, never},
			"description":  {always, always},
			"image":        {never, never},
			"imageVersion": {never, never},
			"vm":           {always, always}, // only to a course-vm image of the user's pool (entityPools after)
			"kernel":       {never, never},
			"initrd":       {never, never},
			"kernelArgs":   {never, never},
			"guest":        {never, never},
		},
	},
	model.EntityImage: {
		// A new image is judged against a course-vm image of its own pool (addTemplate).
		add: right{always, always},
		del: right{always, always},
		fields: map[string]right{
			"kind":        {never, never},
			"description": {always, always},
			"pool":        {never, never}, // re-homing an image re-homes every mode that starts it
			// What unpinned modes boot: desktop and compute images belong to no pool, so
			// only a site admin switches them; a course-vm image's pool admins and
			// lecturers, who publish its versions, also pick which one starts.
			"current": {always, always},
		},
	},
	model.EntityImageVersion: {
		// A version is published whole and never modified (the store refuses that).
		add: right{always, always},
		del: right{always, always},
		fields: map[string]right{
			"sha256":  {never, never},
			"size":    {never, never},
			"path":    {never, never},
			"created": {never, never},
		},
	},
}

func (p Principal) check(cur, next *model.Site, c model.Change) error {
	rights, ok := fieldRights[c.Kind]
	if !ok {
		return forbid(p, c, "only a site admin may")
	}
	fields := c.Fields
	if c.Op == model.OpAdd {
		fields = addedFields(cur, next, c)
	}
	states := []*model.Site{cur, next}
	switch c.Op {
	case model.OpAdd:
		states = []*model.Site{next}
	case model.OpDelete:
		states = []*model.Site{cur}
	}
	for _, site := range states {
		pools := entityPools(site, c)
		if len(pools) == 0 {
			return forbid(p, c, "only a site admin may; pool admins and lecturers manage course-vm modes and images only of their pool")
		}
		for _, pool := range pools {
			admin := p.PoolAdmin[pool]
			lect := p.Lecturer[pool]
			if !admin && !lect {
				return forbid(p, c, "it belongs to pool "+pool+", where the user has no role")
			}
			if !admin {
				if why := p.lecturerMay(site, c, pool); why != "" {
					return forbid(p, c, why)
				}
			}
			judge := func(what string, r right) error {
				if admin {
					if ok, _ := p.allows(r.poolAdmin, cur, next, c, pool); ok {
						return nil
					}
					return forbid(p, c, fmt.Sprintf("a pool admin of pool %s may not %s%s", pool, what, refusal(r.poolAdmin, "")))
				}
				ok, why := p.allows(r.lecturer, cur, next, c, pool)
				if ok {
					return nil
				}
				return forbid(p, c, fmt.Sprintf("a lecturer of pool %s may not %s%s", pool, what, refusal(r.lecturer, why)))
			}
			switch c.Op {
			case model.OpAdd:
				if err := judge("add it", rights.add); err != nil {
					return err
				}
			case model.OpDelete:
				if err := judge("delete it", rights.del); err != nil {
					return err
				}
			}
			for _, f := range fields {
				if err := judge("change its "+f, rights.fields[f]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// refusal explains a refused table entry; why is what allows found (may be "").
func refusal(m may, why string) string {
	switch m {
	case ownCourseRules:
		if why != "" {
			return " except their own bookings with course-vm modes of the pool: " + why
		}
		return " except their own bookings with course-vm modes of the pool (a course-vm mode belongs to the pool of its VM image)"
	case asSelf:
		return " except to themselves when booking"
	}
	return ": only a site admin may"
}

// allows evaluates one table entry for change c in pool; for a conditional entry that
// does not hold it also says why (naming the rule and its owner).
func (p Principal) allows(m may, cur, next *model.Site, c model.Change, pool string) (bool, string) {
	switch m {
	case always:
		return true, ""
	case ownCourseRules:
		if why := p.ownRuleChanges(cur, next, c, pool); why != "" {
			return false, why
		}
		return true, ""
	case asSelf:
		e := next.Exception(c.Name)
		return c.Op == model.OpAdd && e != nil && e.Owner == p.UID, ""
	}
	return false, ""
}

// ownerText names who a booking belongs to, for refusals.
func ownerText(owner string) string {
	if owner == "" {
		return "the site file's (it has no owner)"
	}
	return "booked by " + owner
}

// ownRuleChanges says why the change of c's weekly rules between cur and next is not
// only the user's own course bookings in pool ("" = it is). A rule counts with its
// owner: a rule whose text stays but whose owner changes is removed and added. The
// order of the list means nothing (overlapping rules are refused), so it is compared
// as a set.
func (p Principal) ownRuleChanges(cur, next *model.Site, c model.Change, pool string) string {
	before, after := ownedRules(cur, c), ownedRules(next, c)
	for _, r := range before {
		if !slices.Contains(after, r) {
			if why := p.ownCourseRule(cur, pool, r); why != "" {
				return why
			}
		}
	}
	for _, r := range after {
		if !slices.Contains(before, r) {
			if why := p.ownCourseRule(next, pool, r); why != "" {
				return why
			}
		}
	}
	return ""
}

// ownedRule is a weekly rule with who booked it ("" = the site file's).
type ownedRule struct{ rule, owner string }

// ownedRules are the weekly rules of the pool or host of c in site, with their owners.
func ownedRules(site *model.Site, c model.Change) []ownedRule {
	var rules []string
	var owners model.RuleOwners
	switch c.Kind {
	case model.EntityPool:
		if p := site.Pool(c.Name); p != nil {
			rules, owners = p.Weekly, p.RuleOwners
		}
	case model.EntityHost:
		if h := site.Host(c.Name); h != nil {
			rules, owners = h.Weekly, h.RuleOwners
		}
	}
	out := make([]ownedRule, len(rules))
	for i, r := range rules {
		out[i] = ownedRule{r, owners[r]}
	}
	return out
}

// ownCourseRule says why a lecturer of pool may not add or remove r in site ("" = may):
// it must be the user's own booking, with a course-vm mode of pool.
func (p Principal) ownCourseRule(site *model.Site, pool string, r ownedRule) string {
	if r.owner != p.UID {
		return fmt.Sprintf("rule %q is %s", r.rule, ownerText(r.owner))
	}
	rule, err := schedule.ParseRule(r.rule)
	if err != nil {
		return fmt.Sprintf("rule %q: %v", r.rule, err)
	}
	if !isCourseModeOf(site, rule.Mode, pool) {
		return fmt.Sprintf("rule %q has mode %s, which is not a course-vm mode of pool %s (a course-vm mode belongs to the pool of its VM image)", r.rule, rule.Mode, pool)
	}
	return ""
}

// lecturerMay says why a lecturer (without admin rights in pool) may not touch the entity
// at all ("" = may, as far as the fields allow): exceptions only with a course-vm mode of
// that pool, of a kind other than maintenance, and only their own bookings (the owner the
// server recorded is the user), judged on each state: so they add only as themselves
// and change or cancel only what they booked, and cannot hand it to someone else.
func (p Principal) lecturerMay(site *model.Site, c model.Change, pool string) string {
	if c.Kind != model.EntityException {
		return ""
	}
	e := site.Exception(c.Name)
	if e == nil {
		return ""
	}
	if e.Kind == model.ExceptionMaintenance {
		// It opens the maintenance system (a root shell) in the boot menus of its hosts.
		return "exceptions of kind maintenance open the maintenance boot entry; only a pool admin of pool " + pool + " may book or change them"
	}
	if !isCourseModeOf(site, e.Mode, pool) {
		return "a lecturer may schedule only course-vm modes of their pool (a course-vm mode belongs to the pool of its VM image), and " + e.Mode + " is not one of pool " + pool
	}
	if e.Owner != p.UID {
		return fmt.Sprintf("a lecturer of pool %s books, changes and cancels only their own bookings, and exception %s is %s", pool, e.Name, ownerText(e.Owner))
	}
	return ""
}

// entityPools lists the pools the entity of c belongs to in site (nil: none, it is the
// site admin's alone, or it does not exist in site).
func entityPools(site *model.Site, c model.Change) []string {
	switch c.Kind {
	case model.EntityPool:
		if site.Pool(c.Name) != nil {
			return []string{c.Name}
		}
	case model.EntityHost:
		if h := site.Host(c.Name); h != nil {
			return []string{h.Pool}
		}
	case model.EntityException:
		if e := site.Exception(c.Name); e != nil {
			return targetPools(site, e)
		}
	case model.EntityImage:
		if pool := courseImagePool(site, c.Name); pool != "" {
			return []string{pool}
		}
	case model.EntityImageVersion:
		image, _ := model.SplitImageVersionName(c.Name)
		if pool := courseImagePool(site, image); pool != "" {
			return []string{pool}
		}
	case model.EntityMode:
		if pool := courseModePool(site, c.Name); pool != "" {
			return []string{pool}
		}
	}
	return nil
}

// courseImagePool is the pool owning a course-vm image ("" for other images).
func courseImagePool(site *model.Site, image string) string {
	if im := site.Image(image); im != nil && im.Kind == model.ImageCourseVM {
		return im.Pool
	}
	return ""
}

// courseModePool is the pool a course-vm mode belongs to: the pool owning the VM image it
// starts ("" for other modes).
func courseModePool(site *model.Site, mode string) string {
	if m := site.Mode(mode); m != nil && m.Kind == model.KindCourseVM {
		return courseImagePool(site, m.VM)
	}
	return ""
}

func isCourseModeOf(site *model.Site, mode, pool string) bool {
	return pool != "" && courseModePool(site, mode) == pool
}

// addedFields lists the fields an added entity sets, as model.Diff reports them against a
// template: the zero entity; for images a course-vm image of the new image's own pool
// (entityPools decides kind and pool); for modes an existing course-vm mode that boots
// the same way (same kind, image, version pin, kernel, initrd, kernel arguments, no
// guest), so that a lecturer can add a mode for another course VM without choosing how
// PCs boot; for image versions the version itself (a publication is judged as a whole).
func addedFields(cur, next *model.Site, c model.Change) []string {
	var from, to model.Site
	switch c.Kind {
	case model.EntityHost:
		h := *next.Host(c.Name)
		from.Hosts, to.Hosts = []model.Host{{Name: h.Name}}, []model.Host{h}
	case model.EntityException:
		e := *next.Exception(c.Name)
		from.Exceptions, to.Exceptions = []model.Exception{{Name: e.Name}}, []model.Exception{e}
	case model.EntityImage:
		im := *next.Image(c.Name)
		im.Versions = nil
		from.Images, to.Images = []model.Image{{Name: im.Name, Kind: model.ImageCourseVM, Pool: im.Pool}}, []model.Image{im}
	case model.EntityMode:
		m := *next.Mode(c.Name)
		template := model.Mode{Name: m.Name}
		for _, t := range cur.Modes {
			if t.Kind == model.KindCourseVM && t.Guest == nil && t.Kind == m.Kind && t.Image == m.Image &&
				t.ImageVersion == m.ImageVersion && t.Kernel == m.Kernel && t.Initrd == m.Initrd && t.KernelArgs == m.KernelArgs {
				template = t
				template.Name = m.Name
				break
			}
		}
		from.Modes, to.Modes = []model.Mode{template}, []model.Mode{m}
	default:
		return nil
	}
	for _, d := range model.Diff(&from, &to) {
		if d.Kind == c.Kind && d.Name == c.Name {
			return d.Fields
		}
	}
	return nil
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
