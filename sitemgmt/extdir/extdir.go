// Package extdir is the external identity source: a directory the university already
// runs (OpenLDAP, Active Directory) whose users may log in to Overtime and whose groups
// map to Overtime roles. Overtime's own ou=people stays the first place a login is
// looked up (sitemgmt/service.Accounts.Login has the order and docs/identity.md the
// reasons); this package is asked only about uids Overtime does not have.
//
// A login is checked by search-then-bind (bind as the service account, find exactly one
// person under the people base whose login attribute is the login, bind as that person's
// DN with the password) or, without a service account, by binding as a DN made from a
// template. Groups come from the user entry's memberOf (AD, OpenLDAP's memberof overlay)
// or from a group search; a group whose DN the configuration maps gives its roles.
//
// What the login can do to the directory is kept small: it must pass Overtime's uid
// alphabet (names.UID), is escaped in every filter (ldap.EscapeFilter) and DN
// (ldap.EscapeDN), and an empty password is never sent (it would be an unauthenticated
// bind, RFC 4513 5.1.2, which servers may accept as anonymous). No entry, two entries, or
// an entry outside the people base are all "invalid credentials".
//
// Errors: ErrInvalidCredentials when the directory said no; *UnavailableError when it
// could not be asked (down, TLS refused, the service account refused, the people base
// missing), which the API answers with 503, not 401.
package extdir

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// ErrInvalidCredentials: the directory said no (wrong password, no such user, an
// ambiguous login). Its InvalidCredentials method lets the service tell it from an outage
// without importing this package.
var ErrInvalidCredentials error = invalidCredentials{}

type invalidCredentials struct{}

func (invalidCredentials) Error() string            { return "external directory: invalid credentials" }
func (invalidCredentials) InvalidCredentials() bool { return true }

// UnavailableError: the external directory could not be asked, or not safely (a
// certificate the CA does not vouch for, the service account refused).
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string   { return "external directory unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error   { return e.Err }
func (*UnavailableError) Unavailable() bool { return true }

func unavailable(format string, a ...any) error {
	return &UnavailableError{Err: fmt.Errorf(format, a...)}
}

// isUnavailable: err means no answer (as opposed to a refusal).
func isUnavailable(err error) bool {
	return ldap.IsErrorWithCode(err, ldap.ErrorNetwork) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultBusy) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultUnavailable) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultServerDown) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultTimeout) ||
		ldap.IsErrorWithCode(err, ldap.LDAPResultConnectError) ||
		errors.Is(err, context.DeadlineExceeded)
}

// Directory is a configured external directory. It keeps no connection: each login
// dials (logins are cached by the API for a minute), so no state is shared between
// users and a broken connection never outlives one request.
type Directory struct {
	s *settings
}

// New checks cfg, reads its CA and password files and returns the directory. It does
// not contact the server (Check does).
func New(cfg Config) (*Directory, error) {
	s, err := cfg.check()
	if err != nil {
		return nil, fmt.Errorf("identity config: %w", err)
	}
	return &Directory{s: s}, nil
}

// Plaintext reports whether passwords cross the network unencrypted (tls mode plain),
// for a warning at start.
func (d *Directory) Plaintext() bool { return d.s.tlsMode == "plain" }

// URLs are the configured servers, for messages.
func (d *Directory) URLs() []string {
	var out []string
	for _, u := range d.s.urls {
		out = append(out, u.String())
	}
	return out
}

// connect dials the first server that answers, with TLS as configured. Only failures to
// reach a server move on to the next one; a TLS refusal (the certificate) is not tried
// elsewhere in plain, there is no such fallback.
func (d *Directory) connect(ctx context.Context) (*ldap.Conn, error) {
	var errs []error
	for _, u := range d.s.urls {
		if err := ctx.Err(); err != nil {
			return nil, unavailable("%w", err)
		}
		c, err := d.dial(u.String(), u.Hostname(), u.Scheme)
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
	}
	return nil, &UnavailableError{Err: errors.Join(errs...)}
}

