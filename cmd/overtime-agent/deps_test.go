package main

import (
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
)

// TestBinaryDeps: desktops get the agent alone. overtime-agent links no testing package,
// no test environment, and nothing of the site manager (sitemgmt/): what the agent shares
// with it (the site model, names, wire documents, the API client) lives in vocab/.
func TestBinaryDeps(t *testing.T) {
	deps := testenv.Deps(t, "./cmd/overtime-agent")
	const mod = "github.com/overtime-hpc/overtime/"
	forbidden := []string{
		"testing", mod + "internal/testenv",
		"github.com/go-ldap/ldap/v3", "github.com/getkin/kin-openapi",
		mod + "sitemgmt", mod + "boot",
	}
	if bad := testenv.ForbiddenDeps(deps, forbidden); len(bad) > 0 {
		t.Errorf("cmd/overtime-agent links %v (`go list -deps ./cmd/overtime-agent` shows through which package)", bad)
	}
}

// TestRunCommand: `overtime-agent run` is the agent, with the flags the systemd unit
// passes, and --server is taken before or after the subcommand.
func TestRunCommand(t *testing.T) {
	root := newRoot()
	run, _, err := root.Find([]string{"run"})
	if err != nil || run.Name() != "run" {
		t.Fatalf("no run command: %v", err)
	}
	for _, f := range []string{"token-file", "pressure-cgroup", "log-json", "mac", "state-dir", "image-root", "listen"} {
		if run.Flags().Lookup(f) == nil {
			t.Errorf("run has no --%s", f)
		}
	}
	if err := run.ParseFlags([]string{"--server", "http://bs1:8080"}); err != nil {
		t.Fatal(err)
	}
	if got := root.PersistentFlags().Lookup("server").Value.String(); got != "http://bs1:8080" {
		t.Errorf("--server after run = %q", got)
	}
}
