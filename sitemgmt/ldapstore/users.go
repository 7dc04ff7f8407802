package ldapstore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Authenticate checks a user's password against the directory: it finds the user's entry
// under ou=people with the service connection, then binds as that entry on a separate,
// short-lived connection (rebinding the service connection would drop the service's
// rights for every request sharing it). A wrong password, an unknown or malformed uid and
// an empty password all give ErrInvalidCredentials and nothing more; a directory that
// could not be asked (down, busy, unreachable) gives an *UnavailableError, and an error of
// another kind also means the directory gave no answer.
func (s *Store) Authenticate(ctx context.Context, uid, password string) error {
	// An empty password would make the bind an "unauthenticated bind" (RFC 4513 5.1.2),
	// which servers may accept as anonymous: never send one.
	if password == "" {
		return ErrInvalidCredentials
	}
	// Only well-formed uids reach the filter at all; escaping it anyway means no input
	// can change the filter's structure (uid=* or "a)(uid=*" match nothing).
	if model.ValidUID(uid) != nil {
		return ErrInvalidCredentials
	}
	dn, err := s.findUser(ctx, uid)
	if errors.Is(err, errAmbiguousUser) {
		return ErrInvalidCredentials
	}
	if errors.Is(err, errNoUser) {
		// Still "invalid credentials" to every caller; the service also sees NotFound
		// and may ask the external directory (service.Accounts.Login).
		return ErrUnknownLogin
	}
	if err != nil {
		return unavailable(err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.userBind(dn, password)
}

// userBind binds as the user on a connection of its own: first to the server the
// service connection uses (where the user was just found), then to the others when a
// server cannot be reached. Only an answer counts: a wrong password on one server is
// ErrInvalidCredentials, and "unavailable" means every server failed.
func (s *Store) userBind(dn, password string) error {
	s.mu.Lock()
	prefer := -1
	if s.conn != nil {
		prefer = s.connIdx
	}
	order := s.order(prefer)
	s.mu.Unlock()
	var errs []error
	for _, i := range order {
		c, err := s.dial(s.urls[i])
		if err == nil {
			err = c.Bind(dn, password)
			c.Close()
			if err == nil {
				return nil
			}
			var answer *ldap.Error
			if !serverFailed(err) && errors.As(err, &answer) {
				// The server said no: invalid credentials, no password set,
				// inappropriate auth... Only an LDAP result counts as an answer: a
				// broken connection once came back as "invalid credentials".
				return ErrInvalidCredentials
			}
			err = fmt.Errorf("ldapstore: bind on %s: %w", s.urls[i], err)
		}
		s.mu.Lock()
		s.markDown(i)
		s.mu.Unlock()
		errs = append(errs, err)
	}
	return unavailable(errors.Join(errs...))
}

var (
	errNoUser        = errors.New("no such user")
	errAmbiguousUser = fmt.Errorf("%w: the uid is not unique", errNoUser)
)

// ErrUnknownLogin is what Authenticate says when ou=people has no user of that uid: an
// ErrInvalidCredentials (errors.Is, same message) that also has NotFound() true, so that
// the service can fall through to the external directory (docs/identity.md) for uids that
// are not Overtime's own, and only for those.
var ErrUnknownLogin error = unknownLoginError{}

type unknownLoginError struct{}

func (unknownLoginError) Error() string            { return ErrInvalidCredentials.Error() }
func (unknownLoginError) InvalidCredentials() bool { return true }
func (unknownLoginError) NotFound() bool           { return true }
func (unknownLoginError) Is(target error) bool     { return target == ErrInvalidCredentials }

// unavailable wraps err in an *UnavailableError when it means the directory could not be
// asked.
func unavailable(err error) error {
	if isUnavailable(err) {
		return &UnavailableError{Err: fmt.Errorf("ldapstore: authenticate: %w", err)}
	}
	return err
}

// findUser returns the DN of the one inetOrgPerson with this uid under ou=people.
func (s *Store) findUser(ctx context.Context, uid string) (string, error) {
	filter := fmt.Sprintf("(&(objectClass=inetOrgPerson)(uid=%s))", ldap.EscapeFilter(uid))
	var res *ldap.SearchResult
	err := s.do(ctx, func(c *ldap.Conn) error {
		var err error
		// Size limit 2: enough to see that the uid is ambiguous, which it must not be.
		res, err = c.Search(ldap.NewSearchRequest(s.dn.people, ldap.ScopeSingleLevel, ldap.NeverDerefAliases,
			2, 0, false, filter, []string{"1.1"}, nil))
		return err
	})
	switch {
	case ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject):
		return "", errNoUser // no ou=people: not initialised, but say no more than that
	case ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded):
		return "", errAmbiguousUser
	case err != nil:
		return "", fmt.Errorf("ldapstore: find user: %w", err)
	case len(res.Entries) > 1:
		return "", errAmbiguousUser
	case len(res.Entries) == 0:
		return "", errNoUser
	}
	return res.Entries[0].DN, nil
}

