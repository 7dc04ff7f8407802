// Command overtime-dev holds Overtime's development tools, for the demo (`make demo`,
// scripts/demo.sh) and the tests: `overtime-dev slapd` starts a throwaway OpenLDAP slapd
// with the Overtime schema, `overtime-dev forward` forwards a loopback port into a network
// namespace. They were `overtime dev ...`; they are a binary of their own so that the
// production binary, overtime, links neither internal/slapdenv nor internal/netns
// (cmd/overtime's TestBinaryDeps). The Makefile builds it next to overtime (bin/); the
// packages never carry it (packaging/debian builds overtime and overtime-agent only).
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/cmdline"
)

// version is set by the build (-ldflags -X main.version=...).
var version = "dev"

// Exit status as for overtime (internal/cmdline): 1 a failure, 2 a usage error.
func main() {
	os.Exit(cmdline.Execute(newRoot(), os.Args[1:], os.Stderr))
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "overtime-dev",
		Short:         "Overtime development helpers (throwaway slapd, namespace port forward for demos); not for production",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newSlapdCmd(), newSlapdStopCmd(), newForwardCmd(), newScreenCmd())
	cmdline.Strict(root)
	return root
}
