package agentcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/node-agent/interference/workload"
)

// BenchCommands are the subcommands of `overtime-agent bench` defined elsewhere in this
// package (the interference matrix, calibration): their files append a constructor in
// init(), so adding one does not edit this file.
var BenchCommands []func() *cobra.Command

// NewBenchCmd is `overtime-agent bench`: benchmarks of this desktop, and the workloads they
// run (guest-load inside a guest, desktop-load as a desktop process).
func NewBenchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks of this desktop and the workloads they run",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newGuestLoadCmd(), newDesktopLoadCmd(), newNoopCmd())
	for _, f := range BenchCommands {
		c.AddCommand(f())
	}
	return c
}

func newGuestLoadCmd() *cobra.Command {
	var (
		o       workload.GuestOptions
		seconds float64
	)
	c := &cobra.Command{
		Use:   "guest-load NAME",
		Short: "Run a guest workload (" + strings.Join(workload.GuestNames(), ", ") + ") and report its progress on stdout",
		Long: `Runs a guest workload until SIGTERM or SIGINT (or --seconds), printing its cumulative
work every 100 ms as "overtime-work <work> <unit>" lines (the benchmark's runners read
them from a pipe, a container's console or a VM's serial console). It can be a VM's
init (PID 1, without /proc): it then powers the VM off when it ends.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if seconds > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(seconds*float64(time.Second)))
				defer cancel()
			}
			err := o.Run(ctx, args[0], os.Stdout)
			if os.Getpid() == 1 {
				// A VM's init that returns panics the kernel: power off instead (the call
				// does not return). A container's init (PID 1 of its PID namespace) has the
				// call end its namespace, or refused by seccomp, and returns as usual.
				if err != nil {
					fmt.Fprintln(os.Stderr, "guest-load:", err)
				}
				unix.Sync()
				_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
			}
			return err
		},
	}
	c.Flags().IntVar(&o.Threads, "threads", 1, "worker threads")
	c.Flags().StringVar(&o.Dir, "dir", os.TempDir(), "directory of the io workload's files")
	c.Flags().Float64Var(&seconds, "seconds", 0, "stop after this many seconds (0: at SIGTERM/SIGINT)")
	return c
}

func newDesktopLoadCmd() *cobra.Command {
	var (
		o        workload.DesktopOptions
		seconds  float64
		asJSON   bool
		progress bool
	)
	c := &cobra.Command{
		Use:   "desktop-load NAME",
		Short: "Run a desktop workload (" + strings.Join(workload.DesktopNames(), ", ") + ") once and print its result",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if seconds <= 0 {
				return fmt.Errorf("--seconds %g: want > 0", seconds)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			stopProgress := func() {}
			if progress {
				// The matrix's paired measurement reads the rate over short segments of
				// this run from these lines (the guests' protocol: "overtime-work W UNIT").
				var work atomic.Uint64
				o.Progress = func(w float64) { work.Store(math.Float64bits(w)) }
				out := cmd.ErrOrStderr()
				if asJSON {
					out = cmd.OutOrStdout()
				}
				done, exited := make(chan struct{}), make(chan struct{})
				stopProgress = func() { close(done); <-exited }
				go func() {
					defer close(exited)
					t := time.NewTicker(20 * time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-done:
							return
						case <-t.C:
							fmt.Fprint(out, workload.FormatProgress(math.Float64frombits(work.Load()), workload.DesktopUnit(args[0])))
						}
					}
				}()
			}
			r, err := o.Run(ctx, args[0], time.Duration(seconds*float64(time.Second)))
			stopProgress() // no progress line may come after (or inside) the result
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			fmt.Fprintf(out, "%s: %.3f s, work %g %s (%.4g/s), cpu %.3f s\n", r.Workload, r.Seconds, r.Work, r.Unit, r.Work/r.Seconds, r.CPUSeconds)
			if len(r.LatencyUs) > 0 {
				fmt.Fprintf(out, "latency µs: p50 %.0f p90 %.0f p99 %.0f max %.0f (%d events)\n",
					workload.Percentile(r.LatencyUs, 50), workload.Percentile(r.LatencyUs, 90),
					workload.Percentile(r.LatencyUs, 99), workload.Percentile(r.LatencyUs, 100), len(r.LatencyUs))
			}
			if r.Events > 0 {
				fmt.Fprintf(out, "missed %d of %d frames\n", r.Missed, r.Events)
			}
			return nil
		},
	}
	c.Flags().Float64Var(&seconds, "seconds", 0, "how long to run (required)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (interference.Result)")
	c.Flags().BoolVar(&progress, "progress", false, "cpu, memory, fs: print the cumulative work every 20 ms as \"overtime-work W UNIT\" lines (before the JSON result with --json, else on stderr)")
	c.Flags().DurationVar(&o.WakeInterval, "wake-interval", time.Millisecond, "wakeup: the tick")
	c.Flags().StringVar(&o.FSRoot, "fs-root", "/usr", "fs: the tree to walk")
	c.Flags().StringSliceVar(&o.StartCommand, "start-command", nil, "startup: the program and arguments to start (default: this binary's no-op)")
	return c
}

// newNoopCmd is `bench noop`, the startup workload's default program: a Go runtime that
// starts and exits. Hidden: it is no use to a person.
func newNoopCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "noop",
		Hidden: true,
		Args:   cobra.ArbitraryArgs,
		RunE:   func(*cobra.Command, []string) error { return nil },
	}
}