// PutUser creates the user uid=UID,ou=people (an inetOrgPerson) or updates its display
// name, and sets its password with the Password Modify extended operation (RFC 3062), so
// that slapd hashes it with its password-hash ({SSHA} by default) and the clear text is
// never stored. A new entry briefly has no password: nobody can bind to it then.
func (s *Store) PutUser(ctx context.Context, uid, displayName, password string) error {
	if err := model.ValidUID(uid); err != nil {
		return err
	}
	if password == "" {
		return model.Invalid("user %s: empty password", uid)
	}
	if displayName == "" {
		displayName = uid
	}
	if err := checkValues(model.Change{Kind: "user", Name: uid}, attr{field: "display name", name: "displayName", vals: []string{displayName}}); err != nil {
		return err
	}
	for _, r := range displayName {
		if r < 0x20 || r == 0x7f {
			return model.Invalid("user %s: display name contains control characters", uid)
		}
	}
	dn := s.dn.user(uid)
	add := ldap.NewAddRequest(dn, nil)
	add.Attribute(aObjectClass, []string{"inetOrgPerson"})
	add.Attribute(aUID, []string{uid})
	add.Attribute(aCN, []string{displayName})
	add.Attribute("sn", []string{uid}) // required by person; the model has no surname
	add.Attribute("displayName", []string{displayName})
	err := s.write(ctx, op{add: add})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultEntryAlreadyExists) {
		mod := ldap.NewModifyRequest(dn, nil)
		mod.Replace(aCN, []string{displayName})
		mod.Replace("displayName", []string{displayName})
		err = s.write(ctx, op{mod: mod})
	}
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return ErrNotInitialised
	}
	if err != nil {
		return fmt.Errorf("ldapstore: user %s: %w", uid, err)
	}
	err = s.do(ctx, func(c *ldap.Conn) error {
		_, err := c.PasswordModify(ldap.NewPasswordModifyRequest(dn, "", password))
		return err
	})
	if err != nil {
		return fmt.Errorf("ldapstore: set password of %s: %w", uid, err)
	}
	return nil
}

// ErrUnknownUser is returned when ou=people has no user of that uid (a NotFound error,
// like ErrUnknownHost).
var ErrUnknownUser error = notFoundError("no such user in the directory")

// Users lists the inetOrgPersons under ou=people, sorted by uid.
func (s *Store) Users(ctx context.Context) ([]model.User, error) {
	var res *ldap.SearchResult
	err := s.do(ctx, func(c *ldap.Conn) error {
		var err error
		res, err = c.SearchWithPaging(ldap.NewSearchRequest(s.dn.people, ldap.ScopeSingleLevel, ldap.NeverDerefAliases,
			0, 0, false, "(objectClass=inetOrgPerson)", []string{aUID, "displayName", aCN}, nil), 500)
		return err
	})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return nil, ErrNotInitialised
	}
	if err != nil {
		return nil, fmt.Errorf("ldapstore: list users: %w", err)
	}
	users := make([]model.User, 0, len(res.Entries))
	for _, e := range res.Entries {
		u := model.User{UID: e.GetAttributeValue(aUID), Name: e.GetAttributeValue("displayName")}
		if u.Name == "" {
			u.Name = e.GetAttributeValue(aCN)
		}
		if u.UID != "" {
			users = append(users, u)
		}
	}
	sort.Slice(users, func(i, j int) bool { return users[i].UID < users[j].UID })
	return users, nil
}

// DeleteUser removes the user's entry. Role grants naming the user keep the member DN
// (it no longer binds); removing those is a site change the caller makes separately.
func (s *Store) DeleteUser(ctx context.Context, uid string) error {
	if err := model.ValidUID(uid); err != nil {
		return err
	}
	if _, err := s.findUser(ctx, uid); errors.Is(err, errNoUser) {
		return ErrUnknownUser
	} else if err != nil {
		return err
	}
	err := s.write(ctx, op{del: ldap.NewDelRequest(s.dn.user(uid), nil)})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return ErrUnknownUser
	}
	if err != nil {
		return fmt.Errorf("ldapstore: delete user %s: %w", uid, err)
	}
	return nil
}

// SetPassword sets an existing user's password (Password Modify, hashed by slapd). It
// does not check the old password: the caller authorises the change.
func (s *Store) SetPassword(ctx context.Context, uid, password string) error {
	if err := model.ValidUID(uid); err != nil {
		return err
	}
	if password == "" {
		return model.Invalid("user %s: empty password", uid)
	}
	dn, err := s.findUser(ctx, uid)
	if errors.Is(err, errNoUser) {
		return ErrUnknownUser
	}
	if err != nil {
		return err
	}
	err = s.do(ctx, func(c *ldap.Conn) error {
		_, err := c.PasswordModify(ldap.NewPasswordModifyRequest(dn, "", password))
		return err
	})
	if err != nil {
		return fmt.Errorf("ldapstore: set password of %s: %w", uid, err)
	}
	return nil
}
