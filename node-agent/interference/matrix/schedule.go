package matrix

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// Cell is one desktop workload × guest workload × isolation policy × guest backend.
type Cell struct {
	Desktop string `json:"desktop"`
	Guest   string `json:"guest"`
	Policy  string `json:"policy"`
	Backend string `json:"backend"`
}

func (c Cell) String() string {
	return fmt.Sprintf("%s/%s×%s/%s", c.Backend, c.Desktop, c.Guest, c.Policy)
}

// Phase kinds: every round runs each of its phases once, in a shuffled order.
const (
	// PhaseDesktop: the desktop workload alone (no guest running: guests of the cell's
	// backends are stopped, or frozen where the backend keeps them, see Config.Keep),
	// with the wake-up probe alongside.
	PhaseDesktop = "desktop-alone"
	// PhaseNoProbe: the CPU desktop workload alone without the probe (the probe's
	// overhead).
	PhaseNoProbe = "desktop-noprobe"
	// PhaseGuest: the guest alone under policy none, no desktop workload.
	PhaseGuest = "guest-alone"
	// PhaseBoth: desktop workload (with probe) next to the guest under the cell's policy.
	PhaseBoth = "both"
)

// Phase is one measurement of a round.
type Phase struct {
	Kind    string `json:"phase"`
	Desktop string `json:"desktop,omitempty"`
	Guest   string `json:"guest,omitempty"`
	Policy  string `json:"policy,omitempty"`
	Backend string `json:"backend,omitempty"`
}

// Cell is the cell of a PhaseBoth.
func (p Phase) Cell() Cell { return Cell{p.Desktop, p.Guest, p.Policy, p.Backend} }

// RoundPhases is the phases a round needs for cells: each cell's both run, the
// desktop-alone baseline of every desktop workload and the guest-alone baseline of every
// (backend, guest workload) among them (shared between the cells of the round), and,
// with probeOverhead, the CPU desktop alone without the probe. Sorted (deterministic);
// Shuffle orders them.
func RoundPhases(cells []Cell, probeOverhead bool) []Phase {
	seen := map[Phase]bool{}
	var out []Phase
	add := func(p Phase) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, c := range cells {
		add(Phase{Kind: PhaseDesktop, Desktop: c.Desktop})
		add(Phase{Kind: PhaseGuest, Guest: c.Guest, Backend: c.Backend, Policy: "none"})
		add(Phase{Kind: PhaseBoth, Desktop: c.Desktop, Guest: c.Guest, Policy: c.Policy, Backend: c.Backend})
	}
	if probeOverhead {
		add(Phase{Kind: PhaseNoProbe, Desktop: "cpu"})
		add(Phase{Kind: PhaseDesktop, Desktop: "cpu"})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
	return out
}

// Shuffle returns phases in a random order drawn from r (Fisher-Yates).
func Shuffle(phases []Phase, r *rand.Rand) []Phase {
	out := append([]Phase(nil), phases...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
