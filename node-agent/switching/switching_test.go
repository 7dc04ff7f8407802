package switching

import (
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestDecide(t *testing.T) {
	boundary := time.Date(2026, 12, 2, 10, 0, 0, 0, time.Local)
	at := func(d time.Duration) time.Time { return boundary.Add(d) }
	pol := model.Policy{PowerOffIdle: model.Duration(30 * time.Minute)}.Effective() // warn 10m, grace 5m, spread 2m
	lecture := &Pending{At: boundary, Mode: "bio", Reason: "the course VM starts on a freshly booted desktop", Label: "BIO101", Rule: model.SwitchForce}
	nightly := &Pending{At: boundary, Mode: "cluster", Reason: "kernel arguments", Rule: model.SwitchWait}
	reboot := &wire.PowerCommand{ID: "c1", Op: wire.OpReboot, By: "alice", Reason: "new driver"}
	forced := &wire.PowerCommand{ID: "c2", Op: wire.OpReboot, By: "alice", Force: true}
	off := &wire.PowerCommand{ID: "c3", Op: wire.OpPowerOff, By: "slurm"}
	for _, tc := range []struct {
		name     string
		in       Input
		act      Act
		wake     time.Time
		notice   string // substring of the notice's text ("" = no notice)
		status   string // substring
		answer   wire.CommandState
		noticeAt time.Time // the notice's deadline, when it has one
	}{
		{name: "nobody logged in: wait for the boundary plus this PC's spread",
			in:  Input{Now: at(-time.Minute), Switch: lecture, Spread: 40 * time.Second},
			act: None, wake: at(40 * time.Second), status: "reboot at"},
		{name: "nobody logged in, spread reached: reboot",
			in:  Input{Now: at(40 * time.Second), Switch: lecture, Spread: 40 * time.Second},
			act: Reboot},
		{name: "logged in, well before the warning",
			in:  Input{Now: at(-time.Hour), Sessions: 1, Switch: lecture},
			act: None, wake: at(-10 * time.Minute), status: "switch at"},
		{name: "logged in, warned: forced switch counts down to boundary+grace",
			in:  Input{Now: at(-9 * time.Minute), Sessions: 1, Switch: lecture},
			act: None, wake: at(0), notice: "restarts at", status: "forced reboot", noticeAt: at(5 * time.Minute)},
		{name: "logged in, grace over: reboot",
			in:  Input{Now: at(5 * time.Minute), Sessions: 2, Switch: lecture},
			act: Reboot},
		{name: "logged in, the nightly switch waits",
			in:  Input{Now: at(3 * time.Hour), Sessions: 1, Switch: nightly},
			act: None, notice: "restarts when you log out", status: "waiting for logout"},
		{name: "the nightly switch once the user left",
			in:  Input{Now: at(3 * time.Hour), Switch: nightly},
			act: Reboot},
		{name: "operator reboot, nobody logged in",
			in:  Input{Now: at(0), Command: reboot, Seen: at(0)},
			act: Reboot, answer: wire.CommandDone},
		{name: "operator reboot, logged in, not forced: waits",
			in:  Input{Now: at(0), Sessions: 1, Command: reboot, Seen: at(0)},
			act: None, answer: wire.CommandPending, notice: "when you log out", status: "waiting for logout"},
		{name: "forced operator reboot counts down",
			in:  Input{Now: at(time.Minute), Sessions: 1, Command: forced, Seen: at(0), Policy: pol},
			act: None, answer: wire.CommandPending, notice: "restarts at", wake: at(4 * time.Minute), status: "forced reboot at", noticeAt: at(5 * time.Minute)},
		{name: "forced operator reboot after the grace",
			in:  Input{Now: at(5 * time.Minute), Sessions: 1, Command: forced, Seen: at(0)},
			act: Reboot, answer: wire.CommandDone},
		{name: "power-off refused while logged in",
			in:  Input{Now: at(0), Sessions: 1, Command: off, Seen: at(0)},
			act: None, answer: wire.CommandRefused},
		{name: "power-off carried out when nobody is",
			in:  Input{Now: at(0), Command: off, Seen: at(0)},
			act: PowerOff, answer: wire.CommandDone},
		{name: "a due switch settles a waiting reboot command",
			in:  Input{Now: at(5 * time.Minute), Sessions: 1, Switch: lecture, Command: reboot, Seen: at(-time.Hour)},
			act: Reboot, answer: wire.CommandDone},
		{name: "power policy: cluster, idle long enough",
			in:  Input{Now: at(0), Kind: model.KindCluster, Idle: at(-31 * time.Minute)},
			act: PowerOff},
		{name: "power policy: not yet",
			in:  Input{Now: at(0), Kind: model.KindCluster, Idle: at(-10 * time.Minute)},
			act: None, wake: at(20 * time.Minute)},
		{name: "power policy: a job runs",
			in:  Input{Now: at(0), Kind: model.KindCluster, Idle: at(-time.Hour), Jobs: 1},
			act: None},
		{name: "power policy: only in cluster modes",
			in:  Input{Now: at(0), Kind: model.KindDesktop, Idle: at(-time.Hour)},
			act: None},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.Policy.Switch == nil {
				in.Policy = pol
			}
			p := Decide(in)
			if p.Act != tc.act {
				t.Errorf("act %q (%s), want %q", p.Act, p.Why, tc.act)
			}
			if !p.Wake.Equal(tc.wake) {
				t.Errorf("wake %s, want %s", p.Wake, tc.wake)
			}
			switch {
			case tc.notice == "" && p.Notice != nil:
				t.Errorf("unexpected notice %+v", p.Notice)
			case tc.notice != "" && (p.Notice == nil || !strings.Contains(p.Notice.Text, tc.notice)):
				t.Errorf("notice %+v, want one saying %q", p.Notice, tc.notice)
			case p.Notice != nil && !p.Notice.Deadline.Equal(tc.noticeAt):
				t.Errorf("notice deadline %s, want %s", p.Notice.Deadline, tc.noticeAt)
			}
			if !strings.Contains(p.Status, tc.status) || (tc.status == "" && p.Status != "") {
				t.Errorf("status %q, want %q", p.Status, tc.status)
			}
			switch {
			case tc.answer == "" && p.Answer != nil:
				t.Errorf("unexpected answer %+v", p.Answer)
			case tc.answer != "" && (p.Answer == nil || p.Answer.State != tc.answer):
				t.Errorf("answer %+v, want %s", p.Answer, tc.answer)
			}
		})
	}
}

// The countdown tells users again at each stage and not in between.
func TestCountdownStages(t *testing.T) {
	boundary := time.Date(2026, 12, 2, 10, 0, 0, 0, time.Local)
	s := &Pending{At: boundary, Mode: "bio", Rule: model.SwitchForce}
	in := Input{Sessions: 1, Switch: s, Policy: model.Policy{}.Effective()}
	keys := map[string]bool{}
	var order []string
	for now := boundary.Add(-12 * time.Minute); now.Before(boundary.Add(5 * time.Minute)); now = now.Add(10 * time.Second) {
		in.Now = now
		p := Decide(in)
		if p.Notice != nil && !keys[p.Notice.Key] {
			keys[p.Notice.Key] = true
			order = append(order, now.Sub(boundary).String())
		}
	}
	// Deadline is 10:05: told at 09:50 (warning), 10:00 (5 min left), 10:04 (1 min left).
	if got := strings.Join(order, " "); got != "-10m0s 0s 4m0s" {
		t.Fatalf("notices at %s", got)
	}
}
