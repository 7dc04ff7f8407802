// Package loginguard throttles password guessing: failed logins slow down further
// attempts for the same user name and from the same source address, with delays that
// grow exponentially up to a cap and fade when the failures stop. It is the one throttle
// behind both front ends (the API's HTTP Basic and the web UI's login form): the service
// asks it before a password is tried (service.Accounts.Login) and tells it the outcome.
//
// Why delays and not a lock: a lock a stranger can trigger by typing wrong passwords for
// "alice" locks the real alice out. Here nothing is ever locked for longer than a cap, and
// the caps differ on purpose:
//
//   - Per source address (an IPv4 address, an IPv6 /64): a guesser at one address is
//     slowed to one attempt per several minutes (Addr's cap, 15 min), whatever names
//     it tries. Addresses get more free failures than names because a campus NAT or a
//     lab's proxy carries many people's typos.
//   - Per user name: a guesser who spreads over many addresses is still slowed on the
//     one name, but only to Name's cap (1 min), so that the real alice, from a fresh
//     address, waits at most that long behind someone hammering her name.
//   - An address the name logged in from successfully before (a "known pair", for
//     Known, 30 days) is not subject to the name's delay at all, nor to the address's
//     (other people's typos there), only to the failures of that name from that
//     address (Pair): an attacker elsewhere cannot slow alice at her usual desk, and
//     one at her desk is slowed as a guesser at one address is.
//
// A failure is counted when the attempt starts (Begin) and taken back when the password
// turns out right or the directory could not be asked (Attempt.Succeeded, Unanswered):
// a burst of parallel guesses therefore gets no more tries through than sequential ones.
// Names are counted whether or not such a user exists, so a delay says nothing about
// existence. Memory is bounded: each table holds at most MaxEntries keys, dropping the
// entries whose failures have faded first and then the longest unused ones.
package loginguard

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Policy is the delay rule for one kind of key.
type Policy struct {
	// Free failures cost nothing; after them each further failure makes the next attempt
	// wait Base, 2·Base, 4·Base, ... up to Cap.
	Free      int
	Base, Cap time.Duration
	// Leak: one failure is forgiven per Leak of quiet after the last failure's wait (a
	// count that decays, so that an address's occasional typos never add up to a delay).
	Leak time.Duration
}

// Config is the whole throttle. Zero fields take the defaults (Default).
type Config struct {
	Name, Addr, Pair Policy
	// Known is how long a successful login makes its (name, address) pair known.
	Known time.Duration
	// MaxEntries bounds each table (names, addresses, pairs, known pairs).
	MaxEntries int
	// FailureFloor is the least time a failed password check takes (service.Login pads
	// to it), so that the time of a refusal does not tell whether the user exists.
	FailureFloor time.Duration
	// Now is the clock (tests inject one); default time.Now.
	Now func() time.Time
}

// Default is the policy `overtime serve` runs with (docs/admin-guide.md, "Logins").
var Default = Config{
	Name:         Policy{Free: 5, Base: time.Second, Cap: time.Minute, Leak: time.Minute},
	Addr:         Policy{Free: 10, Base: time.Second, Cap: 15 * time.Minute, Leak: 5 * time.Minute},
	Pair:         Policy{Free: 10, Base: time.Second, Cap: 15 * time.Minute, Leak: 5 * time.Minute},
	Known:        30 * 24 * time.Hour,
	MaxEntries:   10000,
	FailureFloor: 500 * time.Millisecond,
}

