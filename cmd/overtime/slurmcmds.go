package main

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/tools"
	"github.com/overtime-hpc/overtime/sitemgmt/hostlist"
	"github.com/overtime-hpc/overtime/sitemgmt/wol"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
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
(steal, and the share of the job's time it lost so), and an estimate of how much it
slowed the desktop: the desktop's work took that much longer, with the interval the
estimate is likely in and the method behind it (run-queue wait, memory canary;
docs/slurm.md). Any directory user may read
reports. Every host that reported the job is shown, each under its name: a job requeued
onto another host has a report from each, and the site manager cannot tell which hosts
Slurm gave the job, so a report from a host that never ran it would stand beside the
real one, never replace it (compare the hosts with "scontrol show job"). With one host,
the report is shown in detail; with several, one line per host (--host picks one host's
report in detail). Without JOBID, lists the recent reports (needs a role; --host
narrows).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			g.useSiteZone(c)
			var list []wire.JobReport
			var v any
			switch {
			case len(args) == 1 && host != "":
				r, err := c.JobReport(cmd.Context(), args[0], host)
				if err != nil {
					return err
				}
				if g.output == "table" {
					printJobReport(g, cmd, r)
					return nil
				}
				v = r
			case len(args) == 1:
				all, err := c.JobReportsOf(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if g.output == "table" && len(all.Reports) == 1 {
					printJobReport(g, cmd, &all.Reports[0])
					return nil
				}
				if g.output == "table" {
					fmt.Fprintf(cmd.OutOrStdout(), "Job %s has reports from %d hosts, one line each (--host NAME shows one in detail):\n", all.Job, len(all.Reports))
				}
				list, v = all.Reports, all
			default:
				if list, err = c.JobReports(cmd.Context(), host); err != nil {
					return err
				}
				v = list
			}
			return emitTo(cmd.OutOrStdout(), g.output, v, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "JOB\tHOST\tEND\tSECONDS\tTHROTTLED\tFROZEN\tOWNER ACTIVE\tSTEAL\tDESKTOP SLOWDOWN")
				for _, r := range list {
					fmt.Fprintf(w, "%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f%%\t%.1f\t%s\n", r.Job, r.Host,
						g.formatTime(r.End), r.Seconds, r.ThrottledSeconds, r.FrozenSeconds,
						100*r.OwnerActiveFraction, r.StealSeconds, r.SlowdownText())
				}
			})
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "the report of this host (with JOBID), or only this host's reports (list)")
	return cmd
}

