package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/overtime-hpc/overtime/node-agent/agentcmd"
)

// TestAgentRunKept: `overtime agent run` stays what it was, the same command as
// `overtime-agent run` (same flags and defaults), next to the client views of agents.
func TestAgentRunKept(t *testing.T) {
	root := newRoot()
	for _, path := range [][]string{{"agent", "run"}, {"agent", "status"}, {"agent", "config"}} {
		if c, _, err := root.Find(path); err != nil || c.Name() != path[1] {
			t.Errorf("overtime %v: not found (%v)", path, err)
		}
	}
	run, _, _ := root.Find([]string{"agent", "run"})
	server := ""
	want := agentcmd.NewRunCmd(&server, version).Flags()
	want.VisitAll(func(f *pflag.Flag) {
		got := run.Flags().Lookup(f.Name)
		if got == nil || got.DefValue != f.DefValue {
			t.Errorf("overtime agent run --%s: %+v, want default %q as in overtime-agent run", f.Name, got, f.DefValue)
		}
	})
}
