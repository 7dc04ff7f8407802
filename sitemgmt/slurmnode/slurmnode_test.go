package slurmnode

import (
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestDesired(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	site := &model.Site{Modes: []model.Mode{
		{Name: "desktop", Kind: model.KindDesktop},
		{Name: "cluster", Kind: model.KindCluster},
		{Name: "maint", Kind: model.KindMaintenance},
	}}
	hb := func(mode string, owner model.OwnerState, action model.GuestAction, guest string) *wire.AgentStatus {
		return &wire.AgentStatus{HostStatus: wire.HostStatus{Heartbeat: wire.Heartbeat{
			Host: "pc1", Time: now, Mode: mode, OwnerState: owner, Action: action, GuestState: guest,
		}, Received: now}}
	}
	stale := hb("desktop", model.StateNoUser, model.ActionRun, "running")
	stale.Stale = true
	for _, c := range []struct {
		name     string
		st       *wire.AgentStatus
		state    wire.SlurmNodeState
		features string
		weight   int
		reason   string
	}{
		{"no heartbeat", nil, wire.SlurmDown, "overtime", 100, "no heartbeat"},
		{"stale heartbeat", stale, wire.SlurmDown, "overtime", 100, "since"},
		{"cluster mode", hb("cluster", model.StateAfterHours, model.ActionRun, "running"), wire.SlurmUp, "overtime,dedicated", 1, ""},
		{"empty desk", hb("desktop", model.StateNoUser, model.ActionRun, "running"), wire.SlurmUp, "overtime,desktop,desk-empty", 10, ""},
		{"owner idle", hb("desktop", model.StateOwnerIdle, model.ActionRun, "running"), wire.SlurmUp, "overtime,desktop,desk-empty", 10, ""},
		{"owner active, throttled", hb("desktop", model.StateOwnerActive, model.ActionThrottle, "running"), wire.SlurmUp, "overtime,desktop,owner-active", 100, ""},
		{"frozen", hb("desktop", model.StateOwnerActive, model.ActionFreeze, "paused"), wire.SlurmFrozen, "overtime,desktop", 100, "frozen"},
		{"evicted", hb("desktop", model.StateOwnerActive, model.ActionEvict, "absent"), wire.SlurmEvicted, "overtime,desktop", 100, "evicted"},
		{"maintenance", hb("maint", model.StateMaintenance, model.ActionRun, "none"), wire.SlurmDown, "overtime", 100, "runs no compute guest"},
		{"guest crashed", hb("desktop", model.StateNoUser, model.ActionRun, "crashed"), wire.SlurmDown, "overtime,desktop", 100, "not running (crashed)"},
		{"mode the site no longer has", hb("gone", model.StateNoUser, model.ActionRun, "running"), wire.SlurmDown, "overtime", 100, "runs no compute guest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var running *model.Mode
			if c.st != nil {
				running = site.Mode(c.st.Mode)
			}
			n := Desired("pc1", c.st, running)
			if n.Name != "pc1" || n.State != c.state || n.Features != c.features || n.Weight != c.weight {
				t.Fatalf("got %+v, want state %s features %s weight %d", n, c.state, c.features, c.weight)
			}
			if c.reason == "" && n.Reason != "" || c.reason != "" && !strings.Contains(n.Reason, c.reason) {
				t.Fatalf("reason %q, want it to contain %q", n.Reason, c.reason)
			}
			// The sync daemon recognises its own drains and downs by this prefix.
			if n.Reason != "" && !strings.HasPrefix(n.Reason, "overtime: ") {
				t.Fatalf("reason %q lacks the overtime: prefix", n.Reason)
			}
		})
	}
}

// A guest the agent did not start because its slurmd would not join the controller is a
// DOWN node whose reason is the agent's: both versions and what to do.
func TestDesiredGuestRefused(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	why := "not started: slurmd 22.05.8 (image compute 1) too old for slurmctld 25.05.1; build the compute image with the controller's Slurm: images/recipes/compute-guest, SLURM_DEBS=DIR"
	st := &wire.AgentStatus{HostStatus: wire.HostStatus{Heartbeat: wire.Heartbeat{
		Host: "pc1", Mode: "cluster", OwnerState: model.StateAfterHours, Action: model.ActionRun,
		GuestState: "absent", GuestReason: why,
	}, Received: now}}
	n := Desired("pc1", st, &model.Mode{Name: "cluster", Kind: model.KindCluster})
	if n.State != wire.SlurmDown || n.Reason != "overtime: guest on pc1 not running (absent: "+why+")" {
		t.Fatalf("got %+v, want down with the agent's reason", n)
	}
}

