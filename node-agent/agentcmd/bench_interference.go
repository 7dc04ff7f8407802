package agentcmd

import (
	"context"
	"fmt"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/node-agent/interference/guestrun"
	"github.com/overtime-hpc/overtime/node-agent/interference/matrix"
)

func init() { BenchCommands = append(BenchCommands, NewBenchInterferenceCmd) }

// NewBenchInterferenceCmd is `overtime-agent bench interference`: the desktop × guest ×
// isolation policy matrix (node-agent/interference/matrix).
func NewBenchInterferenceCmd() *cobra.Command {
	var (
		desktops, guests, policies, backends, keep []string
		preset, out, workDir, kernel               string
		seconds, warmup, maxWidth, target, start   float64
		signalTick, segment, adaptiveWarmup        time.Duration
		pairs                                      int
		reps, maxReps, threads                     int
		seed                                       uint64
		adapt, noOverhead, dryRun, noCanary        bool
	)
	presets := make([]string, 0, len(matrix.Presets))
	for k := range matrix.Presets {
		presets = append(presets, k)
	}
	sort.Strings(presets)
	c := &cobra.Command{
		Use:   "interference",
		Short: "Measure how guest workloads under each isolation policy slow the desktop (desktop × guest × policy)",
		Long: `Measures cells of desktop workload × guest workload × isolation policy × guest backend.
Every cell is measured as the desktop alone, the guest alone and both; the baselines are
shared between the cells of a round, every round runs its phases in a shuffled order, and
rounds repeat (--reps; --adapt adds rounds for cells whose slowdown interval is wider
than --max-width, up to --max-reps). The wake-up probe runs alongside every desktop run.
Writes interference.json (environment, every run, per-cell medians with 95% intervals)
and interference.md to --out; test/bench/interferenceplot draws the figures.

Cells: --cells PRESET (` + strings.Join(presets, ", ") + `; the lists below then filter it), or the cross
product of --desktop, --guest, --policy and --backend. Needs root (cgroups, SCHED_IDLE).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := matrix.Config{Run: dur(seconds), Warmup: dur(warmup), Reps: reps, MaxReps: maxReps, Adapt: adapt,
				MaxWidth: maxWidth, Threads: threads, Seed: seed, ProbeOverhead: !noOverhead, Keep: map[string]bool{},
				Pairs: pairs, Segment: segment, AdaptiveWarmup: adaptiveWarmup}
			for _, k := range keep {
				cfg.Keep[k] = true
			}
			if preset != "" {
				p, ok := matrix.Presets[preset]
				if !ok {
					return fmt.Errorf("--cells %q: presets are %v", preset, presets)
				}
				if !cmd.Flags().Changed("seconds") {
					cfg.Run = p.Run
				}
				if !cmd.Flags().Changed("warmup") && p.Warmup > 0 {
					cfg.Warmup = p.Warmup
				}
				f := cmd.Flags()
				for _, c := range p.Cells {
					if (!f.Changed("desktop") || slices.Contains(desktops, c.Desktop)) && (!f.Changed("guest") || slices.Contains(guests, c.Guest)) &&
						(!f.Changed("policy") || slices.Contains(policies, c.Policy)) && (!f.Changed("backend") || slices.Contains(backends, c.Backend)) {
						cfg.Cells = append(cfg.Cells, c)
					}
				}
			} else {
				if slices.Contains(policies, "all") {
					policies = matrix.Policies
				}
				cfg.Cells = matrix.Cross(desktops, guests, policies, backends)
			}
			// QEMU needs a kernel to boot: without one its cells are left out (and the
			// report says so) rather than failing every run.
			if kernel == "" && slices.ContainsFunc(cfg.Cells, func(c matrix.Cell) bool { return c.Backend == "qemu" }) {
				if _, err := guestrun.FindKernel(); err != nil {
					note := fmt.Sprintf("qemu cells left out: %v", err)
					fmt.Fprintln(cmd.ErrOrStderr(), "bench interference:", note)
					cfg.Notes = append(cfg.Notes, note)
					cfg.Cells = slices.DeleteFunc(cfg.Cells, func(c matrix.Cell) bool { return c.Backend == "qemu" })
				}
			}
			if len(cfg.Cells) == 0 {
				return fmt.Errorf("no cells")
			}
			est, what := matrix.EstimateDuration(cfg)
			fmt.Fprintf(cmd.ErrOrStderr(), "bench interference: %s; estimated %v (without --adapt's extra rounds)\n", what, est.Round(time.Second))
			if dryRun {
				for _, c := range cfg.Cells {
					fmt.Fprintln(cmd.OutOrStdout(), c)
				}
				return nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			var bes []string
			for _, c := range cfg.Cells {
				if !slices.Contains(bes, c.Backend) {
					bes = append(bes, c.Backend)
				}
			}
			real, err := matrix.NewReal(context.WithoutCancel(ctx), matrix.RealOptions{WorkDir: workDir, Target: target, StartCap: start, SignalTick: signalTick, NoCanary: noCanary, Backends: bes, Kernel: kernel})
			if err != nil {
				return err
			}
			defer real.Close()
			cfg.Notes = append(cfg.Notes, "guests' cgroups below "+real.Parent().Path()+"; desktop workloads run as `overtime-agent bench desktop-load` processes next to this one")
			t0 := time.Now()
			cfg.Log = func(format string, a ...any) {
				fmt.Fprintf(cmd.ErrOrStderr(), "[%5.0fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, a...))
			}
			rep, err := matrix.Measure(ctx, cfg, real.Deps)
			if rep == nil {
				return err
			}
			rep.SignalsCost = matrix.F(real.Cost())
			if werr := rep.Write(out); werr != nil {
				return werr
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "bench interference: %d runs in %v; wrote %s/interference.{json,md}\n", len(rep.Runs), time.Since(t0).Round(time.Second), out)
			return err
		},
	}
	f := c.Flags()
	f.StringSliceVar(&desktops, "desktop", []string{"cpu"}, "desktop workloads (wakeup, frame, cpu, memory, fs, startup)")
	f.StringSliceVar(&guests, "guest", []string{"cpu"}, "guest workloads (cpu, memory, io, idle)")
	f.StringSliceVar(&policies, "policy", []string{"none", "cgroup-idle"}, "isolation policies ("+strings.Join(matrix.Policies, ", ")+", or all)")
	f.StringSliceVar(&backends, "backend", []string{"process"}, "guest backends (process, container, qemu)")
	f.StringVar(&preset, "cells", "", "a cell preset ("+strings.Join(presets, ", ")+") instead of the cross product")
	f.Float64Var(&seconds, "seconds", 3, "length of each measured run")
	f.Float64Var(&warmup, "warmup", 0.5, "desktop warm-up before each measured run (s)")
	f.IntVar(&reps, "reps", 5, "rounds")
	f.IntVar(&pairs, "pairs", matrix.DefaultPairs, "throughput desktops (cpu, memory, fs): frozen/running segment pairs per both run (-1: unpaired both runs)")
	f.DurationVar(&segment, "segment", matrix.DefaultSegment, "length of each segment of a paired run")
	f.DurationVar(&adaptiveWarmup, "adaptive-warmup", 8*time.Second, "the adaptive policy's both runs measure after the desktop worked this long next to the controller (its transient is in the cap trace)")
	f.BoolVar(&adapt, "adapt", false, "add rounds for cells whose slowdown interval is wider than --max-width")
	f.IntVar(&maxReps, "max-reps", 15, "rounds at most with --adapt")
	f.Float64Var(&maxWidth, "max-width", 0.02, "slowdown interval width (fraction) --adapt aims at")
	f.IntVar(&threads, "threads", 0, "guest worker threads (default: the host's CPUs)")
	f.Uint64Var(&seed, "seed", 0, "seed of the phase order (default: the time)")
	f.Float64Var(&target, "target", 0.01, "the adaptive controller's slowdown target")
	f.Float64Var(&start, "start-cap", 0, "the adaptive controller's starting cap, fraction of the CPUs (default: the controller's)")
	f.StringSliceVar(&keep, "keep", []string{"qemu"}, "backends whose guests stay up (frozen) between runs instead of restarting per run")
	f.StringVar(&out, "out", "interference", "output directory")
	f.StringVar(&workDir, "work-dir", "", "directory for the io guest's files and the container's directories (default: $TMPDIR)")
	f.StringVar(&kernel, "kernel", "", "kernel the QEMU guests boot (default: the test image's or /boot's; without one the qemu cells are left out)")
	f.BoolVar(&noOverhead, "no-probe-overhead", false, "leave out the probe-overhead runs (CPU desktop without the probe)")
	f.DurationVar(&signalTick, "signal-tick", 100*time.Millisecond, "the signal sampler's period (windows align to it; the agent samples every 250ms)")
	f.BoolVar(&noCanary, "no-canary", false, "run the signal sampler without its memory canary")
	f.BoolVar(&dryRun, "dry-run", false, "print the cells and the estimated duration only")
	return c
}

func dur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
