package api_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
)

// whoamiFrom is GET /api/v1/whoami as user from the client address from (via
// X-Forwarded-For): status, Retry-After in seconds (-1: none) and body.
func whoamiFrom(t *testing.T, e *testenv.Env, user, pw, from string) (int, int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.HTTP.URL+"/api/v1/whoami", nil)
	req.SetBasicAuth(user, pw)
	if from != "" {
		req.Header.Set("X-Forwarded-For", from)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	ra := -1
	if v := res.Header.Get("Retry-After"); v != "" {
		if ra, err = strconv.Atoi(v); err != nil {
			t.Fatalf("Retry-After %q: %v", v, err)
		}
	}
	return res.StatusCode, ra, string(body)
}

// Failed logins through HTTP Basic are throttled per user name and per client address:
// a stranger guessing alice's password is answered 429 with Retry-After (without the
// password being tried: alice's right one is refused there too, her cached login
// notwithstanding), alice herself gets in at once at her usual address, from a fresh
// one after at most the name's cap, and an unknown user is throttled the same way.
func TestLoginThrottle(t *testing.T) {
	e, clk, cfg := testenv.NewThrottled(t, "127.0.0.1/32")
	const usual, attacker, fresh, fresh2, other = "198.51.100.3", "198.51.100.1", "198.51.100.2", "198.51.100.4", "198.51.100.9"
	ok := func(from string) {
		t.Helper()
		if code, _, body := whoamiFrom(t, e, "alice", "alice-secret", from); code != http.StatusOK {
			t.Fatalf("alice's right password from %s: %d %s", from, code, body)
		}
	}
	ok(usual)
	for i := 0; i <= cfg.Name.Free; i++ {
		if code, _, body := whoamiFrom(t, e, "alice", "guess", attacker); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d %s, want 401", i+1, code, body)
		}
	}
	code, ra, throttledBody := whoamiFrom(t, e, "alice", "alice-secret", attacker)
	if code != http.StatusTooManyRequests || ra < 1 || !strings.Contains(throttledBody, "too many failed logins") {
		t.Fatalf("after %d failures, the right password from the guesser's address: %d, Retry-After %d, %s; want 429 with Retry-After", cfg.Name.Free+1, code, ra, throttledBody)
	}
	ok(usual) // a known address: the name's delay does not apply
	code, ra, body := whoamiFrom(t, e, "alice", "alice-secret", fresh)
	if code != http.StatusTooManyRequests || ra < 1 || ra > int(cfg.Name.Cap/time.Second) {
		t.Fatalf("alice from a fresh address: %d, Retry-After %d, %s; want 429 with at most %v", code, ra, body, cfg.Name.Cap)
	}
	clk.Add(time.Duration(ra) * time.Second)
	ok(fresh)

	// The guesser keeps going, waiting out each delay: their address is slowed far
	// beyond the name's cap, and alice from yet another address still waits at most that.
	for ra = 0; ra <= int(cfg.Name.Cap/time.Second); {
		code, ra, body = whoamiFrom(t, e, "alice", "guess", attacker)
		switch code {
		case http.StatusUnauthorized:
			ra = 0
		case http.StatusTooManyRequests:
			if ra <= int(cfg.Name.Cap/time.Second) {
				clk.Add(time.Duration(ra) * time.Second)
			}
		default:
			t.Fatalf("guess: %d %s", code, body)
		}
	}
	attackerWait := ra // > the name's cap
	code, ra, body = whoamiFrom(t, e, "alice", "alice-secret", fresh2)
	if code == http.StatusTooManyRequests && ra <= int(cfg.Name.Cap/time.Second) {
		clk.Add(time.Duration(ra) * time.Second)
		code, _, body = whoamiFrom(t, e, "alice", "alice-secret", fresh2)
	}
	if code != http.StatusOK {
		t.Fatalf("alice from another fresh address, after at most the name's cap %v (the guesser's address waits %d s): %d %s", cfg.Name.Cap, attackerWait, code, body)
	}

	// A user who does not exist: the same refusals, the same throttle, the same words.
	for i := 0; i <= cfg.Name.Free; i++ {
		if code, _, body := whoamiFrom(t, e, "nosuchuser", "guess", other); code != http.StatusUnauthorized {
			t.Fatalf("unknown user, guess %d: %d %s, want 401", i+1, code, body)
		}
	}
	if code, ra, body := whoamiFrom(t, e, "nosuchuser", "guess", other); code != http.StatusTooManyRequests || ra != 1 || body != throttledBody {
		t.Fatalf("unknown user after %d failures: %d, Retry-After %d, %s; want 429 as for alice: %s", cfg.Name.Free+1, code, ra, body, throttledBody)
	}
}

// X-Forwarded-For from a peer that is not a trusted proxy is ignored: a guesser cannot
// escape the address's throttle by writing a new address into each request.
func TestLoginThrottleIgnoresUntrustedForwardedFor(t *testing.T) {
	e, _, cfg := testenv.NewThrottled(t, "192.0.2.0/24") // loopback is not a trusted proxy
	var code int
	var body string
	for i := 0; i < cfg.Addr.Free+1; i++ {
		// A different name and claimed address each time: only the peer's address adds up.
		code, _, body = whoamiFrom(t, e, "guess"+strconv.Itoa(i), "guess", "203.0.113."+strconv.Itoa(i))
		if code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d %s, want 401", i+1, code, body)
		}
	}
	code, _, body = whoamiFrom(t, e, "guess-next", "guess", "203.0.113.200")
	if code != http.StatusTooManyRequests {
		t.Fatalf("after %d failures from one peer with forged X-Forwarded-For: %d %s, want 429", cfg.Addr.Free+1, code, body)
	}
}
