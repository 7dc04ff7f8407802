// Package agentcmd is the node agent's command line, `overtime-agent run` (and, for
// installations and scripts that predate the separate binary, `overtime agent run`): it
// turns flags into agent.Options and serves the agent's HTTP endpoints. What the agent
// decides lives in node-agent/agent, node-agent/sensor and the guest backends.
package agentcmd

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/node-agent/agent"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/examfw"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/guest/container"
	"github.com/overtime-hpc/overtime/node-agent/guest/libvirt"
	"github.com/overtime-hpc/overtime/node-agent/guest/vmware"
	"github.com/overtime-hpc/overtime/node-agent/interference/calibrate"
	"github.com/overtime-hpc/overtime/node-agent/kvmprobe"
	"github.com/overtime-hpc/overtime/node-agent/powerctl"
	"github.com/overtime-hpc/overtime/node-agent/seat"
	"github.com/overtime-hpc/overtime/node-agent/sensor"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// NewRunCmd is `run`: the node agent. server is the site manager URL (the parent's
// persistent --server flag, read when the command runs); version goes into heartbeats.
// The binary's main must call container.MaybeInit first: the container backend starts
// a guest's init by running the binary again.
func NewRunCmd(server *string, version string) *cobra.Command {
	var (
		tokenFile, mac, stateDir, imageRoot, listen, libvirtURI string
		courseVMFile, cmdlineFile, examFile, powerCommand       string
		examRuleset                                             string
		inputDir, utmpPath, pressureGroup, guestURL             string
		calibrateMode                                           string
		refresh, heartbeat, checkEvery, seatRecheck             time.Duration
		backoff                                                 time.Duration
		logJSON, debug                                          bool
	)
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the node agent (systemd unit overtime-agent.service)",
		Long: `Run the node agent on this desktop: fetch the host's configuration from the site
manager with the host credential, watch the person at the desk (input devices, sessions,
desktop load and pressure) and run, throttle, freeze or evict the compute guest by the
pool's policy. The last good configuration is cached in --state-dir (tmpfs) and used
while the site manager is unreachable. Metrics on --listen /metrics.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hopt := &slog.HandlerOptions{}
			if debug {
				hopt.Level = slog.LevelDebug
			}
			var h slog.Handler = slog.NewTextHandler(os.Stderr, hopt)
			if logJSON {
				h = slog.NewJSONHandler(os.Stderr, hopt)
			}
			// Decide KVM or TCG in the background: the probe boots a tiny guest (up to 5 s),
			// which should not delay the first decision.
			go kvmprobe.Accel()
			log := slog.New(h)
			if !cmd.Flags().Changed("token-file") {
				tokenFile = TokenFile(os.Getenv("CREDENTIALS_DIRECTORY"))
			}
			cred, err := client.CredentialFromFile(tokenFile)
			if err != nil {
				return err
			}
			site, err := client.NewForAgent(*server, cred)
			if err != nil {
				return err
			}
			log.Info("host credential", "file", tokenFile, "caPin", cred.CAPin)
			if strings.HasPrefix(*server, "http:") {
				log.Warn("the host credential goes to the site manager in clear: plain HTTP (docs/node-agent.md \"The channel\")", "server", *server)
			}
			if mac == "" {
				if mac, err = agent.DefaultMAC(); err != nil {
					return err
				}
			}
			if mac, err = model.NormalizeMAC(mac); err != nil {
				return err
			}
			cg, err := cgroup.Detect()
			if err != nil {
				log.Warn("cgroups not usable: guests run without cgroup limits the backend does not set itself", "err", err)
			}
			var calib calibrate.RunFunc
			switch calibrateMode {
			case "auto":
				if cg != nil {
					// The calibration's guest workloads run where the compute guests'
					// groups are (the container backend's "overtime").
					calib = agent.ProfileRun(cg.Group("overtime"))
				} else {
					log.Warn("no cgroups: this host cannot calibrate its interference profile")
				}
			case "off":
			default:
				return fmt.Errorf("--calibrate %q: want auto or off", calibrateMode)
			}
			backends := map[model.GuestBackend]guest.Backend{
				model.BackendQEMU: libvirt.New(libvirt.Options{URI: libvirtURI, Log: log,
					ProbeKVM: kvmprobe.KVM, SetIdle: libvirt.IdleDomainCgroup(cg)}),
				model.BackendXen: libvirt.New(libvirt.Options{Kind: model.BackendXen, Log: log}),
				// The agent keeps a guest's state in StateDir/guest/NAME (agent.guestLifecycle):
				// a restarted agent looks for a VMware guest's .vmx there.
				model.BackendVMware:    vmware.New(vmware.Config{StateRoot: filepath.Join(stateDir, "guest")}),
				model.BackendContainer: container.New(container.Options{Hierarchy: cg, Logf: func(format string, a ...any) { log.Info(fmt.Sprintf(format, a...)) }}),
			}
			// The load sensor counts CPU outside the guest; the agent knows the guest.
			var a *agent.Agent
			guestCPU := func() time.Duration {
				if a == nil {
					return 0
				}
				return a.GuestCPU()
			}
			// What Overtime booted here, from the kernel command line the site manager
			// rendered: the configuration then says whether the PC must restart to follow
			// its schedule. Absent on a PC Overtime did not boot: never restarted by one.
			booted, exam := BootedFrom(cmdlineFile)
			site.BootedMode, site.BootedExam = booted, exam
			if booted != "" {
				log.Info("booted by Overtime", "mode", booted, "exam", exam)
			}
			var machine powerctl.Machine = powerctl.Systemd{}
			if powerCommand != "" {
				machine = powerctl.Command{Path: powerCommand}
			}
			var examFW examfw.Firewall
			if examRuleset != "" {
				examFW = &examfw.NFT{File: examRuleset}
			}
			a, err = agent.New(agent.Options{
				ExamFirewall: examFW,
				Machine:      machine,
				Site:         site, MAC: mac, Booted: booted, BootedExam: exam, ExamFile: examFile,
				StateDir: stateDir, ImageRoot: imageRoot, Backends: backends, CourseVMFile: courseVMFile,
				Sensors: sensor.Desktop(sensor.DesktopOptions{InputDir: inputDir, Utmp: utmpPath,
					PressureGroup: pressureGroup, GuestCPU: guestCPU, Log: log}),
				Refresh: refresh, Heartbeat: heartbeat, CheckEvery: checkEvery,
				RestartBackoff: backoff, Log: log, Version: version,
				DesktopCPUPressure: sensor.CPUPressureFile(pressureGroup), GuestAgentURL: guestURL,
				Calibrate: calib,
			})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if listen != "" {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return fmt.Errorf("metrics listener: %w", err)
				}
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", a.MetricsHandler())
				mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
				// The SPANK plugin in the guest reports job start and end here.
				a.JobHandler(mux)
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
				go srv.Serve(ln)
				defer srv.Close()
				log.Info("metrics", "listen", ln.Addr().String())
			}
			if seatRecheck > 0 {
				// The greeter's word on the university directory, kept current while the
				// PC runs (seat-config checks it once, before the greeter starts).
				go seat.Watch(ctx, "/", seatRecheck, func(status string, err error) {
					if err != nil {
						log.Warn("seat: recheck of the directory", "err", err)
						return
					}
					log.Info("seat: the login screens now say", "status", status)
				})
			}
			log.Info("node agent starting", "server", *server, "mac", mac, "stateDir", stateDir, "imageRoot", imageRoot)
			return a.Run(ctx)
		},
	}
	f := c.Flags()
	f.StringVar(&tokenFile, "token-file", paths.AgentToken, "host credential (overtime host credential HOST --out FILE); default: the systemd credential agent.token (TPM) when the unit passes a non-empty one, else "+paths.AgentToken+" (the initramfs copies it from the LABEL=OVERTIME-ID partition)")
	f.StringVar(&mac, "mac", "", "this PC's MAC (default: the interface with the default route)")
	f.StringVar(&stateDir, "state-dir", paths.AgentState, "tmpfs directory: cached configuration, guest overlays")
	f.StringVar(&imageRoot, "image-root", paths.AgentImages, "where the image export is mounted read-only (version paths below it)")
	f.StringVar(&courseVMFile, "course-vm-file", paths.CourseVMSpec, "where the course VM of a course-vm mode is named for the session's player (overtime-agent course-vm); empty: not written")
	f.StringVar(&listen, "listen", paths.AgentListen, "HTTP address for /metrics and the guest's job calls /v1/jobs (empty: off)")
	f.StringVar(&powerCommand, "power-command", "", "program run as `PROGRAM reboot` or `PROGRAM poweroff` to restart or switch off the PC (default: systemctl reboot|poweroff)")
	f.StringVar(&cmdlineFile, "cmdline", "/proc/cmdline", "kernel command line to read overtime.mode= (and overtime.exam=) from: what Overtime booted")
	f.StringVar(&examFile, "exam-file", paths.ExamMarker, "file that exists while the PC is in an exam (read by overtime-exam.path); empty: not written")
	f.StringVar(&examRuleset, "exam-ruleset", paths.ExamRuleset, "during an exam: the nftables ruleset (table inet overtime_exam) written here and loaded with nft -f, limiting the network to what the exam allows; empty: the network is never limited")
	f.StringVar(&libvirtURI, "libvirt-uri", "qemu:///system", "libvirt connection for the qemu backend")
	f.StringVar(&inputDir, "input-dir", "/dev/input", "input devices to watch (timestamps only)")
	f.StringVar(&utmpPath, "utmp", sensor.DefaultUtmp, "utmp file: sessions and terminal activity")
	f.StringVar(&guestURL, "guest-url", "", "this agent's --listen address as the guest reaches it, e.g. http://10.0.0.5:9101 (given to the guest for the SPANK plugin's job reports)")
	f.StringVar(&pressureGroup, "pressure-cgroup", "", "cgroup v2 group whose pressure is the desktop's (e.g. /sys/fs/cgroup/user.slice); default system-wide /proc/pressure")
	f.DurationVar(&refresh, "refresh", 60*time.Second, "re-fetch the configuration at least this often")
	f.DurationVar(&seatRecheck, "seat-recheck", 30*time.Second, "ask the university directory of the seat's logins (overtime-agent seat-config) this often and keep the greeter's notice in step with the answer; 0: never")
	f.DurationVar(&heartbeat, "heartbeat", 30*time.Second, "heartbeat interval")
	f.DurationVar(&checkEvery, "check", 30*time.Second, "guest status check interval (crashes are also reported by events)")
	f.DurationVar(&backoff, "restart-backoff", 5*time.Second, "first delay before a crashed guest is restarted (doubles to 5 min)")
	f.BoolVar(&logJSON, "log-json", false, "structured JSON logs (journald keeps them as they are)")
	f.BoolVar(&debug, "debug", false, "log every sensor signal")
	f.StringVar(&calibrateMode, "calibrate", "auto", "auto: measure this host's interference profile (about 2 minutes, guest frozen) when it is due — cluster mode, nobody logged in for 10 min, no job, no current profile; off: never (tests, labs)")
	return c
}

// BootedFrom reads the mode Overtime booted (overtime.mode=) and whether it was an exam's
// boot (overtime.exam=1) from a kernel command line file; "" when it names none.
func BootedFrom(cmdline string) (mode string, exam bool) {
	b, err := os.ReadFile(cmdline)
	if err != nil {
		return "", false
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "overtime.mode="); ok && model.ValidName("mode", v) == nil {
			mode = v
		}
		if f == "overtime.exam=1" {
			exam = true
		}
	}
	return mode, exam
}

// TokenFile is the host credential the agent reads when --token-file is not given, in the
// documented order (docs/node-agent.md "Host credential"): the systemd credential
// agent.token in credDir ($CREDENTIALS_DIRECTORY: the TPM-sealed blob, decrypted by
// systemd) when it is there and not empty, else paths.AgentToken, which the initramfs
// copies from a LABEL=OVERTIME-ID partition on PCs without a TPM, and where the shipped
// unit's agent-credential decrypts a TPM-sealed token. The credential directory serves
// sites whose own unit passes the token with LoadCredential=.
func TokenFile(credDir string) string {
	if credDir != "" {
		p := filepath.Join(credDir, "agent.token")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			return p
		}
	}
	return paths.AgentToken
}
