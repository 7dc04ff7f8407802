// Package seat applies a desktop's login stack, as the site manager hands it out
// (wire.SeatConfig, GET /api/v1/agent/seat), to the PC before its display manager
// and sssd start: the files under /etc (only the paths wire.SeatFiles names, each
// written atomically with its mode), and what the login screen says when university
// logins cannot work. `overtime-agent seat-config` (unit overtime-seat.service)
// runs it once per boot; docs/desktop.md "Logins".
package seat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Paths of what Apply writes besides the login files, relative to the root.
const (
	// Manifest lists the login files the last Apply wrote, so that the next one removes
	// those an answer no longer names (and never a file the image brought).
	Manifest = "run/overtime/seat.files"
	// Status is one line: "ok", or why university logins cannot work here. The
	// graphical greeter and `overtime-agent seat-config --status` read it.
	Status = "run/overtime/seat.status"
	// Issue is shown by the console's login prompt (agetty reads /run/issue.d).
	Issue = "run/issue.d/50-overtime-login.issue"
	// Notice exists only while university logins cannot work: the reason, which the
	// graphical greeter shows when someone starts to log in (pam_echo in its PAM stack,
	// images/recipes/desktop).
	Notice = "run/overtime/seat.notice"
)

// Apply writes sl under root ("/" on a PC; a directory in tests). Files outside
// wire.SeatFiles, or with a mode other than 0600 and 0644, are refused before
// anything is written: the agent trusts the site manager, but a file the login stack
// reads as root is worth the check.
func Apply(root string, sl *wire.SeatConfig) error {
	for _, f := range sl.Files {
		if !slices.Contains(wire.SeatFiles, f.Path) {
			return fmt.Errorf("seat config: the site manager named %q, which is not a login file", f.Path)
		}
		if f.Mode != 0o600 && f.Mode != 0o644 {
			return fmt.Errorf("seat config: %s with mode %o", f.Path, f.Mode)
		}
	}
	if sl.Unavailable == "" && len(sl.Files) == 0 {
		return errors.New("seat config: the site manager's answer has neither files nor a reason")
	}
	prev := readManifest(root)
	var wrote []string
	for _, f := range sl.Files {
		p := filepath.Join(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(p, f.Content, os.FileMode(f.Mode)); err != nil {
			return fmt.Errorf("seat config: %w", err)
		}
		// WriteFile's mode is subject to nothing but this: make sure (sssd refuses a
		// group- or world-readable sssd.conf; krb5_child, running as the user, needs to
		// read krb5.conf).
		if err := os.Chmod(p, os.FileMode(f.Mode)); err != nil {
			return err
		}
		wrote = append(wrote, f.Path)
	}
	for _, p := range prev {
		if !slices.Contains(wrote, p) && slices.Contains(wire.SeatFiles, p) {
			if err := os.Remove(filepath.Join(root, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := writeRun(root, Manifest, strings.Join(wrote, "\n")+"\n"); err != nil {
		return err
	}
	status, issue := "ok\n", ""
	if sl.Unavailable != "" {
		status = OneLine(sl.Unavailable) + "\n"
		issue = "\n" + agettyText(OneLine(sl.Unavailable)) + "\n\n"
	}
	if err := writeRun(root, Status, status); err != nil {
		return err
	}
	if issue == "" {
		for _, f := range []string{Issue, Notice} {
			if err := os.Remove(filepath.Join(root, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	if err := writeRun(root, Notice, OneLine(sl.Unavailable)+"\n"); err != nil {
		return err
	}
	return writeRun(root, Issue, issue)
}

// Unreachable records that the site manager could not be asked: the files the image has
// (or an earlier Apply wrote) stay, and the login screen says why logins may fail.
func Unreachable(root, server string) error {
	return Say(root, "The site manager ("+server+") could not be reached at boot: logins with university accounts may not work on this PC until it is restarted.")
}

// Say records why university logins may not work here (msg, one line) without touching
// the login files.
func Say(root, msg string) error {
	msg = OneLine(msg)
	if err := writeRun(root, Status, msg+"\n"); err != nil {
		return err
	}
	if err := writeRun(root, Notice, msg+"\n"); err != nil {
		return err
	}
	return writeRun(root, Issue, "\n"+agettyText(msg)+"\n\n")
}

// ReadStatus is the status line Apply or Unreachable left ("" when none ran).
func ReadStatus(root string) string {
	b, err := os.ReadFile(filepath.Join(root, Status))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func writeRun(root, rel, content string) error {
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, []byte(content), 0o644)
}

func readManifest(root string) []string {
	f, err := os.Open(filepath.Join(root, Manifest))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// OneLine makes a reason one line of printable text.
func OneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }), " ")
}

// agettyText keeps agetty from reading escapes (\n, \l, ...) in a reason: agetty has no
// escape for a backslash itself, so it becomes a slash.
func agettyText(s string) string { return strings.ReplaceAll(s, `\`, "/") }

// Reachable reports whether one of the directory's servers (host:port) accepts a TCP
// connection within timeout, asking all at once. No servers (AD found by DNS): true, as
// there is nothing to check.
func Reachable(ctx context.Context, servers []string, timeout time.Duration) bool {
	if len(servers) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok := make(chan bool, len(servers))
	for _, s := range servers {
		go func(addr string) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
			}
			ok <- err == nil
		}(s)
	}
	for range servers {
		if <-ok {
			return true
		}
	}
	return false
}

// DirectoryUnreachable says that the configuration is written but none of the
// directory's servers answered from this PC.
func DirectoryUnreachable(root string, servers []string) error {
	return Say(root, "The university directory ("+strings.Join(servers, ", ")+") cannot be reached from this PC: logins with university accounts will fail until it answers.")
}
