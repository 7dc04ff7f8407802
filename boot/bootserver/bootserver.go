// Package bootserver runs one Overtime boot server: dnsmasq (DHCP or proxy-DHCP, and TFTP
// for the first small loader) and the read-only NFS exports of the published images, both
// configured from what the site manager renders for this boot server.
//
// The site manager is the only source of configuration; this process only fetches,
// checks, installs and reloads:
//
//   - every Refresh it fetches the rendered dnsmasq configuration, the dhcp-hostsfile and
//     the NFS exports (GET /api/v1/render/...), with a read-only account;
//   - a changed hosts file is replaced atomically and dnsmasq gets SIGHUP: new, moved or
//     removed PCs take effect at once, without a restart and without dropping leases;
//   - a changed main configuration is checked with `dnsmasq --test` first and only then
//     installed, and dnsmasq is restarted (its lease file survives the restart);
//   - changed exports are installed and nfs-ganesha restarted, or /etc/exports.d
//     rewritten and `exportfs -ra` run for the kernel NFS server;
//   - the installed files are the last good configuration: when the site manager cannot
//     be reached (or sends something dnsmasq rejects), the boot server keeps serving
//     them, also across its own restart, and says so in its log once per outage.
//
// Boot scripts, kernels and initrds are not handled here: `overtime serve` renders the
// scripts per request and serves the files over HTTP (docs/boot.md).
package bootserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/boot/storm"
	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/internal/paths"
	"github.com/overtime-hpc/overtime/internal/tools"
	"github.com/overtime-hpc/overtime/sitemgmt/wol"
	"github.com/overtime-hpc/overtime/vocab/client"
)

// NFS server kinds.
const (
	NFSGanesha = "ganesha" // nfs-ganesha run by this process (VFS FSAL)
	NFSKernel  = "kernel"  // the kernel NFS server: /etc/exports.d + exportfs -ra
	NFSNone    = "none"    // images are exported by someone else
)

// DefaultLoaders are the first-stage loaders the TFTP root must hold, from Debian's
// pxelinux and ipxe packages.
var DefaultLoaders = map[string]string{
	"lpxelinux.0":   "/usr/lib/PXELINUX/lpxelinux.0",
	"ldlinux.c32":   "/usr/lib/syslinux/modules/bios/ldlinux.c32",
	"undionly.kpxe": "/usr/lib/ipxe/undionly.kpxe",
	"ipxe.efi":      "/usr/lib/ipxe/ipxe.efi",
}

// Config configures Run.
type Config struct {
	Client *client.Client // the site manager's API, with a read-only (viewer) account
	Name   string         // this boot server's name in the site

	StateDir string            // dnsmasq.conf, dnsmasq.hosts, leases, NFS config: the last good configuration
	TFTPRoot string            // receives the loaders
	Loaders  map[string]string // TFTP name -> source file; nil: DefaultLoaders
	Refresh  time.Duration     // how often to ask the site manager; default 5 s

	Dnsmasq string // path of dnsmasq; default "dnsmasq" in PATH or /usr/sbin

	NFS         string // NFSGanesha, NFSKernel or NFSNone
	ExportRoot  string // the published image tree; default /srv/overtime/images
	Ganesha     string // path of ganesha.nfsd
	Rpcbind     string // path of rpcbind (started for NFSv3 when none answers on port 111)
	ExportsFile string // kernel NFS: default /etc/exports.d/overtime.exports
	Exportfs    string // kernel NFS: default exportfs
	Clients     string // kernel NFS: who may mount (exports(5) client spec); default "*"

	// SyncImages: pull the image versions this boot server's hosts need from the site
	// manager's store into ExportRoot, verify and report them (images.go). ImageStats,
	// when set, counts what the syncs did.
	SyncImages bool
	ImageStats *ImageStats

	// Wake: send the Wake-on-LAN packets the site manager asks for (wakes.go); needs
	// the boot server's own account to report them sent. Dial makes the UDP socket
	// (default net.Dialer; tests dial inside a network namespace).
	Wake  bool
	Dial  wol.Dialer
	wakes *wakeState

	// StormTuning: what a room of PCs switched on at once needs (boot/storm): the kernel
	// limits of storm.Sysctls (dnsmasq's socket receive buffer, the ARP table) raised
	// before dnsmasq starts, the open-file limit dnsmasq inherits, dnsmasq's scheduling
	// priority and a larger pipe for its log. Host-wide settings, so off in tests;
	// `overtime bootserver run` sets it.
	StormTuning bool

	// Command makes the command of a daemon; default exec.Command. Tests put the
	// daemons into a network namespace with it.
	Command func(name string, args ...string) *exec.Cmd

	Log *slog.Logger
}

