// Package idlelogout decides when an abandoned graphical session is logged out: a student
// who walks away from a locked (or unlocked) desktop would otherwise hold the PC for
// ever — a `wait` schedule switch waits for their logout, the power policy never finds
// the PC free, and the next student meets someone else's session. It is pure: the node
// agent gives it the last input at the PC's keyboard and mouse, the graphical sessions
// and the clock, shows the warning and ends the sessions (docs/desktop.md "Abandoned
// sessions").
//
// The rules:
//   - only a pool's LogoutIdle (policy logoutIdle) turns it on; only local graphical
//     sessions count (a console or ssh login is nobody's seat);
//   - the people logged in are warned Warning(limit) before the logout, and always get
//     that long: a limit already passed when it is learnt (a policy change, an agent
//     restart) moves the logout to the warning plus its lead;
//   - any input at the PC after the warning cancels it; the count starts again.
package idlelogout

import (
	"fmt"
	"time"
)

// MaxWarning is the longest lead of the warning: enough to come back from the coffee
// machine, not so long that it is forgotten.
const MaxWarning = 5 * time.Minute

// Warning is how long before the logout the people logged in are told: MaxWarning, or
// half the limit when that is shorter.
func Warning(limit time.Duration) time.Duration {
	return min(MaxWarning, limit/2)
}

// Input is what the agent observes.
type Input struct {
	Now time.Time
	// LastInput is the last keyboard or mouse event at the PC (or the session's start,
	// when that is later: a login is input).
	LastInput time.Time
	// Graphical is the number of local graphical sessions of people (not greeters).
	Graphical int
	// Limit is the pool's LogoutIdle (0: off).
	Limit time.Duration
	// Warned is when the warning of the current count was shown (zero: not yet).
	Warned time.Time
}

// Plan is the decision.
type Plan struct {
	// Warn: show the warning now (Text says when the logout comes); the caller records
	// Now as Warned.
	Warn bool
	Text string
	// Logout: end the graphical sessions now.
	Logout bool
	// Reset: the warning shown is void (input came, or nobody is left); the caller
	// forgets Warned.
	Reset bool
	// Wake: decide again then at the latest (zero: only on events).
	Wake time.Time
}

// Decide applies the rules to in.
func Decide(in Input) Plan {
	warned := !in.Warned.IsZero()
	if in.Limit <= 0 || in.Graphical == 0 {
		return Plan{Reset: warned}
	}
	lead := Warning(in.Limit)
	due := in.LastInput.Add(in.Limit)
	if warned && in.LastInput.After(in.Warned) {
		// Someone came back after the warning: it is void, the count starts again.
		return Plan{Reset: true, Wake: due.Add(-lead)}
	}
	if !warned {
		if in.Now.Before(due.Add(-lead)) {
			return Plan{Wake: due.Add(-lead)}
		}
		at := later(due, in.Now.Add(lead))
		return Plan{Warn: true, Text: Text(in.Now, at, in.Limit), Wake: at}
	}
	at := later(due, in.Warned.Add(lead))
	if in.Now.Before(at) {
		return Plan{Wake: at}
	}
	return Plan{Logout: true}
}

// Title is the warning's heading.
const Title = "You will be logged out"

// Text is the warning: when the logout comes, why, and how to stay.
func Text(now, at time.Time, limit time.Duration) string {
	in := at.Sub(now).Round(time.Second)
	return fmt.Sprintf("Nobody has used this PC for %s: the session ends in %s (at %s) and unsaved work is lost. "+
		"Move the mouse or press a key to stay logged in.", words(limit), words(in), at.Format("15:04"))
}

// words says a duration as people do: "2 minutes", "45 seconds", "1 hour 30 minutes".
func words(d time.Duration) string {
	d = d.Round(time.Second)
	unit := func(n int, one string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0 && m > 0:
		return unit(h, "hour") + " " + unit(m, "minute")
	case h > 0:
		return unit(h, "hour")
	case m > 0 && s >= 30 && m < 10:
		return unit(m, "minute") + " " + unit(s, "second")
	case m > 0:
		return unit(m, "minute")
	}
	return unit(s, "second")
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
