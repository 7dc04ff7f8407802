package matrix

import (
	"math"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// Kind is how a desktop workload's slowdown is defined.
type Kind string

const (
	// Throughput (cpu, memory, fs): slowdown = alone rate / both rate - 1.
	Throughput Kind = "throughput"
	// Latency (wakeup, startup): slowdown = median(both) / median(alone) - 1, plus the
	// absolute p99 delta.
	Latency Kind = "latency"
	// Frame: slowdown = median frame work time both / alone - 1, plus the missed-frame
	// share delta.
	Frame Kind = "frame"
)

// KindOf is the kind of desktop workload name.
func KindOf(name string) Kind {
	switch name {
	case "wakeup", "startup":
		return Latency
	case "frame":
		return Frame
	}
	return Throughput
}

// rate is work per second of a run (NaN if it has no time).
func rate(r interference.Result) float64 {
	if r.Seconds <= 0 {
		return math.NaN()
	}
	return r.Work / r.Seconds
}

// Derived are the numbers of one cell in one round, from its three runs.
type Derived struct {
	// Slowdown per the desktop's Kind (fraction: 0.01 = 1% slower).
	Slowdown float64 `json:"slowdown"`
	// P99DeltaUs: latency kinds, p99(both) - p99(alone) of the workload's own latencies.
	P99DeltaUs float64 `json:"p99DeltaUs"`
	// MissedDelta: frame, missed-frame share both - alone.
	MissedDelta float64 `json:"missedDelta"`
	// ProbeP99AloneUs, ProbeP99BothUs: the wake-up probe's p99 next to the desktop
	// workload, without and with the guest.
	ProbeP99AloneUs float64 `json:"probeP99AloneUs"`
	ProbeP99BothUs  float64 `json:"probeP99BothUs"`
	// IdleShare: 1 - desktop CPU / (cores × seconds) in desktop-alone.
	IdleShare float64 `json:"idleShare"`
	// Harvest: guest work during the desktop's run / (guest-alone rate × run seconds ×
	// IdleShare); NaN when the guest does no measurable work (idle).
	Harvest float64 `json:"harvest"`
	// GuestShare: guest work during the run / (guest-alone rate × run seconds).
	GuestShare float64 `json:"guestShare"`
}

// minIdleShare keeps Harvest finite when the desktop alone filled every core.
const minIdleShare = 0.01

// Derive computes a cell's numbers for one round: alone is the desktop-alone run (with
// the probe), both the run next to the guest, guestAlone the guest-alone run.
func Derive(desktop string, cores int, alone, both, guestAlone *Run) Derived {
	d := Derived{Slowdown: math.NaN(), P99DeltaUs: math.NaN(), MissedDelta: math.NaN(),
		ProbeP99AloneUs: math.NaN(), ProbeP99BothUs: math.NaN(), IdleShare: math.NaN(),
		Harvest: math.NaN(), GuestShare: math.NaN()}
	if alone == nil || both == nil || alone.Result == nil || both.Result == nil {
		return d
	}
	a, b := *alone.Result, *both.Result
	switch KindOf(desktop) {
	case Throughput:
		if len(both.Paired) > 0 {
			d.Slowdown = medianOf(both.Paired)
		} else {
			d.Slowdown = rate(a)/rate(b) - 1
		}
	case Latency:
		d.Slowdown = ratio(alone.DesktopLatency, both.DesktopLatency, func(q *Quantiles) float64 { return q.P50 }) - 1
		if alone.DesktopLatency != nil && both.DesktopLatency != nil {
			d.P99DeltaUs = both.DesktopLatency.P99 - alone.DesktopLatency.P99
		}
	case Frame:
		d.Slowdown = ratio(alone.DesktopLatency, both.DesktopLatency, func(q *Quantiles) float64 { return q.P50 }) - 1
		d.MissedDelta = share(b.Missed, b.Events) - share(a.Missed, a.Events)
	}
	if alone.Probe != nil {
		d.ProbeP99AloneUs = alone.Probe.P99
	}
	if both.Probe != nil {
		d.ProbeP99BothUs = both.Probe.P99
	}
	d.IdleShare = IdleShare(a, cores)
	d.Harvest, d.GuestShare = Harvest(both, guestAlone, d.IdleShare)
	return d
}

// IdleShare is 1 - desktop CPU / (cores × seconds) of a desktop-alone run, at least 0.01.
func IdleShare(alone interference.Result, cores int) float64 {
	if alone.Seconds <= 0 || cores <= 0 {
		return math.NaN()
	}
	return math.Max(minIdleShare, 1-alone.CPUSeconds/(float64(cores)*alone.Seconds))
}

// Harvest is the guest's work over the both run's desktop interval against what the guest
// alone would do in that time on the idle share (harvest) and on the whole machine
// (share).
func Harvest(both, guestAlone *Run, idleShare float64) (harvest, share float64) {
	if both == nil || guestAlone == nil || guestAlone.GuestSeconds <= 0 || both.GuestSeconds <= 0 {
		return math.NaN(), math.NaN()
	}
	aloneRate := guestAlone.GuestWork / guestAlone.GuestSeconds
	if !(aloneRate > 0) {
		return math.NaN(), math.NaN()
	}
	share = both.GuestWork / (aloneRate * both.GuestSeconds)
	return share / idleShare, share
}

func ratio(a, b *Quantiles, f func(*Quantiles) float64) float64 {
	if a == nil || b == nil || f(a) <= 0 {
		return math.NaN()
	}
	return f(b) / f(a)
}

func share(k, n int) float64 {
	if n <= 0 {
		return math.NaN()
	}
	return float64(k) / float64(n)
}
