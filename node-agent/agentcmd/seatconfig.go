package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/node-agent/seat"
	"github.com/overtime-hpc/overtime/vocab/capin"
	"github.com/overtime-hpc/overtime/vocab/client"
)

// NewSeatConfigCmd is `overtime-agent seat-config`: once per boot, before sssd and the
// display manager (unit overtime-seat.service), fetch this desktop's login stack
// from the site manager with the host credential and write it (node-agent/seat).
func NewSeatConfigCmd(server *string) *cobra.Command {
	var (
		tokenFile, root string
		wait            time.Duration
		status          bool
	)
	c := &cobra.Command{
		Use:   "seat-config",
		Short: "Write this desktop's login configuration (sssd, Kerberos) from the site manager",
		Long: `Fetches how this desktop authenticates the people at its seat (the site's or its
pool's desktopLogin: sssd.conf, krb5.conf, the directory's CA, this PC's keytab) with the
host credential and writes it under --root, before sssd and the display manager start
(unit overtime-seat.service). When university logins cannot work here (nothing
configured, a secret missing, the site manager unreachable for --wait), the reason goes
to /run/overtime/seat.status and the console's login prompt, and the command
still succeeds: the PC boots, and says why. --status prints that line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status {
				st := seat.ReadStatus(root)
				if st == "" {
					return errors.New("seat-config has not run on this boot")
				}
				fmt.Fprintln(cmd.OutOrStdout(), st)
				return nil
			}
			if !cmd.Flags().Changed("token-file") {
				tokenFile = TokenFile(os.Getenv("CREDENTIALS_DIRECTORY"))
			}
			cred, err := client.CredentialFromFile(tokenFile)
			if err != nil {
				_ = seat.Say(root, "This PC has no usable host credential ("+err.Error()+"): it cannot ask the site manager how university accounts log in. Administrators: enrol it (docs/node-agent.md \"Host credential\").")
				return err
			}
			site, err := client.NewForAgent(*server, cred)
			if err != nil {
				_ = seat.Say(root, "This PC cannot reach the site manager safely ("+err.Error()+"): university logins are not configured.")
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			for {
				reqCtx, reqCancel := context.WithTimeout(ctx, 10*time.Second)
				sl, err := site.SeatConfig(reqCtx)
				reqCancel()
				if err == nil {
					if err := seat.Apply(root, sl); err != nil {
						return err
					}
					if sl.Unavailable != "" {
						fmt.Fprintln(cmd.ErrOrStderr(), "seat-config: university logins unavailable:", seat.OneLine(sl.Unavailable))
						return nil
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "seat-config: wrote %d files\n", len(sl.Files))
					if !seat.Reachable(cmd.Context(), sl.Directory, 5*time.Second) {
						fmt.Fprintf(cmd.ErrOrStderr(), "seat-config: no directory server answers (%s)\n", strings.Join(sl.Directory, ", "))
						return seat.DirectoryUnreachable(root, sl.Directory)
					}
					return nil
				}
				var apiErr *client.APIError
				var notOurs *capin.MismatchError
				if errors.As(err, &notOurs) {
					// The server at the URL is not the site's: asking it again will not
					// change its certificate.
					_ = seat.Say(root, "The server at "+*server+" is not this site's site manager ("+err.Error()+"): university logins are not configured. Administrators: check the boot server's URL and the site manager's certificate.")
					return fmt.Errorf("seat-config: %w", err)
				}
				if errors.As(err, &apiErr) && apiErr.Status < 500 {
					// Refused (a revoked credential, an unknown host): asking again will
					// not help, and saying so is the useful thing.
					_ = seat.Say(root, "The site manager ("+*server+") refused this PC ("+err.Error()+"): logins with university accounts may not work here. Administrators: check the PC's host credential.")
					return fmt.Errorf("seat-config: the site manager refused: %w", err)
				}
				select {
				case <-ctx.Done():
					fmt.Fprintf(cmd.ErrOrStderr(), "seat-config: %v; giving up after %v\n", err, wait)
					return seat.Unreachable(root, *server)
				case <-time.After(2 * time.Second):
				}
			}
		},
	}
	f := c.Flags()
	f.StringVar(&tokenFile, "token-file", "", "host credential file (default: the systemd credential agent.token, else /run/overtime/agent.token)")
	f.StringVar(&root, "root", "/", "root directory to write under (tests)")
	f.DurationVar(&wait, "wait", time.Minute, "how long to keep asking an unreachable site manager at boot")
	f.BoolVar(&status, "status", false, "print what the last run said (ok, or why university logins cannot work) and exit")
	return c
}
