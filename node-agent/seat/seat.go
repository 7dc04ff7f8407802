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
	// Issue is shown by the console's login prompt. agetty reads /run/issue.d only
	// when there is no /etc/issue, and Debian has one: /etc/issue.d it reads after it
	// (on a PC, /etc is the boot's tmpfs overlay like /run, gone at the next boot).
	Issue = "etc/issue.d/50-overtime-login.issue"
	// Notice exists only while university logins cannot work: the reason, which the
	// graphical greeter shows when someone starts to log in (pam_echo in its PAM stack,
	// images/recipes/desktop).
	Notice = "run/overtime/seat.notice"
	// Directory lists the directory's servers (host:port, one a line) of the last
	// Apply that configured logins: what Recheck asks again while the PC runs.
	Directory = "run/overtime/seat.directory"
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
	prev := readLines(root, Manifest)
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
	if issue == "" && len(sl.Directory) > 0 {
		if err := writeRun(root, Directory, strings.Join(sl.Directory, "\n")+"\n"); err != nil {
			return err
		}
	} else if err := removeRun(root, Directory); err != nil {
		return err
	}
	if issue == "" {
		return removeRun(root, Issue, Notice)
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

func removeRun(root string, rels ...string) error {
	for _, rel := range rels {
		if err := os.Remove(filepath.Join(root, rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// readLines is a file's non-empty lines (none when it does not exist).
func readLines(root, rel string) []string {
	f, err := os.Open(filepath.Join(root, rel))
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
	return Say(root, directoryDown(servers))
}

func directoryDown(servers []string) string {
	return OneLine("The university directory (" + strings.Join(servers, ", ") + ") cannot be reached from this PC: logins with university accounts will fail until it answers.")
}

// Recheck asks the directory's servers of the last Apply (Directory) again and keeps
// what the login screens say in step with the answer: none answers while the status is
// "ok", and the greeter's notice and the console's prompt say so (DirectoryUnreachable);
// one answers again while they say so, and the status is "ok" again and both are gone.
// Any other status (nothing configured, a secret missing, the site manager refused or
// unreachable at boot) is seat-config's, and stays until the next boot. changed is the
// new status when Recheck changed it, "" otherwise.
//
// Why: seat-config checks the directory once, before the greeter starts; a directory
// that goes down later (or comes back after a failed boot-time check) would otherwise
// leave students at a greeter that says nothing, or that warns about an outage long over.
func Recheck(ctx context.Context, root string, timeout time.Duration) (changed string, err error) {
	servers := readLines(root, Directory)
	if len(servers) == 0 {
		return "", nil
	}
	status, down := ReadStatus(root), directoryDown(servers)
	if status != "ok" && status != down {
		return "", nil
	}
	up := Reachable(ctx, servers, timeout)
	switch {
	case !up && status == "ok":
		return down, DirectoryUnreachable(root, servers)
	case up && status == down:
		if err := writeRun(root, Status, "ok\n"); err != nil {
			return "", err
		}
		return "ok", removeRun(root, Issue, Notice)
	}
	return "", nil
}

// Watch runs Recheck every interval until ctx ends, telling logf what changed. The node
// agent runs it (overtime-agent run --seat-recheck).
func Watch(ctx context.Context, root string, every time.Duration, logf func(status string, err error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if changed, err := Recheck(ctx, root, 5*time.Second); changed != "" || err != nil {
			logf(changed, err)
		}
	}
}
