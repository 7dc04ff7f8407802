package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/idlelogout"
	"github.com/overtime-hpc/overtime/node-agent/powerctl"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// abandonedSessions carries out node-agent/idlelogout's plan under the pool's logoutIdle:
// the warning through the notifier (a desktop notification in the session, wall on
// terminals), the logout through the ender (logind). Owned by Run's goroutine.
type abandonedSessions struct {
	notifier powerctl.Notifier
	ender    powerctl.Ender
	log      *slog.Logger

	warned time.Time // when the warning of the current count was shown (zero: none)
	ended  time.Time // sessions were ended then, and logind has not yet said they are gone
	wake   time.Time
}

// Plan decides with the graphical sessions and the last sign of life at the PC, and
// acts: a warning, or the logout.
func (s *abandonedSessions) Plan(ctx context.Context, c *wire.AgentConfig, now time.Time, graphical int, lastInput time.Time) {
	if !s.ended.IsZero() {
		// Closing takes logind a moment: no new warning for sessions already ended,
		// unless they are still there after the retry interval.
		if graphical > 0 && now.Before(s.ended.Add(retryActAfter)) {
			s.wake = s.ended.Add(retryActAfter)
			return
		}
		s.ended = time.Time{}
	}
	p := idlelogout.Decide(idlelogout.Input{Now: now, LastInput: lastInput, Graphical: graphical,
		Limit: time.Duration(c.Policy.LogoutIdle), Warned: s.warned})
	s.wake = p.Wake
	switch {
	case p.Reset:
		s.warned = time.Time{}
	case p.Warn:
		s.warned = now
		s.log.Info("warning an abandoned session of its logout", "lastInput", lastInput, "limit", time.Duration(c.Policy.LogoutIdle), "text", p.Text)
		if err := s.notifier.Notify(ctx, idlelogout.Title, p.Text); err != nil {
			s.log.Warn("logout warning not delivered", "err", err)
		}
	case p.Logout:
		ended, err := s.ender.EndGraphical(ctx)
		s.log.Info("logged out abandoned sessions", "sessions", ended, "lastInput", lastInput, "err", err)
		s.warned, s.ended = time.Time{}, now
		s.wake = now.Add(retryActAfter)
	}
}

// Wake is when the plan must be made again (zero: on events only).
func (s *abandonedSessions) Wake() time.Time { return s.wake }
