package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/node-agent/coursevm"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// fakeSite stands in for the site manager's agent API: the tests here are about what the
// agent does with what it gets (bad documents, none at all); the real API and the agent
// meet in test/agent_test.go.
type fakeSite struct {
	reports []wire.JobReport
	mu      sync.Mutex
	calls   int
	cfg     *wire.AgentConfig
	err     error
	hbs     []wire.Heartbeat
}

func (f *fakeSite) AgentConfig(context.Context) (*wire.AgentConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	b, _ := json.Marshal(f.cfg) // a fresh copy, as from the wire
	var c wire.AgentConfig
	json.Unmarshal(b, &c)
	return &c, nil
}

func (f *fakeSite) Heartbeat(_ context.Context, hb wire.Heartbeat) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hbs = append(f.hbs, hb)
	return nil
}

func (f *fakeSite) GuestSecrets(context.Context) (*wire.GuestSecrets, error) {
	return &wire.GuestSecrets{MungeKey: []byte("test munge key")}, nil
}

func (f *fakeSite) PostJobReport(_ context.Context, r wire.JobReport) (*wire.JobReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, r)
	return &r, nil
}

func (f *fakeSite) set(c *wire.AgentConfig, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg, f.err = c, err
}

const testMAC = "52:54:00:0c:00:01"

func goodConfig() *wire.AgentConfig {
	return &wire.AgentConfig{Host: "pc1", MAC: testMAC, Pool: "lab", Generated: time.Now(),
		Mode: "maintenance", Kind: model.KindMaintenance, Policy: model.DefaultPolicy()}
}

func metricValue(t *testing.T, a *Agent, name string) string {
	rec := httptest.NewRecorder()
	a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// runAgent runs a's loop until the test ends.
func runAgent(t *testing.T, a *Agent) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, cond)
}

