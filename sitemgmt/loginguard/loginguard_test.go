package loginguard

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// clock is a settable clock for the guard.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newGuard(cfg Config) (*Guard, *clock) {
	c := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	cfg.Now = c.Now
	return New(cfg), c
}

var (
	addrA = netip.MustParseAddr("198.51.100.1")
	addrB = netip.MustParseAddr("198.51.100.2")
	addrC = netip.MustParseAddr("198.51.100.3")
)

// fail counts n failed attempts of name from addr, each when the guard lets it through
// (advancing the clock by the wait it asks for); it returns the total time waited.
func fail(t *testing.T, g *Guard, c *clock, name string, addr netip.Addr, n int) time.Duration {
	t.Helper()
	var waited time.Duration
	for i := 0; i < n; i++ {
		at, err := g.Begin(name, addr)
		var th *Throttled
		if errors.As(err, &th) {
			c.Add(th.Wait)
			waited += th.Wait
			i--
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		at.Failed()
	}
	return waited
}

func wait(t *testing.T, g *Guard, name string, addr netip.Addr) time.Duration {
	t.Helper()
	at, err := g.Begin(name, addr)
	if err == nil {
		at.Unanswered()
		return 0
	}
	var th *Throttled
	if !errors.As(err, &th) {
		t.Fatalf("Begin: %v", err)
	}
	if g.Check(name, addr) != th.Wait {
		t.Fatalf("Check says %v, Begin %v", g.Check(name, addr), th.Wait)
	}
	return th.Wait
}

// Free failures cost nothing; then the waits double up to the name's cap.
func TestDelaysGrowToTheCap(t *testing.T) {
	g, c := newGuard(Default)
	for i := 0; i < Default.Name.Free; i++ {
		fail(t, g, c, "alice", netip.Addr{}, 1)
		if w := wait(t, g, "alice", netip.Addr{}); w != 0 {
			t.Fatalf("after %d failures: wait %v, want none (free)", i+1, w)
		}
	}
	var got []time.Duration
	for i := 0; i < 9; i++ {
		// Each from a fresh address: only the name's delay applies.
		a := netip.AddrFrom4([4]byte{203, 0, 113, byte(i)})
		fail(t, g, c, "alice", a, 1)
		got = append(got, wait(t, g, "alice", addrC))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("waits after the free failures: %v, want %v s", got, want)
		}
	}
}

// A stranger cannot lock alice out. Guessing from many addresses slows her name, but
// from a fresh address she waits at most the name's cap, and from an address she
// logged in from before not at all; hammering from one address slows that address far
// longer than her name.
func TestStrangerCannotLockOutTheUser(t *testing.T) {
	g, c := newGuard(Default)
	ok, err := g.Begin("alice", addrC)
	if err != nil {
		t.Fatal(err)
	}
	ok.Succeeded() // alice's usual desk
	for i := 0; i < 40; i++ {
		fail(t, g, c, "alice", netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 1)
	}
	if w := wait(t, g, "alice", addrB); w == 0 || w > Default.Name.Cap {
		t.Fatalf("after a spread attack alice from a fresh address waits %v, want (0, %v]", w, Default.Name.Cap)
	}
	if w := wait(t, g, "alice", addrC); w != 0 {
		t.Fatalf("after a spread attack alice at her usual address waits %v, want none", w)
	}
	fail(t, g, c, "alice", addrA, 30)
	if w := wait(t, g, "alice", addrA); w <= Default.Name.Cap {
		t.Fatalf("attacker's address waits %v, want more than the name's cap %v", w, Default.Name.Cap)
	}
	if w := wait(t, g, "alice", addrB); w > Default.Name.Cap {
		t.Fatalf("alice from a fresh address waits %v, want at most %v", w, Default.Name.Cap)
	}
	if w := wait(t, g, "alice", addrC); w != 0 {
		t.Fatalf("alice at her usual address waits %v, want none", w)
	}
	if w := wait(t, g, "bob", addrA); w <= Default.Name.Cap {
		t.Fatalf("another name from the attacker's address waits %v, want the address's delay", w)
	}
}

// A right password takes its attempt back, an unanswered one too; failures fade after
// quiet.
func TestSuccessAndQuiet(t *testing.T) {
	g, c := newGuard(Default)
	fail(t, g, c, "alice", addrA, Default.Name.Free)
	for i := 0; i < 3; i++ {
		at, err := g.Begin("alice", addrB)
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if i%2 == 0 {
			at.Succeeded()
		} else {
			at.Unanswered()
		}
	}
	// addrB is known now; from a fresh address the name is still at its free limit.
	if w := wait(t, g, "alice", addrC); w != 0 {
		t.Fatalf("after right passwords: wait %v, want none", w)
	}
	fail(t, g, c, "alice", addrA, 20)
	c.Add(time.Duration(20+Default.Name.Free) * Default.Name.Leak)
	if w := wait(t, g, "alice", addrC); w != 0 {
		t.Fatalf("after a long quiet: wait %v, want none", w)
	}
	fail(t, g, c, "alice", addrC, 1)
	if w := wait(t, g, "alice", addrB); w != 0 {
		t.Fatalf("one failure after the quiet: wait %v, want none (the count faded)", w)
	}
}

// Parallel guesses get no more tries through than sequential ones: each counts when it
// starts.
func TestParallelBurst(t *testing.T) {
	g, _ := newGuard(Default)
	var wg sync.WaitGroup
	var mu sync.Mutex
	let := 0
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at, err := g.Begin("alice", addrA)
			if err != nil {
				return
			}
			mu.Lock()
			let++
			mu.Unlock()
			at.Failed()
		}()
	}
	wg.Wait()
	if let != Default.Name.Free+1 {
		t.Fatalf("%d of 100 parallel attempts let through, want %d", let, Default.Name.Free+1)
	}
}

// Memory is bounded however many names and addresses come.
func TestBounded(t *testing.T) {
	cfg := Default
	cfg.MaxEntries = 50
	g, c := newGuard(cfg)
	fail(t, g, c, "alice", addrA, 20)
	for i := 0; i < 1000; i++ {
		a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		name := fmt.Sprintf("u%d", i)
		at, err := g.Begin(name, a)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			at.Succeeded()
		} else {
			at.Failed()
		}
		c.Add(time.Hour) // every u's entry fades before the next
	}
	n, a, p, k := g.Len()
	if n > 50 || a > 50 || p > 50 || k > 50 {
		t.Fatalf("tables hold %d names, %d addresses, %d pairs, %d known pairs; want at most 50 each", n, a, p, k)
	}
}

// IPv6 clients are counted by their /64.
func TestIPv6Prefix(t *testing.T) {
	g, c := newGuard(Default)
	for i := 0; i < 40; i++ {
		a := netip.MustParseAddr(fmt.Sprintf("2001:db8:1:2::%x", i+1))
		fail(t, g, c, fmt.Sprintf("u%d", i), a, 1)
	}
	if w := wait(t, g, "bob", netip.MustParseAddr("2001:db8:1:2:ffff::1")); w == 0 {
		t.Fatalf("another address of the same /64 is not throttled")
	}
	if w := wait(t, g, "bob", netip.MustParseAddr("2001:db8:1:3::1")); w != 0 {
		t.Fatalf("another /64 waits %v", w)
	}
}
