package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/extdir"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/sitemgmt/trustproxy"
	"github.com/overtime-hpc/overtime/vocab/capin"
)

type ldapFlags struct {
	url, baseDN, bindDN, passwordFile string
}

func (l *ldapFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&l.url, "ldap-url", envOr("OVERTIME_LDAP_URL", "ldap://127.0.0.1:389"),
		"directory URL, or several separated by spaces or commas (multi-provider replicas, tried in order; $OVERTIME_LDAP_URL)")
	f.StringVar(&l.baseDN, "base-dn", envOr("OVERTIME_LDAP_BASE", "dc=example,dc=org"), "directory base DN ($OVERTIME_LDAP_BASE)")
	f.StringVar(&l.bindDN, "bind-dn", envOr("OVERTIME_LDAP_BIND_DN", "cn=admin,dc=example,dc=org"), "service account DN ($OVERTIME_LDAP_BIND_DN)")
	f.StringVar(&l.passwordFile, "bind-password-file", os.Getenv("OVERTIME_LDAP_PASSWORD_FILE"), "file with the service account password (else $OVERTIME_LDAP_PASSWORD)")
}

func (l *ldapFlags) open() (*ldapstore.Store, error) {
	pw, err := readSecret(l.passwordFile, "OVERTIME_LDAP_PASSWORD", "bind password")
	if err != nil {
		return nil, err
	}
	return ldapstore.Open(ldapstore.Config{URL: l.url, BaseDN: l.baseDN, BindDN: l.bindDN, BindPassword: pw})
}

