package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// recordingFirewall records what the agent loads and removes; fail makes the next call
// fail once.
type recordingFirewall struct {
	calls []string // "apply" or "remove"
	last  string   // the last ruleset applied
	fail  bool
}

func (f *recordingFirewall) Apply(_ context.Context, ruleset []byte) error {
	f.calls = append(f.calls, "apply")
	if f.fail {
		f.fail = false
		return errors.New("nft: no such file")
	}
	f.last = string(ruleset)
	return nil
}

func (f *recordingFirewall) Remove(context.Context) error {
	f.calls = append(f.calls, "remove")
	if f.fail {
		f.fail = false
		return errors.New("nft: busy")
	}
	return nil
}

type staticLookup map[string][]netip.Addr

func (l staticLookup) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := l[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// The agent loads the exam's ruleset when the configuration turns to an exam (names
// resolved, unresolvable ones left out, the PC's resolvers added), does not reload an
// unchanged one at every fetch, reloads a changed one, retries after a failure, and
// deletes the table when the exam is over; a restarted agent's first configuration
// outside an exam deletes a table an earlier agent may have left.
func TestExamNetworkApplied(t *testing.T) {
	fw := &recordingFirewall{}
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 10.0.0.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), ExamFirewall: fw,
		ExamLookup:     staticLookup{"exam.uni.example": {netip.MustParseAddr("198.51.100.7")}},
		ExamResolvConf: []string{resolv}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	desk := goodConfig()
	desk.Mode, desk.Kind = "desktop", model.KindDesktop
	exam := func(allow ...string) *wire.AgentConfig {
		c := *desk
		c.Exam = true
		c.ExamNetwork = &wire.ExamNetwork{Allow: []wire.ExamEndpoint{{Endpoint: "10.0.0.1", For: wire.ExamForBootServer}}}
		for _, e := range allow {
			c.ExamNetwork.Allow = append(c.ExamNetwork.Allow, wire.ExamEndpoint{Endpoint: e, For: wire.ExamForExam})
		}
		return &c
	}
	step := func(name string, c *wire.AgentConfig, calls []string, has, hasNot []string) {
		t.Helper()
		fw.calls = nil
		if err := checkConfig(c, testMAC); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a.apply(ctx, c, "api")
		if !slices.Equal(fw.calls, calls) {
			t.Errorf("%s: firewall calls %v, want %v", name, fw.calls, calls)
		}
		for _, s := range has {
			if !strings.Contains(fw.last, s) {
				t.Errorf("%s: ruleset lacks %q:\n%s", name, s, fw.last)
			}
		}
		for _, s := range hasNot {
			if strings.Contains(fw.last, s) {
				t.Errorf("%s: ruleset has %q:\n%s", name, s, fw.last)
			}
		}
	}
	step("restarted agent outside an exam", desk, []string{"remove"}, nil, nil)
	step("still no exam", desk, nil, nil, nil)
	step("the exam starts", exam("exam.uni.example:443", "gone.uni.example"), []string{"apply"},
		[]string{`ip daddr 10.0.0.1 accept comment "boot-server"`, `ip daddr 198.51.100.7 meta l4proto { tcp, udp } th dport 443 accept comment "exam"`,
			`ip daddr 10.0.0.53 meta l4proto { tcp, udp } th dport 53 accept comment "dns"`}, []string{"gone"})
	step("the same exam at the next fetch", exam("exam.uni.example:443", "gone.uni.example"), nil, nil, nil)
	fw.fail = true
	step("the allow list changes, nft fails", exam("10.0.5.0/24"), []string{"apply"}, nil, []string{"10.0.5.0/24"})
	step("tried again", exam("10.0.5.0/24"), []string{"apply"}, []string{`ip daddr 10.0.5.0/24 accept comment "exam"`}, []string{"198.51.100.7"})
	step("the exam is over", desk, []string{"remove"}, nil, nil)
	step("after the exam", desk, nil, nil, nil)
	old := exam()
	old.ExamNetwork = nil
	step("an exam from an older site manager: not limited", old, nil, nil, nil)
}

// A configuration whose exam network the agent cannot render whole is refused.
func TestExamNetworkChecked(t *testing.T) {
	c := goodConfig()
	c.Exam = true
	c.ExamNetwork = &wire.ExamNetwork{Allow: []wire.ExamEndpoint{{Endpoint: "10.0.0.0/8; flush ruleset", For: wire.ExamForExam}}}
	if err := checkConfig(c, testMAC); err == nil || !strings.Contains(err.Error(), "allow[0]") {
		t.Fatalf("checkConfig = %v", err)
	}
}

// The exam marker (read by overtime-exam.path, which locks the seat down at every change)
// is written when the exam starts, not rewritten at fetches that change nothing,
// rewritten when what it says changes, and removed when the exam is over.
func TestExamMarkerWrittenOnChange(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "run", "exam")
	a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), ExamFirewall: &recordingFirewall{},
		ExamFile: marker, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	desk := goodConfig()
	desk.Mode, desk.Kind = "desktop", model.KindDesktop
	exam := *desk
	exam.Exam, exam.Label = true, "Final exam"
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(marker)
		if err != nil {
			t.Fatalf("exam marker: %v", err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	ctx := context.Background()
	a.apply(ctx, &exam, "api")
	first := inode()
	a.apply(ctx, &exam, "api")
	if inode() != first {
		t.Error("an unchanged exam rewrote the marker (a new lockdown at every fetch)")
	}
	relabelled := exam
	relabelled.Label = "Final exam, room 2"
	a.apply(ctx, &relabelled, "api")
	if inode() == first {
		t.Error("a changed exam did not rewrite the marker")
	}
	if b, _ := os.ReadFile(marker); !strings.Contains(string(b), "room 2") {
		t.Errorf("marker %q", b)
	}
	a.apply(ctx, desk, "api")
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the marker outlived the exam: %v", err)
	}
}

// An exam locks a PC Overtime booted for something else only in the exam's own boot:
// until the restart (the countdown runs, someone may be saving work to the file server
// the exam's network blocks) neither the marker nor the ruleset is there; the exam's
// boot locks at once, and so does a PC Overtime did not boot (it never restarts).
func TestExamWaitsForItsBoot(t *testing.T) {
	desk := goodConfig()
	desk.Mode, desk.Kind = "desktop", model.KindDesktop
	exam := *desk
	exam.Exam, exam.Label = true, "Final exam"
	exam.ExamNetwork = &wire.ExamNetwork{Allow: []wire.ExamEndpoint{{Endpoint: "10.0.0.1", For: wire.ExamForBootServer}}}
	exam.Reboot = "an exam starts on a freshly booted PC"
	for _, tc := range []struct {
		name       string
		booted     string
		bootedExam bool
		locked     bool
	}{
		{"booted for the lecture", "lecture", false, false},
		{"the exam's boot", "desktop", true, true},
		{"not booted by Overtime", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "exam")
			fw := &recordingFirewall{}
			a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), ExamFirewall: fw, ExamFile: marker,
				ExamLookup: staticLookup{}, Booted: tc.booted, BootedExam: tc.bootedExam,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			a.apply(context.Background(), &exam, "api")
			_, statErr := os.Stat(marker)
			if marked := statErr == nil; marked != tc.locked {
				t.Errorf("exam marker there: %v, want %v", marked, tc.locked)
			}
			if applied := slices.Contains(fw.calls, "apply"); applied != tc.locked {
				t.Errorf("firewall calls %v: network limited %v, want %v", fw.calls, applied, tc.locked)
			}
		})
	}
}
