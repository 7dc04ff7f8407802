package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// PageSize is the page size of Load's paged search (RFC 2696). 1000 entries per round
// trip keeps a 10,000-host site at a dozen round trips without large server buffers.
const PageSize = 1000

// loadFilter selects Overtime's entries and nothing else under ou=overtime (users and
// the containers are skipped by the server, not by us).
var loadFilter = "(|" + strings.Join([]string{
	"(objectClass=" + ocSite + ")", "(objectClass=" + ocPool + ")", "(objectClass=" + ocHost + ")",
	"(objectClass=" + ocBootServer + ")", "(objectClass=" + ocMode + ")", "(objectClass=" + ocImage + ")",
	"(objectClass=" + ocImageVersion + ")", "(objectClass=" + ocException + ")", "(objectClass=" + ocRole + ")",
}, "") + ")"

// loadAttrs asks for exactly the attributes the model uses: no userPassword (ACLs hide it
// anyway), no operational attributes.
var loadAttrs = []string{
	aObjectClass, aCN, aDescription, aRoom, aMAC, aIP, aMember,
	aSiteName, aTimezone, aDefaultMode, aUnknownMode, aPoolName, aBootServer, aWeekly, aBookedRule, aOwner,
	aHTTPURL, aNFSServer, aNFSRoot, aDHCP, aInterface, aSubnet, aRangeFrom, aRangeTo, aRouter, aDNSServer, aDNSDomain, aAPIURL,
	aModeKind, aImageName, aPinned, aVMImage, aKernel, aInitrd, aKernelArgs,
	aImageKind, aVersion, aSHA256, aSize, aPath, aCreated,
	aExceptionKind, aStart, aEnd, aModeName, aTargetPool, aTargetHost, aExamAllow, aRoleKind,
	aPolicy, aGuest, aDesktopLogin, aPrinting, aHomes,
}

// Load reads the whole site with one paged subtree search of ou=overtime and returns it
// sorted (model.Site.Sort). It does not validate: the caller decides what to do with a
// directory edited into an invalid state behind its back.
func (s *Store) Load(ctx context.Context) (*model.Site, error) {
	var (
		site      *model.Site
		haveSite  bool
		versions  []version
		decodeErr error
	)
	err := s.do(ctx, func(c *ldap.Conn) error {
		// Each page is decoded as it arrives, so that a 100,000-host site is never held
		// as LDAP entries all at once (issue 18: the replica's peak memory at start).
		site, haveSite, versions, decodeErr = &model.Site{}, false, nil, nil
		return s.search(ctx, c, func(page []*ldap.Entry) {
			for _, e := range page {
				if decodeErr != nil {
					return
				}
				isSite, err := s.decodeEntry(site, &versions, e)
				haveSite = haveSite || isSite
				decodeErr = err
			}
		})
	})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return nil, ErrNotInitialised
	}
	if err != nil {
		return nil, fmt.Errorf("ldapstore: load: %w", err)
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	return finish(site, haveSite, versions)
}

// search runs the paged search, checking ctx between pages, and hands each page to fn.
func (s *Store) search(ctx context.Context, c *ldap.Conn, fn func(page []*ldap.Entry)) error {
	paging := ldap.NewControlPaging(PageSize)
	req := ldap.NewSearchRequest(s.dn.site, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, 0, false,
		loadFilter, loadAttrs, []ldap.Control{paging})
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := c.Search(req)
		if err != nil {
			return err
		}
		fn(res.Entries)
		ctl, _ := ldap.FindControl(res.Controls, ldap.ControlTypePaging).(*ldap.ControlPaging)
		if ctl == nil || len(ctl.Cookie) == 0 {
			return nil
		}
		paging.SetCookie(ctl.Cookie)
	}
}

// attrs is an entry's attributes keyed by lower-case name: servers return attribute
// names in their own spelling.
type attrs map[string][]string

func attrsOf(e *ldap.Entry) attrs {
	m := make(attrs, len(e.Attributes))
	for _, a := range e.Attributes {
		m[strings.ToLower(a.Name)] = a.Values
	}
	return m
}

func (a attrs) all(name string) []string { return a[strings.ToLower(name)] }