func (c Config) withDefaults() Config {
	pol := func(p *Policy, d Policy) {
		if p.Free == 0 && p.Base == 0 && p.Cap == 0 && p.Leak == 0 {
			*p = d
		}
		if p.Base <= 0 {
			p.Base = d.Base
		}
		if p.Cap < p.Base {
			p.Cap = p.Base
		}
		if p.Leak <= 0 {
			p.Leak = d.Leak
		}
	}
	pol(&c.Name, Default.Name)
	pol(&c.Addr, Default.Addr)
	pol(&c.Pair, Default.Pair)
	if c.Known <= 0 {
		c.Known = Default.Known
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = Default.MaxEntries
	}
	if c.FailureFloor < 0 {
		c.FailureFloor = 0
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Throttled is the refusal of an attempt that came too early. Its message says neither
// which of the name or the address is throttled nor whether the user exists.
type Throttled struct{ Wait time.Duration }

func (e *Throttled) Error() string {
	return fmt.Sprintf("too many failed logins for this user name or from this address: try again in %s", RoundUp(e.Wait))
}

// RetryAfter is a wait as the Retry-After header states it: whole seconds, rounded up.
func RetryAfter(d time.Duration) string { return strconv.Itoa(int(RoundUp(d) / time.Second)) }

// RoundUp is a wait in whole seconds (at least 1 s), as Retry-After states it.
func RoundUp(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second
	return max(s, 1) * time.Second
}

// entry is the failures of one key.
type entry struct {
	n     float64   // failures, decayed to last
	last  time.Time // last failure (or taken-back failure)
	until time.Time // no attempt before this
}

// table is one kind of key with its policy.
type table struct {
	p Policy
	m map[string]*entry
}

// decayed is e's count at now. Quiet starts when the wait the last failure imposed is
// over: a guesser who waits out each delay and tries again is never quiet, and so
// reaches the cap and stays there.
func (t *table) decayed(e *entry, now time.Time) float64 {
	quiet := now.Sub(e.last)
	if e.until.After(e.last) {
		quiet = now.Sub(e.until)
	}
	return max(0, e.n-float64(max(quiet, 0))/float64(t.p.Leak))
}

// delay is the wait after the n-th failure.
func (t *table) delay(n float64) time.Duration {
	// A failure counts until it has faded whole: a part of one left counts as one.
	over := int(math.Ceil(n-1e-9)) - t.p.Free
	if over <= 0 {
		return 0
	}
	d := t.p.Base
	for i := 1; i < over && d < t.p.Cap; i++ {
		d *= 2
	}
	return min(d, t.p.Cap)
}

func (t *table) wait(key string, now time.Time) time.Duration {
	if e := t.m[key]; e != nil && now.Before(e.until) {
		return e.until.Sub(now)
	}
	return 0
}

// fail counts a failure of key at now; it returns the entry's until before, for undo.
func (t *table) fail(key string, now time.Time, max int) (prevUntil time.Time) {
	e := t.m[key]
	if e == nil {
		if len(t.m) >= max {
			t.evict(now)
		}
		e = &entry{}
		t.m[key] = e
	}
	prevUntil = e.until
	e.n = t.decayed(e, now) + 1
	e.last = now
	e.until = now.Add(t.delay(e.n))
	return prevUntil
}

// undo takes back a failure counted at at (a right password, or no answer).
func (t *table) undo(key string, at time.Time, prevUntil time.Time) {
	e := t.m[key]
	if e == nil {
		return // evicted meanwhile
	}
	e.n = max(0, e.n-1)
	if e.last.Equal(at) {
		// No failure since: the delay this attempt started is not owed.
		e.until = prevUntil
	}
}

// evict makes room: first every entry whose failures have faded and whose wait is over,
// and if none has, the one unused longest. (Called only on a full table: the scan is
// bounded by MaxEntries and happens once per new key at most.)
func (t *table) evict(now time.Time) {
	var oldest string
	var oldestAt time.Time
	freed := false
	for k, e := range t.m {
		if !now.Before(e.until) && t.decayed(e, now) == 0 {
			delete(t.m, k)
			freed = true
			continue
		}
		if oldest == "" || e.last.Before(oldestAt) {
			oldest, oldestAt = k, e.last
		}
	}
	if !freed && oldest != "" {
		delete(t.m, oldest)
	}
}

// Guard is the throttle. Its methods are safe for concurrent use.
type Guard struct {
	cfg              Config
	mu               sync.Mutex
	name, addr, pair table
	known            map[string]time.Time // pair key → when it last logged in
}

// New makes a Guard.
func New(cfg Config) *Guard {
	cfg = cfg.withDefaults()
	return &Guard{cfg: cfg,
		name:  table{p: cfg.Name, m: map[string]*entry{}},
		addr:  table{p: cfg.Addr, m: map[string]*entry{}},
		pair:  table{p: cfg.Pair, m: map[string]*entry{}},
		known: map[string]time.Time{},
	}
}

// FailureFloor is Config.FailureFloor.
func (g *Guard) FailureFloor() time.Duration { return g.cfg.FailureFloor }

// AddrKey is the key a source address is counted under: the address itself for IPv4,
// its /64 for IPv6 (one subscriber's allocation: an attacker has all of it). An invalid
// address (none known) is one key of its own.
func AddrKey(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "?"
	case a.Is4() || a.Is4In6():
		return a.Unmap().String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

func pairKey(name, addr string) string { return name + "\x00" + addr }

// Attempt is a login attempt Begin let through, counted as a failure until its outcome
// says otherwise. Call exactly one of Failed, Succeeded or Unanswered.
type Attempt struct {
	g                  *Guard
	name, addr, pair   string
	at                 time.Time
	prevN, prevA, prev time.Time
}

// Check reports how long name from addr must wait before an attempt (0: may try now),
// without counting one. The API asks it before its cache of recent logins compares a
// password, so that the cache is no way around the throttle.
func (g *Guard) Check(name string, addr netip.Addr) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waitLocked(name, AddrKey(addr), g.cfg.Now())
}

func (g *Guard) waitLocked(name, a string, now time.Time) time.Duration {
	pk := pairKey(name, a)
	if t, ok := g.known[pk]; ok && now.Sub(t) <= g.cfg.Known {
		return g.pair.wait(pk, now)
	}
	return max(g.name.wait(name, now), g.addr.wait(a, now), g.pair.wait(pk, now))
}

// Begin starts an attempt of name from addr: a *Throttled error while it must wait,
// otherwise the attempt, already counted as a failure.
func (g *Guard) Begin(name string, addr netip.Addr) (*Attempt, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now, a := g.cfg.Now(), AddrKey(addr)
	if w := g.waitLocked(name, a, now); w > 0 {
		return nil, &Throttled{Wait: w}
	}
	at := &Attempt{g: g, name: name, addr: a, pair: pairKey(name, a), at: now}
	at.prevN = g.name.fail(name, now, g.cfg.MaxEntries)
	at.prevA = g.addr.fail(a, now, g.cfg.MaxEntries)
	at.prev = g.pair.fail(at.pair, now, g.cfg.MaxEntries)
	return at, nil
}

// Failed: the password was wrong (or the user unknown); the failure stays counted.
func (at *Attempt) Failed() {}

// Succeeded: the password was right. The failure is taken back and the pair becomes
// known. (The earlier failures are not forgiven: a guesser who owns an account must not
// reset an address's count by logging in as themselves between guesses.)
func (at *Attempt) Succeeded() {
	g := at.g
	g.mu.Lock()
	defer g.mu.Unlock()
	at.undoLocked()
	now := g.cfg.Now()
	if _, ok := g.known[at.pair]; !ok && len(g.known) >= g.cfg.MaxEntries {
		g.evictKnownLocked(now)
	}
	g.known[at.pair] = now
}

// Unanswered: the directory could not be asked; nothing was learnt, nothing is counted.
func (at *Attempt) Unanswered() {
	at.g.mu.Lock()
	defer at.g.mu.Unlock()
	at.undoLocked()
}

func (at *Attempt) undoLocked() {
	at.g.name.undo(at.name, at.at, at.prevN)
	at.g.addr.undo(at.addr, at.at, at.prevA)
	at.g.pair.undo(at.pair, at.at, at.prev)
}

// evictKnownLocked drops expired known pairs, or if none, the one unused longest.
func (g *Guard) evictKnownLocked(now time.Time) {
	var oldest string
	var oldestAt time.Time
	freed := false
	for k, t := range g.known {
		if now.Sub(t) > g.cfg.Known {
			delete(g.known, k)
			freed = true
			continue
		}
		if oldest == "" || t.Before(oldestAt) {
			oldest, oldestAt = k, t
		}
	}
	if !freed && oldest != "" {
		delete(g.known, oldest)
	}
}

// Len is the number of entries in each table (names, addresses, pairs, known pairs).
func (g *Guard) Len() (names, addrs, pairs, known int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.name.m), len(g.addr.m), len(g.pair.m), len(g.known)
}
