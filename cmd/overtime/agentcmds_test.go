package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// run executes a command tree with args and returns what it printed.
func run(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestAgentCommands(t *testing.T) {
	// The site manager serves TLS with its CA at the end of the chain; the CLI trusts
	// that CA (--ca-file), the credential file pins it.
	env := testenv.New(t, testenv.Options{TLS: true})
	env.ApplyExample(t)
	t.Setenv("OVERTIME_PASSWORD", testenv.AdminPassword)
	srv := []string{"--server", env.HTTP.URL, "--ca-file", env.CAFile, "--user", "admin"}
	root := func(args ...string) (string, error) {
		return run(t, newRoot(), append(append([]string{}, srv...), args...)...)
	}
	ctx := context.Background()
	dir := t.TempDir()

	// host credential --out: a 0600 file holding the token, which authenticates the host.
	file := filepath.Join(dir, "agent.token")
	out, err := root("host", "credential", "pc-b01", "--out", file)
	if err != nil || !strings.Contains(out, "written to "+file) {
		t.Fatalf("credential --out: %v\n%s", err, out)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi.Mode(), err)
	}
	cred, err := client.CredentialFromFile(file)
	if err != nil || !strings.HasPrefix(cred.Token, "ot1.pc-b01.") || cred.CAPin != env.CAPin {
		t.Fatalf("credential %+v %v, want a token and the pin %s", cred, err, env.CAPin)
	}
	agent, err := client.NewForAgent(env.HTTP.URL, cred)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := agent.AgentConfig(ctx); err != nil || cfg.Host != "pc-b01" {
		t.Fatalf("agent with the pinned credential: %+v %v", cfg, err)
	}
	// Issuing again replaces file and credential; no temporary file is left behind.
	if _, err := root("host", "credential", "pc-b01", "--out", file); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.AgentConfig(ctx); err == nil {
		t.Fatal("the replaced token still works")
	}
	cred2, _ := client.CredentialFromFile(file)
	if agent, err = client.NewForAgent(env.HTTP.URL, cred2); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("directory holds %v", entries)
	}
	// A token file others can read is refused by the agent side.
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CredentialFromFile(file); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable token file: %v", err)
	}
	// --out into a missing directory fails before the credential is replaced.
	if _, err := root("host", "credential", "pc-b01", "--out", filepath.Join(dir, "nope", "t")); err == nil {
		t.Fatal("--out into a missing directory")
	}
	if _, err := agent.AgentConfig(ctx); err != nil {
		t.Fatalf("a failed --out replaced the credential: %v", err)
	}

	// Without --out the token alone is printed; -o json gives the whole answer.
	out, err = root("host", "credential", "pc-b02")
	if err != nil || !strings.HasPrefix(out, "ot1.pc-b02.") || strings.Count(out, "\n") != 1 {
		t.Fatalf("credential to stdout: %v %q", err, out)
	}
	out, err = root("-o", "json", "host", "credential", "pc-b02")
	var issued wire.HostCredential
	if err != nil || json.Unmarshal([]byte(out), &issued) != nil || issued.Host != "pc-b02" || !strings.HasPrefix(issued.Token, "ot1.pc-b02.") || issued.CAPin != env.CAPin {
		t.Fatalf("credential -o json: %v %s", err, out)
	}
	out, err = root("host", "credential", "pc-b02", "--revoke")
	if err != nil || strings.TrimSpace(out) != "credential of host pc-b02 revoked" {
		t.Fatalf("revoke: %v %q", err, out)
	}
	out, err = root("host", "credential", "pc-b02", "--revoke")
	if err != nil || strings.TrimSpace(out) != "host pc-b02 had no credential" {
		t.Fatalf("second revoke: %v %q", err, out)
	}
	if _, err := root("host", "credential", "nope"); err == nil || !strings.Contains(err.Error(), `host "nope" not found`) {
		t.Fatalf("unknown host: %v", err)
	}

	// Pool policy and mode guest from files.
	pol := filepath.Join(dir, "policy.yaml")
	writeFile(t, pol, "actions:\n  owner-active: evict\nthrottleCPU: 40\nidleAfter: 2m\n")
	if _, err := root("pool", "set", "lab-b", "--policy-file", pol); err != nil {
		t.Fatal(err)
	}
	var pool model.Pool
	if _, err := env.Admin().Get("/api/v1/pools/lab-b", nil, &pool); err != nil || pool.Policy == nil ||
		pool.Policy.Actions[model.StateOwnerActive] != model.ActionEvict || pool.Policy.ThrottleCPU != 40 {
		t.Fatalf("pool policy: %+v %v", pool.Policy, err)
	}
	if cfg, err := agent.AgentConfig(ctx); err != nil || cfg.Policy.ThrottleCPU != 40 || cfg.Policy.Actions[model.StateOwnerActive] != model.ActionEvict {
		t.Fatalf("agent sees the policy: %+v %v", cfg, err)
	}
	writeFile(t, pol, `{"throttleCPU": 40, "thrott1eCPU": 5}`) // JSON, with a typo
	if _, err := root("pool", "set", "lab-b", "--policy-file", pol); err == nil || !strings.Contains(err.Error(), "thrott1eCPU") {
		t.Fatalf("policy file with a typo: %v", err)
	}
	writeFile(t, pol, "thawPressure: 50\n")
	if _, err := root("pool", "set", "lab-b", "--policy-file", pol); err == nil ||
		err.Error() != "pool lab-b: policy: thawPressure 50 must be below freezePressure 20 (hysteresis)" {
		t.Fatalf("invalid policy: %v", err)
	}
	if _, err := root("pool", "set", "lab-b", "--no-policy"); err != nil {
		t.Fatal(err)
	}
	pool = model.Pool{}
	if _, err := env.Admin().Get("/api/v1/pools/lab-b", nil, &pool); err != nil || pool.Name != "lab-b" || pool.Policy != nil {
		t.Fatalf("--no-policy: %+v %v", pool.Policy, err)
	}
	guest := filepath.Join(dir, "guest.yaml")
	writeFile(t, guest, "image: compute-guest\nbackend: container\nnetwork: nat\nports: [\"6818:6818\"]\n")
	if _, err := root("mode", "set", "desktop", "--guest-file", guest); err != nil {
		t.Fatal(err)
	}
	if cfg, err := agent.AgentConfig(ctx); err != nil || cfg.Guest == nil || cfg.Guest.Backend != model.BackendContainer || cfg.Guest.Ports[0] != "6818:6818" {
		t.Fatalf("agent sees the guest: %+v %v", cfg, err)
	}
	writeFile(t, guest, "image: debian-desktop\n")
	if _, err := root("mode", "set", "desktop", "--guest-file", guest); err == nil || !strings.Contains(err.Error(), "not a compute (or course-vm) image") {
		t.Fatalf("desktop image as guest: %v", err)
	}
	if _, err := root("mode", "set", "desktop", "--no-guest", "--guest-file", guest); err == nil {
		t.Fatal("--no-guest with --guest-file")
	}
	if _, err := root("mode", "set", "desktop", "--no-guest"); err != nil {
		t.Fatal(err)
	}
	if cfg, err := agent.AgentConfig(ctx); err != nil || cfg.Guest != nil {
		t.Fatalf("guest removed: %+v %v", cfg, err)
	}

	// agent status and config, as the lead attaches them under `overtime agent`.
	if err := agent.Heartbeat(ctx, wire.Heartbeat{Mode: "desktop", OwnerState: model.StateNoUser, Action: model.ActionRun, GuestState: "running", Pressure: 1.5}); err != nil {
		t.Fatal(err)
	}
	g := &globals{server: env.HTTP.URL, caFile: env.CAFile, user: "admin", output: "table"}
	out, err = run(t, newAgentStatusCmd(g))
	if err != nil || !strings.Contains(out, "HOST") || !strings.Contains(out, "pc-b01") || !strings.Contains(out, "no-user") || !strings.Contains(out, "1.5%") {
		t.Fatalf("agent status: %v\n%s", err, out)
	}
	if out, err = run(t, newAgentStatusCmd(g), "--pool", "lab-a"); err != nil || strings.Contains(out, "pc-b01") {
		t.Fatalf("agent status --pool lab-a: %v\n%s", err, out)
	}
	g.output = "json"
	out, err = run(t, newAgentStatusCmd(g), "pc-b01")
	var st wire.AgentStatus
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Host != "pc-b01" || st.Stale || st.GuestState != "running" {
		t.Fatalf("agent status pc-b01 -o json: %v\n%s", err, out)
	}
	if _, err = run(t, newAgentStatusCmd(g), "pc-b03"); err == nil || !strings.Contains(err.Error(), "no heartbeat from host pc-b03") {
		t.Fatalf("status of a silent host: %v", err)
	}
	g.output = "table"
	out, err = run(t, newAgentConfigCmd(g), "--host", "pc-b01")
	var cfg wire.AgentConfig
	if err != nil || json.Unmarshal([]byte(out), &cfg) != nil || cfg.Host != "pc-b01" || cfg.Mode != "desktop" || cfg.Policy.ThrottleCPU != 25 {
		t.Fatalf("agent config: %v\n%s", err, out)
	}
	if _, err = run(t, newAgentConfigCmd(g)); err == nil {
		t.Fatal("agent config without --host")
	}

	// A calibration in a heartbeat: kept, shown by agent status HOST with the
	// controller's slowdown and cap, handed back in the agent configuration; an invalid
	// one is refused with a message naming the field.
	measured := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC)
	prof := &wire.InterferenceProfile{Measured: measured, Kernel: "6.8.0-45-generic", CPUModel: "Intel Core i5-8500", CPUs: 6,
		Cgroup: "v2", Backend: "container", CanaryNs: 850000, CPUSlowdown: 0.021, MemorySlowdown: 0.094,
		WakeupP99AloneUs: 60, WakeupP99GuestUs: 75, StartCap: 0.4, Harvest: 0.7}
	bad := *prof
	bad.MemorySlowdown = -0.5
	if err := agent.Heartbeat(ctx, wire.Heartbeat{Mode: "desktop", Interference: &bad}); err == nil || !strings.Contains(err.Error(), "memorySlowdown") {
		t.Fatalf("invalid profile: %v", err)
	}
	if err := agent.Heartbeat(ctx, wire.Heartbeat{Mode: "desktop", OwnerState: model.StateOwnerActive, Action: model.ActionThrottle,
		GuestState: "running", Interference: prof, Slowdown: 0.004, Cap: 0.35}); err != nil {
		t.Fatal(err)
	}
	if err := agent.Heartbeat(ctx, wire.Heartbeat{Mode: "desktop", OwnerState: model.StateOwnerActive, Action: model.ActionThrottle,
		GuestState: "running", Slowdown: 0.004, Cap: 0.35}); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, newAgentStatusCmd(g), "pc-b01")
	for _, want := range []string{"Desktop slowdown now: 0.4%", "guest CPU cap: 35% of the CPUs", "6.8.0-45-generic", "CPU-bound 2.1%, memory-bound 9.4%", "guest cap of 40%"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("agent status pc-b01 lacks %q: %v\n%s", want, err, out)
		}
	}
	if cfg, err := agent.AgentConfig(ctx); err != nil || cfg.Interference == nil || !cfg.Interference.Measured.Equal(measured) || cfg.Interference.MemorySlowdown != 0.094 {
		t.Fatalf("agent configuration does not carry the calibration back: %+v %v", cfg.Interference, err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
