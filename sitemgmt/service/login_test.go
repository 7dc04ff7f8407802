package service_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	"github.com/overtime-hpc/overtime/sitemgmt/extdir"
	"github.com/overtime-hpc/overtime/sitemgmt/loginguard"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
)

// medianLogin is the median time of n refused logins of uid (each must be refused as
// invalid credentials, not throttled or unanswered).
func medianLogin(t *testing.T, svc *service.Service, uid string, n int) time.Duration {
	t.Helper()
	from := netip.MustParseAddr("192.0.2.7")
	var d []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		_, err := svc.Accounts.Login(context.Background(), uid, "not-the-password", from)
		d = append(d, time.Since(start))
		if !service.IsInvalidCredentials(err) {
			t.Fatalf("login of %s with a wrong password: %v, want invalid credentials", uid, err)
		}
	}
	slices.Sort(d)
	return d[n/2]
}

// The time a refused login takes does not tell whether the user exists: a known uid
// (search, then a bind that fails) and an unknown one (a search that finds nothing, then
// the external directory's search) take the same time, the guard's failure floor, in
// the median of several attempts against the real directories. The bounds are loose on
// purpose (noise on a shared machine): the medians within a factor of 1.5 of each other
// and both at least the floor.
func TestRefusedLoginTimeHidesExistence(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	cfg := loginguard.Default
	// Many free failures: this test measures the floor, not the throttle.
	cfg.Name.Free, cfg.Addr.Free, cfg.Pair.Free = 1000, 1000, 1000
	env.Svc.Accounts.SetLoginGuard(loginguard.New(cfg))
	floor := cfg.FailureFloor
	const n = 5
	check := func(t *testing.T, known, unknown string) {
		k, u := medianLogin(t, env.Svc, known, n), medianLogin(t, env.Svc, unknown, n)
		t.Logf("median refused login: %s (exists) %v, %s (does not) %v", known, k, unknown, u)
		if k < floor || u < floor {
			t.Errorf("refused logins took %v (%s) and %v (%s): want at least the floor %v", k, known, u, unknown, floor)
		}
		if r := float64(max(k, u)) / float64(min(k, u)); r > 1.5 {
			t.Errorf("refused logins of a user who exists (%s: %v) and one who does not (%s: %v) differ by a factor %.2f: the time tells", known, k, unknown, u, r)
		}
	}
	t.Run("own directory", func(t *testing.T) { check(t, "admin", "nosuchuser") })
	t.Run("external directory", func(t *testing.T) {
		u := unidir.Start(t)
		u.AddUser(t, unidir.User{DN: "cn=Ada Lovelace," + unidir.People, SAM: "ada", UID: "ada", Password: "ada-uni-pw"})
		d, err := extdir.New(extdir.Config{
			URLs:  []string{u.URL},
			TLS:   extdir.TLSConfig{Mode: "starttls", CAFile: u.CA.CertPEM},
			Bind:  extdir.BindConfig{Method: "search", DN: u.ServiceDN, PasswordFile: u.ServicePassword},
			Users: extdir.UserConfig{Base: unidir.People, Filter: "(objectClass=adStyleAccount)", LoginAttribute: "sAMAccountName"},
			Group: extdir.GroupConfig{Source: "memberOf"},
		})
		if err != nil {
			t.Fatal(err)
		}
		env.Svc.Accounts.SetExternal(d)
		defer env.Svc.Accounts.SetExternal(nil)
		check(t, "ada", "nosuchuser")
	})
}