func (a attrs) one(name string) string {
	if v := a[strings.ToLower(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (a attrs) is(class string) bool {
	for _, c := range a["objectclass"] {
		if strings.EqualFold(c, class) {
			return true
		}
	}
	return false
}

// decodeErr names the entry that could not be understood.
func decodeErr(dn string, format string, args ...any) error {
	return fmt.Errorf("ldapstore: entry %s: %s", dn, fmt.Sprintf(format, args...))
}

// version is an image version as decoded, with the image it belongs to (its parent entry).
type version struct {
	image string
	v     model.ImageVersion
}

// finish completes a site decoded entry by entry: image versions under their images, the
// lists sorted.
func finish(site *model.Site, haveSite bool, versions []version) (*model.Site, error) {
	if !haveSite {
		return nil, ErrNotInitialised
	}
	if len(versions) > 0 {
		images := byName(site.Images, func(im *model.Image) string { return im.Name })
		for _, v := range versions {
			im := images[v.image]
			if im == nil {
				return nil, errors.New("ldapstore: image version " + v.v.Version + " under unknown image " + v.image)
			}
			im.Versions = append(im.Versions, v.v)
		}
	}
	site.Sort()
	return site, nil
}

// decodeEntry decodes one entry of the site into site: the site settings (isSite) or
// one entity appended to its list; an image version is appended to versions instead (its
// image may come later). Entries of other classes are ignored.
func (s *Store) decodeEntry(site *model.Site, versions *[]version, e *ldap.Entry) (isSite bool, err error) {
	a := attrsOf(e)
	switch {
	case a.is(ocSite):
		site.Name = a.one(aSiteName)
		site.Timezone = a.one(aTimezone)
		site.DefaultMode = a.one(aDefaultMode)
		site.UnknownMode = a.one(aUnknownMode)
		if site.DesktopLogin, err = decodeDesktopLogin(e.DN, a); err != nil {
			return false, err
		}
		if site.Printing, err = decodePrinting(e.DN, a); err != nil {
			return false, err
		}
		if site.Homes, err = decodeHomes(e.DN, a); err != nil {
			return false, err
		}
		isSite = true
	case a.is(ocHost):
		h := model.Host{
			Name: a.one(aCN), MAC: a.one(aMAC), IP: a.one(aIP), Pool: a.one(aPoolName),
			BootServer: a.one(aBootServer),
		}
		h.Weekly, h.RuleOwners = decodeRules(a.all(aWeekly), a.all(aBookedRule))
		site.Hosts = append(site.Hosts, h)
	case a.is(ocPool):
		p := model.Pool{
			Name: a.one(aCN), Description: a.one(aDescription), Room: a.one(aRoom),
			BootServer: a.one(aBootServer),
		}
		p.Weekly, p.RuleOwners = decodeRules(a.all(aWeekly), a.all(aBookedRule))
		if v := a.one(aPolicy); v != "" {
			pol, err := unmarshalPolicy(v)
			if err != nil {
				return false, decodeErr(e.DN, "%s: %v", aPolicy, err)
			}
			p.Policy = &pol
		}
		if p.DesktopLogin, err = decodeDesktopLogin(e.DN, a); err != nil {
			return false, err
		}
		if p.Printing, err = decodePrinting(e.DN, a); err != nil {
			return false, err
		}
		if p.Homes, err = decodeHomes(e.DN, a); err != nil {
			return false, err
		}
		site.Pools = append(site.Pools, p)
	case a.is(ocBootServer):
		site.BootServers = append(site.BootServers, model.BootServer{
			Name: a.one(aCN), IP: a.one(aIP), HTTPURL: a.one(aHTTPURL), NFSServer: a.one(aNFSServer),
			NFSRoot: a.one(aNFSRoot), DHCP: model.DHCPMode(a.one(aDHCP)), Interface: a.one(aInterface),
			Subnet: a.one(aSubnet), RangeFrom: a.one(aRangeFrom), RangeTo: a.one(aRangeTo), Router: a.one(aRouter),
			DNSServers: a.all(aDNSServer), Domain: a.one(aDNSDomain), APIURL: a.one(aAPIURL),
		})
	case a.is(ocMode):
		m := model.Mode{
			Name: a.one(aCN), Kind: model.ModeKind(a.one(aModeKind)), Description: a.one(aDescription),
			Image: a.one(aImageName), ImageVersion: a.one(aPinned), VM: a.one(aVMImage),
			Kernel: a.one(aKernel), Initrd: a.one(aInitrd), KernelArgs: a.one(aKernelArgs),
		}
		if v := a.one(aGuest); v != "" {
			g, err := unmarshalGuest(v)
			if err != nil {
				return false, decodeErr(e.DN, "%s: %v", aGuest, err)
			}
			m.Guest = &g
		}
		site.Modes = append(site.Modes, m)
	case a.is(ocImage):
		site.Images = append(site.Images, model.Image{
			Name: a.one(aCN), Kind: model.ImageKind(a.one(aImageKind)), Description: a.one(aDescription),
			Pool: a.one(aPoolName), Current: a.one(aPinned),
		})
	case a.is(ocImageVersion):
		// The image is the parent entry: otVersion=V,cn=IMAGE,ou=images,...
		dn, err := ldap.ParseDN(e.DN)
		if err != nil || len(dn.RDNs) < 2 || len(dn.RDNs[1].Attributes) != 1 {
			return false, decodeErr(e.DN, "image version outside an image")
		}
		v := model.ImageVersion{Version: a.one(aVersion), SHA256: a.one(aSHA256), Path: a.one(aPath)}
		if sz := a.one(aSize); sz != "" {
			if v.Size, err = strconv.ParseInt(sz, 10, 64); err != nil {
				return false, decodeErr(e.DN, "size %q: %v", sz, err)
			}
		}
		if v.Created, err = parseGenTime(a.one(aCreated)); err != nil {
			return false, decodeErr(e.DN, "created %q: %v", a.one(aCreated), err)
		}
		*versions = append(*versions, version{dn.RDNs[1].Attributes[0].Value, v})
	case a.is(ocException):
		x := model.Exception{Name: a.one(aCN), Kind: model.ExceptionKind(a.one(aExceptionKind)),
			Description: a.one(aDescription), Mode: a.one(aModeName), Owner: a.one(aOwner)}
		var err error
		if x.Start, err = parseGenTime(a.one(aStart)); err != nil {
			return false, decodeErr(e.DN, "start %q: %v", a.one(aStart), err)
		}
		if x.End, err = parseGenTime(a.one(aEnd)); err != nil {
			return false, decodeErr(e.DN, "end %q: %v", a.one(aEnd), err)
		}
		for _, p := range a.all(aTargetPool) {
			x.Targets = append(x.Targets, model.Target{Pool: p})
		}
		for _, h := range a.all(aTargetHost) {
			x.Targets = append(x.Targets, model.Target{Host: h})
		}
		x.Allow = a.all(aExamAllow)
		site.Exceptions = append(site.Exceptions, x)
	case a.is(ocRole):
		r := model.RoleGrant{Name: a.one(aCN), Role: model.RoleKind(a.one(aRoleKind)), Pool: a.one(aPoolName), BootServer: a.one(aBootServer)}
		for _, m := range a.all(aMember) {
			if m == "" {
				continue // placeholder of a grant without members
			}
			uid, ok := s.dn.uidOf(m)
			if !ok {
				return false, decodeErr(e.DN, "member %q is not a user under %s", m, s.dn.people)
			}
			r.Members = append(r.Members, uid)
		}
		site.Roles = append(site.Roles, r)
	}
	return isSite, nil
}

// seatField is a structured seat field of the site or a pool (model.DesktopLogin,
// model.Printing, model.Homes): validated by field name.
type seatField interface {
	Validate(what string) error
}

// decodeSeatField decodes an entry's JSON attribute attr into a T (nil when absent),
// validated like a write as field: a hand edit with a typo is refused rather than half
// applied to the PCs.
func decodeSeatField[T any, PT interface {
	*T
	seatField
}](dn string, a attrs, attr, field string) (*T, error) {
	v := a.one(attr)
	if v == "" {
		return nil, nil
	}
	d, err := unmarshalJSON[T](v)
	if err == nil {
		err = PT(&d).Validate(field)
	}
	if err != nil {
		return nil, decodeErr(dn, "%s: %v", attr, err)
	}
	return &d, nil
}

// decodeDesktopLogin and decodePrinting decode an entry's otDesktopLogin and otPrinting.
func decodeDesktopLogin(dn string, a attrs) (*model.DesktopLogin, error) {
	return decodeSeatField[model.DesktopLogin](dn, a, aDesktopLogin, "desktopLogin")
}

func decodePrinting(dn string, a attrs) (*model.Printing, error) {
	return decodeSeatField[model.Printing](dn, a, aPrinting, "printing")
}

// decodeHomes decodes an entry's otHomes.
func decodeHomes(dn string, a attrs) (*model.Homes, error) {
	return decodeSeatField[model.Homes](dn, a, aHomes, "homes")
}
