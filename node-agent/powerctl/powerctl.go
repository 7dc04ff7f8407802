// Package powerctl carries out what node-agent/switching decides: it restarts or
// switches off the PC through systemd, and tells the people logged in — on every terminal
// with wall(1), and in every graphical session as a desktop notification over its D-Bus
// session bus (org.freedesktop.Notifications).
//
// Both use tools every Debian desktop has (systemctl, wall from util-linux, busctl from
// systemd, setpriv from util-linux), so the agent package adds no dependency.
package powerctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine restarts or switches off the PC.
type Machine interface {
	Reboot(ctx context.Context) error
	PowerOff(ctx context.Context) error
}

// Systemd asks systemd (PID 1) through systemctl, which stops services in order: the
// agent's own stop leaves the guest to systemd's shutdown like every other service.
type Systemd struct{}

func (Systemd) Reboot(ctx context.Context) error { return run(ctx, nil, nil, "systemctl", "reboot") }
func (Systemd) PowerOff(ctx context.Context) error {
	return run(ctx, nil, nil, "systemctl", "poweroff")
}

// Command runs a site's own program instead: `Path reboot` or `Path poweroff` (a power
// distribution unit's client, an IPMI wrapper; test labs record what they are asked).
type Command struct{ Path string }

func (c Command) Reboot(ctx context.Context) error   { return run(ctx, nil, nil, c.Path, "reboot") }
func (c Command) PowerOff(ctx context.Context) error { return run(ctx, nil, nil, c.Path, "poweroff") }

// Notifier tells the people logged in.
type Notifier interface {
	Notify(ctx context.Context, title, text string) error
}

// Sessions notifies every terminal (wall) and every graphical session whose user runs a
// session bus under RunUser (/run/user/UID/bus).
type Sessions struct {
	RunUser string // default /run/user
	// Wall false: no terminal messages (tests that check only desktop notifications).
	NoWall bool
	Log    func(msg string, args ...any)
}

// Notify sends the message everywhere it can; it fails only when it reached nobody
// although there was somewhere to send it.
func (s Sessions) Notify(ctx context.Context, title, text string) error {
	var errs []error
	sent := 0
	if !s.NoWall {
		// wall's banner names the sender (root); the title says what it is about.
		if err := run(ctx, strings.NewReader(title+"\n"+text+"\n"), nil, "wall"); err != nil {
			errs = append(errs, fmt.Errorf("wall: %w", err))
		} else {
			sent++
		}
	}
	dir := s.RunUser
	if dir == "" {
		dir = "/run/user"
	}
	buses, _ := filepath.Glob(filepath.Join(dir, "*", "bus"))
	for _, bus := range buses {
		uid := filepath.Base(filepath.Dir(bus))
		if _, err := strconv.Atoi(uid); err != nil {
			continue
		}
		if err := desktopNotify(ctx, bus, uid, title, text); err != nil {
			// A session bus without a notification daemon (a text login with lingering):
			// not an error of the switch, only of this channel.
			if s.Log != nil {
				s.Log("desktop notification not delivered", "bus", bus, "err", err)
			}
			continue
		}
		sent++
	}
	if sent == 0 && len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// desktopNotify calls org.freedesktop.Notifications.Notify on the user's session bus as
// that user: a session bus accepts only its own user, so root drops to the user's ids
// (setpriv) for the one call. Urgency critical (2): the notice stays until dismissed.
//
// The user's group is the owner group of their runtime directory (logind makes it
// theirs), not a look-up in Go: the agent is built without cgo, and Go's own look-up
// reads /etc/passwd only, where a university account (sssd) is not — setpriv, a libc
// program, finds it through NSS for --init-groups.
func desktopNotify(ctx context.Context, bus, uid, title, text string) error {
	dir := filepath.Dir(bus)
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || strconv.FormatUint(uint64(st.Uid), 10) != uid {
		return fmt.Errorf("%s is not user %s's runtime directory", dir, uid)
	}
	env := []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + bus, "XDG_RUNTIME_DIR=" + dir,
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	args := []string{"busctl", "--user", "--timeout=5", "call", "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
		"org.freedesktop.Notifications", "Notify", "susssasa{sv}i",
		"Overtime", "0", "system-reboot", title, text, "0", "1", "urgency", "y", "2", "0"}
	if os.Geteuid() == 0 && uid != "0" {
		args = append([]string{"setpriv", "--reuid=" + uid, "--regid=" + strconv.FormatUint(uint64(st.Gid), 10), "--init-groups", "--"}, args...)
	}
	return run(ctx, nil, env, args[0], args[1:]...)
}

func run(ctx context.Context, stdin *strings.Reader, env []string, name string, args ...string) error {
	_, err := execute(ctx, stdin, env, name, args...)
	return err
}

// execute runs one tool (within 30 s) and returns its standard output; a failure says
// what the tool said on standard error.
func execute(ctx context.Context, stdin *strings.Reader, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if env != nil {
		cmd.Env = env
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(errb.String())
		if why == "" {
			why = strings.TrimSpace(out.String())
		}
		return "", fmt.Errorf("%s: %w: %s", name, err, why)
	}
	return out.String(), nil
}
