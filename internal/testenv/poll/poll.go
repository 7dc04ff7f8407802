// Package poll waits in tests for a condition that no event announces: it polls with a
// deadline instead of sleeping a fixed time. A leaf package, so that the tests of any
// package (and the test environments under internal/testenv) can use it.
//
// Until fails the test on the deadline; Wait and WaitEvery only report whether the
// condition held, for helpers that add their own context to the failure (a daemon's log)
// or that are not handed a testing.TB.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until and Wait check their condition.
const Interval = 10 * time.Millisecond

// Until polls cond every Interval until it holds, and fails t when within has passed
// first, naming what was awaited.
func Until(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	if !Wait(within, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// Wait polls cond every Interval until it holds or within has passed, and reports whether
// it held.
func Wait(within time.Duration, cond func() bool) bool {
	return WaitEvery(within, Interval, cond)
}

// WaitEvery is Wait checking every interval instead of every Interval: for conditions
// that cost a process or a round trip to check (a daemon's readiness probe). cond is
// checked at least once, and once more at the deadline, so a slow check or a descheduled
// test does not miss a condition that came true just in time.
func WaitEvery(within, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(interval, left))
	}
}
