package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// commit is set by the build with -ldflags "-X main.commit=..." (Makefile build), as is
// version (declared with the node agent, which reports it in heartbeats).
var commit string

// buildInfo is what `overtime version` shows. Without -ldflags (go install, go run) it
// falls back to what the Go toolchain recorded: the module version and the VCS revision
// (absent with -buildvcs=false).
type buildInfo struct {
	Version string `json:"version" yaml:"version"`
	Commit  string `json:"commit" yaml:"commit"`
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if b.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.Version = bi.Main.Version
	}
	if b.Commit == "" {
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if b.Commit != "" && modified {
			b.Commit += "-dirty"
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func versionString() string {
	b := currentBuild()
	return fmt.Sprintf("%s (commit %s)", b.Version, b.Commit)
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of this binary (also --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.output == "json" || g.output == "yaml" {
				return emitTo(cmd.OutOrStdout(), g.output, currentBuild(), nil)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "overtime %s\n", versionString())
			return nil
		},
	}
}
