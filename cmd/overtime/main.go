// Command overtime is Overtime's one binary: the site manager (`overtime serve`, the API
// and boot script server), the boot server (`bootserver run`), the node agent (`agent
// run`), Slurm's power saving programs (`slurm resume|suspend`) and the API's command-line
// client (most other subcommands; `ldap init` and `dev` talk to the directory itself).
// One binary also runs a container guest's init (container.MaybeInit).
package main

import (
	"fmt"
	"github.com/overtime-hpc/overtime/node-agent/guest/container"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/sitemgmt/client"
)

// Every failure prints one line on stderr and exits 1.
func main() {
	// The container backend starts a guest's init by running this binary again; in that
	// process MaybeInit takes over and never returns.
	container.MaybeInit()
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "overtime: "+strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

type globals struct {
	server       string
	user         string
	passwordFile string
	output       string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "overtime",
		Short:         "Overtime site manager: pool PCs as a cluster, scheduled per 10-minute slot",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("OVERTIME_SERVER", "http://127.0.0.1:8080"), "site manager URL ($OVERTIME_SERVER)")
	pf.StringVar(&g.user, "user", os.Getenv("OVERTIME_USER"), "directory user ($OVERTIME_USER)")
	pf.StringVar(&g.passwordFile, "password-file", os.Getenv("OVERTIME_PASSWORD_FILE"), "file holding the password (else $OVERTIME_PASSWORD)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")

	root.AddCommand(
		newServeCmd(),
		newLDAPCmd(),
		newDevCmd(),
		newSiteCmd(g),
		newModeAtCmd(g),
		newRenderCmd(g),
		newWhoamiCmd(g),
		newUserCmd(g),
		newScheduleCmd(g),
		newAgentCmd(g),
		newJobReportCmd(g),
		newSlurmCmd(g),
	)
	for _, c := range entityCmds(g) {
		if c.Name() == "bootserver" {
			// Next to the boot server records: running one.
			c.AddCommand(newBootServerCmd(g))
		}
		root.AddCommand(c)
	}
	return root
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// client builds an API client from the global flags.
func (g *globals) client() (*client.Client, error) {
	pw := os.Getenv("OVERTIME_PASSWORD")
	if g.passwordFile != "" {
		b, err := os.ReadFile(g.passwordFile)
		if err != nil {
			return nil, fmt.Errorf("password file: %w", err)
		}
		pw = strings.TrimRight(string(b), "\r\n")
	}
	return &client.Client{BaseURL: g.server, User: g.user, Password: pw}, nil
}

func readSecret(file, env, what string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s file: %w", what, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if v := os.Getenv(env); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("no %s: give a --%s-file or set $%s", what, strings.ReplaceAll(what, " ", "-"), env)
}
