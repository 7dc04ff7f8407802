package agent

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/node-agent/switching"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// The PC follows its schedule (docs/operations.md): this file turns the configuration's
// switch fields (Reboot, NextReboot), an operator's power command and the pool's power
// policy into switching.Decide's input, and carries out its plan — notices to the people
// logged in, a restart or a power-off through Options.Machine.

// switchState is the loop's memory of switches and commands (owned by Run's goroutine).
type switchState struct {
	cfgAt      time.Time            // agent clock when the configuration in force arrived
	pendingAt  map[string]time.Time // mode -> when the switch into it became due here
	cmdSeen    map[string]time.Time // command id -> first seen
	notice     string               // key of the last notice shown
	wake       time.Time            // plan again then
	acted      time.Time            // a restart or power-off was asked for then
	idleSince  time.Time            // nobody logged in since (zero: someone is)
	status     string
	answer     *wire.CommandStatus
	bootSecond float64
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
func (a *Agent) pending(now time.Time) *switching.Pending {
	c := a.cfg
	s := &a.sw
	if a.o.Booted == "" {
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

// planSwitch decides and carries out restarts, power-offs and notices.
func (a *Agent) planSwitch(ctx context.Context) {
	if a.cfg == nil {
		return
	}
	now := a.o.Now()
	s := &a.sw
	sessions := a.obs.LocalSessions + a.obs.RemoteSessions
	switch {
	case sessions > 0:
		s.idleSince = time.Time{}
	case s.idleSince.IsZero():
		s.idleSince = now
	}
	in := switching.Input{Now: now, Sessions: sessions, Idle: s.idleSince, Jobs: a.runningJobs(),
		Kind: a.cfg.Kind, Policy: a.cfg.Policy, Switch: a.pending(now),
		Spread: spread(a.cfg.Host, time.Duration(a.cfg.Policy.SwitchSpread))}
	if c := a.cfg.Power; c != nil {
		if s.cmdSeen == nil {
			s.cmdSeen = map[string]time.Time{}
		}
		if _, ok := s.cmdSeen[c.ID]; !ok {
			s.cmdSeen[c.ID] = now
			a.log.Info("power command", "id", c.ID, "op", c.Op, "by", c.By, "force", c.Force, "reason", c.Reason)
		}
		in.Command, in.Seen = c, s.cmdSeen[c.ID]
	}
	p := switching.Decide(in)
	s.wake = p.Wake
	changed := p.Status != s.status || !sameAnswer(p.Answer, s.answer)
	s.status = p.Status
	if p.Answer != nil {
		s.answer = p.Answer
	}
	if p.Notice != nil && p.Notice.Key != s.notice {
		s.notice = p.Notice.Key
		a.log.Info("telling logged-in users", "title", p.Notice.Title, "text", p.Notice.Text)
		if err := a.o.Notifier.Notify(ctx, p.Notice.Title, p.Notice.Text); err != nil {
			a.log.Warn("notice not delivered", "err", err)
		}
	}
	if p.Act == switching.None {
		if changed {
			a.updateHeartbeat()
			go a.sendHeartbeat(context.WithoutCancel(ctx))
		}
		return
	}
	if !s.acted.IsZero() && now.Sub(s.acted) < retryActAfter {
		s.wake = s.acted.Add(retryActAfter)
		return
	}
	s.acted = now
	s.wake = now.Add(retryActAfter)
	a.log.Info("switching the PC", "act", p.Act, "why", p.Why)
	// The site manager learns first: once the PC is down nobody can tell it.
	a.updateHeartbeat()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	a.sendHeartbeat(hctx)
	cancel()
	var err error
	if p.Act == switching.PowerOff {
		err = a.o.Machine.PowerOff(ctx)
	} else {
		err = a.o.Machine.Reboot(ctx)
	}
	if err != nil {
		a.log.Error("switching the PC failed; asking again in 2 minutes", "act", p.Act, "err", err)
	}
}

func sameAnswer(a, b *wire.CommandStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (a *Agent) runningJobs() int {
	a.jobsMu.Lock()
	defer a.jobsMu.Unlock()
	return len(a.jobStart)
}

// examMarker tells the desktop it is in an exam (overtime-exam.path locks it down) by a
// small file that exists exactly while the configuration says exam.
func (a *Agent) examMarker(c *wire.AgentConfig) {
	if a.o.ExamFile == "" {
		return
	}
	if !c.Exam {
		if err := os.Remove(a.o.ExamFile); err != nil && !os.IsNotExist(err) {
			a.log.Error("exam marker not removed", "file", a.o.ExamFile, "err", err)
		}
		return
	}
	doc := struct {
		Mode  string    `json:"mode"`
		Label string    `json:"label,omitempty"`
		Until time.Time `json:"until,omitzero"`
	}{c.Mode, c.Label, c.NextChange}
	b, _ := json.Marshal(doc)
	if err := os.MkdirAll(filepath.Dir(a.o.ExamFile), 0o755); err == nil {
		err = atomicfile.WriteFile(a.o.ExamFile, append(b, '\n'), 0o644)
		if err != nil {
			a.log.Error("exam marker not written", "file", a.o.ExamFile, "err", err)
		}
	}
}

// bootSeconds is how long this boot took to reach the agent's first configuration: the
// kernel's uptime then, kept in the state directory (tmpfs: one value per boot) so that
// a restarted agent reports the boot's, not its own start.
func (a *Agent) bootSeconds() float64 {
	if a.sw.bootSecond > 0 {
		return a.sw.bootSecond
	}
	f := filepath.Join(a.o.StateDir, "boot-seconds")
	if b, err := os.ReadFile(f); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && v > 0 {
			a.sw.bootSecond = v
			return v
		}
	}
	b, err := os.ReadFile(a.o.Uptime)
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || v <= 0 {
		return 0
	}
	a.sw.bootSecond = v
	_ = atomicfile.WriteFile(f, []byte(strconv.FormatFloat(v, 'f', 1, 64)+"\n"), 0o644)
	return v
}

// examDecision keeps the compute guest off during an exam whatever the pool's policy
// says: an exam PC runs nothing but the exam.
func examDecision(c *wire.AgentConfig, state model.OwnerState, action model.GuestAction) (model.OwnerState, model.GuestAction) {
	if c != nil && c.Exam {
		return model.StateMaintenance, model.ActionEvict
	}
	return state, action
}
