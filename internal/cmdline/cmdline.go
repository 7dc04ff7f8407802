// Package cmdline is how Overtime's commands (overtime, overtime-agent) treat their
// command line. Exit status: 0 success, 1 a failure (the server refused, a file is
// missing, ...), 2 a usage error (unknown command or flag, wrong number of arguments, bad
// flag value), as getopt-style tools and kubectl do, so that scripts can tell "fix the
// command line" from "try again".
package cmdline

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	ExitFailure = 1
	ExitUsage   = 2
)

// UsageError marks an error in the command line itself (exit status 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage marks err as a usage error.
func Usage(err error) error { return &UsageError{err} }

// Usagef is a usage error with a formatted message.
func Usagef(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

// Execute runs the command line and returns the exit status. A failure prints one line
// on stderr; a usage error prints the error as cobra wrote it (with its "Did you mean
// this?" suggestions) and where to find the usage. Every line starts with the root's name.
func Execute(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", root.Name(), strings.TrimRight(err.Error(), "\n"), cmd.CommandPath())
		return ExitUsage
	}
	fmt.Fprintln(stderr, root.Name()+": "+strings.ReplaceAll(err.Error(), "\n", " "))
	return ExitFailure
}

// Strict makes every flag and argument error of the tree below root a usage error, and
// every command with subcommands refuse an unknown one. cobra prints the help of a group
// command that is not runnable and exits 0 for `overtime host frobnicate`; with a RunE
// and an Args check the group names the unknown subcommand and suggests the closest ones
// instead, as the root does. A group run without arguments still prints its help. Call it
// once the tree is complete.
func Strict(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{err} })
	strictArgs(root)
}

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
			return &UsageError{err}
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
