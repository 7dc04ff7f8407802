package main

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
)

// newJobReportCmd: `overtime job-report JOBID` — what the desktop and the guest did to
// each other while the job ran (docs/slurm.md).
func newJobReportCmd(g *globals) *cobra.Command {
	var host string
	cmd := &cobra.Command{
		Use:   "job-report [JOBID]",
		Short: "A Slurm job's desktop-interference report (throttled, frozen, owner activity, steal)",
		Long: `Shows the interference report of a Slurm job that ran on an Overtime node: how long
its guest was throttled or frozen because the desk's owner was working, the share of the
job's time the owner was active, the CPU the guest got, the time it waited for the CPU
(steal), and an estimate of how much it slowed the desktop. Any directory user may read
reports. Without JOBID, lists the recent reports (needs a role; --host narrows).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var list []model.JobReport
			var v any
			if len(args) == 1 {
				r, err := c.JobReport(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if g.output == "table" {
					printJobReport(cmd, r)
					return nil
				}
				v = r
			} else {
				if list, err = c.JobReports(cmd.Context(), host); err != nil {
					return err
				}
				v = list
			}
			return emitTo(cmd.OutOrStdout(), g.output, v, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "JOB\tHOST\tEND\tSECONDS\tTHROTTLED\tFROZEN\tOWNER ACTIVE\tSTEAL\tDESKTOP SLOWDOWN")
				for _, r := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f%%\t%.1f\t%.0f%%\n", r.Job, r.Host,
						r.End.Local().Format(time.DateTime), r.Seconds, r.ThrottledSeconds, r.FrozenSeconds,
						100*r.OwnerActiveFraction, r.StealSeconds, 100*r.DesktopSlowdown)
				}
			})
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "list only reports of this host")
	return cmd
}

func printJobReport(cmd *cobra.Command, r *model.JobReport) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	pct := func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }
	share := func(s float64) string {
		if r.Seconds <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%.0f%% of the job)", 100*s/r.Seconds)
	}
	fmt.Fprintf(w, "Job\t%s\n", r.Job)
	fmt.Fprintf(w, "Host\t%s (mode %s)\n", r.Host, r.Mode)
	fmt.Fprintf(w, "Ran\t%s to %s, %.0f s\n", r.Start.Local().Format(time.DateTime), r.End.Local().Format(time.DateTime), r.Seconds)
	fmt.Fprintf(w, "Owner active\t%s of the job's time\n", pct(r.OwnerActiveFraction))
	fmt.Fprintf(w, "Throttled\t%.0f s%s\n", r.ThrottledSeconds, share(r.ThrottledSeconds))
	fmt.Fprintf(w, "Frozen\t%.0f s%s\n", r.FrozenSeconds, share(r.FrozenSeconds))
	fmt.Fprintf(w, "Guest CPU\t%.1f s\n", r.GuestCPUSeconds)
	fmt.Fprintf(w, "Steal\t%.1f s (guest threads runnable, waiting for a CPU)\n", r.StealSeconds)
	fmt.Fprintf(w, "Desktop slowdown\t~%s (desktop CPU pressure during the job; an upper bound)\n", pct(r.DesktopSlowdown))
	if len(r.Actions) > 0 {
		var parts []string
		for _, a := range model.GuestActions {
			if n := r.Actions[a]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", a, n))
			}
		}
		fmt.Fprintf(w, "Policy actions\t%s\n", strings.Join(parts, ", "))
	}
	w.Flush()
}

// newSlurmCmd: the Slurm view of the pool.
func newSlurmCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "slurm", Short: "Slurm integration: desired node states (docs/slurm.md)"}
	cmd.AddCommand(&cobra.Command{
		Use:   "nodes",
		Short: "What Slurm should think of each host now (state, features, weight, reason)",
		Long: `Shows the desired Slurm node of every host, as the site manager derives it from the
node agents' heartbeats and the modes they run. overtime-slurm-sync applies these to Slurm.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			feed, err := c.SlurmNodes(cmd.Context(), 0, 0)
			if err != nil {
				return err
			}
			sort.Slice(feed.Nodes, func(i, j int) bool { return feed.Nodes[i].Name < feed.Nodes[j].Name })
			return emitTo(cmd.OutOrStdout(), g.output, feed, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "NODE\tSTATE\tWEIGHT\tFEATURES\tREASON")
				for _, n := range feed.Nodes {
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", n.Name, n.State, n.Weight, n.Features, n.Reason)
				}
			})
		},
	})
	return cmd
}
