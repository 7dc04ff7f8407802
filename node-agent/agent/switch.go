package agent

import (
	"context"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/powerctl"
	"github.com/overtime-hpc/overtime/node-agent/switching"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// The PC follows its schedule (docs/operations.md): this file turns the configuration's
// switch fields (Reboot, NextReboot), an operator's power command and the pool's power
// policy into switching.Decide's input, and carries out its plan — notices to the people
// logged in, a restart or a power-off through Options.Machine.

// switcher is the loop's memory of switches and commands, and what carries them out
// (owned by Run's goroutine).
type switcher struct {
	machine  powerctl.Machine
	notifier powerctl.Notifier
	booted   string // Options.Booted
	log      *slog.Logger

	cfgAt     time.Time            // agent clock when the configuration in force arrived
	pendingAt map[string]time.Time // mode -> when the switch into it became due here
	cmdSeen   map[string]time.Time // command id -> first seen
	notice    string               // key of the last notice shown
	wake      time.Time            // plan again then
	acted     time.Time            // a restart or power-off was asked for then
	idleSince time.Time            // nobody logged in since (zero: someone is)
	status    string
	answer    *wire.CommandStatus
}

// retryActAfter: a restart that systemd did not carry out is asked for again after this.
const retryActAfter = 2 * time.Minute

// spread is this PC's place in the pool's spread window: fixed per host (a hash of its
// name), so that the room's PCs spread evenly and each keeps its place across agent
// restarts.
func spread(host string, window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(host))
	return time.Duration(h.Sum64() % uint64(window))
}

// pending is the switch the configuration asks for, with its instant on the agent's
// clock: a boundary is translated by the configuration's own Generated time, since the
// PC's clock may differ from the site manager's (a stepped clock, a test server's).
func (s *switcher) pending(c *wire.AgentConfig, now time.Time) *switching.Pending {
	if s.booted == "" {
		return nil
	}
	if s.pendingAt == nil {
		s.pendingAt = map[string]time.Time{}
	}
	switch {
	case c.Reboot != "":
		at, ok := s.pendingAt[c.Mode]
		if !ok {
			at = now
			s.pendingAt[c.Mode] = at
		}
		return &switching.Pending{At: at, Mode: c.Mode, Reason: c.Reboot, Label: c.Label, Rule: c.RebootSwitch}
	case c.NextReboot != "" && !c.NextChange.IsZero():
		at := s.cfgAt.Add(c.NextChange.Sub(c.Generated))
		// Remembered, so that the switch keeps its instant when the configuration after
		// the boundary (Reboot set) arrives a moment later.
		s.pendingAt[c.NextMode] = at
		return &switching.Pending{At: at, Mode: c.NextMode, Reason: c.NextReboot, Label: c.NextLabel, Rule: c.NextSwitch}
	}
	return nil
}

// Configured notes when the configuration in force arrived (agent clock): the
// configuration's boundaries are translated by it (pending).
func (s *switcher) Configured(now time.Time) { s.cfgAt = now }

// Plan decides the restarts, power-offs and notices under configuration c, with
// sessions logged in and jobs running, and shows a notice it asks for. It returns the
// switch to carry out now (Switch; switching.None: none) and whether the status or the
// command's answer, which the heartbeat reports, changed.
func (s *switcher) Plan(ctx context.Context, c *wire.AgentConfig, now time.Time, sessions, jobs int) (act switching.Act, changed bool) {
	switch {
	case sessions > 0:
		s.idleSince = time.Time{}
	case s.idleSince.IsZero():
		s.idleSince = now
	}
	in := switching.Input{Now: now, Sessions: sessions, Idle: s.idleSince, Jobs: jobs,
		Kind: c.Kind, Policy: c.Policy, Switch: s.pending(c, now),
		Spread: spread(c.Host, time.Duration(c.Policy.SwitchSpread))}
	if pc := c.Power; pc != nil {
		if s.cmdSeen == nil {
			s.cmdSeen = map[string]time.Time{}
		}
		if _, ok := s.cmdSeen[pc.ID]; !ok {
			s.cmdSeen[pc.ID] = now
			s.log.Info("power command", "id", pc.ID, "op", pc.Op, "by", pc.By, "force", pc.Force, "reason", pc.Reason)
		}
		in.Command, in.Seen = pc, s.cmdSeen[pc.ID]
	}
	p := switching.Decide(in)
	s.wake = p.Wake
	changed = p.Status != s.status || !sameAnswer(p.Answer, s.answer)
	s.status = p.Status
	if p.Answer != nil {
		s.answer = p.Answer
	}
	if p.Notice != nil && p.Notice.Key != s.notice {
		s.notice = p.Notice.Key
		s.log.Info("telling logged-in users", "title", p.Notice.Title, "text", p.Notice.Text)
		if err := s.notifier.Notify(ctx, p.Notice.Title, p.Notice.Text); err != nil {
			s.log.Warn("notice not delivered", "err", err)
		}
	}
	if p.Act == switching.None {
		return switching.None, changed
	}
	if !s.acted.IsZero() && now.Sub(s.acted) < retryActAfter {
		s.wake = s.acted.Add(retryActAfter)
		return switching.None, false
	}
	s.acted = now
	s.wake = now.Add(retryActAfter)
	s.log.Info("switching the PC", "act", p.Act, "why", p.Why)
	return p.Act, changed
}

// Switch restarts or switches off the PC (Plan's act).
func (s *switcher) Switch(ctx context.Context, act switching.Act) {
	var err error
	if act == switching.PowerOff {
		err = s.machine.PowerOff(ctx)
	} else {
		err = s.machine.Reboot(ctx)
	}
	if err != nil {
		s.log.Error("switching the PC failed; asking again in 2 minutes", "act", act, "err", err)
	}
}

// Wake is when the switch must be planned again (zero: no need).
func (s *switcher) Wake() time.Time { return s.wake }

// Report puts the pending switch and the power command's answer into a heartbeat.
func (s *switcher) Report(hb *wire.Heartbeat) {
	hb.Switch = wire.OneLine(s.status, wire.MaxGuestReason)
	if ans := s.answer; ans != nil {
		c := *ans
		c.Reason = wire.OneLine(c.Reason, wire.MaxGuestReason)
		hb.Power = &c
	}
}

func sameAnswer(a, b *wire.CommandStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
