package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// step is one observation in a scenario and what the engine must conclude from it.
type step struct {
	at     time.Duration // since t0
	obs    func(o *Observation)
	state  model.OwnerState
	action model.GuestAction
	reason string // substring of the reason, optional
}

func desktop(o *Observation) {}
func input(ago time.Duration) func(*Observation) {
	return func(o *Observation) { o.LastInput = o.Now.Add(-ago); o.LocalSessions = 1 }
}

func TestScenarios(t *testing.T) {
	def := model.DefaultPolicy() // idle 5m, hold 30s, throttle, freeze >=20%, thaw <5%, evict after 10m
	tests := []struct {
		name   string
		policy model.Policy
		steps  []step
	}{
		{"no one there: run", def, []step{
			{0, desktop, model.StateNoUser, model.ActionRun, "no sessions"},
		}},
		{"first key press throttles at once, idle after 5 min, run after hold", def, []step{
			{0, desktop, model.StateNoUser, model.ActionRun, ""},
			{time.Second, input(0), model.StateOwnerActive, model.ActionThrottle, "input"},
			{4 * time.Minute, input(3 * time.Minute), model.StateOwnerActive, model.ActionThrottle, ""},
			// 5 min after the last input: owner idle; throttle was wanted until just now, so
			// the engine holds 30 s before going back to full speed.
			{6*time.Minute + time.Second, input(5*time.Minute + time.Second), model.StateOwnerIdle, model.ActionThrottle, "holding throttle"},
			{6*time.Minute + 20*time.Second, input(5*time.Minute + 20*time.Second), model.StateOwnerIdle, model.ActionThrottle, "holding"},
			{7 * time.Minute, input(6 * time.Minute), model.StateOwnerIdle, model.ActionRun, ""},
		}},
		{"pressure freezes, thaws only below thaw threshold and after hold", def, []step{
			{0, input(0), model.StateOwnerActive, model.ActionThrottle, ""},
			{time.Second, func(o *Observation) { input(0)(o); o.Pressure = 25 }, model.StateOwnerActive, model.ActionFreeze, "pressure 25.0%"},
			{2 * time.Second, func(o *Observation) { input(0)(o); o.Pressure = 10 }, model.StateOwnerActive, model.ActionFreeze, "not yet below 5.0%"},
			{3 * time.Second, func(o *Observation) { input(0)(o); o.Pressure = 2 }, model.StateOwnerActive, model.ActionFreeze, "holding freeze"},
			{33 * time.Second, func(o *Observation) { input(0)(o); o.Pressure = 2 }, model.StateOwnerActive, model.ActionThrottle, ""},
		}},
		{"frozen for evictAfter evicts, stays evicted while pressure lasts", def, []step{
			{0, func(o *Observation) { input(0)(o); o.Pressure = 30 }, model.StateOwnerActive, model.ActionFreeze, ""},
			{9 * time.Minute, func(o *Observation) { input(0)(o); o.Pressure = 30 }, model.StateOwnerActive, model.ActionFreeze, ""},
			{10 * time.Minute, func(o *Observation) { input(0)(o); o.Pressure = 30 }, model.StateOwnerActive, model.ActionEvict, "frozen for 10m0s"},
			{11 * time.Minute, func(o *Observation) { input(0)(o); o.Pressure = 30 }, model.StateOwnerActive, model.ActionEvict, ""},
			{11*time.Minute + 10*time.Second, func(o *Observation) { input(0)(o); o.Pressure = 1 }, model.StateOwnerActive, model.ActionEvict, "holding evict"},
			{11*time.Minute + 30*time.Second, func(o *Observation) { input(0)(o); o.Pressure = 1 }, model.StateOwnerActive, model.ActionThrottle, ""},
		}},
		{"desktop load without input is an active owner", def, []step{
			{0, func(o *Observation) { o.LocalSessions = 1; o.Load = 1.5 }, model.StateOwnerActive, model.ActionThrottle, "desktop load 1.50"},
		}},
		{"cluster mode runs the guest even with a user typing", def, []step{
			{0, func(o *Observation) { input(0)(o); o.Kind = model.KindCluster }, model.StateAfterHours, model.ActionRun, "cluster"},
		}},
		{"pressure does not freeze the guest after hours (it is the guest's own)", def, []step{
			{0, func(o *Observation) { o.Kind = model.KindCluster; o.Pressure = 90 }, model.StateAfterHours, model.ActionRun, ""},
		}},
		{"maintenance evicts at once, from run", def, []step{
			{0, desktop, model.StateNoUser, model.ActionRun, ""},
			{time.Second, func(o *Observation) { o.Kind = model.KindMaintenance }, model.StateMaintenance, model.ActionEvict, "maintenance"},
		}},
		{"a mode without guest is maintenance", def, []step{
			{0, func(o *Observation) { o.HasGuest = false }, model.StateMaintenance, model.ActionEvict, "runs no guest"},
		}},
		{"remote sessions ignored when remoteActive is false", func() model.Policy {
			no := false
			p := def
			p.RemoteActive = &no
			return p
		}(), []step{
			{0, func(o *Observation) { o.RemoteSessions = 2 }, model.StateNoUser, model.ActionRun, ""},
		}},
		{"remote session counts as logged in by default", def, []step{
			{0, func(o *Observation) { o.RemoteSessions = 1 }, model.StateOwnerIdle, model.ActionRun, "1 session"},
		}},
		{"a pool that freezes on input", model.Policy{Actions: map[model.OwnerState]model.GuestAction{model.StateOwnerActive: model.ActionFreeze}}.Effective(), []step{
			{0, desktop, model.StateNoUser, model.ActionRun, ""},
			{time.Second, input(0), model.StateOwnerActive, model.ActionFreeze, ""},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(tc.policy)
			for i, s := range tc.steps {
				o := Observation{Now: t0.Add(s.at), Kind: model.KindDesktop, HasGuest: true}
				s.obs(&o)
				d := e.Decide(o)
				if d.State != s.state || d.Action != s.action || !strings.Contains(d.Reason, s.reason) {
					t.Fatalf("step %d (t+%s): got %s/%s (%q), want %s/%s (reason containing %q)",
						i, s.at, d.State, d.Action, d.Reason, s.state, s.action, s.reason)
				}
			}
		})
	}
}

