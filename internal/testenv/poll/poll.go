// Package poll waits in tests for a condition that no event announces: it polls with a
// deadline instead of sleeping a fixed time. A leaf package, so that the tests of any
// package (and the test environments under internal/testenv) can use it.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 10 * time.Millisecond

// Until polls cond every Interval until it holds, and fails t when within has passed
// first, naming what was awaited.
func Until(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(Interval)
	}
}
