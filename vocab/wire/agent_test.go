package wire

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestHeartbeatValidate(t *testing.T) {
	ok := Heartbeat{Host: "pc-a01", Mode: "desktop", ConfigFrom: ConfigFromAPI, OwnerState: model.StateOwnerIdle, Action: model.ActionRun,
		GuestState: "running", GuestReason: `domain "overtime-pc-a01" started`, Pressure: 3.5, GuestCPUSeconds: 12}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Heartbeat{}).Validate(); err != nil {
		t.Fatalf("empty heartbeat: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(h *Heartbeat)
		msg  string
	}{
		{"bad host", func(h *Heartbeat) { h.Host = "pc*)(cn=*" }, "heartbeat: invalid hostname"},
		{"bad mode", func(h *Heartbeat) { h.Mode = "Desk Top" }, "heartbeat: invalid mode name"},
		{"config from", func(h *Heartbeat) { h.ConfigFrom = "disk" }, `heartbeat: configFrom "disk" must be "api" or "cache"`},
		{"owner state", func(h *Heartbeat) { h.OwnerState = "asleep" }, `heartbeat: unknown owner state "asleep"`},
		{"action", func(h *Heartbeat) { h.Action = "nap" }, `heartbeat: unknown action "nap"`},
		{"newline", func(h *Heartbeat) { h.GuestReason = "a\nb" }, "heartbeat: guestReason"},
		{"long", func(h *Heartbeat) { h.Version = strings.Repeat("v", 65) }, "heartbeat: version too long"},
		{"pressure", func(h *Heartbeat) { h.Pressure = 101 }, "heartbeat: pressure 101 out of range"},
		{"NaN cpu", func(h *Heartbeat) { h.GuestCPUSeconds = math.NaN() }, "heartbeat: guestCPUSeconds NaN out of range"},
		{"restarts", func(h *Heartbeat) { h.Restarts = -1 }, "heartbeat: negative restarts"},
		// Sizes go to Slurm as the node's: a PC must not declare itself a giant.
		{"cpus", func(h *Heartbeat) { h.CPUs = 1 << 20 }, "heartbeat: cpus 1048576 out of range (0-1024)"},
		{"memory", func(h *Heartbeat) { h.MemoryMB = 1 << 30 }, "heartbeat: memoryMB 1073741824 out of range"},
		{"gpus", func(h *Heartbeat) { h.GPUs = 1000 }, "heartbeat: gpus 1000 out of range (0-64)"},
	} {
		h := ok
		tc.mod(&h)
		if err := h.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.msg)
		}
	}
}

func TestAgentConfigJSON(t *testing.T) {
	b, err := json.Marshal(AgentConfig{Host: "pc", Policy: model.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "nextChange") || strings.Contains(string(b), `"guest"`) {
		t.Fatalf("zero next change or nil guest encoded: %s", b)
	}
	b, _ = json.Marshal(AgentConfig{NextChange: time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)})
	if !strings.Contains(string(b), `"nextChange":"2026-11-02T08:00:00Z"`) {
		t.Fatalf("next change missing: %s", b)
	}
}

// The agent refuses an exam network it must not render: an endpoint that is not one,
// a purpose not on the fixed list, too many entries.
func TestExamNetworkCheck(t *testing.T) {
	many := make([]ExamEndpoint, MaxExamEndpoints+1)
	for i := range many {
		many[i] = ExamEndpoint{Endpoint: "10.0.0.1", For: ExamForExam}
	}
	for _, tc := range []struct {
		name  string
		allow []ExamEndpoint
		err   string
	}{
		{"empty", nil, ""},
		{"every purpose", []ExamEndpoint{{"exam.uni.example:443", ExamForExam}, {"10.0.0.1", ExamForBootServer},
			{"boot.uni.example:8080", ExamForSiteManager}, {"10.0.0.53:53", ExamForDNS}, {"ldap.uni.example:636", ExamForLogin},
			{"kdc.uni.example:88", ExamForKDC}, {"[2001:db8::631]:631", ExamForPrint}}, ""},
		{"at the bound", many[:MaxExamEndpoints], ""},
		{"over the bound", many, "at most 128"},
		{"not an endpoint", []ExamEndpoint{{"10.0.0.1", ExamForExam}, {"10.0.0.0/8 accept", ExamForExam}}, "allow[1]: invalid endpoint"},
		{"unknown purpose", []ExamEndpoint{{"10.0.0.1", `x" accept`}}, "unknown purpose"},
	} {
		err := (&ExamNetwork{Allow: tc.allow}).Check()
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: Check = %v, want %q", tc.name, err, tc.err)
		}
	}
}
