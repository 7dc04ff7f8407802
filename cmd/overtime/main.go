// Command overtime is Overtime's one binary: the site manager (`overtime serve`, the API
// and boot script server), the boot server (`bootserver run`), the node agent (`agent
// run`), Slurm's power saving programs (`slurm resume|suspend`) and the API's command-line
// client (most other subcommands; `ldap init` and `dev` talk to the directory itself).
// One binary also runs a container guest's init (container.MaybeInit).
package main

import (
	"errors"
	"fmt"
	"github.com/overtime-hpc/overtime/node-agent/guest/container"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/sitemgmt/client"
)

// Exit status: 0 success, 1 a failure (the server refused, a file is missing, ...), 2 a
// usage error (unknown command or flag, wrong number of arguments, bad flag value), as
// getopt-style tools and kubectl do, so that scripts can tell "fix the command line"
// from "try again".
const (
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	// The container backend starts a guest's init by running this binary again; in that
	// process MaybeInit takes over and never returns.
	container.MaybeInit()
	os.Exit(execute(newRoot(), os.Args[1:], os.Stderr))
}

// execute runs the command line and returns the exit status. A failure prints one line
// on stderr; a usage error prints the error as cobra wrote it (with its "Did you mean
// this?" suggestions) and where to find the usage.
func execute(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "overtime: %s\nRun '%s --help' for usage.\n", strings.TrimRight(err.Error(), "\n"), cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintln(stderr, "overtime: "+strings.ReplaceAll(err.Error(), "\n", " "))
	return exitFailure
}

// usageError marks an error in the command line itself (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

type globals struct {
	server       string
	user         string
	passwordFile string
	output       string
	configFile   string
	zone         *time.Location // of times in tables (see useSiteZone)
	// flags is the root's persistent flag set: whether a flag was given on the command
	// line decides between it, the environment and the config file (see client).
	flags interface{ Changed(string) bool }
}

func newRoot() *cobra.Command {
	root, _ := newRootGlobals()
	return root
}

// newRootGlobals is newRoot, and the globals its flags fill.
func newRootGlobals() (*cobra.Command, *globals) {
	g := &globals{}
	root := &cobra.Command{
		Use:           "overtime",
		Short:         "Overtime site manager: pool PCs as a cluster, scheduled per 10-minute slot",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Usage errors the flag parser and cobra's own checks find are exit status 2.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// `agent run` reads g.server itself (a daemon: flag or environment, no
			// config file); every client command resolves it again in g.settings.
			if !g.given("server") {
				g.server = envOr("OVERTIME_SERVER", g.server)
			}
			if err := checkOutputFlag(cmd, g.output); err != nil {
				return err
			}
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return &usageError{err}
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return &usageError{err}
			}
			return nil
		},
	}
	root.SetVersionTemplate("overtime {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	g.flags = pf
	pf.StringVar(&g.server, "server", defaultServer, "site manager URL ($OVERTIME_SERVER, config file)")
	pf.StringVar(&g.user, "user", "", "directory user ($OVERTIME_USER, config file)")
	pf.StringVar(&g.passwordFile, "password-file", "", "file holding the password ($OVERTIME_PASSWORD_FILE, else $OVERTIME_PASSWORD, config file, else a prompt on a terminal)")
	pf.StringVar(&g.configFile, "config", "", "client config file ($OVERTIME_CONFIG, else $XDG_CONFIG_HOME/overtime/config.yaml)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml (commands that offer them)")

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
		newVersionCmd(g),
		newDocsCmd(),
	)
	for _, c := range entityCmds(g) {
		if c.Name() == "bootserver" {
			// Next to the boot server records: running one.
			c.AddCommand(newBootServerCmd(g))
		}
		root.AddCommand(c)
	}
	// cobra adds these when it executes; adding them now lets the tree walks below (and
	// the man pages) see them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	declareOutputFormats(root)
	strictArgs(root)
	registerCompletions(root, g)
	return root, g
}

// strictArgs makes every argument error a usage error, and every command with
// subcommands refuse an unknown one. cobra prints the help of a group command that is
// not runnable and exits 0 for `overtime host frobnicate`; with a RunE and an Args check
// the group names the unknown subcommand and suggests the closest ones instead, as the
// root does. A group run without arguments still prints its help.
func strictArgs(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = unknownSubcommand
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if c.Args == nil && c.Name() != "help" { // cobra's help takes a command path
		// A leaf without an Args check would ignore stray arguments silently.
		c.Args = cobra.NoArgs
	}
	if c.Args == nil {
		c.Args = cobra.ArbitraryArgs
	}
	check := c.Args
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err}
		}
		return nil
	}
	for _, sub := range c.Commands() {
		strictArgs(sub)
	}
}

// unknownSubcommand is the Args check of group commands: any argument is a subcommand
// that does not exist. The message is cobra's, with its suggestions.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only for the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return errors.New(msg)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// client builds an API client from the global flags, the environment and the config
// file, in that order of precedence.
func (g *globals) client() (*client.Client, error) {
	s, err := g.settings()
	if err != nil {
		return nil, err
	}
	return &client.Client{BaseURL: s.server, User: s.user, Password: s.password}, nil
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
