// Package switching decides when a running PC restarts or switches off: to follow a
// schedule change that needs another boot (a course VM, an exam, the local disk, another
// image), for an operator's command (overtime host reboot|poweroff), or by the pool's power
// policy. It is pure: the node agent gives it what it observes and the clock, and carries
// out the plan (docs/operations.md).
//
// The rules, in order:
//   - a power-off is never carried out while anyone is logged in;
//   - nobody logged in: a switch happens at its boundary plus this PC's place in the
//     spread window (so that a room does not reach the boot server in one instant);
//   - someone logged in: they are told from SwitchWarn before the boundary, with a
//     countdown; a forced switch restarts SwitchGrace after the boundary, a waiting one
//     when the last session ends.
package switching

import (
	"fmt"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Act is what the agent does now.
type Act string

const (
	None     Act = ""
	Reboot   Act = "reboot"
	PowerOff Act = "poweroff"
)

// Pending is a switch the PC must make: at At (the boundary, or when the agent learnt that
// the boundary had passed), into Mode, because of Reason.
type Pending struct {
	At     time.Time
	Mode   string
	Reason string
	Label  string // what users are told the PC becomes
	Rule   model.SwitchRule
}

// Input is what the agent observes.
type Input struct {
	Now      time.Time
	Sessions int // logged-in sessions, local and remote
	// Idle is when the PC was last seen with a session (or the agent's start): the power
	// policy counts "nobody logged in for PowerOffIdle" from it.
	Idle   time.Time
	Jobs   int            // Slurm jobs running in the guest
	Kind   model.ModeKind // the mode in force
	Policy model.Policy   // effective
	Switch *Pending       // nil: none
	// Command is an operator's pending reboot or power-off; Seen when the agent first saw it.
	Command *wire.PowerCommand
	Seen    time.Time
	// Spread is this PC's place in the pool's spread window (0 ≤ Spread < SwitchSpread).
	Spread time.Duration
}

// Notice is what logged-in users are told. Key changes when there is something new to
// say (a new stage of the countdown); the agent shows each key once.
type Notice struct {
	Key      string
	Title    string
	Text     string
	Deadline time.Time // when the PC restarts (zero: at logout)
}

// Plan is the decision.
type Plan struct {
	Act    Act
	Why    string
	Wake   time.Time // plan again at this instant at the latest (zero: on events only)
	Notice *Notice
	Status string              // the pending switch, for the heartbeat ("" = none)
	Answer *wire.CommandStatus // the answer to Command (nil: none)
}

// Countdown stages before a deadline: users are told again when each is crossed.
var stages = []time.Duration{5 * time.Minute, time.Minute}

// Decide plans. An operator's command that acts now wins; else a due switch (which also
// settles a pending reboot command: the PC restarts either way); else what is pending
// (the command's notice first); else the power policy.
func Decide(in Input) Plan {
	var cmd Plan
	if c := in.Command; c != nil {
		if cmd = command(in, c); cmd.Act != None {
			return cmd
		}
	}
	var sw Plan
	if in.Switch != nil {
		sw = schedule(in, in.Switch)
	}
	switch {
	case sw.Act != None:
		if cmd.Answer != nil && cmd.Answer.State == wire.CommandPending && in.Command.Op == wire.OpReboot {
			sw.Answer = &wire.CommandStatus{ID: in.Command.ID, State: wire.CommandDone, Reason: "restarted for the schedule"}
		} else {
			sw.Answer = cmd.Answer
		}
		return sw
	case cmd.Answer != nil && cmd.Answer.State == wire.CommandPending:
		cmd.Wake = earliest(cmd.Wake, sw.Wake)
		return cmd
	case sw.Status != "":
		sw.Answer = cmd.Answer
		return sw
	}
	p := Plan{Answer: cmd.Answer}
	if d := time.Duration(in.Policy.PowerOffIdle); d > 0 && in.Kind == model.KindCluster && in.Sessions == 0 && in.Jobs == 0 {
		if at := in.Idle.Add(d); !in.Now.Before(at) {
			p.Act, p.Why = PowerOff, fmt.Sprintf("cluster mode, no job and nobody logged in for %s (pool power policy)", d)
		} else {
			p.Wake = at
		}
	}
	return p
}

func command(in Input, c *wire.PowerCommand) Plan {
	answer := func(st wire.CommandState, why string) *wire.CommandStatus {
		return &wire.CommandStatus{ID: c.ID, State: st, Reason: why}
	}
	by := "requested by " + c.By
	if c.Reason != "" {
		by += ": " + c.Reason
	}
	switch {
	case c.Op == wire.OpPowerOff && in.Sessions > 0:
		return Plan{Answer: answer(wire.CommandRefused, fmt.Sprintf("%d session(s) logged in; a PC is never switched off under a user", in.Sessions))}
	case c.Op == wire.OpPowerOff:
		return Plan{Act: PowerOff, Why: "power-off " + by, Answer: answer(wire.CommandDone, "")}
	case c.Op != wire.OpReboot:
		return Plan{Answer: answer(wire.CommandRefused, fmt.Sprintf("the agent does not carry out %q", c.Op))}
	case in.Sessions == 0:
		return Plan{Act: Reboot, Why: "reboot " + by, Answer: answer(wire.CommandDone, "")}
	case !c.Force:
		return Plan{Status: "reboot " + by + ", waiting for logout", Answer: answer(wire.CommandPending, "waiting for logout"),
			Notice: &Notice{Key: "cmd-" + c.ID, Title: "This PC will restart",
				Text: "An administrator asked for a restart of this PC (" + by + "). It restarts when you log out."}}
	}
	deadline := in.Seen.Add(time.Duration(in.Policy.SwitchGrace))
	if !in.Now.Before(deadline) {
		return Plan{Act: Reboot, Why: "forced reboot " + by, Answer: answer(wire.CommandDone, "")}
	}
	p := Plan{Status: "forced reboot at " + clock(deadline) + ", " + by, Answer: answer(wire.CommandPending, "countdown to "+clock(deadline))}
	stage, wake := stageAt(in.Now, deadline)
	p.Wake = wake
	p.Notice = &Notice{Key: fmt.Sprintf("cmd-%s-%d", c.ID, stage), Title: "This PC restarts at " + clock(deadline), Deadline: deadline,
		Text: fmt.Sprintf("This PC restarts at %s (in %s): %s. Save your work now.", clock(deadline), left(in.Now, deadline), by)}
	return p
}

func schedule(in Input, s *Pending) Plan {
	what := s.Label
	if what == "" {
		what = s.Mode
	}
	if in.Sessions == 0 {
		at := s.At.Add(in.Spread)
		if !in.Now.Before(at) {
			return Plan{Act: Reboot, Why: fmt.Sprintf("switch to %s: %s", s.Mode, s.Reason)}
		}
		return Plan{Wake: at, Status: fmt.Sprintf("reboot at %s into %s (%s)", clock(at), s.Mode, s.Reason)}
	}
	warnFrom := s.At.Add(-time.Duration(in.Policy.SwitchWarn))
	if in.Now.Before(warnFrom) {
		return Plan{Wake: warnFrom, Status: fmt.Sprintf("switch at %s into %s (%s)", clock(s.At), s.Mode, s.Reason)}
	}
	if s.Rule == model.SwitchWait {
		p := Plan{Status: fmt.Sprintf("waiting for logout to switch to %s (%s)", s.Mode, s.Reason)}
		if in.Now.Before(s.At) {
			stage, wake := stageAt(in.Now, s.At)
			p.Wake = wake
			p.Notice = &Notice{Key: fmt.Sprintf("wait-%d-%d", s.At.Unix(), stage), Title: "This PC switches to " + what + " at " + clock(s.At),
				Text: fmt.Sprintf("At %s (in %s) this PC switches to %s. It restarts when you log out; you may keep working.", clock(s.At), left(in.Now, s.At), what)}
			return p
		}
		p.Wake = time.Time{}
		p.Notice = &Notice{Key: fmt.Sprintf("wait-%d-due", s.At.Unix()), Title: "This PC restarts when you log out",
			Text: fmt.Sprintf("Since %s this PC is scheduled for %s. It restarts when you log out.", clock(s.At), what)}
		return p
	}
	deadline := s.At.Add(time.Duration(in.Policy.SwitchGrace))
	if !in.Now.Before(deadline) {
		return Plan{Act: Reboot, Why: fmt.Sprintf("forced switch to %s after the grace period: %s", s.Mode, s.Reason)}
	}
	stage, wake := stageAt(in.Now, deadline)
	return Plan{Wake: wake, Status: fmt.Sprintf("forced reboot at %s into %s (%s)", clock(deadline), s.Mode, s.Reason),
		Notice: &Notice{Key: fmt.Sprintf("force-%d-%d", s.At.Unix(), stage), Title: "This PC restarts at " + clock(deadline), Deadline: deadline,
			Text: fmt.Sprintf("This PC restarts at %s (in %s) for %s. Save your work now.", clock(deadline), left(in.Now, deadline), what)}}
}

// stageAt is how many countdown stages before deadline have been crossed at now (0: none
// yet), and when the next one is crossed (or the deadline).
func stageAt(now, deadline time.Time) (int, time.Time) {
	n := 0
	for _, s := range stages {
		if at := deadline.Add(-s); !now.Before(at) {
			n++
		} else {
			return n, at
		}
	}
	return n, deadline
}

func earliest(a, b time.Time) time.Time {
	if b.IsZero() {
		return a
	}
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// clock is an instant as users read it: local wall time.
func clock(t time.Time) string { return t.Local().Format("15:04") }

func left(now, t time.Time) string {
	d := t.Sub(now).Round(time.Minute)
	if d < time.Minute {
		return "less than a minute"
	}
	if d == time.Minute {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", int(d/time.Minute))
}
