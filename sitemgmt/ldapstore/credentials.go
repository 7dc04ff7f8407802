package ldapstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Node agent credentials. A host's bearer token is never stored: only its hash, in the
// otAgentTokenHash attribute of the host entry (sitemgmt/hostcred makes and checks
// tokens). The hash is outside the site model, so Load, exports and the site file never
// carry it; a host deleted (or renamed, which is delete + add) loses its credential with
// its entry.

// ErrUnknownHost is returned when the directory has no host entry of that name. It has a
// NotFound method, so that callers that only see the service.Backend interface (the API)
// can tell it from a directory failure without importing this package.
var ErrUnknownHost error = notFoundError("no such host in the directory")

type notFoundError string

func (e notFoundError) Error() string { return string(e) }
func (notFoundError) NotFound() bool  { return true }

// validTokenHash reports whether v has the form hostcred.Hash produces: "sha256:" and the
// digest in lower-case hex.
func validTokenHash(v string) bool {
	digest, ok := strings.CutPrefix(v, "sha256:")
	return ok && names.SHA256(digest) == nil
}

// SetHostCredential stores hash as the host's credential, replacing any previous one;
// an empty hash removes it (revocation). Removing a credential the host does not have is
// not an error.
func (s *Store) SetHostCredential(ctx context.Context, host, hash string) error {
	// Host names never contain DN metacharacters (model.ValidHostname), and the DN is
	// escaped anyway; a name that is not a host name cannot name a host entry.
	if model.ValidHostname(host) != nil {
		return ErrUnknownHost
	}
	if hash != "" && !validTokenHash(hash) {
		return fmt.Errorf("ldapstore: credential hash of %s has the wrong form", host)
	}
	mod := ldap.NewModifyRequest(s.dn.host(host), nil)
	if hash == "" {
		mod.Replace(aTokenHash, nil)
	} else {
		mod.Replace(aTokenHash, []string{hash})
	}
	err := s.write(ctx, op{mod: mod})
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return ErrUnknownHost
	}
	if err != nil {
		return fmt.Errorf("ldapstore: credential of host %s: %w", host, err)
	}
	return nil
}

// HostCredential returns the stored credential hash of a host, "" when the host has
// none, and ErrUnknownHost when there is no such host (including any name that is not a
// valid host name: such a name is never sent to the directory). A stored value of the
// wrong form counts as no credential.
func (s *Store) HostCredential(ctx context.Context, host string) (string, error) {
	if model.ValidHostname(host) != nil {
		return "", ErrUnknownHost
	}
	var res *ldap.SearchResult
	err := s.do(ctx, func(c *ldap.Conn) error {
		var err error
		// A base-object read of the host's own entry: the filter is a constant, the name
		// only appears (escaped) in the DN.
		res, err = c.Search(ldap.NewSearchRequest(s.dn.host(host), ldap.ScopeBaseObject, ldap.NeverDerefAliases,
			1, 0, false, "(objectClass="+ocHost+")", []string{aTokenHash}, nil))
		return err
	})
	switch {
	case ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject):
		return "", ErrUnknownHost
	case err != nil:
		return "", fmt.Errorf("ldapstore: credential of host %s: %w", host, err)
	case len(res.Entries) != 1:
		return "", ErrUnknownHost
	}
	v := res.Entries[0].GetAttributeValue(aTokenHash)
	if !validTokenHash(v) {
		return "", nil
	}
	return v, nil
}
