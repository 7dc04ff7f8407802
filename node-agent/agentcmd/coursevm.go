package agentcmd

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/node-agent/coursevm"
)

// NewCourseVMCmd is `overtime-agent course-vm`: the course-VM player, run by the desktop's
// graphical session as the logged-in (or kiosk) user, not by the root agent: it needs
// the session's display, and the agent hands it what to show through --spec-file
// (docs/course-vms.md). With --dir it shows one version directory directly (trying an
// import on a PC, or a test).
func NewCourseVMCmd() *cobra.Command {
	var (
		specFile, dir, stateDir, display, serialLog, listen string
		share                                               string
		memPercent                                          int
		verify, logJSON, session                            bool
		poll, sessionWait                                   time.Duration
	)
	c := &cobra.Command{
		Use:   "course-vm",
		Short: "Show the course VM of a course-vm mode full screen (run by the desktop session)",
		Long: `Runs the course VM the node agent names in --spec-file while the schedule gives a
course-vm mode: from the read-only image export, with a throwaway overlay in --state-dir
(tmpfs), full screen. A VM that is closed or dies is started again, fresh, after a
backoff; when the mode changes or this command ends, the VM is stopped and its overlay
deleted. Run it from the graphical session, as the session's user.

With --session it is the X session itself, the one the greeter offers in a course slot:
the VM is not started again when it powers off or its window is closed, the command
ends (exit 0) and so does the student's session; SIGTERM or SIGHUP (logout, the X
server gone) stop the VM and delete the overlay. With no course VM to show for
--session-wait (no spec file, the VM unavailable, every start failing) it ends with
an error saying why, rather than leave a black screen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
			if logJSON {
				h = slog.NewJSONHandler(os.Stderr, nil)
			}
			log := slog.New(h)
			if stateDir == "" {
				stateDir = defaultCourseVMState()
			}
			p := coursevm.New(coursevm.Options{StateDir: stateDir, Display: display, SerialLog: serialLog,
				MemoryPercent: memPercent, VerifyDisk: verify, Session: session, SessionWait: sessionWait, Share: share, Log: log})
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			defer stop()
			var specs <-chan *coursevm.Spec
			if dir != "" {
				abs, err := filepath.Abs(dir)
				if err != nil {
					return err
				}
				ch := make(chan *coursevm.Spec, 1)
				ch <- &coursevm.Spec{Mode: "(--dir)", Image: filepath.Base(filepath.Dir(abs)), Version: filepath.Base(abs), Dir: abs}
				specs = ch
			} else {
				specs = coursevm.WatchSpec(ctx, specFile, poll, log)
			}
			if listen != "" {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return fmt.Errorf("metrics listener: %w", err)
				}
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", p.MetricsHandler())
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
				go srv.Serve(ln)
				defer srv.Close()
			}
			log.Info("course VM player", "spec", specFile, "dir", dir, "stateDir", stateDir, "display", display, "session", session)
			err := p.Run(ctx, specs)
			if err != nil && session {
				// The X session's log (~/.xsession-errors) is where an administrator looks.
				log.Error("course VM session ends", "err", err)
			}
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&specFile, "spec-file", paths.CourseVMSpec, "the course VM the node agent names (overtime-agent run --course-vm-file)")
	f.StringVar(&dir, "dir", "", "show this course-VM version directory instead (disk, vm.json, SHA256SUMS)")
	f.StringVar(&stateDir, "state-dir", "", "tmpfs directory for the throwaway overlays (default $XDG_RUNTIME_DIR/overtime-course-vm)")
	f.StringVar(&display, "display", "gtk", "gtk or sdl (full screen), or none (headless: serial log only)")
	f.StringVar(&serialLog, "serial-log", "", "append the VM's serial console to this file (- : standard output, the journal under systemd)")
	f.StringVar(&listen, "listen", "", "HTTP address for /metrics (e.g. 127.0.0.1:9102; empty: off)")
	f.StringVar(&share, "share", "", "a folder the VM sees read-write (made 0700 if missing): QEMU's virtio-9p mount tag \"home\", VMware's shared folder \"home\"; the greeter's session shares ~/coursevm; empty: none")
	f.IntVar(&memPercent, "memory-percent", 75, "the VM gets at most this share of the PC's memory")
	f.BoolVar(&verify, "verify", false, "check the disk's sha256 against SHA256SUMS before each start (reads it whole)")
	f.BoolVar(&logJSON, "log-json", false, "structured JSON logs")
	f.DurationVar(&poll, "poll", 2*time.Second, "how often the spec file is looked at")
	f.BoolVar(&session, "session", false, "run as the X session: end when the VM ends, never start it again")
	f.DurationVar(&sessionWait, "session-wait", time.Minute, "with --session: how long to wait for a course VM to show before ending the session")
	return c
}

// defaultCourseVMState is the session user's tmpfs ($XDG_RUNTIME_DIR), else a directory
// of the user's below /run/overtime.
func defaultCourseVMState() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "overtime-course-vm")
	}
	return filepath.Join("/run/overtime", "course-vm-"+strconv.Itoa(os.Getuid()))
}
