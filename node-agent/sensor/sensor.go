// Package sensor watches the person at the desk for the node agent: each sensor delivers
// Events on a channel, driven by the kernel's own notifications wherever one exists, so
// that the agent reacts to the input event itself rather than to a poll (HTCondor's kbdd
// looks every 5 s; the agent's target is 250 ms from input to action at the 99th
// percentile).
//
//   - Input: every /dev/input/event* device (keyboards, mice, touchpads), hot-plugged
//     devices included (inotify on the directory). Each device's file descriptor sits in
//     Go's poller; nothing wakes up while nobody types.
//   - Logind: sessions of systemd-logind over D-Bus (SessionNew, SessionRemoved,
//     PropertiesChanged: idle hints).
//   - Utmp: login sessions from utmp, for hosts without logind, and activity on each
//     session's terminal (inotify on /dev/pts/N or /dev/ttyN), which is how ssh and text
//     console use becomes owner activity without polling.
//   - Pressure: PSI triggers (the kernel wakes the poller when stalls exceed a threshold)
//     on /proc/pressure or a cgroup's *.pressure files.
//   - Load: CPU use outside the compute guest. No event exists for that: this one sensor
//     samples (every second, averaged over 5 s).
//
// Privacy: the input sensor reads the kernel's struct input_event records only for their
// timestamps. Of the rest it looks at the event type alone, to tell input by a person
// (key, relative and absolute axes, switches) from the kernel's framing (EV_SYN) and from
// feedback the system itself generates (LEDs, sounds, autorepeat settings, force
// feedback). Key codes and values — what was typed — are never inspected, stored, logged
// or passed on: an Event says only that there was input on a device, and when. The
// terminal sensor does not read terminals at all; inotify only says that someone did.
package sensor

import (
	"context"
	"time"
)

// Kind is what an Event reports.
type Kind string

const (
	KindInput    Kind = "input"    // input on a device or a session's terminal
	KindSessions Kind = "sessions" // the logged-in sessions changed
	KindPressure Kind = "pressure" // PSI stall of the desktop, percent
	KindLoad     Kind = "load"     // CPU use outside the guest crossed its threshold, cores
)

// Event is one observation of a sensor.
type Event struct {
	Kind Kind
	// Time is when it happened: for device input the kernel's timestamp of the input
	// event (converted to wall-clock time; it carries a monotonic reading for time.Since),
	// otherwise when the sensor noticed.
	Time time.Time
	// Source names where: "input:event3", "tty:pts/3", "logind", "utmp",
	// "/proc/pressure/cpu", "load".
	Source   string
	Sessions Sessions // for KindSessions
	// Value: for KindPressure the largest "some avg10" (percent) of the watched
	// cpu/memory/io pressure files, for KindLoad the CPU use in cores.
	Value float64
}

// Sessions are the logged-in sessions of people (not those of display managers' greeters
// or of system services).
type Sessions struct {
	Local, Remote int
	// Graphical counts the local sessions on a display (logind's Type x11, wayland or
	// mir): those an abandoned-session logout may end (node-agent/idlelogout). utmp
	// cannot tell: 0.
	Graphical int
	// IdleSince is, when AllIdle, the time the last session went idle (logind's
	// IdleSinceHint); zero when not all are idle or it is not known (utmp).
	IdleSince time.Time
	// AllIdle: every session says it is idle (logind's IdleHint); false without sessions.
	AllIdle bool
}

// Equal tells whether s and o say the same.
func (s Sessions) Equal(o Sessions) bool {
	return s.Local == o.Local && s.Remote == o.Remote && s.Graphical == o.Graphical && s.AllIdle == o.AllIdle && s.IdleSince.Equal(o.IdleSince)
}

// Total is Local+Remote.
func (s Sessions) Total() int { return s.Local + s.Remote }

// Sensor is what every sensor of this package implements. Run delivers events on out
// until ctx is done, and then returns nil; it returns an error early only when the
// sensor cannot work at all on this host (no system bus, no PSI), for the agent to log and
// fall back on another. Run does not close out and sends nothing after it returned.
type Sensor interface {
	Run(ctx context.Context, out chan<- Event) error
}

// send delivers ev unless ctx ends first.
func send(ctx context.Context, out chan<- Event, ev Event) bool {
	select {
	case out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// DefaultCoalesce is the input sensors' default interval between events of one device.
const DefaultCoalesce = 250 * time.Millisecond

// coalescer limits input events to one per window per source: the first event after a
// quiet window goes out at once; events within the window after an emitted one are held,
// and the latest of them goes out when the window ends (so a consumer learns within one
// window that input went on). Not safe for concurrent use: one loop owns it.
type coalescer struct {
	window  time.Duration
	last    map[string]time.Time // when the last event of a source went out (local clock)
	pending map[string]Event     // the latest held event of a source
}

func newCoalescer(window time.Duration) *coalescer {
	if window <= 0 {
		window = DefaultCoalesce
	}
	return &coalescer{window: window, last: map[string]time.Time{}, pending: map[string]Event{}}
}

// add takes an event observed at now and says whether it goes out now.
func (c *coalescer) add(ev Event, now time.Time) bool {
	if p, held := c.pending[ev.Source]; held {
		if ev.Time.After(p.Time) {
			c.pending[ev.Source] = ev
		}
		return false
	}
	if last, ok := c.last[ev.Source]; ok && now.Sub(last) < c.window {
		c.pending[ev.Source] = ev
		return false
	}
	c.last[ev.Source] = now
	return true
}

// due returns the held events whose window has ended, marking them sent, and the time
// the next one is due (zero when none is held).
func (c *coalescer) due(now time.Time) (out []Event, next time.Time) {
	for src, ev := range c.pending {
		at := c.last[src].Add(c.window)
		if !now.Before(at) {
			out = append(out, ev)
			delete(c.pending, src)
			c.last[src] = now
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return out, next
}

// forget drops a source's state (a removed device).
func (c *coalescer) forget(src string) {
	delete(c.last, src)
	delete(c.pending, src)
}

// resetTimer makes t fire at at, or never when at is zero.
func resetTimer(t *time.Timer, at time.Time) {
	t.Stop()
	if !at.IsZero() {
		t.Reset(time.Until(at))
	}
}
