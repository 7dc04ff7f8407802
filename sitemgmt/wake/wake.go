// Package wake decides which powered-off PCs must be woken before their schedule needs
// them (issue 15, "Power"): a PC that is off (no fresh heartbeat) is woken when the next
// change of its schedule is to a mode other than local disk, at the boundary minus its
// pool's measured boot time and a margin, so that it has booted into the new mode when
// the slot starts. Pure: the site manager hands in the hosts' next changes, whether they
// are off, and the boot times their agents reported; the boot server sends the packets.
package wake

import (
	"slices"
	"strconv"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

const (
	// DefaultBoot is the boot time assumed for a pool none of whose agents has reported
	// one yet: a PXE boot of the desktop image over a busy network.
	DefaultBoot = 180 * time.Second
	// Margin is added to the measured boot time: the firmware's POST before the agent's
	// clock starts (BootSeconds counts from the kernel), and a boot server's poll interval.
	Margin = 60 * time.Second
)

// Host is one host's input: its pool, whether it is off, and its schedule's next change.
type Host struct {
	Name, Pool string
	Off        bool           // no fresh heartbeat: the PC is off or its agent is not running
	Next       time.Time      // the next change (zero: none ahead)
	NextMode   string         // the mode from then on
	NextKind   model.ModeKind // its kind
}

// Wake is a wake that is due: Host must be woken now for NextMode at Boundary.
type Wake struct {
	ID       string
	Host     string
	Boundary time.Time
	Due      time.Time // Boundary minus the pool's lead
	Mode     string
}

// ID names the scheduled wake of host for the change at boundary: the same on every
// replica and at every poll, so that the boot server's report marks it sent once.
func ID(host string, boundary time.Time) string {
	return "sched-" + host + "-" + strconv.FormatInt(boundary.Unix(), 10)
}

// Lead is how long before a boundary a pool's PCs are woken: the median of the boot
// times its agents reported (seconds; <= 0 ignored), DefaultBoot without any, plus
// Margin. The median, not the mean: one PC that hung in its firmware must not wake the
// whole room ten minutes early.
func Lead(bootSeconds []float64) time.Duration {
	var s []float64
	for _, b := range bootSeconds {
		if b > 0 {
			s = append(s, b)
		}
	}
	if len(s) == 0 {
		return DefaultBoot + Margin
	}
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return time.Duration(m*float64(time.Second)) + Margin
}

// Due lists the wakes due at now: hosts that are off whose next change, to a mode other
// than local disk, lies within their pool's lead (boot: the reported boot times by
// pool). A wake stays due until the boundary; the caller drops those already sent (by
// ID). Sorted by host.
func Due(hosts []Host, boot map[string][]float64, now time.Time) []Wake {
	leads := map[string]time.Duration{}
	var out []Wake
	for _, h := range hosts {
		if !h.Off || h.Next.IsZero() || h.NextKind == model.KindLocalDisk || h.NextKind == "" {
			continue
		}
		lead, ok := leads[h.Pool]
		if !ok {
			lead = Lead(boot[h.Pool])
			leads[h.Pool] = lead
		}
		due := h.Next.Add(-lead)
		if now.Before(due) || !now.Before(h.Next) {
			continue
		}
		out = append(out, Wake{ID: ID(h.Name, h.Next), Host: h.Name, Boundary: h.Next, Due: due, Mode: h.NextMode})
	}
	slices.SortFunc(out, func(a, b Wake) int {
		if a.Host < b.Host {
			return -1
		}
		if a.Host > b.Host {
			return 1
		}
		return 0
	})
	return out
}