// A document the agent must not act on is refused with a reason, and the previous one
// (and its cache) stays in force.
func TestBadConfigRejected(t *testing.T) {
	site := &fakeSite{cfg: goodConfig()}
	dir := t.TempDir()
	a, err := New(Options{Site: site, MAC: testMAC, StateDir: dir, Refresh: 20 * time.Millisecond, Heartbeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	waitFor(t, "config from the API", func() bool {
		return metricValue(t, a, `overtime_agent_config_source{source="api"}`) == "1"
	})
	cached, _ := os.ReadFile(filepath.Join(dir, "config.json"))

	bad := []struct {
		name string
		mod  func(c *wire.AgentConfig)
	}{
		{"another PC's document", func(c *wire.AgentConfig) { c.MAC = "52:54:00:0c:00:99"; c.Host = "pc99" }},
		{"invalid policy", func(c *wire.AgentConfig) { c.Policy.ThrottleCPU = 500 }},
		{"hysteresis upside down", func(c *wire.AgentConfig) { c.Policy.ThawPressure = 50; c.Policy.FreezePressure = 10 }},
		{"guest name outside the agent's namespace", func(c *wire.AgentConfig) {
			c.Kind, c.Mode = model.KindDesktop, "desktop"
			c.Guest = &wire.AgentGuest{Guest: model.Guest{Image: "compute"}, Name: "desktop-session",
				Resolved: model.ImageVersion{Version: "v1", Path: "compute/v1"}}
		}},
		{"image path escaping the image root", func(c *wire.AgentConfig) {
			c.Kind, c.Mode = model.KindDesktop, "desktop"
			c.Guest = &wire.AgentGuest{Guest: model.Guest{Image: "compute"}, Name: "overtime-pc1",
				Resolved: model.ImageVersion{Version: "v1", Path: "../../etc"}}
		}},
		{"unknown mode kind", func(c *wire.AgentConfig) { c.Kind = "party" }},
	}
	rejected := func() int {
		n, _ := strconv.Atoi(metricValue(t, a, "overtime_agent_config_rejected_total"))
		return n
	}
	for _, tc := range bad {
		c := goodConfig()
		tc.mod(c)
		site.set(c, nil)
		// The agent fetches (and refuses) every Refresh. One fetch of the previous document
		// may still be under way when the new one is set; it is serial, so the second
		// refusal counted from here on is of this document.
		before := rejected()
		waitFor(t, tc.name+" refused", func() bool { return rejected() >= before+2 })
		if now, _ := os.ReadFile(filepath.Join(dir, "config.json")); string(now) != string(cached) {
			t.Fatalf("%s: the cached configuration changed", tc.name)
		}
	}
	// The site manager goes away: the configuration in force stays.
	site.set(nil, errors.New("connection refused"))
	site.mu.Lock()
	before := site.calls
	site.mu.Unlock()
	waitFor(t, "three failed fetches", func() bool {
		site.mu.Lock()
		defer site.mu.Unlock()
		return site.calls >= before+3
	})
	if v := metricValue(t, a, `overtime_agent_config_source{source="api"}`); v != "1" {
		t.Fatalf("config source after the site manager went away: %q", v)
	}
}

// A restarted agent without the site manager takes the cached configuration.
func TestCacheUsedWhenSiteManagerDown(t *testing.T) {
	dir := t.TempDir()
	b, _ := json.Marshal(goodConfig())
	if err := writeAtomic(filepath.Join(dir, "config.json"), b); err != nil {
		t.Fatal(err)
	}
	site := &fakeSite{err: errors.New("connection refused")}
	a, err := New(Options{Site: site, MAC: testMAC, StateDir: dir, Refresh: 20 * time.Millisecond, Heartbeat: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
	waitFor(t, "cached config in force", func() bool {
		return metricValue(t, a, `overtime_agent_config_source{source="cache"}`) == "1" &&
			metricValue(t, a, `overtime_agent_owner_state{state="maintenance"}`) == "1"
	})
}

func TestGuestMAC(t *testing.T) {
	for in, want := range map[string]string{
		"00:1b:21:0a:0b:0c": "02:1b:21:0a:0b:0c",
		"52:54:00:0b:00:01": "56:54:00:0b:00:01", // already locally administered: another bit
	} {
		got, err := GuestMAC(in)
		if err != nil || got != want {
			t.Errorf("GuestMAC(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := GuestMAC("nonsense"); err == nil {
		t.Error("bad MAC accepted")
	}
}

// Every heartbeat document gets the next sequence number of this agent process's
// instance, so the site manager can order concurrent posts without the agent's clock,
// also when the clock steps back; a new agent process (a restart) has a new instance.
func TestHeartbeatSequence(t *testing.T) {
	clock := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	newAgent := func() *Agent {
		a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), Now: func() time.Time { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		a.cfg = goodConfig()
		return a
	}
	a := newAgent()
	var docs []wire.Heartbeat
	for _, step := range []time.Duration{0, time.Second, -5 * time.Hour, time.Second} { // NTP steps the clock back
		clock = clock.Add(step)
		a.updateHeartbeat()
		docs = append(docs, a.LastHeartbeat())
	}
	for i, hb := range docs {
		if hb.Instance != docs[0].Instance || hb.Seq != uint64(i+1) {
			t.Fatalf("document %d: instance %q seq %d, want %q and %d", i, hb.Instance, hb.Seq, docs[0].Instance, i+1)
		}
	}
	if len(docs[0].Instance) != 16 {
		t.Fatalf("instance %q, want 16 hex digits", docs[0].Instance)
	}
	if err := docs[0].Validate(); err != nil {
		t.Fatal(err)
	}
	b := newAgent()
	b.updateHeartbeat()
	if hb := b.LastHeartbeat(); hb.Instance == docs[0].Instance || hb.Seq != 1 {
		t.Fatalf("restarted agent: instance %q seq %d, want a new instance at 1", hb.Instance, hb.Seq)
	}
}

// TestCourseVMSpec: the agent hands a course-vm mode's VM to the session's player as a
// spec file, and removes it when the mode changes.
func TestCourseVMSpec(t *testing.T) {
	cfg := &wire.AgentConfig{Host: "pc-a01", Mode: "course-bio101", Kind: model.KindCourseVM,
		CourseVM: &wire.AgentCourseVM{Image: "bio101-vm", Resolved: model.ImageVersion{Version: "ws-1", Path: "bio101-vm/ws-1"}, ImageURL: "http://bs/images/bio101-vm/ws-1"}}
	s := CourseVMSpec(cfg, "/run/overtime/images")
	if s == nil || s.Dir != "/run/overtime/images/bio101-vm/ws-1" || s.Image != "bio101-vm" || s.Version != "ws-1" || s.Unavailable != "" {
		t.Fatalf("spec %+v", s)
	}
	if s := CourseVMSpec(&wire.AgentConfig{Mode: "course-bio101", Kind: model.KindCourseVM, CourseVMUnavailable: "no version"}, "/x"); s == nil || s.Unavailable != "no version" {
		t.Fatalf("unavailable: %+v", s)
	}
	if s := CourseVMSpec(&wire.AgentConfig{Mode: "desktop", Kind: model.KindDesktop}, "/x"); s != nil {
		t.Fatalf("desktop mode: %+v", s)
	}
	file := filepath.Join(t.TempDir(), "course-vm.json")
	a, err := New(Options{Site: &fakeSite{}, StateDir: t.TempDir(), ImageRoot: "/run/overtime/images", CourseVMFile: file})
	if err != nil {
		t.Fatal(err)
	}
	a.publishCourseVM(context.Background(), cfg)
	if got, err := coursevm.ReadSpec(file); err != nil || got == nil || got.Dir != s.Dir {
		t.Fatalf("written spec %+v %v", got, err)
	}
	a.publishCourseVM(context.Background(), &wire.AgentConfig{Mode: "desktop", Kind: model.KindDesktop})
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("spec file after the mode changed: %v", err)
	}
	// A course VM path that leaves the image root is refused with the configuration.
	bad := *cfg
	bad.MAC, bad.Policy = "52:54:00:0a:00:01", model.DefaultPolicy()
	bad.CourseVM = &wire.AgentCourseVM{Image: "bio101-vm", Resolved: model.ImageVersion{Path: "../../etc"}}
	if err := checkConfig(&bad, ""); err == nil {
		t.Error("a course VM path with .. was accepted")
	}
}
