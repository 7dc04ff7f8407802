package service

import (
	"context"
	"errors"
	"testing"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/hostcred"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// userStore is a Backend of directory users only: uid -> password; down: every call
// fails as a directory that cannot be asked.
type userStore struct {
	Backend // the site model's methods: not used by the user operations
	pw      map[string]string
	down    bool
	creds   map[string]string // host -> hash of its agent credential
}

type userStoreErr struct{ invalid, notFound bool }

func (e userStoreErr) Error() string            { return "store error" }
func (e userStoreErr) InvalidCredentials() bool { return e.invalid }
func (e userStoreErr) NotFound() bool           { return e.notFound }

func (u *userStore) check(uid string) error {
	if u.down {
		return errors.New("ldap: connection refused")
	}
	if _, ok := u.pw[uid]; !ok {
		return userStoreErr{notFound: true}
	}
	return nil
}

func (u *userStore) Authenticate(_ context.Context, uid, password string) error {
	if err := u.check(uid); err != nil {
		return err
	}
	if u.pw[uid] != password {
		return userStoreErr{invalid: true}
	}
	return nil
}

func (u *userStore) Users(context.Context) ([]model.User, error) {
	if u.down {
		return nil, errors.New("ldap: connection refused")
	}
	var l []model.User
	for uid := range u.pw {
		l = append(l, model.User{UID: uid, Name: uid})
	}
	return l, nil
}

func (u *userStore) PutUser(_ context.Context, uid, _, password string) error {
	if u.down {
		return errors.New("ldap: connection refused")
	}
	u.pw[uid] = password
	return nil
}

func (u *userStore) DeleteUser(_ context.Context, uid string) error {
	if err := u.check(uid); err != nil {
		return err
	}
	delete(u.pw, uid)
	return nil
}

func (u *userStore) SetPassword(_ context.Context, uid, password string) error {
	if err := u.check(uid); err != nil {
		return err
	}
	u.pw[uid] = password
	return nil
}

func (u *userStore) HostCredential(_ context.Context, host string) (string, error) {
	if u.down {
		return "", errors.New("ldap: connection refused")
	}
	return u.creds[host], nil
}

func (u *userStore) SetHostCredential(_ context.Context, host, hash string) error {
	if u.down {
		return errors.New("ldap: connection refused")
	}
	if hash == "" {
		delete(u.creds, host)
	} else {
		u.creds[host] = hash
	}
	return nil
}

var (
	userSiteAdmin = authz.Principal{UID: "admin", SiteAdmin: true}
	userAlice     = authz.Principal{UID: "alice", PoolAdmin: map[string]bool{"lab": true}}
	userExtBob    = authz.Principal{UID: "bob", External: true}
)

// The kinds of refusal the front ends map to a status (errstatus.Of, and 503 for
// errstatus.Unavailable).
const (
	kindOK          = "ok"
	kindForbidden   = "forbidden"   // *authz.Forbidden: 403
	kindInvalid     = "invalid"     // *model.InvalidError: 400
	kindConflict    = "conflict"    // *model.InvalidError with Conflict: 409
	kindNotFound    = "not found"   // *model.NotFoundError: 404
	kindUnavailable = "unavailable" // *errstatus.Unavailable: 503
	kindStoreFailed = "store"       // the store's own failure: 502
)

func kindOf(err error) string {
	var forb *authz.Forbidden
	var inv *model.InvalidError
	var nf *model.NotFoundError
	var du *errstatus.Unavailable
	switch {
	case err == nil:
		return kindOK
	case errors.As(err, &forb):
		return kindForbidden
	case errors.As(err, &nf):
		return kindNotFound
	case errors.As(err, &du):
		return kindUnavailable
	case errors.As(err, &inv) && inv.Conflict:
		return kindConflict
	case errors.As(err, &inv):
		return kindInvalid
	}
	return kindStoreFailed
}

// TestAccountsUsers: who may list, create and delete users and set whose password, what
// a password must be, and what each refusal is.
func TestAccountsUsers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		down bool // the directory cannot be asked
		op   func(a *Accounts) error
		want string
		pw   map[string]string // the passwords afterwards, when the operation succeeded
	}{
		{name: "site admin lists", op: func(a *Accounts) error { _, err := a.Users(ctx, userSiteAdmin); return err }, want: kindOK},
		{name: "pool admin may not list", op: func(a *Accounts) error { _, err := a.Users(ctx, userAlice); return err }, want: kindForbidden},
		{name: "list with the directory down", down: true, op: func(a *Accounts) error { _, err := a.Users(ctx, userSiteAdmin); return err }, want: kindStoreFailed},

		{name: "site admin creates", op: func(a *Accounts) error { return a.PutUser(ctx, userSiteAdmin, "carol", "", "carol-secret") }, want: kindOK,
			pw: map[string]string{"admin": "admin-secret", "alice": "alice-secret", "carol": "carol-secret"}},
		{name: "pool admin may not create", op: func(a *Accounts) error { return a.PutUser(ctx, userAlice, "carol", "", "carol-secret") }, want: kindForbidden},
		{name: "invalid uid", op: func(a *Accounts) error { return a.PutUser(ctx, userSiteAdmin, "Carol Smith", "", "carol-secret") }, want: kindInvalid},
		{name: "short password on create", op: func(a *Accounts) error { return a.PutUser(ctx, userSiteAdmin, "carol", "", "short") }, want: kindInvalid},

		{name: "site admin deletes", op: func(a *Accounts) error { return a.DeleteUser(ctx, userSiteAdmin, "alice") }, want: kindOK,
			pw: map[string]string{"admin": "admin-secret"}},
		{name: "site admin may not delete themselves", op: func(a *Accounts) error { return a.DeleteUser(ctx, userSiteAdmin, "admin") }, want: kindConflict},
		{name: "pool admin may not delete", op: func(a *Accounts) error { return a.DeleteUser(ctx, userAlice, "admin") }, want: kindForbidden},
		{name: "delete an unknown user", op: func(a *Accounts) error { return a.DeleteUser(ctx, userSiteAdmin, "nobody") }, want: kindNotFound},

		{name: "own password with the current one", op: func(a *Accounts) error {
			return a.SetPassword(ctx, userAlice, "alice", "alice-secret", "alice-new-secret")
		}, want: kindOK,
			pw: map[string]string{"admin": "admin-secret", "alice": "alice-new-secret"}},
		{name: "own password without the current one", op: func(a *Accounts) error { return a.SetPassword(ctx, userAlice, "alice", "", "alice-new-secret") }, want: kindInvalid},
		{name: "own password with a wrong current one", op: func(a *Accounts) error { return a.SetPassword(ctx, userAlice, "alice", "guess", "alice-new-secret") }, want: kindForbidden},
		{name: "own password with the directory down", down: true, op: func(a *Accounts) error {
			return a.SetPassword(ctx, userAlice, "alice", "alice-secret", "alice-new-secret")
		}, want: kindUnavailable},
		{name: "own password too short", op: func(a *Accounts) error { return a.SetPassword(ctx, userAlice, "alice", "alice-secret", "short") }, want: kindInvalid},
		{name: "another user's password", op: func(a *Accounts) error {
			return a.SetPassword(ctx, userAlice, "admin", "admin-secret", "admin-new-secret")
		}, want: kindForbidden},
		{name: "site admin sets anyone's without the current one", op: func(a *Accounts) error { return a.SetPassword(ctx, userSiteAdmin, "alice", "", "alice-new-secret") }, want: kindOK,
			pw: map[string]string{"admin": "admin-secret", "alice": "alice-new-secret"}},
		{name: "site admin sets an unknown user's", op: func(a *Accounts) error { return a.SetPassword(ctx, userSiteAdmin, "nobody", "", "nobody-secret") }, want: kindNotFound},
		{name: "external user's own password", op: func(a *Accounts) error { return a.SetPassword(ctx, userExtBob, "bob", "bob-secret", "bob-new-secret") }, want: kindConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &userStore{pw: map[string]string{"admin": "admin-secret", "alice": "alice-secret"}, down: tc.down}
			s := newService(st, nil)
			err := tc.op(s.Accounts)
			if got := kindOf(err); got != tc.want {
				t.Fatalf("%v (%s), want %s", err, got, tc.want)
			}
			if tc.pw != nil && !samePasswords(st.pw, tc.pw) {
				t.Errorf("passwords afterwards %v, want %v", st.pw, tc.pw)
			}
			if err != nil && !tc.down && !samePasswords(st.pw, map[string]string{"admin": "admin-secret", "alice": "alice-secret"}) {
				t.Errorf("a refused operation changed the directory: %v", st.pw)
			}
		})
	}
}

