package ldapstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Attribute names (see sitemgmt/ldap/overtime.schema). Standard ones are reused where
// they mean the same thing: cn, description, roomNumber, macAddress, ipHostNumber, member.
const (
	aObjectClass   = "objectClass"
	aCN            = "cn"
	aDescription   = "description"
	aRoom          = "roomNumber"
	aMAC           = "macAddress"
	aIP            = "ipHostNumber"
	aMember        = "member"
	aUID           = "uid"
	aSiteName      = "otSiteName"
	aTimezone      = "otTimezone"
	aDefaultMode   = "otDefaultMode"
	aUnknownMode   = "otUnknownMode"
	aPoolName      = "otPoolName"
	aBootServer    = "otBootServerName"
	aWeekly        = "otWeeklyRule"
	aBookedRule    = "otBookedRule"
	aOwner         = "otOwner"
	aHTTPURL       = "otHTTPURL"
	aNFSServer     = "otNFSServer"
	aNFSRoot       = "otNFSRoot"
	aDHCP          = "otDHCPMode"
	aInterface     = "otInterface"
	aSubnet        = "otSubnet"
	aRangeFrom     = "otRangeFrom"
	aRangeTo       = "otRangeTo"
	aRouter        = "otRouter"
	aDNSServer     = "otDNSServer"
	aDNSDomain     = "otDNSDomain"
	aModeKind      = "otModeKind"
	aImageName     = "otImageName"
	aPinned        = "otPinnedVersion"
	aVMImage       = "otVMImageName"
	aKernel        = "otKernel"
	aInitrd        = "otInitrd"
	aKernelArgs    = "otKernelArgs"
	aImageKind     = "otImageKind"
	aVersion       = "otVersion"
	aSHA256        = "otSHA256"
	aSize          = "otSize"
	aPath          = "otPath"
	aCreated       = "otCreated"
	aExceptionKind = "otExceptionKind"
	aStart         = "otStart"
	aEnd           = "otEnd"
	aModeName      = "otModeName"
	aTargetPool    = "otTargetPool"
	aTargetHost    = "otTargetHost"
	aExamAllow     = "otExamAllow"
	aAPIURL        = "otAPIURL"
	aRoleKind      = "otRoleKind"
	aPolicy        = "otPolicy"
	aDesktopLogin  = "otDesktopLogin"
	aPrinting      = "otPrinting"
	aHomes         = "otHomes"
	aGuest         = "otGuest"
	aTokenHash     = "otAgentTokenHash"
)

// Object classes.
const (
	ocSite         = "otSite"
	ocPool         = "otPool"
	ocHost         = "otHost"
	ocBootServer   = "otBootServer"
	ocMode         = "otMode"
	ocImage        = "otImage"
	ocImageVersion = "otImageVersion"
	ocException    = "otException"
	ocRole         = "otRole"
	ocIPHost       = "ipHost"
)

// ia5 attributes take ASCII only (IA5String syntax); checked before writing so that a
// value slapd would reject does not stop an Apply half way.
var ia5 = map[string]bool{
	aTimezone: true, aHTTPURL: true, aNFSServer: true, aNFSRoot: true, aDHCP: true, aInterface: true,
	aSubnet: true, aRangeFrom: true, aRangeTo: true, aRouter: true, aDNSServer: true, aDNSDomain: true, aModeKind: true, aPinned: true,
	aKernel: true, aInitrd: true, aKernelArgs: true, aImageKind: true, aVersion: true, aSHA256: true,
	aPath: true, aExceptionKind: true, aRoleKind: true, aMAC: true, aIP: true, aTokenHash: true,
	aOwner: true, aExamAllow: true, aAPIURL: true,
}

// maxJSON bounds the JSON documents kept in one attribute value (otPolicy, otGuest), the
// length the schema declares; otDesktopLogin, which carries CA certificates, has
// maxLoginJSON.
const (
	maxJSON         = 4096
	maxLoginJSON    = 16384
	maxPrintingJSON = 1024
	maxHomesJSON    = 1024
)

// attr is one LDAP attribute of an entity and the model field it carries ("" for the
// naming attribute). A field can map to two attributes (exception targets).
type attr struct {
	field string
	name  string
	vals  []string
}

// entry is the LDAP form of one entity. err is set when a field could not be encoded
// (a structured field whose JSON is too long); Apply refuses the change then.
type entry struct {
	classes []string
	attrs   []attr
	err     error
}

