package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Power commands and the audit trail (docs/operations.md, "Power: reboot, wake, power off").

// newHostPowerCmd: `overtime host reboot|poweroff|wake HOSTLIST`.
func newHostPowerCmd(g *globals, op wire.PowerOp) *cobra.Command {
	var (
		force  bool
		reason string
	)
	short := map[wire.PowerOp]string{
		wire.OpReboot:   "Restart PCs (their agents reboot them into what the schedule gives)",
		wire.OpPowerOff: "Switch PCs off (never while a user is logged in)",
		wire.OpWake:     "Wake PCs with Wake-on-LAN from their boot server",
	}[op]
	long := map[wire.PowerOp]string{
		wire.OpReboot: `Asks the node agents of the hosts to restart their PCs. Without --force an agent
waits for its users to log out; with --force it tells them and reboots after the pool's
switch grace. Refused at once for hosts whose agent is not running (no fresh heartbeat).`,
		wire.OpPowerOff: `Asks the node agents of the hosts to switch their PCs off. Refused at once for hosts
whose last heartbeat reports a user logged in, and refused by the agent should someone
log in before it acts: a power-off is never forced (--force does not change that).`,
		wire.OpWake: `Has the hosts' boot servers send Wake-on-LAN magic packets (overtime bootserver run
--wake, with its own account). The command is done when a boot server reports the
packets sent; whether the PC woke shows in its heartbeat.`,
	}[op]
	cmd := &cobra.Command{
		Use:   string(op) + " HOSTLIST...",
		Short: short,
		Long: long + `

HOSTLIST is a Slurm hostlist expression, e.g. pc-a[01-20],pc-b3. Allowed for site admins
and the admins of every named host's pool. Prints per host whether the command was
accepted (its ID, to follow with 'overtime host power-status') or refused and why; exits
1 when any host was refused. Every request is in the audit trail ('overtime audit').`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Power(cmd.Context(), wire.HostPowerRequest{Op: op, Hosts: strings.Join(args, ","), Force: force, Reason: reason})
			if err != nil {
				return err
			}
			var refused []string
			for _, r := range res.Hosts {
				if !r.Accepted {
					refused = append(refused, r.Host)
				}
			}
			err = emitTo(cmd.OutOrStdout(), g.output, res, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "HOST\tRESULT\tID\tREASON")
				for _, r := range res.Hosts {
					result := "accepted"
					if !r.Accepted {
						result = "refused"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Host, result, r.ID, r.Reason)
				}
			})
			if err != nil {
				return err
			}
			if len(refused) > 0 {
				return fmt.Errorf("%d of %d hosts refused: %s", len(refused), len(res.Hosts), strings.Join(refused, ","))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "reboot: go ahead with users logged in after the countdown (a power-off is never forced)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, shown to logged-in users and in the audit trail (one line of text)")
	return cmd
}

// newHostPowerStatusCmd: `overtime host power-status [HOST]`.
func newHostPowerStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "power-status [HOST]",
		Short: "Power commands (reboot, power-off, wake) and how far they got",
		Long: `Lists the power commands the site manager keeps, newest first: pending (the agent or
boot server has not answered yet, or a countdown runs), done, sent (a wake's packets
left the boot server) or refused (with the reason: users logged in, superseded, ...).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			host := ""
			if len(args) == 1 {
				host = args[0]
			}
			list, err := c.PowerCommands(cmd.Context(), host)
			if err != nil {
				return err
			}
			g.useSiteZone(c)
			return emitTo(cmd.OutOrStdout(), g.output, list, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tHOST\tOP\tSTATE\tREQUESTED\tBY\tRESULT")
				for _, r := range list {
					op := string(r.Op)
					if r.Force {
						op += " (force)"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Host, op, r.State, g.formatTime(r.Requested), r.By, r.Result)
				}
			})
		},
	}
}

// newAuditCmd: `overtime audit [--host H] [--since T]`.
func newAuditCmd(g *globals) *cobra.Command {
	var host, since string
	var detail bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "The audit trail: power commands and their results, site changes",
		Long: `Lists the audit trail, oldest first: every power command (who, when, which hosts,
accepted or refused, and later its result) and every change written to the site (who
and the list of changes). --host narrows to entries concerning a host; --since to
entries at or after a time (RFC 3339, 'YYYY-MM-DD HH:MM' in the site's zone, or a
duration back from now such as 24h). --detail adds each entry's lines: a power command's
per-host answers, a site change's changes with their fields old → new.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if d, err := time.ParseDuration(since); err == nil {
				if d < 0 {
					return cmdline.Usagef("--since %s: a duration back from now must be positive", since)
				}
				since = queryTime(time.Now().Add(-d))
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			list, err := c.Audit(cmd.Context(), host, since)
			if err != nil {
				return err
			}
			g.useSiteZone(c)
			return emitTo(cmd.OutOrStdout(), g.output, list, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "TIME\tKIND\tUSER\tSUMMARY")
				for _, e := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", g.formatTime(e.Time), e.Kind, e.User, e.Summary)
					if detail {
						for _, l := range e.Detail {
							fmt.Fprintf(w, "\t\t\t  %s\n", l)
						}
					}
				}
			})
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "only entries concerning this host")
	cmd.Flags().StringVar(&since, "since", "", "only entries at or after this time (or a duration back from now, e.g. 24h)")
	cmd.Flags().BoolVarP(&detail, "detail", "d", false, "show each entry's detail lines (site changes: fields old → new)")
	return cmd
}
