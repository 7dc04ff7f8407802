package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// InitOptions are the first settings of a new site.
type InitOptions struct {
	SiteName      string
	Timezone      string // IANA name
	AdminUID      string
	AdminPassword string
}

// Names of what Init creates.
const (
	InitMode      = "local-disk"  // the one mode of a new site, and its default
	InitAdminRole = "site-admins" // the site-admin grant holding the first admin
)

// ErrSchemaNotLoaded says the server lacks the Overtime schema.
var ErrSchemaNotLoaded = errors.New("schema not loaded: add sitemgmt/ldap/overtime.schema to slapd")

// Init bootstraps a directory: it checks that the Overtime schema is loaded, creates the
// base entry if missing, ou=overtime with its containers, the mode "local-disk" (the
// site's default), the site settings, the admin user and the "site-admins" grant holding
// them. It is idempotent: existing entries are left alone (an existing admin keeps their
// password; a site already initialised keeps its name, time zone and default mode), so
// running it again only recreates what is missing.
func (s *Store) Init(ctx context.Context, o InitOptions) error {
	if err := model.ValidName("site", o.SiteName); err != nil {
		return err
	}
	if _, err := time.LoadLocation(o.Timezone); err != nil || o.Timezone == "" || o.Timezone == "Local" {
		return model.Invalid("invalid timezone %q: use an IANA name like Europe/Berlin", o.Timezone)
	}
	if err := model.ValidUID(o.AdminUID); err != nil {
		return err
	}
	if o.AdminPassword == "" {
		return model.Invalid("admin password is empty")
	}
	if err := s.checkSchema(ctx); err != nil {
		return err
	}

	// Base entry (a rootdn can create it; a service account needs it to exist).
	if exists, err := s.exists(ctx, s.dn.base); err != nil {
		return err
	} else if !exists {
		base, err := baseEntry(s.dn.base)
		if err != nil {
			return err
		}
		if err := s.ensure(ctx, base); err != nil {
			return err
		}
	}

	// ou=overtime starts as a plain organizationalUnit and becomes the site (otSite) only
	// after its default mode exists: a site entry never references a missing mode, and
	// Load reports "not initialised" until Init has got that far.
	if err := s.ensure(ctx, ou(s.dn.site)); err != nil {
		return err
	}
	for _, dn := range s.dn.containers() {
		if err := s.ensure(ctx, ou(dn)); err != nil {
			return err
		}
	}
	isSite, err := s.hasClass(ctx, s.dn.site, ocSite)
	if err != nil {
		return err
	}
	if !isSite {
		mode := ldap.NewAddRequest(s.dn.mode(InitMode), nil)
		mode.Attribute(aObjectClass, []string{ocMode})
		mode.Attribute(aCN, []string{InitMode})
		mode.Attribute(aModeKind, []string{string(model.KindLocalDisk)})
		mode.Attribute(aDescription, []string{"boot the local disk"})
		if err := s.ensure(ctx, mode); err != nil {
			return err
		}
		mod := ldap.NewModifyRequest(s.dn.site, nil)
		mod.Add(aObjectClass, []string{ocSite})
		mod.Replace(aSiteName, []string{o.SiteName})
		mod.Replace(aTimezone, []string{o.Timezone})
		mod.Replace(aDefaultMode, []string{InitMode})
		if err := s.write(ctx, op{mod: mod}); err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultAttributeOrValueExists) {
			return fmt.Errorf("ldapstore: init site entry: %w", err)
		}
	}

	// The first admin and their grant: recreated if missing (a way back in after the
	// last admin was removed), never changed if present.
	if _, err := s.findUser(ctx, o.AdminUID); errors.Is(err, errNoUser) {
		if err := s.PutUser(ctx, o.AdminUID, o.AdminUID, o.AdminPassword); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	role := ldap.NewAddRequest(s.dn.role(InitAdminRole), nil)
	role.Attribute(aObjectClass, []string{"groupOfNames", ocRole})
	role.Attribute(aCN, []string{InitAdminRole})
	role.Attribute(aRoleKind, []string{string(model.RoleSiteAdmin)})
	role.Attribute(aMember, []string{s.dn.user(o.AdminUID)})
	return s.ensure(ctx, role)
}