func TestNextDeadline(t *testing.T) {
	e := New(model.DefaultPolicy())
	o := Observation{Now: t0, Kind: model.KindDesktop, HasGuest: true, LocalSessions: 1, LastInput: t0}
	e.Decide(o)
	if got, want := e.NextDeadline(), t0.Add(5*time.Minute); !got.Equal(want) {
		t.Fatalf("deadline after input: %s, want idle timeout %s", got, want)
	}
	o.Now = t0.Add(5 * time.Minute)
	d := e.Decide(o)
	if d.Action != model.ActionThrottle {
		t.Fatalf("action at idle timeout: %s, want throttle held", d.Action)
	}
	if got, want := e.NextDeadline(), t0.Add(5*time.Minute+30*time.Second); !got.Equal(want) {
		t.Fatalf("deadline while holding: %s, want %s", got, want)
	}
	o.Pressure = 50
	o.LastInput = o.Now
	e.Decide(o)
	if got, want := e.NextDeadline(), o.Now.Add(5*time.Minute); !got.Equal(want) {
		// idle timeout (5m) comes before the evict deadline (10m)
		t.Fatalf("deadline while frozen: %s, want %s", got, want)
	}
}

func TestChanged(t *testing.T) {
	e := New(model.DefaultPolicy())
	o := Observation{Now: t0, Kind: model.KindDesktop, HasGuest: true}
	if d := e.Decide(o); !d.Changed {
		t.Fatal("first decision must report a change")
	}
	if d := e.Decide(o); d.Changed {
		t.Fatal("same observation reported a change")
	}
}

// An exam keeps the guest off whatever the engine decided; outside an exam the
// decision stands as it is.
func TestExamDecision(t *testing.T) {
	throttle := Decision{State: model.StateOwnerActive, Action: model.ActionThrottle, Reason: "input 1s ago", Changed: true}
	evict := Decision{State: model.StateOwnerIdle, Action: model.ActionEvict, Reason: "frozen for 10m0s (evictAfter 10m0s)"}
	for _, tc := range []struct {
		name string
		d    Decision
		exam bool
		want Decision
	}{
		{"no exam: as decided", throttle, false, throttle},
		{"no exam, evict: as decided", evict, false, evict},
		{"exam: evicted, in maintenance, with the exam as the reason", throttle, true,
			Decision{State: model.StateMaintenance, Action: model.ActionEvict, Reason: "exam: no compute guest", Changed: true}},
		{"exam, already evicting: the engine's reason stays", evict, true,
			Decision{State: model.StateMaintenance, Action: model.ActionEvict, Reason: evict.Reason}},
	} {
		if got := ExamDecision(tc.d, tc.exam); got != tc.want {
			t.Errorf("%s: ExamDecision(%+v, %v) = %+v, want %+v", tc.name, tc.d, tc.exam, got, tc.want)
		}
	}
}
