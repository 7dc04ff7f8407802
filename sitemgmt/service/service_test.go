package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// A directory edited behind the site manager's back into an invalid state (here:
// overlapping rules written with a plain LDAP client) must not take boot service down:
// Reload reports it and the last good snapshot keeps serving.
func TestReloadKeepsLastGoodSnapshot(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	ctx := context.Background()
	good := env.Svc.Snapshot()

	conn, err := ldap.DialURL(env.Slapd.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Bind(env.Slapd.RootDN, env.Slapd.RootPW); err != nil {
		t.Fatal(err)
	}
	mod := ldap.NewModifyRequest("cn=lab-b,ou=pools,ou=overtime,"+env.Slapd.BaseDN, nil)
	mod.Add("otWeeklyRule", []string{"wed 17:00-19:00 maintenance"})
	if err := conn.Modify(mod); err != nil {
		t.Fatal(err)
	}
	err = env.Svc.Reload(ctx)
	if err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("reload of an invalid directory: %v", err)
	}
	if env.Svc.Snapshot() != good {
		t.Fatal("the snapshot was replaced by an invalid directory")
	}
	// Repairing the directory is picked up by the next reload.
	mod = ldap.NewModifyRequest("cn=lab-b,ou=pools,ou=overtime,"+env.Slapd.BaseDN, nil)
	mod.Delete("otWeeklyRule", []string{"wed 17:00-19:00 maintenance"})
	mod2 := ldap.NewModifyRequest("cn=lab-b,ou=pools,ou=overtime,"+env.Slapd.BaseDN, nil)
	mod2.Replace("roomNumber", []string{"Room 0.99"})
	for _, m := range []*ldap.ModifyRequest{mod, mod2} {
		if err := conn.Modify(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Svc.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := env.Svc.Snapshot().Site.Pool("lab-b").Room; got != "Room 0.99" {
		t.Fatalf("external edit not picked up: room %q", got)
	}
}

// A write the store fails half way leaves the snapshot equal to what the directory holds.
func TestFailedWriteReloads(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	ctx := context.Background()
	if err := env.Slapd.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := env.Svc.Update(ctx, nil, false, func(s *model.Site) error {
		s.Pool("lab-a").Room = "moved"
		return nil
	})
	if err == nil {
		t.Fatal("write with slapd down succeeded")
	}
	if env.Svc.Snapshot().Site.Pool("lab-a").Room == "moved" {
		t.Fatal("snapshot shows a change that was never written")
	}
	// Validation errors never reach the store.
	_, err = env.Svc.Update(ctx, nil, false, func(s *model.Site) error {
		s.Hosts[0].MAC = s.Hosts[1].MAC
		return nil
	})
	var inv *model.InvalidError
	if err == nil || !errors.As(err, &inv) || !inv.Conflict {
		t.Fatalf("duplicate MAC: %v", err)
	}
}

// A site apply without roles does not lock the administrators out.
func TestKeepsASiteAdmin(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	_, err := env.Svc.Update(context.Background(), nil, false, func(s *model.Site) error {
		s.Roles = nil
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "without a site admin") {
		t.Fatalf("removing every site admin was accepted: %v", err)
	}
	if len(env.Svc.Snapshot().Site.Roles) == 0 {
		t.Fatal("roles gone")
	}
}

// Update is where written MACs are canonicalised (model.Site.Normalize): whatever spelling
// an entry point passes on is stored, and found by MAC, in lower-case colon form; a MAC
// that is not one is refused as invalid input.
func TestUpdateCanonicalisesMACs(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	ctx := context.Background()
	for _, tc := range []struct{ mac, want string }{
		{"52-54-00-0A-FF-01", "52:54:00:0a:ff:01"},
		{"5254.000a.ff02", "52:54:00:0a:ff:02"},
	} {
		_, err := env.Svc.Update(ctx, nil, false, func(s *model.Site) error {
			s.Hosts[0].MAC = tc.mac
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.mac, err)
		}
		snap := env.Svc.Snapshot()
		if h := snap.HostByMAC(tc.want); h == nil || h.Name != snap.Site.Hosts[0].Name {
			t.Fatalf("%s: not stored as %s (host by MAC: %v)", tc.mac, tc.want, h)
		}
	}
	_, err := env.Svc.Update(ctx, nil, false, func(s *model.Site) error {
		s.Hosts[0].MAC = "01:00:5e:00:00:01"
		return nil
	})
	var inv *model.InvalidError
	if err == nil || !errors.As(err, &inv) || !strings.Contains(err.Error(), "multicast") {
		t.Fatalf("multicast MAC: %v", err)
	}
}

// The site-admin role goes only to directory users, and a change never leaves the site
// without a site admin who can log in; other roles may name users to be created later.
func TestSiteAdminsAreDirectoryUsers(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	ctx := context.Background()
	b := env.Store
	if err := b.PutUser(ctx, "zed", "", "zed-secret"); err != nil {
		t.Fatal(err)
	}
	setAdmins := func(members ...string) func(s *model.Site) error {
		return func(s *model.Site) error {
			s.Role("site-admins").Members = members
			return nil
		}
	}
	// Made site admin while the account exists; it is deleted afterwards.
	if _, err := env.Svc.Update(ctx, nil, false, setAdmins("admin", "zed")); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteUser(ctx, "zed"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(s *model.Site) error
		refuse string // "" = accepted
	}{
		{"misspelt member", setAdmins("admin", "zed", "admn"), "cannot be given to admn: not a directory user"},
		{"new grant to an unknown user", func(s *model.Site) error {
			s.Roles = append(s.Roles, model.RoleGrant{Name: "more-admins", Role: model.RoleSiteAdmin, Members: []string{"ghost", "alice"}})
			return nil
		}, "cannot be given to ghost"},
		{"viewer grant turned site admin", func(s *model.Site) error {
			s.Roles = append(s.Roles, model.RoleGrant{Name: "later", Role: model.RoleViewer, Members: []string{"ghost"}})
			return nil
		}, ""},
		{"grant of unknown members made site-admin", func(s *model.Site) error {
			s.Role("later").Role = model.RoleSiteAdmin
			return nil
		}, "cannot be given to ghost"},
		{"only a deleted user left", setAdmins("zed"), "without a site admin who is a directory user"},
		{"a member deleted before stays", setAdmins("zed", "admin", "alice"), ""},
		{"handed over to an existing user", setAdmins("alice"), ""},
	} {
		before := env.Svc.Snapshot()
		_, err := env.Svc.Update(ctx, nil, false, tc.change)
		if tc.refuse == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var inv *model.InvalidError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.refuse) {
			t.Errorf("%s: %v, want an invalid-change error naming %q", tc.name, err, tc.refuse)
		}
		if env.Svc.Snapshot() != before {
			t.Errorf("%s: refused, but the site changed", tc.name)
		}
	}
}
