package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// op is one LDAP write.
type op struct {
	add *ldap.AddRequest
	mod *ldap.ModifyRequest
	del *ldap.DelRequest
}

// Apply writes the difference between cur (what the directory holds, as last loaded)
// and next. next must validate (model.Site.Validate). Every write is built and checked
// before the first one is sent, so that invalid input (an immutable image version
// changed, a value the schema would reject, addresses that cannot move without
// colliding: model.CheckAddressOrder) fails without touching the directory. The writes
// then go out one by one in model.Diff's safe order, each a single LDAP add, delete or
// modify that replaces only the changed attributes. LDAP has no multi-entry
// transactions, but after any prefix of them every reference points to an existing
// entry, so a failure half way leaves a consistent (if partly updated) directory.
//
// It returns the changes written: all of them, or on error those before the one that
// failed. With a nil cur, Apply loads the directory first.
//
// cur must be what the directory holds: a stale cur makes a write fail (an add of an
// existing entry, a modify of a missing one), which stops the Apply like any failure.
func (s *Store) Apply(ctx context.Context, cur, next *model.Site) ([]model.Change, error) {
	if next == nil {
		return nil, model.Invalid("no site to apply")
	}
	if err := next.Validate(); err != nil {
		return nil, err
	}
	return s.ApplyValidated(ctx, cur, next)
}

// ApplyValidated is Apply for a next that the caller has just validated (the service's
// write path): at 100,000 hosts a second validation was a fifth of a write's time.
func (s *Store) ApplyValidated(ctx context.Context, cur, next *model.Site) ([]model.Change, error) {
	if next == nil {
		return nil, model.Invalid("no site to apply")
	}
	if cur == nil {
		var err error
		if cur, err = s.Load(ctx); err != nil {
			return nil, err
		}
	}
	changes := model.Diff(cur, next)
	if err := model.CheckAddressOrder(cur, next, changes); err != nil {
		return nil, err
	}
	ci, ni := newIndex(cur), newIndex(next)
	ops := make([]op, len(changes))
	for i, c := range changes {
		o, err := s.plan(ci, ni, c)
		if err != nil {
			return nil, err
		}
		ops[i] = o
	}
	return s.run(ctx, changes, ops)
}

// run sends the writes in order and stops at the first failure. While it runs, the
// store does not move its connection back to an earlier server (probe): with several
// providers, a write sent to one that has not yet received the previous write of the
// sequence by replication could fail (a modify of an entry added a moment ago
// elsewhere) or trip the unique overlay (a host renamed keeping its MAC: the delete of
// the old entry has not arrived yet). A failover (the server failed) still moves the
// rest of the writes to the next server.
func (s *Store) run(ctx context.Context, changes []model.Change, ops []op) ([]model.Change, error) {
	s.switching.RLock()
	defer s.switching.RUnlock()
	done := make([]model.Change, 0, len(changes))
	for i, o := range ops {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		if s.beforeWrite != nil {
			if err := s.beforeWrite(i, changes[i]); err != nil {
				return done, fmt.Errorf("ldapstore: %v: %w", changes[i], err)
			}
		}
		if err := s.write(ctx, o); err != nil {
			return done, fmt.Errorf("ldapstore: %v: %w%s", changes[i], err, olderSchema(err))
		}
		done = append(done, changes[i])
	}
	return done, nil
}

// olderSchema explains a write the directory refused because its Overtime schema predates
// an attribute this version stores (a field added after the directory was set up): the
// attribute type is unknown, or its object class does not allow it yet.
func olderSchema(err error) string {
	var le *ldap.Error
	if !errors.As(err, &le) {
		return ""
	}
	msg := le.Err.Error()
	if le.ResultCode == ldap.LDAPResultUndefinedAttributeType ||
		le.ResultCode == ldap.LDAPResultObjectClassViolation && strings.Contains(msg, "not allowed") {
		return " (the directory's Overtime schema is older than this site manager: load the new " +
			"attribute types and object classes, sitemgmt/ldap/README.md \"Schema changes\")"
	}
	return ""
}

// write sends one write. When the server failed under it, do repeats it on a new
// connection, to the same server or (failover) the next one; the first attempt may have
// reached a server, and with multi-provider replication its effect may already have
// arrived at the next one, so on the repeat "already exists" after an add and "no such
// object" after a delete mean it did (a modify replaces values and can simply be
// repeated).
func (s *Store) write(ctx context.Context, o op) error {
	repeat := false
	return s.do(ctx, func(c *ldap.Conn) error {
		var err error
		switch {
		case o.add != nil:
			err = c.Add(o.add)
			if repeat && ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
				err = nil
			}
		case o.del != nil:
			err = c.Del(o.del)
			if repeat && ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
				err = nil
			}
		case o.mod != nil:
			err = c.Modify(o.mod)
		}
		repeat = true
		return err
	})
}

