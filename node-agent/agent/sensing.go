package agent

import (
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/policy"
	"github.com/overtime-hpc/overtime/node-agent/sensor"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// sensing folds the sensors' events (input, sessions, pressure, load) into the
// observation the policy engine decides on, and remembers the owner's comings and goings
// the calibration asks about. Owned by Run's goroutine.
type sensing struct {
	m *metrics

	obs         policy.Observation
	sawSessions bool
	// lastLogout: when the last user session ended (zero: none since the agent started);
	// the calibration's "nobody logged in since".
	lastLogout time.Time
	// graphical: local graphical sessions now; graphicalSince: when the first of them
	// appeared (or the agent first saw them), where an abandoned session's idle time
	// starts at the latest.
	graphical      int
	graphicalSince time.Time
	// seatInput: the last event of the PC's own keyboard or mouse (the input devices,
	// Source "input:..."), not a terminal's: keys typed over ssh do not keep an
	// abandoned graphical session alive.
	seatInput time.Time
}

// Observe folds a sensor event into the observation.
func (s *sensing) Observe(ev sensor.Event) {
	s.m.signals.WithLabelValues(string(ev.Kind)).Inc()
	switch ev.Kind {
	case sensor.KindInput:
		if ev.Time.After(s.obs.LastInput) {
			s.obs.LastInput = ev.Time
		}
		if strings.HasPrefix(ev.Source, "input:") && ev.Time.After(s.seatInput) {
			s.seatInput = ev.Time
		}
	case sensor.KindSessions:
		// Logging in is activity; sessions that exist when the agent starts are not news.
		if s.sawSessions && ev.Sessions.Total() > s.obs.LocalSessions+s.obs.RemoteSessions && ev.Time.After(s.obs.LastInput) {
			s.obs.LastInput = ev.Time
		}
		s.sawSessions = true
		if before, after := s.Sessions(), ev.Sessions.Total(); before > 0 && after == 0 {
			s.lastLogout = ev.Time
		}
		s.obs.LocalSessions, s.obs.RemoteSessions = ev.Sessions.Local, ev.Sessions.Remote
		if s.graphical == 0 && ev.Sessions.Graphical > 0 {
			s.graphicalSince = ev.Time
		}
		s.graphical = ev.Sessions.Graphical
	case sensor.KindPressure:
		s.obs.Pressure = ev.Value
		s.m.pressure.Set(ev.Value)
	case sensor.KindLoad:
		s.obs.Load = ev.Value
		s.m.load.Set(ev.Value)
	}
}

// SetMode takes the configuration's mode kind and whether it has a guest into the
// observation.
func (s *sensing) SetMode(kind model.ModeKind, hasGuest bool) {
	s.obs.Kind, s.obs.HasGuest = kind, hasGuest
}

// At is the observation at now, for the policy engine.
func (s *sensing) At(now time.Time) policy.Observation {
	s.obs.Now = now
	return s.obs
}

// Sessions is the number of sessions logged in (local and remote).
func (s *sensing) Sessions() int { return s.obs.LocalSessions + s.obs.RemoteSessions }

// Pressure is the desktop's pressure last reported (percent).
func (s *sensing) Pressure() float64 { return s.obs.Pressure }

// LastLogout is when the last session ended (zero: none since the agent started).
func (s *sensing) LastLogout() time.Time { return s.lastLogout }

// Graphical is the number of local graphical sessions, and the last sign of life at the
// seat: its keyboard's or mouse's last event, or when the graphical sessions began if
// later.
func (s *sensing) Graphical() (n int, lastInput time.Time) {
	lastInput = s.seatInput
	if s.graphicalSince.After(lastInput) {
		lastInput = s.graphicalSince
	}
	return s.graphical, lastInput
}