func (c *Config) defaults() error {
	if c.Client == nil || c.Name == "" || c.StateDir == "" || c.TFTPRoot == "" {
		return errors.New("bootserver: need the site manager client, the boot server name, a state directory and a TFTP root")
	}
	if c.Loaders == nil {
		c.Loaders = DefaultLoaders
	}
	if c.Command == nil {
		c.Command = exec.Command
	}
	if c.Refresh <= 0 {
		c.Refresh = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.ExportRoot == "" {
		c.ExportRoot = paths.ImageExport
	}
	if c.Clients == "" {
		c.Clients = "*"
	}
	if c.ExportsFile == "" {
		c.ExportsFile = paths.KernelNFSExports
	}
	switch c.NFS {
	case NFSGanesha, NFSKernel, NFSNone:
	case "":
		c.NFS = NFSNone
	default:
		return fmt.Errorf("bootserver: --nfs must be %s, %s or %s, not %q", NFSGanesha, NFSKernel, NFSNone, c.NFS)
	}
	var err error
	if c.Dnsmasq, err = findTool(c.Dnsmasq, "dnsmasq", "dnsmasq-base"); err != nil {
		return err
	}
	switch c.NFS {
	case NFSGanesha:
		if c.Ganesha, err = findTool(c.Ganesha, "ganesha.nfsd", "nfs-ganesha nfs-ganesha-vfs"); err != nil {
			return err
		}
		if c.Rpcbind, err = findTool(c.Rpcbind, "rpcbind", "rpcbind"); err != nil {
			return err
		}
	case NFSKernel:
		if c.Exportfs, err = findTool(c.Exportfs, "exportfs", "nfs-kernel-server"); err != nil {
			return err
		}
	}
	for _, d := range []string{c.StateDir, c.TFTPRoot} {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("bootserver: %s is not an absolute path", d)
		}
	}
	return nil
}

