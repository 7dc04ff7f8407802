package poll

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	cases := []struct {
		name      string
		within    time.Duration
		trueAfter int // the check from which cond holds; 0: never
		want      bool
		minChecks int
	}{
		{"holds at once", time.Second, 1, true, 1},
		{"holds after a few checks", 5 * time.Second, 4, true, 4},
		{"never holds", 50 * time.Millisecond, 0, false, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var checks int
			start := time.Now()
			got := Wait(c.within, func() bool {
				checks++
				return c.trueAfter > 0 && checks >= c.trueAfter
			})
			took := time.Since(start)
			if got != c.want {
				t.Fatalf("Wait = %v after %d checks, want %v", got, checks, c.want)
			}
			if checks < c.minChecks {
				t.Errorf("%d checks, want at least %d", checks, c.minChecks)
			}
			if c.trueAfter > 0 && checks != c.trueAfter {
				t.Errorf("checked %d times, want to stop at the first that holds (%d)", checks, c.trueAfter)
			}
			if !got && took < c.within {
				t.Errorf("gave up after %v, before the deadline %v", took, c.within)
			}
		})
	}
}

// The last check is at the deadline, not an interval before it: a condition that comes
// true just in time is seen, though the interval is much longer than within.
func TestWaitEveryChecksAtTheDeadline(t *testing.T) {
	start := time.Now()
	within := 100 * time.Millisecond
	got := WaitEvery(within, time.Hour, func() bool { return time.Since(start) >= within })
	if !got {
		t.Fatal("the condition that held at the deadline was not seen")
	}
	if took := time.Since(start); took > 10*within {
		t.Errorf("took %v: slept the whole interval past the deadline", took)
	}
}

// A condition that another goroutine makes true is seen within a few intervals.
func TestUntilSeesAnotherGoroutine(t *testing.T) {
	var done atomic.Bool
	time.AfterFunc(30*time.Millisecond, func() { done.Store(true) })
	start := time.Now()
	Until(t, "the flag", 10*time.Second, done.Load)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Until returned after %v", took)
	}
}

// fakeTB records Fatalf instead of stopping the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = strings.TrimSpace(fmt.Sprintf(format, args...))
}

func TestUntilFailsNamingWhat(t *testing.T) {
	f := &fakeTB{TB: t}
	Until(f, "the moon", 20*time.Millisecond, func() bool { return false })
	if !strings.Contains(f.failed, "waiting for the moon") || !strings.Contains(f.failed, "20ms") {
		t.Errorf("failure %q, want it to name what was awaited and for how long", f.failed)
	}
	f = &fakeTB{TB: t}
	Until(f, "the sun", time.Second, func() bool { return true })
	if f.failed != "" {
		t.Errorf("failed although the condition held: %q", f.failed)
	}
}