func newServeCmd() *cobra.Command {
	var (
		l                   ldapFlags
		listen, bootServer  string
		bootListen          string
		reload, menu        time.Duration
		watch               bool
		now                 string
		tlsCert, tlsKey     string
		imagesDir, filesDir string
		mungeKey            string
		desktopSecrets      string
		syslinuxDir         string
		identityConfig      string
		maxUpload           string
		uploadsPerUser      int
		stagedPerUser       string
		stagingTTL          time.Duration
		trustedProxy        string
		insecureHTTP        bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the REST API and the per-request boot script server",
		Long: `Serves the JSON API under /api/v1 (OpenAPI: docs/api/openapi.yaml), iPXE scripts at
/boot/ipxe/{mac}, PXELINUX configs at /pxelinux.cfg/01-{mac}, and rendered configs at
/api/v1/render/{dnsmasq,dnsmasq-hosts,slurm,ganesha,exports}. The site is held in memory,
kept current by following the directory's changes as they happen (an RFC 4533 persistent
search; --watch) and re-read whole every --reload as a safety net; writes go through the API.

On a boot server it also serves the boot files over HTTP: kernels and initrds of published
images from --images-dir (/images/...), kernels of modes that bring their own from
--files-dir (/files/...), and the syslinux modules lpxelinux loads (--syslinux-dir,
Debian: /usr/lib/syslinux/modules/bios). See docs/boot.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			store, err := l.open()
			if err != nil {
				return err
			}
			defer store.Close()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			svc, err := service.New(ctx, store, log)
			if err != nil {
				return err
			}
			if identityConfig != "" {
				if err := useExternalDirectory(ctx, svc, identityConfig, log); err != nil {
					return err
				}
			}
			// Heartbeats and job reports from the directory: what this server knew before
			// a restart, and what other replicas know.
			if err := svc.LoadState(ctx); err != nil {
				return fmt.Errorf("loading runtime state: %w", err)
			}
			// The state writer outlives ctx until the HTTP server has stopped, so that
			// what the last requests brought is written too.
			stateCtx, stopState := context.WithCancel(context.Background())
			defer stopState()
			stateDone := make(chan struct{})
			go func() {
				defer close(stateDone)
				svc.SyncState(stateCtx, 5*time.Second)
			}()
			opt := api.Options{BootServer: bootServer, MenuTimeout: menu, Log: log,
				ImagesDir: imagesDir, FilesDir: filesDir, SyslinuxDir: syslinuxDir, MungeKeyFile: mungeKey, UploadsPerUser: uploadsPerUser,
				StagingTTL: stagingTTL, DesktopSecrets: desktopSecrets, InsecureHTTP: insecureHTTP}
			if (tlsCert == "") != (tlsKey == "") {
				return cmdline.Usagef("--tls-cert and --tls-key go together")
			}
			if tlsCert != "" {
				// The CA at the end of the chain is what PCs pin (vocab/capin): every host
				// credential issued here carries it.
				chain, err := os.ReadFile(tlsCert)
				if err != nil {
					return fmt.Errorf("--tls-cert: %w", err)
				}
				if opt.CAPin, err = capin.FromChainPEM(chain); err != nil {
					return fmt.Errorf("--tls-cert %s: %w", tlsCert, err)
				}
				if opt.CAPin != "" {
					log.Info("TLS: host credentials issued here pin the site's CA", "caPin", opt.CAPin)
				} else {
					log.Warn("--tls-cert does not end with a CA certificate: host credentials issued here pin no CA, and agents check this server against the system's roots", "file", tlsCert)
				}
			}
			if desktopSecrets != "" {
				// A wrong path fails the start, not the first PC's login screen.
				if fi, err := os.Stat(desktopSecrets); err != nil || !fi.IsDir() {
					return fmt.Errorf("--desktop-secrets %s: not a readable directory (%v)", desktopSecrets, err)
				}
			}
			if mungeKey != "" {
				// Read once now so that a wrong path fails the start, not the first guest.
				if b, err := os.ReadFile(mungeKey); err != nil || len(b) == 0 {
					return fmt.Errorf("--munge-key %s: unreadable or empty (%v)", mungeKey, err)
				}
			}
			if opt.MaxUpload, err = parseSize(maxUpload); err != nil {
				return cmdline.Usagef("--max-upload: %v", err)
			}
			if opt.StagedPerUser, err = parseSize(stagedPerUser); err != nil {
				return cmdline.Usagef("--staged-per-user: %v", err)
			}
			if stagingTTL <= 0 {
				return cmdline.Usagef("--staging-ttl: %v is not a positive duration", stagingTTL)
			}
			if opt.TrustedProxies, err = trustproxy.Parse(trustedProxy); err != nil {
				return cmdline.Usagef("--trusted-proxy: %v", err)
			}
			for _, d := range []struct{ flag, dir string }{{"--images-dir", imagesDir}, {"--files-dir", filesDir}, {"--syslinux-dir", syslinuxDir}} {
				if d.dir == "" {
					continue
				}
				if fi, err := os.Stat(d.dir); err != nil || !fi.IsDir() {
					return fmt.Errorf("%s %s: not a directory", d.flag, d.dir)
				}
			}
			if now != "" {
				t, err := time.Parse(time.RFC3339, now)
				if err != nil {
					return fmt.Errorf("--now: %w", err)
				}
				// A fixed clock that still advances, so that a demo or a test can put the
				// site at any instant of the week.
				offset := time.Until(t)
				opt.Now = func() time.Time { return time.Now().Add(offset) }
			}
			if watch {
				// Every replica learns of a write (its own, another's, an ldapmodify)
				// from the directory's change feed; batches of changes up to 50 ms apart
				// become one new snapshot.
				go svc.FollowSite(ctx, 50*time.Millisecond)
			}
			go svc.ReloadEvery(ctx, reload)
			if bootListen != "" && tlsCert == "" {
				return cmdline.Usagef("--boot-listen is the plain-HTTP listener beside an HTTPS API: give --tls-cert too (without TLS, --listen serves the boot files already)")
			}
			handler := api.New(svc, opt)
			srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			log.Info("serving", "addr", ln.Addr().String(), "tls", tlsCert != "", "site", svc.Snapshot().Site.Name, "hosts", len(svc.Snapshot().Site.Hosts))
			errc := make(chan error, 2)
			go func() {
				if tlsCert != "" {
					errc <- srv.ServeTLS(ln, tlsCert, tlsKey)
				} else {
					errc <- srv.Serve(ln)
				}
			}()
			servers := []*http.Server{srv}
			if bootListen != "" {
				// Firmware cannot do TLS: boot scripts, kernels, initrds and images on
				// plain HTTP, nothing else (api.BootFiles).
				apiURL := ""
				if b := svc.Snapshot().Site.BootServer(bootServer); b != nil {
					apiURL = b.APIURL
				}
				bsrv := &http.Server{Handler: api.BootFiles(handler, apiURL), ReadHeaderTimeout: 10 * time.Second}
				bln, err := net.Listen("tcp", bootListen)
				if err != nil {
					return err
				}
				log.Info("serving boot files on plain HTTP", "addr", bln.Addr().String())
				servers = append(servers, bsrv)
				go func() { errc <- bsrv.Serve(bln) }()
			}
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				for _, s := range servers {
					if serr := s.Shutdown(sctx); err == nil {
						err = serr
					}
				}
				stopState()
				<-stateDone // the last heartbeats and reports are written
				return err
			}
		},
	}
	l.register(cmd)
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&bootListen, "boot-listen", "", "with --tls-cert: also serve the boot files (boot scripts, kernels, initrds, images, files) and nothing else on plain HTTP at this address, for PC firmware; the boot server's httpURL names it, its apiURL the HTTPS API")
	f.StringVar(&bootServer, "boot-server", "", "boot server this instance answers for (unknown MACs)")
	f.DurationVar(&reload, "reload", 15*time.Minute, "re-read the whole site from the directory this often, a safety net behind --watch (0: never)")
	f.BoolVar(&watch, "watch", true, "follow the directory's changes as they happen (RFC 4533 persistent search; needs the syncprov overlay)")
	f.DurationVar(&menu, "menu-timeout", 5*time.Second, "boot menu timeout before the scheduled mode boots")
	f.StringVar(&now, "now", "", "pretend the current time is this RFC 3339 instant (demos, tests)")
	f.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this certificate chain: the server's certificate, any intermediates, and the site's CA last (node agents pin that CA: docs/node-agent.md \"The channel\")")
	f.StringVar(&tlsKey, "tls-key", "", "key for --tls-cert")
	f.BoolVar(&insecureHTTP, "insecure-http", false, "labs only: hand node agents the cluster's munge key and desktop login secrets over plain HTTP (without it they go over TLS only: --tls-cert, or a trusted proxy's https)")
	f.StringVar(&mungeKey, "munge-key", "", "the cluster's munge key, handed to node agents for their compute guests (never baked into images)")
	f.StringVar(&desktopSecrets, "desktop-secrets", "", "directory of the desktops' login secrets: bind-password, keytabs/HOST.keytab (docs/desktop.md); each PC gets its own with its login configuration")
	f.StringVar(&imagesDir, "images-dir", "", "serve published images' kernels and initrds from this tree (the NFS export root)")
	f.StringVar(&filesDir, "files-dir", "", "serve kernels and initrds that modes name themselves from this directory")
	f.StringVar(&identityConfig, "identity-config", "", "also authenticate users against the university's directory described in this YAML file (docs/identity.md)")
	f.StringVar(&maxUpload, "max-upload", "64GiB", "largest image file an upload may bring (PUT /api/v1/images/…/files/…; e.g. 512MiB, 64GiB, 10G)")
	f.IntVar(&uploadsPerUser, "uploads-per-user", api.DefaultUploadsPerUser, "uploads one user may have in flight at once")
	f.StringVar(&stagedPerUser, "staged-per-user", "128GiB", "bytes one user may keep in uploads not yet published or discarded")
	f.DurationVar(&stagingTTL, "staging-ttl", imagestore.DefaultStagingTTL, "a staged upload nobody touched for this long is removed at the next upload")
	f.StringVar(&trustedProxy, "trusted-proxy", os.Getenv("OVERTIME_TRUSTED_PROXY"),
		"reverse proxies (CIDR[,CIDR...]) whose X-Forwarded-For and X-Forwarded-Proto are believed: the client address failed logins are throttled by, and Secure session cookies behind a proxy that terminates TLS ($OVERTIME_TRUSTED_PROXY; default: nobody)")
	f.StringVar(&syslinuxDir, "syslinux-dir", "", "serve lpxelinux's modules from this directory (e.g. /usr/lib/syslinux/modules/bios)")
	return cmd
}

func newLDAPCmd() *cobra.Command {
	ldapCmd := &cobra.Command{Use: "ldap", Short: "Directory administration"}
	var (
		l                     ldapFlags
		site, tz, admin, apwf string
	)
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Bootstrap an empty directory: check the schema, create base entries and the first site admin",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pw, err := readSecret(apwf, "OVERTIME_ADMIN_PASSWORD", "admin password")
			if err != nil {
				return err
			}
			store, err := l.open()
			if err != nil {
				return err
			}
			defer store.Close()
			err = store.Init(context.Background(), ldapstore.InitOptions{SiteName: site, Timezone: tz, AdminUID: admin, AdminPassword: pw})
			if err != nil {
				return err
			}
			fmt.Printf("directory %s initialised: site %s (%s), site admin %s\n", l.baseDN, site, tz, admin)
			return nil
		},
	}
	l.register(initCmd)
	f := initCmd.Flags()
	f.StringVar(&site, "site", "example", "site name")
	f.StringVar(&tz, "timezone", "Europe/Berlin", "site time zone (IANA)")
	f.StringVar(&admin, "admin", "admin", "uid of the first site admin")
	f.StringVar(&apwf, "admin-password-file", "", "file with the first admin's password (else $OVERTIME_ADMIN_PASSWORD)")
	ldapCmd.AddCommand(initCmd)
	return ldapCmd
}

// useExternalDirectory configures the external directory from its file. A configuration
// that does not hold stops the server (a typo must not silently lock the university's
// users out); a directory that cannot be reached now does not (local users and boot
// service go on; /healthz says degraded and its users get 503 until it answers).
func useExternalDirectory(ctx context.Context, svc *service.Service, path string, log *slog.Logger) error {
	cfg, err := extdir.LoadConfig(path)
	if err != nil {
		return err
	}
	d, err := extdir.New(cfg)
	if err != nil {
		return fmt.Errorf("--identity-config %s: %w", path, err)
	}
	if d.Plaintext() {
		log.Warn("external directory without TLS (tls mode plain): passwords cross the network readable", "urls", d.URLs())
	}
	svc.Accounts.SetExternal(d)
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err = d.Check(cctx)
	svc.Accounts.NoteExternal(err)
	if err != nil {
		log.Error("external directory unavailable at start; its users get 503 until it answers", "err", err)
	} else {
		log.Info("external directory answers", "urls", d.URLs())
	}
	return nil
}

// parseSize reads a byte count: a number with an optional unit (k, M, G, T with or without
// "i" and "B": binary multiples either way, as disk images are measured).
func parseSize(v string) (int64, error) {
	t := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		up := strings.ToUpper(t)
		for _, s := range []string{u.suffix + "IB", u.suffix + "B", u.suffix} {
			if strings.HasSuffix(up, s) {
				t, mult = strings.TrimSpace(t[:len(t)-len(s)]), u.mult
				goto num
			}
		}
	}
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "b")
num:
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q: a positive number with an optional unit (KiB, MiB, GiB, TiB)", v)
	}
	return n * mult, nil
}
