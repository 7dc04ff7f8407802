// Command overtime-agent is the node agent of a desktop: `overtime-agent run` fetches the
// host's configuration from the site manager and runs, throttles, freezes or evicts the
// compute guest by the pool's policy (systemd unit overtime-agent.service). It is a binary
// of its own so that desktops carry the agent alone: no LDAP, OpenAPI or server code of
// the site manager. The client views of agents (`overtime agent status|config`) stay in
// the overtime command.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/node-agent/agentcmd"
	"github.com/overtime-hpc/overtime/node-agent/guest/container"
)

// version is set by the build (-ldflags -X main.version=...).
var version = "dev"

// Exit status as for overtime (internal/cmdline): 1 a failure, 2 a usage error.
func main() {
	// The container backend starts a guest's init by running this binary again; in that
	// process MaybeInit takes over and never returns.
	container.MaybeInit()
	os.Exit(cmdline.Execute(newRoot(), os.Args[1:], os.Stderr))
}

func newRoot() *cobra.Command {
	var server string
	root := &cobra.Command{
		Use:           "overtime-agent",
		Short:         "Overtime node agent: run the compute guest on this desktop by the pool's policy",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("OVERTIME_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	root.PersistentFlags().StringVar(&server, "server", def, "site manager URL ($OVERTIME_SERVER)")
	root.AddCommand(agentcmd.NewRunCmd(&server, version), agentcmd.NewSeatConfigCmd(&server), agentcmd.NewCourseVMCmd(), agentcmd.NewBenchCmd())
	cmdline.Strict(root)
	return root
}
