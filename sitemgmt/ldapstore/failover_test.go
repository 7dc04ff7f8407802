package ldapstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestConfigServers(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{URL: "ldap://a"}, []string{"ldap://a"}},
		{Config{URL: " ldap://a  ldap://b,ldap://c ,\tldap://a "}, []string{"ldap://a", "ldap://b", "ldap://c"}},
		{Config{URL: "ldap://a", URLs: []string{"ldap://b", "ldap://a", ""}}, []string{"ldap://a", "ldap://b"}},
		{Config{URLs: []string{"ldaps://x:636"}}, []string{"ldaps://x:636"}},
		{Config{URL: " , "}, nil},
	} {
		if got := tc.cfg.Servers(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%+v: servers %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

func TestCaughtUp(t *testing.T) {
	a1 := "20260101120000.000001Z#000000#001#000000"
	a2 := "20260101120001.000000Z#000000#001#000000"
	b1 := "20260101120000.500000Z#000000#002#000000"
	for _, tc := range []struct {
		cand, cur []string
		want      bool
	}{
		{[]string{a2, b1}, []string{a1, b1}, true},
		{[]string{a1, b1}, []string{a2, b1}, false}, // behind on serverID 1
		{[]string{a2}, []string{a2, b1}, false},     // never saw serverID 2's writes
		{nil, nil, true},                            // no contextCSN readable: nothing to wait for
	} {
		if got := caughtUp(tc.cand, tc.cur); got != tc.want {
			t.Errorf("caughtUp(%v, %v) = %v, want %v", tc.cand, tc.cur, got, tc.want)
		}
	}
}

// A store given two providers, and only the first one can be reached: every kind of
// operation succeeds on the second, and "unavailable" comes only when both are down.
func TestFailoverUnavailableOnlyWhenAllDown(t *testing.T) {
	s := slapdtest.StartReplicatedT(t, 2, slapdenv.Options{})
	st := openReplicated(t, s, 2*time.Second, time.Hour)
	if err := s[0].Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(bg); err != nil {
		t.Fatalf("Load with provider 1 down: %v", err)
	}
	if got := st.Server(); got != s[1].URL {
		t.Fatalf("store on %q after failover, want %s", got, s[1].URL)
	}
	if err := st.Authenticate(bg, "admin", adminPW); err != nil {
		t.Fatalf("Authenticate with provider 1 down: %v", err)
	}
	if err := st.Authenticate(bg, "admin", "wrong"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("wrong password with provider 1 down: %v, want ErrInvalidCredentials", err)
	}
	cur := mustLoad(t, st)
	next := cur.Clone()
	next.Pools = append(next.Pools, model.Pool{Name: "lab-z"})
	mustApply(t, st, cur, next)

	if err := s[1].Stop(); err != nil {
		t.Fatal(err)
	}
	var ue *UnavailableError
	if err := st.Authenticate(bg, "admin", adminPW); !errors.As(err, &ue) {
		t.Fatalf("Authenticate with both down: %v, want an *UnavailableError", err)
	}
	if _, err := st.Load(bg); err == nil || !isUnavailable(err) {
		t.Fatalf("Load with both down: %v, want unavailable", err)
	}
}

// openReplicated opens and initialises a store on the providers, in their order.
func openReplicated(t *testing.T, s []*slapdenv.Server, timeout, retry time.Duration) *Store {
	t.Helper()
	cfg := Config{URL: s[0].URL + " " + s[1].URL, URLs: nil, BaseDN: s[0].BaseDN, BindDN: s[0].ServiceDN,
		BindPassword: s[0].ServicePW, Timeout: timeout, RetryPrimary: retry}
	for _, o := range s[2:] {
		cfg.URLs = append(cfg.URLs, o.URL)
	}
	st, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Init(bg, InitOptions{SiteName: "uni", Timezone: "Europe/Berlin", AdminUID: "admin", AdminPassword: adminPW}); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, s)
	return st
}

// waitReplicated waits until every provider has every change the first one has (its
// contextCSN values caught up), so a test that stops provider 1 next finds the
// initialised directory on the others rather than racing syncrepl.
func waitReplicated(t *testing.T, s []*slapdenv.Server) {
	t.Helper()
	csn := func(srv *slapdenv.Server) []string {
		c, err := ldap.DialURL(srv.URL)
		if err != nil {
			return nil
		}
		defer c.Close()
		if err := c.Bind(srv.RootDN, srv.RootPW); err != nil {
			return nil
		}
		return contextCSN(c, srv.BaseDN)
	}
	want := csn(s[0])
	if len(want) == 0 {
		t.Fatalf("provider 1 (%s) has no contextCSN after init", s[0].URL)
	}
	for i, srv := range s[1:] {
		poll.Until(t, fmt.Sprintf("provider %d caught up with provider 1", i+2), 20*time.Second, func() bool {
			return caughtUp(csn(srv), want)
		})
	}
}

// Provider 1 stops while readers (Load), logins (right and wrong passwords) and a
// writer (Apply, one host at a time) run against a store that lists both providers.
// Operations that start later than failoverBound after the stop all succeed on provider
// 2; no operation gives a wrong answer at any time (a Load that does not validate, a
// right password refused or a wrong one accepted); what was written during the outage
// is on provider 1 after its restart, and the store moves back to provider 1 once
// RetryPrimary has passed.
func TestFailoverUnderLoad(t *testing.T) {
	const failoverBound = 3 * time.Second
	s := slapdtest.StartReplicatedT(t, 2, slapdenv.Options{})
	st := openReplicated(t, s, 2*time.Second, 2*time.Second)
	site := exampleSite()
	mustApply(t, st, nil, site)

	var (
		stopAt   atomic.Int64 // unix nanos when provider 1's stop began; 0 before
		stopDone atomic.Int64
		mu       sync.Mutex
		written  []string // hosts whose Apply succeeded
		lateErrs []string // failures of operations started after the bound
		failures atomic.Int64
		ops      atomic.Int64
		lastFail atomic.Int64 // unix nanos of the last failure's start
	)
	fail := func(started time.Time, what string, err error) {
		failures.Add(1)
		t.Logf("failed: %s started %v after the stop began: %v", what, started.Sub(time.Unix(0, stopAt.Load())), err)
		if v := lastFail.Load(); started.UnixNano() > v {
			lastFail.Store(started.UnixNano())
		}
		if sa := stopAt.Load(); sa == 0 || started.After(time.Unix(0, sa).Add(failoverBound)) {
			mu.Lock()
			lateErrs = append(lateErrs, fmt.Sprintf("%s started %v after the stop: %v", what, started.Sub(time.Unix(0, sa)), err))
			mu.Unlock()
		}
	}
	wrong := func(format string, a ...any) {
		mu.Lock()
		lateErrs = append(lateErrs, fmt.Sprintf("WRONG ANSWER %v after the stop began (store on %s): ", time.Since(time.Unix(0, stopAt.Load())), st.Server())+fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ { // readers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				started := time.Now()
				ops.Add(1)
				got, err := st.Load(bg)
				if err != nil {
					fail(started, "Load", err)
					continue
				}
				if err := got.Validate(); err != nil {
					wrong("Load returned a site that does not validate: %v", err)
				}
			}
		}()
	}
	for g := 0; g < 2; g++ { // logins
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pw, want := adminPW, error(nil)
				if (i+g)%2 == 1 {
					pw, want = "wrong-"+adminPW, ErrInvalidCredentials
				}
				started := time.Now()
				ops.Add(1)
				err := st.Authenticate(bg, "admin", pw)
				switch {
				case errors.Is(err, want) || (want == nil && err == nil):
				case errors.Is(err, ErrInvalidCredentials) || err == nil:
					wrong("Authenticate(%q) = %v", pw, err)
				default:
					fail(started, "Authenticate", err)
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() { // the writer: one new host per Apply, retried after a failure as the service does
		defer wg.Done()
		cur := site.Clone()
		for i := 0; ; {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("pc-w%03d", i)
			next := cur.Clone()
			next.Hosts = append(next.Hosts, model.Host{Name: name, MAC: fmt.Sprintf("52:54:00:ee:%02x:%02x", i/256, i%256), Pool: "lab-b"})
			started := time.Now()
			ops.Add(1)
			if _, err := st.Apply(bg, cur, next); err != nil {
				fail(started, "Apply "+name, err)
				// The service re-reads the directory after a failed write; so do we.
				if c, err := st.Load(bg); err == nil {
					cur = c
				}
				continue
			}
			mu.Lock()
			written = append(written, name)
			mu.Unlock()
			cur, i = next, i+1
		}
	}()

	countWritten := func() int { mu.Lock(); defer mu.Unlock(); return len(written) }
	poll.Until(t, "some writes before the stop", 20*time.Second, func() bool { return countWritten() >= 5 })
	beforeStop := countWritten()
	stopAt.Store(time.Now().UnixNano())
	if err := s[0].Stop(); err != nil {
		t.Fatal(err)
	}
	stopDone.Store(time.Now().UnixNano())
	poll.Until(t, "writes on provider 2 during the outage", 20*time.Second, func() bool { return countWritten() >= beforeStop+10 })
	if got := st.Server(); got != s[1].URL {
		t.Errorf("store on %q during the outage, want provider 2 %s", got, s[1].URL)
	}
	duringOutage := countWritten()
	outageHost := func() string { mu.Lock(); defer mu.Unlock(); return written[duringOutage-1] }()

	restartAt := time.Now()
	if err := s[0].Restart(); err != nil {
		t.Fatal(err)
	}
	// Provider 1 catches up with what was written on 2 meanwhile.
	poll.Until(t, "provider 1 has "+outageHost, 20*time.Second, func() bool {
		one, err := Open(Config{URL: s[0].URL, BaseDN: s[0].BaseDN, BindDN: s[0].ServiceDN, BindPassword: s[0].ServicePW, Timeout: 2 * time.Second})
		if err != nil {
			return false
		}
		defer one.Close()
		site, err := one.Load(bg)
		return err == nil && site.Host(outageHost) != nil
	})
	// And the store returns to provider 1 (RetryPrimary 2 s) while the load goes on.
	poll.Until(t, "store back on provider 1", 20*time.Second, func() bool { return st.Server() == s[0].URL })
	backAfter := time.Since(restartAt)
	afterBack := countWritten()
	poll.Until(t, "writes after the return", 20*time.Second, func() bool { return countWritten() >= afterBack+5 })
	close(stop)
	wg.Wait()

	if lf := lastFail.Load(); lf != 0 {
		t.Logf("last failed operation started %v after the stop began (stop took %v)",
			time.Unix(0, lf).Sub(time.Unix(0, stopAt.Load())), time.Unix(0, stopDone.Load()).Sub(time.Unix(0, stopAt.Load())))
	}
	t.Logf("%d operations, %d failed; %d hosts written (%d before the stop, %d during the outage); back on provider 1 %v after its restart",
		ops.Load(), failures.Load(), countWritten(), beforeStop, duringOutage-beforeStop, backAfter.Round(time.Millisecond))
	for _, e := range lateErrs {
		t.Error(e)
	}
	// Every acknowledged write is on both providers.
	for i, srv := range s {
		one, err := Open(Config{URL: srv.URL, BaseDN: srv.BaseDN, BindDN: srv.ServiceDN, BindPassword: srv.ServicePW})
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		poll.Until(t, fmt.Sprintf("provider %d holds every written host", i+1), 20*time.Second, func() bool {
			site, err := one.Load(bg)
			if err != nil {
				return false
			}
			missing = missing[:0]
			for _, h := range written {
				if site.Host(h) == nil {
					missing = append(missing, h)
				}
			}
			return len(missing) == 0 && site.Validate() == nil
		})
		one.Close()
	}
}
