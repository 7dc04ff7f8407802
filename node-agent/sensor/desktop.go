package sensor

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"
)

// DesktopOptions say where the desktop's sensors look; zero values take the defaults.
type DesktopOptions struct {
	InputDir      string // input devices (default /dev/input)
	Utmp          string // utmp file (default DefaultUtmp)
	PressureGroup string // cgroup v2 group whose pressure is the desktop's; "" system-wide
	// GuestCPU is the compute guest's CPU time so far, which the load sensor subtracts
	// (the agent knows the guest, the sensor does not).
	GuestCPU func() time.Duration
	Log      *slog.Logger
}

// Desktop returns the node agent's sensors: pressure, desktop load, input devices, and
// sessions (logind, or utmp where there is no logind) with terminal activity.
func Desktop(o DesktopOptions) []Sensor {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	pressure := &Pressure{Sources: []string{DefaultPressure}}
	if o.PressureGroup != "" {
		pressure.Sources = []string{o.PressureGroup}
	}
	inputDir := o.InputDir
	if inputDir == "" {
		inputDir = "/dev/input"
	}
	return []Sensor{
		pressure,
		&Load{Guest: o.GuestCPU},
		&Input{Dir: inputDir, Opened: func(path, name string, err error) {
			if err != nil {
				log.Warn("input device", "path", path, "err", err)
			} else {
				log.Info("input device", "path", path, "name", name)
			}
		}},
		&LogindOrUtmp{Utmp: &Utmp{Path: o.Utmp}, Logind: &Logind{}, Log: log},
	}
}

// CPUPressureFile is the PSI file of the desktop's CPU pressure, which job reports give
// as the desktop's slowdown: the desktop's cgroup (group) when given, else system-wide.
func CPUPressureFile(group string) string {
	if group != "" {
		return filepath.Join(group, "cpu.pressure")
	}
	return filepath.Join(DefaultPressure, "cpu")
}

// LogindOrUtmp takes sessions from logind where it runs (it knows graphical sessions and
// idle hints) and from utmp otherwise; utmp always provides terminal activity. Until
// logind has failed, utmp's session counts are held back; the last of them goes out
// when logind fails, so the agent does not wait for the next login to know the sessions.
// Run returns when the utmp sensor returns (its error) or ctx is done.
type LogindOrUtmp struct {
	Utmp   Sensor // *Utmp: sessions and terminal activity
	Logind Sensor // *Logind: sessions with idle hints
	Log    *slog.Logger
}

func (s *LogindOrUtmp) Run(ctx context.Context, out chan<- Event) error {
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	// Both sensors end before Run returns: logind sends on out itself, and nothing may
	// arrive there after Run returned.
	ctx, cancel := context.WithCancel(ctx)
	fromUtmp := make(chan Event, 16)
	logindErr := make(chan error, 1)
	go func() { logindErr <- s.Logind.Run(ctx, out) }()
	utmpDone := make(chan error, 1)
	go func() { utmpDone <- s.Utmp.Run(ctx, fromUtmp) }()
	logindRunning, utmpRunning := true, true
	defer func() {
		cancel()
		if logindRunning {
			<-logindErr
		}
		if utmpRunning {
			<-utmpDone
		}
	}()
	useUtmpSessions := false
	var lastSessions *Event // utmp's, held back while logind may still answer
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-logindErr:
			logindRunning = false
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Info("logind unavailable: sessions from utmp", "err", err)
				useUtmpSessions = true
				if lastSessions != nil && !send(ctx, out, *lastSessions) {
					return nil
				}
			}
		case err := <-utmpDone:
			utmpRunning = false
			return err
		case ev := <-fromUtmp:
			if ev.Kind == KindSessions && !useUtmpSessions {
				lastSessions = &ev
				continue
			}
			if !send(ctx, out, ev) {
				return nil
			}
		}
	}
}
