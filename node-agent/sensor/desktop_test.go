package sensor

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// fakeSensor runs a script: what a real sensor would send, and when it returns.
type fakeSensor func(ctx context.Context, out chan<- Event) error

func (f fakeSensor) Run(ctx context.Context, out chan<- Event) error { return f(ctx, out) }

func sessionsEvent(local int) Event {
	return Event{Kind: KindSessions, Source: "utmp", Sessions: Sessions{Local: local}}
}

// recv takes the next event of out; a missing event fails the test after a generous
// deadline (it is never the synchronisation itself).
func recv(t *testing.T, out <-chan Event) Event {
	t.Helper()
	select {
	case ev := <-out:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return Event{}
	}
}

// TestLogindOrUtmpLogindAnswers: while logind runs, its sessions go out and utmp's are
// held back; utmp's terminal activity goes out either way.
func TestLogindOrUtmpLogindAnswers(t *testing.T) {
	logind := fakeSensor(func(ctx context.Context, out chan<- Event) error {
		out <- Event{Kind: KindSessions, Source: "logind", Sessions: Sessions{Local: 1, AllIdle: true}}
		<-ctx.Done()
		return nil
	})
	utmp := fakeSensor(func(ctx context.Context, out chan<- Event) error {
		out <- sessionsEvent(3)
		out <- Event{Kind: KindInput, Source: "tty:pts/0"}
		<-ctx.Done()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Event, 8)
	done := make(chan error, 1)
	go func() { done <- (&LogindOrUtmp{Utmp: utmp, Logind: logind}).Run(ctx, out) }()
	var sources []string
	for range 2 {
		sources = append(sources, recv(t, out).Source)
	}
	slices.Sort(sources)
	if want := []string{"logind", "tty:pts/0"}; !slices.Equal(sources, want) {
		t.Errorf("events from %v, want %v", sources, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	// utmp's sessions (sent before its input, so already handled) never went out.
	if len(out) != 0 {
		t.Errorf("extra event after Run returned: %+v", <-out)
	}
}

// TestLogindOrUtmpLogindFails: when logind fails, the sessions utmp reported last go out
// at once, and utmp's later session counts go out as they come.
func TestLogindOrUtmpLogindFails(t *testing.T) {
	logindFail, utmpMore := make(chan struct{}), make(chan struct{})
	logind := fakeSensor(func(ctx context.Context, out chan<- Event) error {
		<-logindFail
		return errors.New("no system bus")
	})
	utmp := fakeSensor(func(ctx context.Context, out chan<- Event) error {
		out <- sessionsEvent(1)
		out <- Event{Kind: KindInput, Source: "tty:pts/0"}
		<-utmpMore
		out <- sessionsEvent(2)
		<-ctx.Done()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Event, 8)
	go (&LogindOrUtmp{Utmp: utmp, Logind: logind}).Run(ctx, out)
	if ev := recv(t, out); ev.Kind != KindInput {
		t.Fatalf("first event %+v, want utmp's input (its sessions held back)", ev)
	}
	close(logindFail)
	if ev := recv(t, out); ev.Kind != KindSessions || ev.Sessions.Local != 1 {
		t.Fatalf("after logind failed: %+v, want the held sessions (1 local)", ev)
	}
	close(utmpMore)
	if ev := recv(t, out); ev.Kind != KindSessions || ev.Sessions.Local != 2 {
		t.Fatalf("then %+v, want utmp's new sessions (2 local)", ev)
	}
}

// TestLogindOrUtmpUtmpFails: Run ends with utmp's error, after logind has stopped.
func TestLogindOrUtmpUtmpFails(t *testing.T) {
	logindStopped := false
	logind := fakeSensor(func(ctx context.Context, out chan<- Event) error {
		<-ctx.Done()
		logindStopped = true
		return nil
	})
	utmpErr := errors.New("utmp: no such file")
	utmp := fakeSensor(func(ctx context.Context, out chan<- Event) error { return utmpErr })
	err := (&LogindOrUtmp{Utmp: utmp, Logind: logind}).Run(context.Background(), make(chan Event, 1))
	if !errors.Is(err, utmpErr) {
		t.Errorf("Run = %v, want %v", err, utmpErr)
	}
	if !logindStopped {
		t.Error("Run returned while logind still ran")
	}
}

func TestCPUPressureFile(t *testing.T) {
	for _, tc := range []struct{ group, want string }{
		{"", "/proc/pressure/cpu"},
		{"/sys/fs/cgroup/user.slice", "/sys/fs/cgroup/user.slice/cpu.pressure"},
	} {
		if got := CPUPressureFile(tc.group); got != tc.want {
			t.Errorf("CPUPressureFile(%q) = %q, want %q", tc.group, got, tc.want)
		}
	}
}

// TestDesktop: one sensor of each kind; the pressure sensor watches the desktop's cgroup
// when one is given, else the whole system; input and utmp paths are passed on.
func TestDesktop(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opt           DesktopOptions
		pressure      []string
		inputDir, utm string
	}{
		{"defaults", DesktopOptions{}, []string{DefaultPressure}, "/dev/input", ""},
		{"desktop cgroup", DesktopOptions{PressureGroup: "/sys/fs/cgroup/user.slice", InputDir: "/tmp/in", Utmp: "/tmp/utmp"},
			[]string{"/sys/fs/cgroup/user.slice"}, "/tmp/in", "/tmp/utmp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kinds []string
			for _, s := range Desktop(tc.opt) {
				switch s := s.(type) {
				case *Pressure:
					kinds = append(kinds, "pressure")
					if !slices.Equal(s.Sources, tc.pressure) {
						t.Errorf("pressure sources %v, want %v", s.Sources, tc.pressure)
					}
				case *Load:
					kinds = append(kinds, "load")
				case *Input:
					kinds = append(kinds, "input")
					if s.Dir != tc.inputDir {
						t.Errorf("input dir %q, want %q", s.Dir, tc.inputDir)
					}
				case *LogindOrUtmp:
					kinds = append(kinds, "sessions")
					if u, ok := s.Utmp.(*Utmp); !ok || u.Path != tc.utm {
						t.Errorf("utmp sensor %#v, want path %q", s.Utmp, tc.utm)
					}
				default:
					t.Errorf("unexpected sensor %T", s)
				}
			}
			if want := []string{"pressure", "load", "input", "sessions"}; !slices.Equal(kinds, want) {
				t.Errorf("sensors %v, want %v", kinds, want)
			}
		})
	}
}