func (d *Directory) dial(raw, host, scheme string) (*ldap.Conn, error) {
	opts := []ldap.DialOpt{ldap.DialWithDialer(&net.Dialer{Timeout: d.s.timeout})}
	if scheme == "ldaps" {
		opts = append(opts, ldap.DialWithTLSConfig(d.s.tlsConfig(host)))
	}
	c, err := ldap.DialURL(raw, opts...)
	if err != nil {
		return nil, err
	}
	c.SetTimeout(d.s.timeout)
	if d.s.tlsMode == "starttls" {
		if err := c.StartTLS(d.s.tlsConfig(host)); err != nil {
			c.Close()
			return nil, fmt.Errorf("StartTLS: %w", err)
		}
	}
	return c, nil
}

// bindService binds c as the service account. A refusal is a configuration problem, not
// the user's: it is reported as unavailable so that users get 503, not "wrong password".
func (d *Directory) bindService(c *ldap.Conn) error {
	if err := c.Bind(d.s.bindDN, d.s.bindPW); err != nil {
		return unavailable("bind as service account %s: %w", d.s.bindDN, err)
	}
	return nil
}

// Check contacts the directory as a login would (connect, TLS, service bind), so that
// the server can report it at start instead of at the first login.
func (d *Directory) Check(ctx context.Context) error {
	c, err := d.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if d.s.method == "search" {
		return d.bindService(c)
	}
	return nil
}

var (
	errNoUser    = errors.New("no such user")
	errAmbiguous = errors.New("login matches more than one entry")
)

// userFilter is the search filter for login: the configured people filter and the login
// attribute, the login escaped so that no byte of it is filter syntax.
func (d *Directory) userFilter(login string) string {
	return fmt.Sprintf("(&%s(%s=%s))", d.s.userFilter, d.s.loginAttr, ldap.EscapeFilter(login+d.s.suffix))
}

// findUser finds the one person whose login attribute is login, under the people base.
func (d *Directory) findUser(c *ldap.Conn, base string, scope int, login string) (*ldap.Entry, error) {
	attrs := []string{d.s.loginAttr}
	if d.s.groupSrc == "memberOf" {
		attrs = append(attrs, d.s.groupAttr)
	}
	// Size limit 2: enough to see that the login is ambiguous, which it must not be.
	res, err := c.Search(ldap.NewSearchRequest(base, scope, ldap.NeverDerefAliases,
		2, int(d.s.timeout.Seconds()), false, d.userFilter(login), attrs, nil))
	switch {
	case ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded):
		return nil, errAmbiguous
	case ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) && base == d.s.baseStr:
		// The people base itself is missing: every login would fail; that is a
		// misconfiguration to report, not a wrong password.
		return nil, unavailable("people base %s does not exist", base)
	case ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject):
		return nil, errNoUser // template mode: no entry at the templated DN
	case err != nil && isUnavailable(err):
		return nil, unavailable("search %s: %w", base, err)
	case err != nil:
		return nil, unavailable("search %s for %s=%s: %w", base, d.s.loginAttr, login, err)
	case len(res.Entries) > 1:
		return nil, errAmbiguous
	case len(res.Entries) == 0:
		return nil, errNoUser
	}
	e := res.Entries[0]
	// Defence in depth against aliases, referrals or a server that matched loosely: the
	// entry must lie under the people base and carry the login itself.
	dn, err := ldap.ParseDN(e.DN)
	if err != nil || !d.s.base.AncestorOfFold(dn) {
		return nil, fmt.Errorf("%w: %s is outside the people base %s", errNoUser, e.DN, d.s.baseStr)
	}
	found := false
	for _, v := range e.GetEqualFoldAttributeValues(d.s.loginAttr) {
		found = found || strings.EqualFold(v, login+d.s.suffix)
	}
	if !found {
		return nil, fmt.Errorf("%w: %s does not carry %s=%s", errNoUser, e.DN, d.s.loginAttr, login+d.s.suffix)
	}
	return e, nil
}