func printJobReport(g *globals, cmd *cobra.Command, r *wire.JobReport) {
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
	fmt.Fprintf(w, "Ran\t%s to %s, %.0f s\n", g.formatTime(r.Start), g.formatTime(r.End), r.Seconds)
	fmt.Fprintf(w, "Owner active\t%s of the job's time\n", pct(r.OwnerActiveFraction))
	fmt.Fprintf(w, "Throttled\t%.0f s%s\n", r.ThrottledSeconds, share(r.ThrottledSeconds))
	fmt.Fprintf(w, "Frozen\t%.0f s%s\n", r.FrozenSeconds, share(r.FrozenSeconds))
	fmt.Fprintf(w, "Guest CPU\t%.1f s\n", r.GuestCPUSeconds)
	fmt.Fprintf(w, "Steal\t%.1f s (guest threads runnable, waiting for a CPU)\n", r.StealSeconds)
	for _, l := range slowdownLines(r) {
		fmt.Fprintf(w, "%s\t%s\n", l[0], l[1])
	}
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

// slowdownLines are the report's estimate of what the guest cost the desktop, with its
// interval and method, what the numbers mean, and what the desktop cost the job.
func slowdownLines(r *wire.JobReport) [][2]string {
	var out [][2]string
	one := func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
	if r.SlowdownLow != 0 || r.SlowdownHigh != 0 || r.SlowdownMethod != "" {
		est := one(r.DesktopSlowdown)
		if r.SlowdownLow != 0 || r.SlowdownHigh != 0 {
			est += fmt.Sprintf(" (likely %.1f–%.1f%%)", 100*r.SlowdownLow, 100*r.SlowdownHigh)
		}
		out = append(out, [2]string{"Desktop slowdown", est})
		if r.SlowdownMethod != "" {
			out = append(out, [2]string{"", "estimated from " + r.SlowdownMethod})
		}
		out = append(out, [2]string{"", fmt.Sprintf("the desktop's work took about %s longer because the guest ran beside it", one(r.DesktopSlowdown))},
			[2]string{"", "(a 100 s task: +" + fmt.Sprintf("%.1f", 100*r.DesktopSlowdown) + " s); the range is the estimator's calibrated error"})
	} else {
		// An agent before calibrated estimates: CPU pressure, a rough figure.
		out = append(out, [2]string{"Desktop slowdown", fmt.Sprintf("~%.0f%% (rough: the desktop's CPU pressure during the job; no interval)", 100*r.DesktopSlowdown)})
	}
	if r.GuestSlowdown > 0 {
		out = append(out, [2]string{"Guest slowdown", one(r.GuestSlowdown) + " of the job's time lost waiting for the desktop (steal)"})
	}
	return out
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
	cmd.AddCommand(newSlurmPowerCmd(g, true), newSlurmPowerCmd(g, false))
	return cmd
}

// newSlurmPowerCmd: `overtime slurm resume|suspend HOSTLIST`, Slurm's ResumeProgram and
// SuspendProgram (docs/slurm.md, "Power saving").
func newSlurmPowerCmd(g *globals, resume bool) *cobra.Command {
	var (
		mode      string
		forTime   time.Duration
		noWake    bool
		downCmd   string
		wakeAfter time.Duration
	)
	use, short, long := "suspend HOSTLIST...", "Slurm SuspendProgram: give idle hosts back to their schedule", `Slurm runs its SuspendProgram with the nodes that have been idle for SuspendTime.
This removes the hosts' power-save exceptions: each host follows its schedule again
(its node agent stops the compute guest when the schedule has no guest for it).
HOSTLIST is a Slurm hostlist expression, e.g. pc[01-20],lab-b3.`
	if resume {
		use, short, long = "resume HOSTLIST...", "Slurm ResumeProgram: put hosts in the cluster and wake them (Wake-on-LAN)", `Slurm runs its ResumeProgram with the powered-down nodes it wants for queued jobs.
For each host the site manager looks at the schedule:
  desktop or cluster mode     nothing to change; the host is woken
  local-disk mode             a power-save exception puts it in a cluster mode for the
                              coming slots (never over a lecture, exam or desktop hours,
                              not even ones added later); the host is woken
  course VM, maintenance, ... refused: a lecture slot always wins
Woken hosts get a Wake-on-LAN magic packet (to their boot server subnet's broadcast
address, UDP port 9). Refused hosts are set DOWN in Slurm with the reason (scontrol), so
their jobs go elsewhere at once instead of after ResumeTimeout; the command then exits 1.
HOSTLIST is a Slurm hostlist expression, e.g. pc[01-20],lab-b3.`
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hosts, err := hostlist.Expand(args...)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			req := wire.PowerRequest{Hosts: hosts, Mode: mode, ForMinutes: int(forTime / time.Minute)}
			var res *wire.PowerResponse
			if resume {
				res, err = c.SlurmResume(cmd.Context(), req)
			} else {
				res, err = c.SlurmSuspend(cmd.Context(), req)
			}
			if err != nil {
				return err
			}
			g.useSiteZone(c)
			var failed []string
			for _, r := range res.Hosts {
				switch {
				case r.Action == wire.PowerRefused:
					failed = append(failed, r.Host)
					if resume && downCmd != "" {
						if err := markDown(cmd, downCmd, r); err != nil {
							fmt.Fprintf(cmd.ErrOrStderr(), "overtime: %s: %v\n", r.Host, err)
						}
					}
				case resume && !noWake && r.MAC != "":
					ctx, cancel := context.WithTimeout(cmd.Context(), wakeAfter)
					err := wol.Send(ctx, r.WakeAddr, r.MAC)
					cancel()
					if err != nil {
						failed = append(failed, r.Host)
						fmt.Fprintf(cmd.ErrOrStderr(), "overtime: wake %s: %v\n", r.Host, err)
					}
				}
			}
			err = emitTo(cmd.OutOrStdout(), g.output, res, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "HOST\tACTION\tMODE\tUNTIL\tWAKE\tREASON")
				for _, r := range res.Hosts {
					until := ""
					if !r.Until.IsZero() {
						until = g.formatTime(r.Until)
					}
					wake := ""
					if resume && r.MAC != "" && !noWake {
						wake = r.MAC + " -> " + r.WakeAddr
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Host, r.Action, r.Mode, until, wake, r.Reason)
				}
			})
			if err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d of %d hosts not done: %s", len(failed), len(res.Hosts), strings.Join(failed, ","))
			}
			return nil
		},
	}
	if resume {
		cmd.Flags().StringVar(&mode, "mode", "", "cluster mode for local-disk hosts (default: the site's only cluster mode with a guest)")
		cmd.Flags().DurationVar(&forTime, "for", time.Duration(wire.DefaultPowerSaveMinutes)*time.Minute, "longest a power-save exception lasts if SuspendProgram never comes")
		cmd.Flags().BoolVar(&noWake, "no-wake", false, "do not send Wake-on-LAN packets")
		cmd.Flags().StringVar(&downCmd, "scontrol", "scontrol", "scontrol used to set refused nodes DOWN with the reason (empty: leave them to ResumeTimeout)")
		cmd.Flags().DurationVar(&wakeAfter, "wake-timeout", 5*time.Second, "time allowed for sending one host's magic packets")
	}
	return cmd
}

// markDown sets a node the site manager refused to wake DOWN with the reason, so that
// slurmctld requeues its jobs onto other nodes now (rather than after ResumeTimeout).
// The "overtime:" prefix marks the down as the sync daemon's to lift when the host runs
// a guest again.
func markDown(cmd *cobra.Command, scontrol string, r wire.PowerResult) error {
	reason := "overtime: not resumed: " + r.Reason
	out, err := exec.CommandContext(cmd.Context(), scontrolPath(scontrol), "update", "NodeName="+r.Host, "State=DOWN", "Reason="+reason).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s update NodeName=%s State=DOWN: %v: %s", scontrol, r.Host, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// scontrolPath: slurmctld runs ResumeProgram with an almost empty environment, without
// PATH, so the usual install directories are searched too.
func scontrolPath(name string) string {
	if p := tools.Find(name, "/usr/bin", "/usr/local/bin", "/opt/slurm/bin"); p != "" {
		return p
	}
	return name // exec reports it missing
}
