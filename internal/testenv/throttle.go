package testenv

import (
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/loginguard"
	"github.com/overtime-hpc/overtime/sitemgmt/trustproxy"
)

// ManualClock is a clock a test advances: waiting out a login delay is advancing it,
// never a sleep.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ManualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock on by d.
func (c *ManualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// NewThrottled is a site manager with the example site that trusts the reverse proxies in
// trusted ("CIDR,..."; the tests' requests come from loopback and may state a client in
// X-Forwarded-For), with its login throttle on a ManualClock and without the failure
// floor (the service's TestRefusedLoginTimeHidesExistence measures that). It returns the
// throttle's configuration, so that tests count in its own numbers.
func NewThrottled(t *testing.T, trusted string) (*Env, *ManualClock, loginguard.Config) {
	t.Helper()
	p, err := trustproxy.Parse(trusted)
	if err != nil {
		t.Fatal(err)
	}
	e := New(t, Options{API: api.Options{TrustedProxies: p}})
	e.ApplyExample(t)
	clk := &ManualClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	cfg := loginguard.Default
	cfg.FailureFloor = 0
	cfg.Now = clk.Now
	e.Svc.Accounts.SetLoginGuard(loginguard.New(cfg))
	return e, clk, cfg
}
