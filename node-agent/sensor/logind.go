package sensor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// Logind follows the sessions of systemd-logind (org.freedesktop.login1 on the system
// bus): it reads every session at start and again whenever logind signals SessionNew,
// SessionRemoved or a change of a session's properties (IdleHint, State), and sends a
// KindSessions Event whenever the Sessions it computes change (the first one at once).
//
// Counted are sessions of class "user" (user, user-early, ...) that are not closing;
// greeters (a display manager's login screen) and lingering closing sessions are not.
// logind's idle hints come from the desktop (screen savers, GNOME's idle monitor) and,
// for terminals, from the terminal's last access.
//
// Run fails at once when there is no system bus or no logind on it: the agent then uses
// Utmp.
type Logind struct {
	// Address of the system bus; default $DBUS_SYSTEM_BUS_ADDRESS, or
	// unix:path=/run/dbus/system_bus_socket.
	Address string
	// CallTimeout bounds one D-Bus call to logind (default 5 s).
	CallTimeout time.Duration
}

const (
	login1Name    = "org.freedesktop.login1"
	login1Path    = dbus.ObjectPath("/org/freedesktop/login1")
	login1Manager = "org.freedesktop.login1.Manager"
	login1Session = "org.freedesktop.login1.Session"
	dbusProps     = "org.freedesktop.DBus.Properties"
)

// DefaultSystemBus is the system bus's address when $DBUS_SYSTEM_BUS_ADDRESS is unset.
const DefaultSystemBus = "unix:path=/run/dbus/system_bus_socket"

// Run follows logind until ctx is done. It fails at once without a system bus or without
// logind on it, and later when the bus connection is lost.
func (l *Logind) Run(ctx context.Context, out chan<- Event) error {
	addr := l.Address
	if addr == "" {
		addr = os.Getenv("DBUS_SYSTEM_BUS_ADDRESS")
	}
	if addr == "" {
		addr = DefaultSystemBus
	}
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("logind: no system bus at %s: %w", addr, err)
	}
	defer conn.Close()

	signals := make(chan *dbus.Signal, 64)
	conn.Signal(signals)
	defer conn.RemoveSignal(signals)
	for _, match := range [][]dbus.MatchOption{
		{dbus.WithMatchSender(login1Name), dbus.WithMatchObjectPath(login1Path), dbus.WithMatchInterface(login1Manager)},
		{dbus.WithMatchSender(login1Name), dbus.WithMatchInterface(dbusProps), dbus.WithMatchMember("PropertiesChanged"),
			dbus.WithMatchPathNamespace(login1Path + "/session")},
	} {
		if err := conn.AddMatchSignalContext(ctx, match...); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("logind: subscribing to signals: %w", err)
		}
	}

	cur, err := l.sessions(ctx, conn)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("logind: %w", err)
	}
	if !send(ctx, out, Event{Kind: KindSessions, Time: time.Now(), Source: "logind", Sessions: cur}) {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case sig, ok := <-signals:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("logind: the system bus connection was lost")
			}
			if !relevant(sig) {
				continue
			}
			// A login sends a burst (SessionNew, then property changes): take what is
			// queued and read once.
		drain:
			for {
				select {
				case _, ok := <-signals:
					if !ok {
						break drain
					}
				default:
					break drain
				}
			}
			s, err := l.sessions(ctx, conn)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if !conn.Connected() {
					return fmt.Errorf("logind: the system bus connection was lost: %w", err)
				}
				continue // e.g. logind restarting: the next signal reads again
			}
			if !s.Equal(cur) {
				cur = s
				if !send(ctx, out, Event{Kind: KindSessions, Time: time.Now(), Source: "logind", Sessions: cur}) {
					return nil
				}
			}
		}
	}
}

func relevant(sig *dbus.Signal) bool {
	switch sig.Name {
	case login1Manager + ".SessionNew", login1Manager + ".SessionRemoved":
		return true
	case dbusProps + ".PropertiesChanged":
		iface, _ := firstString(sig.Body)
		return iface == login1Session
	}
	return false
}

func firstString(body []any) (string, bool) {
	if len(body) == 0 {
		return "", false
	}
	s, ok := body[0].(string)
	return s, ok
}

// graphicalTypes are logind's session types of a display server.
var graphicalTypes = map[string]bool{"x11": true, "wayland": true, "mir": true}

// sessions reads all sessions from logind.
func (l *Logind) sessions(ctx context.Context, conn *dbus.Conn) (Sessions, error) {
	timeout := l.CallTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	call := func(obj dbus.BusObject, method string, out any, args ...any) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return obj.CallWithContext(cctx, method, 0, args...).Store(out)
	}
	var list []struct {
		ID   string
		UID  uint32
		User string
		Seat string
		Path dbus.ObjectPath
	}
	if err := call(conn.Object(login1Name, login1Path), login1Manager+".ListSessions", &list); err != nil {
		return Sessions{}, fmt.Errorf("ListSessions: %w", err)
	}
	var s Sessions
	allIdle := true
	var idleSince time.Time
	for _, e := range list {
		var props map[string]dbus.Variant
		if err := call(conn.Object(login1Name, e.Path), dbusProps+".GetAll", &props, login1Session); err != nil {
			continue // closed meanwhile
		}
		class, _ := props["Class"].Value().(string)
		state, _ := props["State"].Value().(string)
		if !strings.HasPrefix(class, "user") || state == "closing" {
			continue
		}
		if remote, _ := props["Remote"].Value().(bool); remote {
			s.Remote++
		} else {
			s.Local++
			if t, _ := props["Type"].Value().(string); graphicalTypes[t] {
				s.Graphical++
			}
		}
		idle, _ := props["IdleHint"].Value().(bool)
		if !idle {
			allIdle = false
			continue
		}
		if us, _ := props["IdleSinceHint"].Value().(uint64); us > 0 {
			if t := time.UnixMicro(int64(us)); t.After(idleSince) {
				idleSince = t
			}
		}
	}
	if s.Total() > 0 && allIdle {
		s.AllIdle = true
		s.IdleSince = idleSince
	}
	return s, nil
}
