package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// newUserCmd: directory users. Site admins add, list and delete them and set anyone's
// password; every user may change their own (`overtime user passwd`). New passwords come
// from a file (--new-password-file, - for stdin), $OVERTIME_NEW_PASSWORD, or a prompt
// without echo on a terminal; never from the command line, where ps(1) would show them.
func newUserCmd(g *globals) *cobra.Command {
	user := &cobra.Command{Use: "user", Short: "Directory users: add, list, delete, change passwords"}
	var name, pwFile string
	newPwFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&pwFile, "new-password-file", "", "file with the new password (- for stdin; else $OVERTIME_NEW_PASSWORD, else a prompt)")
	}
	add := &cobra.Command{
		Use: "add UID", Short: "Create a user or set their name and password (site admins)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := newPassword(cmd, pwFile, args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.PutUser(cmd.Context(), args[0], name, pw); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s saved\n", args[0])
			return nil
		},
	}
	add.Flags().StringVar(&name, "name", "", "display name")
	newPwFlag(add)
	list := &cobra.Command{
		Use: "list", Short: "List the directory users (site admins)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			users, err := c.Users(cmd.Context())
			if err != nil {
				return err
			}
			return emitTo(cmd.OutOrStdout(), g.output, users, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "UID\tNAME")
				for _, u := range users {
					fmt.Fprintf(w, "%s\t%s\n", u.UID, u.Name)
				}
			})
		},
	}
	del := &cobra.Command{
		Use: "delete UID", Short: "Delete a user (site admins; role grants naming them stay until changed)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteUser(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s deleted\n", args[0])
			return nil
		},
	}
	passwd := &cobra.Command{
		Use:   "passwd [UID]",
		Short: "Change your password, or (site admins) anyone's",
		Long: `Without UID, changes the password of the user you log in as (--user, $OVERTIME_USER or
the config file); the password you log in with is sent as the current one, which the
server checks. Site admins may set any user's password.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.settings()
			if err != nil {
				return err
			}
			uid := s.user
			if len(args) == 1 {
				uid = args[0]
			}
			if uid == "" {
				return cmdline.Usagef("whose password? give UID or log in with --user")
			}
			pw, err := newPassword(cmd, pwFile, uid)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			old := ""
			if uid == s.user {
				old = s.password
			}
			if err := c.SetPassword(cmd.Context(), uid, old, pw); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "password of %s changed\n", uid)
			return nil
		},
	}
	newPwFlag(passwd)
	user.AddCommand(add, list, del, passwd)
	return user
}

// newPassword reads a new password: from file (- is stdin), $OVERTIME_NEW_PASSWORD, a
// terminal prompt asked twice, or else one line of a piped stdin.
func newPassword(cmd *cobra.Command, file, uid string) (string, error) {
	var pw string
	switch {
	case file == "-":
		line, err := firstLine(cmd.InOrStdin())
		if err != nil {
			return "", fmt.Errorf("new password from stdin: %w", err)
		}
		pw = line
	case file != "":
		var err error
		if pw, err = readSecretFile(file, "new password"); err != nil {
			return "", err
		}
	case os.Getenv("OVERTIME_NEW_PASSWORD") != "":
		pw = os.Getenv("OVERTIME_NEW_PASSWORD")
	case term.IsTerminal(int(os.Stdin.Fd())):
		first, err := promptPassword("New password for " + uid + ": ")
		if err != nil {
			return "", err
		}
		again, err := promptPassword("Retype the new password: ")
		if err != nil {
			return "", err
		}
		if first != again {
			return "", errors.New("the passwords do not match")
		}
		pw = first
	default:
		line, err := firstLine(cmd.InOrStdin())
		if err != nil {
			return "", fmt.Errorf("no new password: give --new-password-file, set $OVERTIME_NEW_PASSWORD or pipe it on stdin (%w)", err)
		}
		pw = line
	}
	if pw == "" {
		return "", errors.New("the new password is empty")
	}
	return pw, nil
}

func firstLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