// subschemaHasOtHost matches the definition of otHost in a subschema objectClasses value.
var subschemaHasOtHost = regexp.MustCompile(`(?i)\bNAME\s+(\(\s*)?'otHost'`)

// checkSchema reads the subschema subentry named by the root DSE and looks for otHost.
func (s *Store) checkSchema(ctx context.Context) error {
	var classes []string
	err := s.do(ctx, func(c *ldap.Conn) error {
		sub := "cn=Subschema"
		res, err := c.Search(ldap.NewSearchRequest("", ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
			"(objectClass=*)", []string{"subschemaSubentry"}, nil))
		if err == nil && len(res.Entries) == 1 {
			if v := res.Entries[0].GetEqualFoldAttributeValue("subschemaSubentry"); v != "" {
				sub = v
			}
		}
		res, err = c.Search(ldap.NewSearchRequest(sub, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
			"(objectClass=subschema)", []string{"objectClasses"}, nil))
		if err != nil {
			return err
		}
		if len(res.Entries) == 1 {
			classes = res.Entries[0].GetEqualFoldAttributeValues("objectClasses")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ldapstore: read schema: %w", err)
	}
	for _, c := range classes {
		if subschemaHasOtHost.MatchString(c) {
			return nil
		}
	}
	return ErrSchemaNotLoaded
}

// ensure adds an entry unless it exists.
func (s *Store) ensure(ctx context.Context, req *ldap.AddRequest) error {
	err := s.write(ctx, op{add: req})
	if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		return fmt.Errorf("ldapstore: init %s: %w", req.DN, err)
	}
	return nil
}

func (s *Store) exists(ctx context.Context, dn string) (bool, error) {
	found := false
	err := s.do(ctx, func(c *ldap.Conn) error {
		res, err := c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
			"(objectClass=*)", []string{"1.1"}, nil))
		if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			return nil
		}
		found = err == nil && len(res.Entries) == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ldapstore: read %s: %w", dn, err)
	}
	return found, nil
}

func (s *Store) hasClass(ctx context.Context, dn, class string) (bool, error) {
	has := false
	err := s.do(ctx, func(c *ldap.Conn) error {
		res, err := c.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 0, 0, false,
			"(objectClass="+ldap.EscapeFilter(class)+")", []string{"1.1"}, nil))
		if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			return nil
		}
		has = err == nil && len(res.Entries) == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ldapstore: read %s: %w", dn, err)
	}
	return has, nil
}

// ou builds an organizationalUnit entry for a DN whose first RDN is ou=NAME.
func ou(dn string) *ldap.AddRequest {
	name := strings.TrimPrefix(strings.SplitN(dn, ",", 2)[0], "ou=")
	req := ldap.NewAddRequest(dn, nil)
	req.Attribute(aObjectClass, []string{"organizationalUnit"})
	req.Attribute("ou", []string{name})
	return req
}

// baseEntry builds the suffix entry from the type of its first RDN.
func baseEntry(baseDN string) (*ldap.AddRequest, error) {
	dn, err := ldap.ParseDN(baseDN)
	if err != nil || len(dn.RDNs) == 0 || len(dn.RDNs[0].Attributes) != 1 {
		return nil, fmt.Errorf("ldapstore: base entry %s is missing and cannot be created", baseDN)
	}
	rdn := dn.RDNs[0].Attributes[0]
	class := map[string]string{"dc": "domain", "o": "organization", "ou": "organizationalUnit"}[strings.ToLower(rdn.Type)]
	if class == "" {
		return nil, fmt.Errorf("ldapstore: base entry %s is missing; create it first (only dc=, o= and ou= bases are created)", baseDN)
	}
	req := ldap.NewAddRequest(baseDN, nil)
	req.Attribute(aObjectClass, []string{class})
	req.Attribute(rdn.Type, []string{rdn.Value})
	return req, nil
}