// plan builds the LDAP request for one change and checks its values.
func (s *Store) plan(cur, next *index, c model.Change) (op, error) {
	dn := s.dn.entityDN(c.Kind, c.Name)
	if dn == "" {
		return op{}, fmt.Errorf("ldapstore: unknown entity kind %q", c.Kind)
	}
	switch c.Op {
	case model.OpDelete:
		return op{del: ldap.NewDelRequest(dn, nil)}, nil

	case model.OpAdd:
		e, ok := s.dn.entityEntry(next, c.Kind, c.Name)
		if !ok {
			return op{}, fmt.Errorf("ldapstore: %v: not in the new site", c)
		}
		if e.err != nil {
			return op{}, e.err
		}
		req := ldap.NewAddRequest(dn, nil)
		req.Attribute(aObjectClass, e.classes)
		for _, a := range e.attrs {
			if len(a.vals) == 0 {
				continue
			}
			if err := checkValues(c, a); err != nil {
				return op{}, err
			}
			req.Attribute(a.name, a.vals)
		}
		return op{add: req}, nil

	case model.OpModify:
		if c.Kind == model.EntityImageVersion {
			img, ver := model.SplitImageVersionName(c.Name)
			return op{}, model.Invalid("image %s version %s is immutable: publish a new version instead of changing %s", img, ver, strings.Join(c.Fields, ", "))
		}
		e, ok := s.dn.entityEntry(next, c.Kind, c.Name)
		if !ok {
			return op{}, fmt.Errorf("ldapstore: %v: not in the new site", c)
		}
		if e.err != nil {
			return op{}, e.err
		}
		req := ldap.NewModifyRequest(dn, nil)
		for _, f := range c.Fields {
			found := false
			for _, a := range e.attrs {
				if a.field != f {
					continue
				}
				found = true
				if err := checkValues(c, a); err != nil {
					return op{}, err
				}
				if c.Kind == model.EntityHost && f == "ip" {
					// ipHost requires ipHostNumber: add or drop the class together with
					// the address, in the same (atomic) modify.
					old := cur.hosts(c.Name)
					switch {
					case old != nil && old.IP == "" && len(a.vals) > 0:
						req.Add(aObjectClass, []string{ocIPHost})
						req.Replace(a.name, a.vals)
					case old != nil && old.IP != "" && len(a.vals) == 0:
						req.Replace(a.name, nil)
						req.Delete(aObjectClass, []string{ocIPHost})
					default:
						req.Replace(a.name, a.vals)
					}
					continue
				}
				// Replace with no values removes the attribute (RFC 4511 4.6).
				req.Replace(a.name, a.vals)
			}
			if !found {
				// The model grew a field this store does not know: refuse rather than
				// silently drop it.
				return op{}, fmt.Errorf("ldapstore: %v: no LDAP attribute for field %q", c, f)
			}
		}
		return op{mod: req}, nil
	}
	return op{}, fmt.Errorf("ldapstore: unknown operation %q", c.Op)
}

// checkValues rejects, before anything is written, values the directory would refuse:
// empty or duplicate values of a multi-valued attribute, non-UTF-8 text, non-ASCII in
// IA5 attributes. model.Validate does not look at these LDAP-specific limits.
func checkValues(c model.Change, a attr) error {
	what := c.Kind + " " + c.Name
	for i, v := range a.vals {
		if v == "" && a.name != aMember {
			return model.Invalid("%s: empty %s value", what, a.field)
		}
		if !utf8.ValidString(v) {
			return model.Invalid("%s: %s %q is not valid UTF-8", what, a.field, v)
		}
		if ia5[a.name] {
			for j := 0; j < len(v); j++ {
				if v[j] >= 0x80 {
					return model.Invalid("%s: %s %q must be ASCII", what, a.field, v)
				}
			}
		}
		// Weekly rules match case-exactly, every other multi-valued attribute here
		// case-insensitively: slapd rejects values equal under the attribute's rule.
		eq := strings.EqualFold
		if a.name == aWeekly || a.name == aBookedRule {
			eq = func(x, y string) bool { return x == y }
		}
		if slices.ContainsFunc(a.vals[:i], func(w string) bool { return eq(v, w) }) {
			return model.Invalid("%s: duplicate %s %q", what, a.field, v)
		}
	}
	return nil
}
