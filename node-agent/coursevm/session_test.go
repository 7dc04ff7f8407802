package coursevm

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// fakeQEMU is a stand-in for qemu-system-x86_64 that records each start (a line in
// starts, with its pid) and then runs body, a shell fragment: the player's part is what
// it does when QEMU exits or must be stopped, not what QEMU shows.
func fakeQEMU(t *testing.T, body string) (bin, starts string) {
	t.Helper()
	dir := t.TempDir()
	bin, starts = filepath.Join(dir, "qemu-system-x86_64"), filepath.Join(dir, "starts")
	script := "#!/bin/sh\necho $$ >>'" + starts + "'\necho \"$@\" >>'" + starts + ".args'\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, starts
}

func lines(p string) []string {
	b, _ := os.ReadFile(p)
	return strings.Fields(string(b))
}

// TestSession: the player as the X session the student chose (Options.Session). The VM
// is never started again: when it powers off (or its window is closed: QEMU exits 0)
// the session ends cleanly, when it dies the session ends with the error; logout
// (SIGTERM, the end of ctx) and the end of the course-vm mode stop it; with no VM to
// show for SessionWait it ends with ErrNoCourseVM saying why, instead of a black screen.
// Every way out leaves the state directory (the overlays) empty.
func TestSession(t *testing.T) {
	needs.Servers(t, "qemu-img")
	good := version(t, nil)
	truncated := version(t, nil)
	if err := os.Truncate(filepath.Join(truncated, vmspec.DiskFile), 1000); err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Mode: "course-bio101", Image: "bio", Version: "ws-1", Dir: good}
	for _, tc := range []struct {
		name  string
		qemu  string // the fake QEMU's behaviour
		spec  *Spec  // sent at once (nil: no spec file)
		late  *Spec  // sent after 200 ms (the agent writes the spec after the login)
		then  func(p *Player, specs chan<- *Spec, cancel func())
		want  string // "" : Run returns nil; else a substring of its error
		isErr error  // errors.Is
		runs  int    // VM starts
	}{
		{name: "the guest powers off", qemu: "sleep 0.3; exit 0", spec: spec, runs: 1},
		{name: "the spec comes after the login", qemu: "sleep 0.3; exit 0", late: spec, runs: 1},
		{name: "QEMU dies", qemu: "echo boom >&2; sleep 0.3; exit 3", spec: spec, want: "course VM bio ws-1 ended: exit status 3: boom", runs: 1},
		{name: "logout (SIGTERM)", qemu: "exec sleep 600", spec: spec, runs: 1,
			then: func(p *Player, _ chan<- *Spec, cancel func()) { cancel() }},
		{name: "the course-vm mode ends", qemu: "exec sleep 600", spec: spec, runs: 1,
			then: func(p *Player, specs chan<- *Spec, _ func()) { specs <- nil }},
		{name: "no spec file", qemu: "exit 0", spec: nil, isErr: ErrNoCourseVM, want: "no course VM is named for this PC now (the spec file is absent or empty"},
		{name: "course VM unavailable", qemu: "exit 0", spec: &Spec{Mode: "course-bio101", Unavailable: "course VM image bio has no published version"},
			isErr: ErrNoCourseVM, want: "course VM unavailable: course VM image bio has no published version"},
		{name: "every start fails", qemu: "exit 0", spec: &Spec{Mode: "course-bio101", Image: "bio", Version: "ws-1", Dir: truncated},
			isErr: ErrNoCourseVM, want: "vm.json says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, starts := fakeQEMU(t, tc.qemu)
			state := t.TempDir()
			p := New(Options{QEMU: bin, StateDir: state, Display: "sdl", Session: true, SessionWait: 500 * time.Millisecond,
				RestartBackoff: 50 * time.Millisecond, Accel: func() (string, string) { return "tcg", "test" },
				Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
			specs := make(chan *Spec, 1)
			specs <- tc.spec
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx, specs) }()
			if tc.late != nil {
				time.Sleep(200 * time.Millisecond)
				specs <- tc.late
			}
			if tc.then != nil {
				// The fake QEMU has run once it wrote its pid: a PID alone may be a
				// shell that the stop kills before its first line.
				poll.Until(t, "the course VM to run", 30*time.Second, func() bool { return p.PID() != 0 && len(lines(starts)) > 0 })
				tc.then(p, specs, cancel)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the session did not end")
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Run: %v, want the session to end cleanly", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			case tc.isErr != nil && !errors.Is(err, tc.isErr):
				t.Errorf("Run: %v, want %v", err, tc.isErr)
			}
			// Never started again; nothing kept; no QEMU left.
			pids := lines(starts)
			if len(pids) != tc.runs {
				t.Errorf("%d VM starts, want %d", len(pids), tc.runs)
			}
			for _, s := range pids {
				pid, _ := strconv.Atoi(s)
				if pid > 0 && syscall.Kill(pid, 0) == nil {
					t.Errorf("QEMU %d still runs after the session ended", pid)
				}
			}
			if n := entries(state); len(n) != 0 {
				t.Errorf("state directory after the session: %v", n)
			}
			// Full screen with SDL, as the session's Exec line asks.
			if args, _ := os.ReadFile(starts + ".args"); tc.runs > 0 && !strings.Contains(string(args), "-display sdl -full-screen") {
				t.Errorf("QEMU's arguments: %s", args)
			}
		})
	}
}

// The course VM session's program (course-vm-session, what the greeter runs) passes
// shellcheck and ends in the player as the session: the booted desktop test runs it.
func TestSessionScript(t *testing.T) {
	needs.Servers(t, "shellcheck")
	if out, err := exec.Command("shellcheck", "-s", "sh", "course-vm-session").CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
	b, err := os.ReadFile("course-vm-session")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n/usr/bin/overtime-agent course-vm --session --display sdl --share \"$HOME/coursevm\" \"$@\"\n") {
		t.Errorf("course-vm-session does not run the player as the session, sharing ~/coursevm")
	}
}
