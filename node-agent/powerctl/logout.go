package powerctl

import (
	"context"
	"fmt"
	"strings"
)

// Ender ends the graphical sessions at the PC: an abandoned session's logout
// (node-agent/idlelogout).
type Ender interface {
	// EndGraphical terminates every local graphical session of a person and says which
	// (logind's session IDs and users, "c2 (student)").
	EndGraphical(ctx context.Context) ([]string, error)
}

// Loginctl ends sessions through logind (loginctl terminate-session): logind stops the
// session's processes and the display manager shows its greeter again. Text consoles,
// ssh logins and greeters are left alone.
type Loginctl struct{}

// EndGraphical lists logind's sessions, picks the local graphical ones of people
// (graphicalUser) and terminates each.
func (Loginctl) EndGraphical(ctx context.Context) ([]string, error) {
	ids, err := output(ctx, "loginctl", "list-sessions", "--no-legend")
	if err != nil {
		return nil, err
	}
	var ended []string
	for _, line := range strings.Split(ids, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		props, err := output(ctx, "loginctl", "show-session", f[0], "-p", "Id", "-p", "Name", "-p", "Class", "-p", "Type", "-p", "Remote", "-p", "State")
		if err != nil {
			continue // closed meanwhile
		}
		s := parseSession(props)
		if !graphicalUser(s) {
			continue
		}
		if _, err := output(ctx, "loginctl", "terminate-session", s["Id"]); err != nil {
			return ended, err
		}
		ended = append(ended, fmt.Sprintf("%s (%s)", s["Id"], s["Name"]))
	}
	return ended, nil
}

// parseSession reads loginctl show-session's KEY=VALUE lines.
func parseSession(out string) map[string]string {
	s := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			s[k] = v
		}
	}
	return s
}

// graphicalUser: a person's session (class user, not a greeter), at the PC (not
// remote), on a display server, and not already closing.
func graphicalUser(s map[string]string) bool {
	switch s["Type"] {
	case "x11", "wayland", "mir":
	default:
		return false
	}
	return strings.HasPrefix(s["Class"], "user") && s["Remote"] == "no" && s["State"] != "closing" && s["Id"] != ""
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	return execute(ctx, nil, nil, name, args...)
}