// findTool resolves a program: the configured path, else PATH, else the sbin directories
// a service's PATH may lack. The error names the Debian package to install.
func findTool(configured, name, pkg string) (string, error) {
	if configured != "" {
		if _, err := os.Stat(configured); err != nil {
			return "", fmt.Errorf("bootserver: %s: %w", configured, err)
		}
		return configured, nil
	}
	if p := tools.Find(name, "/usr/sbin", "/sbin"); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("bootserver: %s not found (Debian package: %s)", name, pkg)
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Paths of the installed configuration inside StateDir.
func (c *Config) path(name string) string { return filepath.Join(c.StateDir, name) }

const (
	fileDnsmasqConf  = "dnsmasq.conf"
	fileDnsmasqHosts = "dnsmasq.hosts"
	fileLeases       = "dnsmasq.leases"
	fileExports      = "exports.conf" // rendered EXPORT blocks (ganesha) or exports(5) lines (kernel)
	fileGaneshaConf  = "ganesha.conf"
)

// rendered is one fetch of everything this boot server needs.
type rendered struct {
	conf, hosts, exports []byte
}

func (c *Config) fetch() (*rendered, error) {
	q := url.Values{"server": {c.Name}, "hostsFile": {c.path(fileDnsmasqHosts)}, "tftpRoot": {c.TFTPRoot}}
	r := &rendered{}
	var err error
	if r.conf, err = c.Client.Get("/api/v1/render/dnsmasq", q, nil); err != nil {
		return nil, fmt.Errorf("dnsmasq configuration: %w", err)
	}
	if r.hosts, err = c.Client.Get("/api/v1/render/dnsmasq-hosts", q, nil); err != nil {
		return nil, fmt.Errorf("dnsmasq hosts: %w", err)
	}
	switch c.NFS {
	case NFSGanesha:
		r.exports, err = c.Client.Get("/api/v1/render/ganesha", url.Values{"server": {c.Name}, "exportRoot": {c.ExportRoot}}, nil)
	case NFSKernel:
		r.exports, err = c.Client.Get("/api/v1/render/exports", url.Values{"exportRoot": {c.ExportRoot}, "clients": {c.Clients}}, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("NFS exports: %w", err)
	}
	return r, nil
}

// writeAtomic replaces path with data (atomicfile: dnsmasq, ganesha or a crash never see
// half a file). Mode 0644: dnsmasq re-reads the hosts file after dropping root.
func writeAtomic(path string, data []byte) error {
	return atomicfile.WriteFile(path, data, 0o644)
}

// sameContent reports whether path holds exactly data.
func sameContent(path string, data []byte) bool {
	old, err := os.ReadFile(path)
	return err == nil && bytes.Equal(old, data)
}

// installLoaders copies the first-stage loaders into the TFTP root (only what changed).
func (c *Config) installLoaders() error {
	for name, src := range c.Loaders {
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("loader %s: %w (Debian packages pxelinux, syslinux-common, ipxe)", name, err)
		}
		dst := filepath.Join(c.TFTPRoot, name)
		if sameContent(dst, data) {
			continue
		}
		if err := writeAtomic(dst, data); err != nil {
			return fmt.Errorf("loader %s: %w", name, err)
		}
	}
	return nil
}

// checkDnsmasq runs `dnsmasq --test` on a candidate main configuration.
func (c *Config) checkDnsmasq(conf []byte) error {
	f, err := os.CreateTemp(c.StateDir, ".dnsmasq-check-*.conf")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(conf); err != nil {
		f.Close()
		return err
	}
	f.Close()
	out, err := exec.Command(c.Dnsmasq, "--test", "--conf-file="+f.Name()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dnsmasq rejects the rendered configuration: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// ganeshaMain is the core configuration around the rendered EXPORT blocks: NFSv3 (with
// rpcbind and mountd on 20048; the initramfs mounts v3, see boot/initramfs/README.md) and
// v4, no Kerberos, no locking
// (read-only images), graceless start so that a restart for a new image version does not
// stall clients for a grace period.
func (c *Config) ganeshaMain() []byte {
	return []byte(fmt.Sprintf(`# Generated by overtime bootserver run. Do not edit.
NFS_CORE_PARAM {
	Protocols = 3, 4;
	# A fixed mountd port, for firewalls (docs/boot.md).
	MNT_Port = 20048;
	Enable_NLM = false;
	Enable_RQUOTA = false;
}
# Exports are sec=sys: no Kerberos keytab to look for.
NFS_KRB5 {
	Active_krb5 = false;
}
NFSv4 {
	RecoveryBackend = fs;
	RecoveryRoot = "%s";
	Graceless = true;
}
%%include "%s"
`, c.path("ganesha-recovery"), c.path(fileExports)))
}

// portOpen says whether something answers on 127.0.0.1:port (rpcbind on 111).
func portOpen(port int) bool {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// logWriter turns a child's output into log lines.
type logWriter struct {
	log  *slog.Logger
	name string
	buf  []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Info(string(w.buf[:i]), "from", w.name)
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

var _ io.Writer = (*logWriter)(nil)

// raiseSysctls raises the kernel limits of boot/storm.Sysctls and says what it did. It
// runs before dnsmasq starts: a socket's receive buffer is net.core.rmem_default as it
// was when the socket was made. Failing is no reason not to serve: the boot server
// serves, and warns that large rooms will wait for DHCP retransmissions.
func (c *Config) raiseSysctls() {
	changes, err := storm.Raise(storm.Sysctls)
	var raised, kept []any
	for _, ch := range changes {
		switch {
		case ch.Err != nil:
		case ch.New != ch.Old:
			raised = append(raised, ch.Key, fmt.Sprintf("%d (was %d)", ch.New, ch.Old))
		default:
			kept = append(kept, ch.Key, ch.Old)
		}
	}
	if len(raised) > 0 {
		c.Log.Info("raised kernel limits for boot storms (a room of PCs switched on at once; boot/storm)", raised...)
	}
	if len(kept) > 0 {
		c.Log.Info("kernel limits for boot storms already high enough", kept...)
	}
	if err != nil {
		c.Log.Warn("cannot raise kernel limits for boot storms: run as root in the host's network namespace, or set them "+
			"yourself (docs/boot.md \"Boot storms\"); until then a room of hundreds of PCs switched on at once loses DHCP "+
			"packets at dnsmasq's socket and waits for the PCs' retransmissions (4, 8, 16 s)", "err", err)
	}
}

// raiseNoFile raises this process's open-file limit, which dnsmasq inherits, to at least
// storm.NoFile (dnsmasq lowers tftp-max to fit its limit). Setting it explicitly also
// keeps Go from giving children the soft limit the process started with.
func (c *Config) raiseNoFile() {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		c.Log.Warn("cannot read the open-file limit", "err", err)
		return
	}
	want := rl
	want.Cur = max(rl.Cur, storm.NoFile)
	want.Max = max(rl.Max, want.Cur)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		// Not root: as far as the hard limit goes.
		want = unix.Rlimit{Cur: max(rl.Cur, min(rl.Max, storm.NoFile)), Max: rl.Max}
		if err2 := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err2 != nil {
			c.Log.Warn("cannot raise the open-file limit for dnsmasq's TFTP transfers", "want", storm.NoFile, "err", err2)
			return
		}
		c.Log.Warn("open-file limit for dnsmasq raised only to the hard limit: dnsmasq may serve fewer concurrent TFTP transfers than tftp-max", "limit", want.Cur, "want", storm.NoFile, "err", err)
		return
	}
	c.Log.Info("open-file limit for dnsmasq's TFTP transfers", "limit", want.Cur)
}

// Run runs the boot server until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	c := &cfg
	for _, d := range []string{c.StateDir, c.TFTPRoot, c.path("ganesha-recovery")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.installLoaders(); err != nil {
		return err
	}
	if c.StormTuning {
		c.raiseSysctls()
		c.raiseNoFile()
	}
	b := &server{cfg: c}
	defer b.stopAll()
	if c.SyncImages {
		if err := os.MkdirAll(c.ExportRoot, 0o755); err != nil {
			return err
		}
		done := make(chan struct{})
		ictx, cancel := context.WithCancel(ctx)
		go func() {
			defer close(done)
			c.imageLoop(ictx, c.ImageStats)
		}()
		defer func() { cancel(); <-done }()
	}

	if c.Wake {
		done := make(chan struct{})
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			defer close(done)
			c.wakeLoop(wctx)
		}()
		defer func() { cancel(); <-done }()
	}

	// Last good configuration first: PCs boot even if the site manager is down now.
	if fileExists(c.path(fileDnsmasqConf)) && fileExists(c.path(fileDnsmasqHosts)) {
		c.Log.Info("starting with the last good configuration", "dir", c.StateDir)
		b.ensureRunning()
	}
	t := time.NewTicker(c.Refresh)
	defer t.Stop()
	for {
		b.refresh()
		b.ensureRunning()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-b.exited():
			// A child died: restart it (with backoff) at once, not at the next tick.
		}
	}
}
