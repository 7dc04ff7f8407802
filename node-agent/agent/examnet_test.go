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