func opt(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// Times are stored in UTC with as many fractional digits as needed, so that any
// time.Time round-trips exactly (GeneralizedTime allows a fraction of the second).
const genTimeLayout = "20060102150405.999999999Z"

func genTime(t time.Time) string { return t.UTC().Format(genTimeLayout) }

func parseGenTime(v string) (time.Time, error) {
	// Z0700 accepts "Z" and "+hhmm"; a fraction after the seconds is accepted too. The
	// minute-only form covers values written by other tools.
	var err error
	for _, layout := range []string{"20060102150405Z0700", "200601021504Z0700", "2006010215Z0700"} {
		var t time.Time
		if t, err = time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

func siteEntry(s *model.Site) entry {
	login, err := jsonValueMax("site desktopLogin", s.DesktopLogin, marshalJSON[model.DesktopLogin], maxLoginJSON)
	printing, perr := jsonValueMax("site printing", s.Printing, marshalJSON[model.Printing], maxPrintingJSON)
	homes, herr := jsonValueMax("site homes", s.Homes, marshalJSON[model.Homes], maxHomesJSON)
	err = errors.Join(err, perr, herr)
	return entry{classes: []string{"organizationalUnit", ocSite}, attrs: []attr{
		{"name", aSiteName, opt(s.Name)},
		{"timezone", aTimezone, opt(s.Timezone)},
		{"defaultMode", aDefaultMode, opt(s.DefaultMode)},
		{"unknownMode", aUnknownMode, opt(s.UnknownMode)},
		{"desktopLogin", aDesktopLogin, login},
		{"printing", aPrinting, printing},
		{"homes", aHomes, homes},
	}, err: err}
}

// jsonValue encodes a structured field (nil: no value).
func jsonValue[T any](what string, v *T, marshal func(T) (string, error)) ([]string, error) {
	return jsonValueMax(what, v, marshal, maxJSON)
}

// jsonValueMax is jsonValue for an attribute whose schema allows max bytes.
func jsonValueMax[T any](what string, v *T, marshal func(T) (string, error), max int) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	s, err := marshal(*v)
	if err != nil {
		return nil, model.Invalid("%s: %v", what, err)
	}
	if len(s) > max {
		return nil, model.Invalid("%s too large (%d bytes of JSON, at most %d)", what, len(s), max)
	}
	return []string{s}, nil
}

func poolEntry(p *model.Pool) entry {
	var policy []string
	var err error
	// An empty policy means the default one, like none (model.Site.Sort drops it too).
	if p.Policy != nil && !p.Policy.IsZero() {
		policy, err = jsonValue("pool "+p.Name+" policy", p.Policy, marshalPolicy)
	}
	login, lerr := jsonValueMax("pool "+p.Name+" desktopLogin", p.DesktopLogin, marshalJSON[model.DesktopLogin], maxLoginJSON)
	printing, perr := jsonValueMax("pool "+p.Name+" printing", p.Printing, marshalJSON[model.Printing], maxPrintingJSON)
	homes, herr := jsonValueMax("pool "+p.Name+" homes", p.Homes, marshalJSON[model.Homes], maxHomesJSON)
	err = errors.Join(err, lerr, perr, herr)
	return entry{classes: []string{ocPool}, attrs: []attr{
		{"", aCN, []string{p.Name}},
		{"description", aDescription, opt(p.Description)},
		{"room", aRoom, opt(p.Room)},
		{"bootServer", aBootServer, opt(p.BootServer)},
		{"weekly", aWeekly, managedRules(p.Weekly, p.RuleOwners)},
		{"weekly", aBookedRule, bookedRules(p.Weekly, p.RuleOwners)},
		{"policy", aPolicy, policy},
		{"desktopLogin", aDesktopLogin, login},
		{"printing", aPrinting, printing},
		{"homes", aHomes, homes},
	}, err: err}
}

func hostEntry(h *model.Host) entry {
	classes := []string{"device", "ieee802Device", ocHost}
	if h.IP != "" {
		// ipHost requires ipHostNumber, so a host without an address is not an ipHost.
		classes = append(classes, ocIPHost)
	}
	return entry{classes: classes, attrs: []attr{
		{"", aCN, []string{h.Name}},
		{"mac", aMAC, opt(h.MAC)},
		{"ip", aIP, opt(h.IP)},
		{"pool", aPoolName, opt(h.Pool)},
		{"bootServer", aBootServer, opt(h.BootServer)},
		{"weekly", aWeekly, managedRules(h.Weekly, h.RuleOwners)},
		{"weekly", aBookedRule, bookedRules(h.Weekly, h.RuleOwners)},
	}}
}

// Weekly rules are stored in two attributes: otWeeklyRule holds the rules the site file
// manages, otBookedRule the bookings as "OWNER RULE" (a user id has no spaces, so the
// first word is the owner). One value per rule keeps adding or removing a booking a
// single-value change, and an LDAP browser shows who booked what.
func managedRules(rules []string, owners model.RuleOwners) []string {
	var out []string
	for _, r := range rules {
		if _, booked := owners[r]; !booked {
			out = append(out, r)
		}
	}
	return out
}

func bookedRules(rules []string, owners model.RuleOwners) []string {
	var out []string
	for _, r := range rules {
		if o, booked := owners[r]; booked {
			out = append(out, o+" "+r)
		}
	}
	return out
}

// decodeRules undoes managedRules and bookedRules: managed rules first, then bookings
// (the order model.Site.Sort gives).
func decodeRules(managed, booked []string) ([]string, model.RuleOwners) {
	rules := append([]string(nil), managed...)
	var owners model.RuleOwners
	for _, b := range booked {
		o, r, ok := strings.Cut(b, " ")
		if !ok {
			// Not written by this store; keep the rule rather than lose it, unowned.
			rules = append(rules, b)
			continue
		}
		if owners == nil {
			owners = model.RuleOwners{}
		}
		owners[r] = o
		rules = append(rules, r)
	}
	return rules, owners
}

func bootServerEntry(b *model.BootServer) entry {
	return entry{classes: []string{"device", ocIPHost, ocBootServer}, attrs: []attr{
		{"", aCN, []string{b.Name}},
		{"ip", aIP, opt(b.IP)},
		{"httpURL", aHTTPURL, opt(b.HTTPURL)},
		{"nfsServer", aNFSServer, opt(b.NFSServer)},
		{"nfsRoot", aNFSRoot, opt(b.NFSRoot)},
		{"dhcp", aDHCP, opt(string(b.DHCP))},
		{"interface", aInterface, opt(b.Interface)},
		{"subnet", aSubnet, opt(b.Subnet)},
		{"rangeFrom", aRangeFrom, opt(b.RangeFrom)},
		{"rangeTo", aRangeTo, opt(b.RangeTo)},
		{"router", aRouter, opt(b.Router)},
		{"dnsServers", aDNSServer, b.DNSServers},
		{"domain", aDNSDomain, opt(b.Domain)},
		{"apiURL", aAPIURL, opt(b.APIURL)},
	}}
}

func modeEntry(m *model.Mode) entry {
	guest, err := jsonValue("mode "+m.Name+" guest", m.Guest, marshalGuest)
	return entry{err: err, classes: []string{ocMode}, attrs: []attr{
		{"", aCN, []string{m.Name}},
		{"kind", aModeKind, opt(string(m.Kind))},
		{"description", aDescription, opt(m.Description)},
		{"image", aImageName, opt(m.Image)},
		{"imageVersion", aPinned, opt(m.ImageVersion)},
		{"vm", aVMImage, opt(m.VM)},
		{"kernel", aKernel, opt(m.Kernel)},
		{"initrd", aInitrd, opt(m.Initrd)},
		{"kernelArgs", aKernelArgs, opt(m.KernelArgs)},
		{"guest", aGuest, guest},
	}}
}

// imageEntry holds the image's own fields; versions are child entries.
func imageEntry(im *model.Image) entry {
	return entry{classes: []string{ocImage}, attrs: []attr{
		{"", aCN, []string{im.Name}},
		{"kind", aImageKind, opt(string(im.Kind))},
		{"description", aDescription, opt(im.Description)},
		{"pool", aPoolName, opt(im.Pool)},
		{"current", aPinned, opt(im.Current)},
	}}
}

func versionEntry(v *model.ImageVersion) entry {
	size := ""
	if v.Size != 0 {
		size = strconv.FormatInt(v.Size, 10)
	}
	return entry{classes: []string{ocImageVersion}, attrs: []attr{
		{"", aVersion, []string{v.Version}},
		{"sha256", aSHA256, opt(v.SHA256)},
		{"size", aSize, opt(size)},
		{"path", aPath, opt(v.Path)},
		{"created", aCreated, []string{genTime(v.Created)}},
	}}
}

// exceptionEntry splits targets into pool and host attributes; Load returns pool targets
// first, then host targets (model.Diff compares targets as a set).
func exceptionEntry(e *model.Exception) entry {
	var pools, hosts []string
	for _, t := range e.Targets {
		if t.Pool != "" {
			pools = append(pools, t.Pool)
		}
		if t.Host != "" {
			hosts = append(hosts, t.Host)
		}
	}
	return entry{classes: []string{ocException}, attrs: []attr{
		{"", aCN, []string{e.Name}},
		{"kind", aExceptionKind, opt(string(e.Kind))},
		{"description", aDescription, opt(e.Description)},
		{"start", aStart, []string{genTime(e.Start)}},
		{"end", aEnd, []string{genTime(e.End)}},
		{"mode", aModeName, opt(e.Mode)},
		{"targets", aTargetPool, pools},
		{"targets", aTargetHost, hosts},
		{"allow", aExamAllow, e.Allow},
		{"owner", aOwner, opt(e.Owner)},
	}}
}

// roleEntry: members are DNs of users. groupOfNames requires at least one member; a
// grant without members gets the empty DN (which names no user), as RFC 4519 suggests
// for empty groups. Load drops it again.
func (l layout) roleEntry(r *model.RoleGrant) entry {
	members := make([]string, 0, len(r.Members))
	for _, uid := range r.Members {
		members = append(members, l.user(uid))
	}
	if len(members) == 0 {
		members = []string{""}
	}
	return entry{classes: []string{"groupOfNames", ocRole}, attrs: []attr{
		{"", aCN, []string{r.Name}},
		{"role", aRoleKind, opt(string(r.Role))},
		{"pool", aPoolName, opt(r.Pool)},
		{"bootServer", aBootServer, opt(r.BootServer)},
		{"members", aMember, members},
	}}
}

// index finds a site's entities by name in constant time (model.Site's lookups are
// linear, which is quadratic over a 10,000-host Apply).
type index struct {
	site        *model.Site
	pools       map[string]*model.Pool
	hosts       func(name string) *model.Host // model.HostFinder: no index of 100,000 hosts per write
	bootServers map[string]*model.BootServer
	modes       map[string]*model.Mode
	images      map[string]*model.Image
	exceptions  map[string]*model.Exception
	roles       map[string]*model.RoleGrant
}

func byName[T any](list []T, name func(*T) string) map[string]*T {
	m := make(map[string]*T, len(list))
	for i := range list {
		m[name(&list[i])] = &list[i]
	}
	return m
}

func newIndex(s *model.Site) *index {
	return &index{
		site:        s,
		pools:       byName(s.Pools, func(p *model.Pool) string { return p.Name }),
		hosts:       model.HostFinder(s.Hosts),
		bootServers: byName(s.BootServers, func(b *model.BootServer) string { return b.Name }),
		modes:       byName(s.Modes, func(m *model.Mode) string { return m.Name }),
		images:      byName(s.Images, func(im *model.Image) string { return im.Name }),
		exceptions:  byName(s.Exceptions, func(e *model.Exception) string { return e.Name }),
		roles:       byName(s.Roles, func(r *model.RoleGrant) string { return r.Name }),
	}
}

// entityEntry is the LDAP form of the entity a change names, taken from the site.
func (l layout) entityEntry(x *index, kind, name string) (entry, bool) {
	switch kind {
	case model.EntitySite:
		return siteEntry(x.site), true
	case model.EntityPool:
		if p := x.pools[name]; p != nil {
			return poolEntry(p), true
		}
	case model.EntityHost:
		if h := x.hosts(name); h != nil {
			return hostEntry(h), true
		}
	case model.EntityBootServer:
		if b := x.bootServers[name]; b != nil {
			return bootServerEntry(b), true
		}
	case model.EntityMode:
		if m := x.modes[name]; m != nil {
			return modeEntry(m), true
		}
	case model.EntityImage:
		if im := x.images[name]; im != nil {
			return imageEntry(im), true
		}
	case model.EntityImageVersion:
		img, ver := model.SplitImageVersionName(name)
		if im := x.images[img]; im != nil && ver != "" {
			if v := im.Version(ver); v != nil {
				return versionEntry(v), true
			}
		}
	case model.EntityException:
		if e := x.exceptions[name]; e != nil {
			return exceptionEntry(e), true
		}
	case model.EntityRole:
		if r := x.roles[name]; r != nil {
			return l.roleEntry(r), true
		}
	}
	return entry{}, false
}

// marshalPolicy and unmarshalPolicy are the LDAP encoding of a policy (compact JSON, one
// attribute value). Unknown fields are refused so a typo does not silently keep a default.
func marshalPolicy(p model.Policy) (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

func unmarshalPolicy(s string) (model.Policy, error) {
	var p model.Policy
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return model.Policy{}, fmt.Errorf("policy: %w", err)
	}
	if dec.More() {
		return model.Policy{}, fmt.Errorf("policy: trailing data after the JSON object")
	}
	return p, p.Validate()
}

// marshalJSON and unmarshalJSON are the LDAP encoding of a structured field without
// encoding rules of its own (compact JSON, one attribute value), strict like the
// policy's: unknown fields and trailing data are refused.
func marshalJSON[T any](v T) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func unmarshalJSON[T any](s string) (T, error) {
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, err
	}
	if dec.More() {
		return v, fmt.Errorf("trailing data after the JSON object")
	}
	return v, nil
}

// marshalGuest and unmarshalGuest are the LDAP encoding of a mode's guest (compact JSON,
// one attribute value), strict like the policy's.
func marshalGuest(g model.Guest) (string, error) {
	b, err := json.Marshal(g)
	return string(b), err
}

func unmarshalGuest(s string) (model.Guest, error) {
	var g model.Guest
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return model.Guest{}, fmt.Errorf("guest: %w", err)
	}
	if dec.More() {
		return model.Guest{}, fmt.Errorf("guest: trailing data after the JSON object")
	}
	return g, g.Validate()
}