// Authenticate checks login's password and returns the role grants its groups map to
// (Members empty: they are the user's own; see authz.For). A login Overtime's alphabet
// refuses never reaches the directory.
func (d *Directory) Authenticate(ctx context.Context, login, password string) ([]model.RoleGrant, error) {
	if password == "" || names.UID(login) != nil {
		return nil, ErrInvalidCredentials
	}
	c, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var user *ldap.Entry
	switch d.s.method {
	case "search":
		if err := d.bindService(c); err != nil {
			return nil, err
		}
		if user, err = d.findUser(c, d.s.baseStr, d.s.scope, login); err != nil {
			return nil, refusal(err)
		}
		if err := d.bindUser(c, user.DN, password); err != nil {
			return nil, err
		}
		// Bound as the user now; groups are read as the service account, which may
		// see groups the user may not.
		if d.s.groupSrc == "search" {
			if err := d.bindService(c); err != nil {
				return nil, err
			}
		}
	case "template":
		dn := fmt.Sprintf(d.s.template, ldap.EscapeDN(login+d.s.suffix))
		if err := d.bindUser(c, dn, password); err != nil {
			return nil, err
		}
		// Read the entry bound as the user: it must be a person of the people filter
		// carrying the login, like a searched one.
		if user, err = d.findUser(c, dn, ldap.ScopeBaseObject, login); err != nil {
			return nil, refusal(err)
		}
	}
	groups, err := d.groups(c, user, login)
	if err != nil {
		return nil, err
	}
	return d.grants(groups), nil
}

// refusal turns findUser's "no" into ErrInvalidCredentials and passes outages through.
func refusal(err error) error {
	if errors.Is(err, errNoUser) || errors.Is(err, errAmbiguous) {
		return ErrInvalidCredentials
	}
	return err
}

// bindUser checks the password by binding as dn.
func (d *Directory) bindUser(c *ldap.Conn, dn, password string) error {
	err := c.Bind(dn, password)
	switch {
	case err == nil:
		return nil
	case isUnavailable(err):
		return unavailable("bind as %s: %w", dn, err)
	default:
		// invalid credentials, a disabled or locked account, inappropriate
		// authentication: the directory said no.
		return ErrInvalidCredentials
	}
}

// groups lists the DNs of the user's groups.
func (d *Directory) groups(c *ldap.Conn, user *ldap.Entry, login string) ([]string, error) {
	if d.s.groupSrc == "memberOf" {
		return user.GetEqualFoldAttributeValues(d.s.groupAttr), nil
	}
	value := user.DN
	if strings.EqualFold(d.s.memberAttr, "memberUid") {
		value = login
	}
	filter := fmt.Sprintf("(&%s(%s=%s))", d.s.groupFlt, d.s.memberAttr, ldap.EscapeFilter(value))
	res, err := c.Search(ldap.NewSearchRequest(d.s.groupBase, d.s.groupScope, ldap.NeverDerefAliases,
		0, int(d.s.timeout.Seconds()), false, filter, []string{"1.1"}, nil))
	if err != nil {
		return nil, unavailable("search groups of %s under %s: %w", login, d.s.groupBase, err)
	}
	out := make([]string, 0, len(res.Entries))
	for _, e := range res.Entries {
		out = append(out, e.DN)
	}
	return out, nil
}

// grants maps group DNs to role grants: a group matches a mapping when the DNs are
// equal ignoring case (AD writes CN=, OU=, DC=; configurations are typed by hand).
// Values that are not DNs match nothing.
func (d *Directory) grants(groups []string) []model.RoleGrant {
	var out []model.RoleGrant
	for _, g := range groups {
		dn, err := ldap.ParseDN(g)
		if err != nil {
			continue
		}
		for _, m := range d.s.roles {
			if m.group.EqualFold(dn) {
				out = append(out, m.grants...)
			}
		}
	}
	return out
}

// Exists reports whether the directory has exactly one person for login (search
// method: looked up as the service account). With the template method there is no
// account to look users up with: that is an error saying so.
func (d *Directory) Exists(ctx context.Context, login string) (bool, error) {
	if names.UID(login) != nil {
		return false, nil
	}
	if d.s.method != "search" {
		return false, model.Invalid("cannot check that %s is a user of the external directory: it is configured without a service account (bind method template); grant site-admin to its users through a mapped group (docs/identity.md)", login)
	}
	c, err := d.connect(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	if err := d.bindService(c); err != nil {
		return false, err
	}
	_, err = d.findUser(c, d.s.baseStr, d.s.scope, login)
	if errors.Is(err, errNoUser) || errors.Is(err, errAmbiguous) {
		return false, nil
	}
	return err == nil, err
}