func samePasswords(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestAccountsHostCredentials: who may issue and revoke a host's agent credential, that
// the directory keeps only the hash of the token issued, and what revoking reports.
func TestAccountsHostCredentials(t *testing.T) {
	ctx := context.Background()
	site := &model.Site{
		Name: "t", Timezone: "UTC", DefaultMode: "desktop",
		Modes: []model.Mode{{Name: "desktop", Kind: model.KindDesktop}},
		Pools: []model.Pool{{Name: "lab"}, {Name: "other"}},
		Hosts: []model.Host{
			{Name: "pc1", MAC: "52:54:00:00:00:01", Pool: "lab"},
			{Name: "pc2", MAC: "52:54:00:00:00:02", Pool: "other"},
		},
	}
	snap, err := newSnapshot(site)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		p         authz.Principal
		host      string
		had, down bool
		want      string
	}{
		{name: "site admin", p: userSiteAdmin, host: "pc2", want: kindOK},
		{name: "site admin, host had one", p: userSiteAdmin, host: "pc2", had: true, want: kindOK},
		{name: "admin of the host's pool", p: userAlice, host: "pc1", want: kindOK},
		{name: "admin of another pool", p: userAlice, host: "pc2", want: kindForbidden},
		{name: "unknown host", p: userSiteAdmin, host: "pc9", want: kindNotFound},
		{name: "directory down", p: userSiteAdmin, host: "pc1", down: true, want: kindStoreFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &userStore{creds: map[string]string{}, down: tc.down}
			if tc.had {
				st.creds[tc.host] = "old-hash"
			}
			s := newService(st, nil)
			s.snap.Store(snap)
			tok, err := s.Accounts.IssueHostCredential(ctx, tc.p, tc.host)
			if got := kindOf(err); got != tc.want {
				t.Fatalf("issue: %v (%s), want %s", err, got, tc.want)
			}
			if err != nil {
				if _, ok := st.creds[tc.host]; ok != tc.had {
					t.Errorf("a refused issue changed the credentials: %v", st.creds)
				}
				if _, err := s.Accounts.RevokeHostCredential(ctx, tc.p, tc.host); kindOf(err) != tc.want {
					t.Errorf("revoke: %v, want %s", err, tc.want)
				}
				return
			}
			if tok == "" || st.creds[tc.host] != hostcred.Hash(tok) || !hostcred.Verify(tok, st.creds[tc.host]) {
				t.Fatalf("token %q, stored %q: want the token's hash stored", tok, st.creds[tc.host])
			}
			had, err := s.Accounts.RevokeHostCredential(ctx, tc.p, tc.host)
			if err != nil || !had || len(st.creds) != 0 {
				t.Fatalf("revoke: had %v, %v, left %v", had, err, st.creds)
			}
			if had, err = s.Accounts.RevokeHostCredential(ctx, tc.p, tc.host); err != nil || had {
				t.Fatalf("revoke again: had %v, %v; want false", had, err)
			}
		})
	}
}