// A heartbeat stamped hours ahead by the agent's clock is neither stale nor shown with
// the agent's time: the node's comment carries the server's receive time.
func TestDesiredIgnoresAgentClock(t *testing.T) {
	received := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	st := &wire.AgentStatus{HostStatus: wire.HostStatus{Heartbeat: wire.Heartbeat{
		Host: "pc1", Time: received.Add(5 * time.Hour), Mode: "desktop", OwnerState: model.StateNoUser,
		Action: model.ActionRun, GuestState: "running",
	}, Received: received}}
	n := Desired("pc1", st, &model.Mode{Name: "desktop", Kind: model.KindDesktop})
	if n.State != wire.SlurmUp || !strings.Contains(n.Comment, "(heartbeat 2026-12-02T14:00:00Z)") {
		t.Fatalf("got %+v, want up with the receive time in the comment", n)
	}
}

// The guest's size travels with the node whatever its state: the daemon declares nodes
// Slurm has not seen (often ones whose desktop is off now) with the last reported size.
func TestDesiredCarriesSize(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		stale bool
		guest string
	}{{"up", false, "running"}, {"stale", true, "running"}, {"no guest", false, "none"}} {
		t.Run(c.name, func(t *testing.T) {
			st := &wire.AgentStatus{HostStatus: wire.HostStatus{Heartbeat: wire.Heartbeat{
				Host: "pc1", Mode: "desktop", OwnerState: model.StateNoUser, Action: model.ActionRun, GuestState: c.guest,
				CPUs: 6, MemoryMB: 12000, GPUs: 1,
			}, Received: now}, Stale: c.stale}
			n := Desired("pc1", st, &model.Mode{Name: "desktop", Kind: model.KindDesktop})
			if n.CPUs != 6 || n.MemoryMB != 12000 || n.GPUs != 1 {
				t.Fatalf("got %+v, want cpus 6 memoryMB 12000 gpus 1", n)
			}
		})
	}
	if n := Desired("pc1", nil, nil); n.CPUs != 0 || n.MemoryMB != 0 || n.GPUs != 0 {
		t.Fatalf("no heartbeat: got size %+v", n)
	}
}

// Among desktops of one class, the PC whose desktop suffers more from a guest (its last
// calibration) gets the higher weight, never reaching the next class; a dedicated PC and
// a PC without a calibration keep their class's weight.
func TestDesiredWeightFromCalibration(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	prof := func(cpu, mem float64) *wire.InterferenceProfile {
		return &wire.InterferenceProfile{Measured: now.Add(-time.Hour), CPUSlowdown: cpu, MemorySlowdown: mem}
	}
	desktop := &model.Mode{Name: "desktop", Kind: model.KindDesktop}
	cluster := &model.Mode{Name: "cluster", Kind: model.KindCluster}
	for _, c := range []struct {
		name   string
		mode   *model.Mode
		owner  model.OwnerState
		p      *wire.InterferenceProfile
		weight int
	}{
		{"desk empty, not calibrated", desktop, model.StateNoUser, nil, 10},
		{"desk empty, no measurable slowdown", desktop, model.StateNoUser, prof(0, 0), 10},
		{"desk empty, 0.4% rounds to 0", desktop, model.StateNoUser, prof(0.004, 0.001), 10},
		{"desk empty, cpu 2%", desktop, model.StateNoUser, prof(0.02, 0.01), 12},
		{"desk empty, memory 9.6% counts", desktop, model.StateNoUser, prof(0.02, 0.096), 20},
		{"desk empty, 89% is the class's top", desktop, model.StateNoUser, prof(0.89, 0), 99},
		{"desk empty, capped below owner-active", desktop, model.StateOwnerIdle, prof(3, 5), 99},
		{"owner active, not calibrated", desktop, model.StateOwnerActive, nil, 100},
		{"owner active, memory 9.6%", desktop, model.StateOwnerActive, prof(0.02, 0.096), 110},
		{"owner active, capped below no-guest", desktop, model.StateOwnerActive, prof(10, 10), 999},
		{"dedicated unchanged", cluster, model.StateAfterHours, prof(0.5, 0.5), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &wire.AgentStatus{HostStatus: wire.HostStatus{Heartbeat: wire.Heartbeat{
				Host: "pc1", Time: now, Mode: c.mode.Name, OwnerState: c.owner, Action: model.ActionRun, GuestState: "running",
				Interference: c.p,
			}, Received: now}}
			n := Desired("pc1", st, c.mode)
			if n.State != wire.SlurmUp || n.Weight != c.weight {
				t.Fatalf("got %+v, want up with weight %d", n, c.weight)
			}
			if c.p != nil && c.mode.Kind == model.KindDesktop && !strings.Contains(n.Comment, "calibrated desktop slowdown") {
				t.Errorf("comment %q does not say why the weight", n.Comment)
			}
		})
	}
	// Monotone: a worse calibration never gives a lower weight.
	prev := 0
	for s := 0.0; s <= 2; s += 0.0005 {
		w := wire.InterferenceWeight(wire.WeightDeskEmpty, prof(s, 0))
		if w < prev || w >= wire.WeightOwnerActive {
			t.Fatalf("slowdown %g: weight %d after %d", s, w, prev)
		}
		prev = w
	}
}
