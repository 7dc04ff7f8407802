package main

import (
	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/node-agent/agentcmd"
)

// newAgentCmd is `overtime agent`: agents' status and configuration, and running the node
// agent. Desktops run the separate binary `overtime-agent run` (cmd/overtime-agent), which
// leaves out the site manager's server code; `overtime agent run` is the same command,
// kept for installations and scripts that run the agent from the overtime binary.
func newAgentCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "agent",
		Short: "Node agent: run the compute guest on a desktop; agents' status and configuration",
	}
	run := agentcmd.NewRunCmd(&g.server, version)
	run.Short += "; desktops normally run `overtime-agent run`, the same command"
	c.AddCommand(run, newAgentStatusCmd(g), newAgentConfigCmd(g))
	return c
}

// version is set by the build (-ldflags -X main.version=...).
var version = "dev"
