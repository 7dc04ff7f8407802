package bootserver

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/boot/storm"
	"github.com/overtime-hpc/overtime/vocab/client"
)

// child is a daemon this process runs in the foreground (dnsmasq, ganesha.nfsd,
// rpcbind). It dies with the boot server (parent-death signal), and is restarted with
// a growing delay when it keeps dying.
type child struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	started time.Time
	backoff time.Duration // delay before the next start after a quick death
	next    time.Time     // no start before this instant
}

func (ch *child) running() bool {
	if ch.cmd == nil {
		return false
	}
	select {
	case <-ch.done:
		return false
	default:
		return true
	}
}

// server is the running state of Run.
type server struct {
	cfg                       *Config
	dnsmasq, ganesha, rpcbind child
	unreachable               bool     // the site manager is down: logged once per outage
	rejected                  [32]byte // hash of the last dnsmasq configuration dnsmasq rejected (logged once)
	exitc                     chan struct{}
	exportsApplied            bool // kernel NFS: exportfs -ra succeeded for the installed file
}

func (b *server) exited() <-chan struct{} {
	if b.exitc == nil {
		b.exitc = make(chan struct{}, 1)
	}
	return b.exitc
}

func (b *server) start(ch *child, name string, args ...string) {
	now := time.Now()
	if now.Before(ch.next) {
		return
	}
	log := b.cfg.Log
	cmd := b.cfg.Command(name, args...)
	w := &logWriter{log: log, name: ch.name}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	tune := ch == &b.dnsmasq && b.cfg.StormTuning
	var logr, logw *os.File
	if tune {
		// A larger pipe than Go's (64 KiB) for dnsmasq's log (storm.LogPipe).
		var err error
		if logr, logw, err = os.Pipe(); err != nil {
			log.Error("cannot start "+ch.name, "err", err)
			b.delay(ch)
			return
		}
		if _, err := unix.FcntlInt(logw.Fd(), unix.F_SETPIPE_SZ, storm.LogPipe); err != nil {
			log.Warn("cannot enlarge dnsmasq's log pipe", "bytes", storm.LogPipe, "err", err)
		}
		cmd.Stdout, cmd.Stderr = logw, logw
	}
	err := cmd.Start()
	if logw != nil {
		logw.Close()
		if err != nil {
			logr.Close()
		} else {
			go func() {
				_, _ = io.Copy(w, logr)
				logr.Close()
			}()
		}
	}
	if err != nil {
		log.Error("cannot start "+ch.name, "err", err)
		b.delay(ch)
		return
	}
	if tune {
		if err := unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, storm.DnsmasqNice); err != nil {
			log.Warn("cannot raise dnsmasq's scheduling priority (boot storms: its DHCP and TFTP answers wait behind HTTP)", "nice", storm.DnsmasqNice, "err", err)
		}
	}
	ch.cmd, ch.started, ch.done = cmd, now, make(chan struct{})
	b.exited()
	done, exitc := ch.done, b.exitc
	go func() {
		err := cmd.Wait()
		close(done)
		log.Warn(ch.name+" exited", "err", err)
		select {
		case exitc <- struct{}{}:
		default:
		}
	}()
	log.Info("started "+ch.name, "pid", cmd.Process.Pid)
}

// delay schedules the next start of a child that died: at once after a long run, else
// after 1 s, 2 s, 4 s ... up to a minute, so that a broken daemon does not spin.
func (b *server) delay(ch *child) {
	if !ch.started.IsZero() && time.Since(ch.started) > time.Minute {
		ch.backoff = 0
	}
	switch {
	case ch.backoff == 0:
		ch.backoff = time.Second
	case ch.backoff < time.Minute:
		ch.backoff *= 2
	}
	ch.next = time.Now().Add(ch.backoff)
}

func (b *server) stop(ch *child) {
	if !ch.running() {
		return
	}
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.done:
	case <-time.After(10 * time.Second):
		_ = ch.cmd.Process.Kill()
		<-ch.done
	}
	ch.cmd = nil
}

func (b *server) stopAll() {
	b.stop(&b.dnsmasq)
	b.stop(&b.ganesha)
	b.stop(&b.rpcbind)
}

// ensureRunning starts whatever should run and does not.
func (b *server) ensureRunning() {
	c := b.cfg
	for _, ch := range []*child{&b.dnsmasq, &b.ganesha, &b.rpcbind} {
		if ch.cmd != nil && !ch.running() {
			ch.cmd = nil
			b.delay(ch)
		}
	}
	b.dnsmasq.name, b.ganesha.name, b.rpcbind.name = "dnsmasq", "ganesha", "rpcbind"
	if !b.dnsmasq.running() && fileExists(c.path(fileDnsmasqConf)) && fileExists(c.path(fileDnsmasqHosts)) {
		b.start(&b.dnsmasq, c.Dnsmasq, "--keep-in-foreground", "--log-facility=-",
			"--conf-file="+c.path(fileDnsmasqConf),
			"--dhcp-leasefile="+c.path(fileLeases),
			"--pid-file="+c.path("dnsmasq.pid"))
	}
	if c.NFS != NFSGanesha || !fileExists(c.path(fileExports)) {
		return
	}
	// NFSv3 needs rpcbind; start one unless the machine already runs it.
	if !b.rpcbind.running() && !portOpen(111) {
		b.start(&b.rpcbind, c.Rpcbind, "-f", "-w")
		waitPort(111, 5*time.Second)
	}
	if !b.ganesha.running() {
		b.start(&b.ganesha, c.Ganesha, "-F", "-f", c.path(fileGaneshaConf), "-L", c.path("ganesha.log"),
			"-p", c.path("ganesha.pid"), "-N", "NIV_EVENT")
	}
}

// waitPort polls until something answers on 127.0.0.1:port or the deadline passes.
func waitPort(port int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if portOpen(port) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// refresh fetches the rendered configuration and installs what changed.
func (b *server) refresh() {
	c, log := b.cfg, b.cfg.Log
	r, err := c.fetch()
	if err != nil {
		if !b.unreachable {
			var ae *client.APIError
			if errors.As(err, &ae) {
				// It answered, but not with a configuration: a wrong account or a boot
				// server name the site does not have. Needs an administrator.
				log.Error("site manager refused to render this boot server's configuration: keeping the last good configuration", "status", ae.Status, "err", err)
			} else {
				log.Warn("site manager unreachable: keeping the last good configuration", "err", err)
			}
			b.unreachable = true
		}
		return
	}
	if b.unreachable {
		log.Info("site manager reachable again")
		b.unreachable = false
	}

	restart := false
	if !sameContent(c.path(fileDnsmasqConf), r.conf) {
		if err := c.checkDnsmasq(r.conf); err != nil {
			if h := sha256.Sum256(r.conf); h != b.rejected {
				log.Error("keeping the last good dnsmasq configuration", "err", err)
				b.rejected = h
			}
			return
		}
		restart = true
	}
	hostsChanged := !sameContent(c.path(fileDnsmasqHosts), r.hosts)
	// The hosts file first: a new main configuration must find its hosts in place.
	if hostsChanged {
		if err := writeAtomic(c.path(fileDnsmasqHosts), r.hosts); err != nil {
			log.Error("cannot install the dnsmasq hosts file", "err", err)
			return
		}
	}
	if restart {
		if err := writeAtomic(c.path(fileDnsmasqConf), r.conf); err != nil {
			log.Error("cannot install the dnsmasq configuration", "err", err)
			return
		}
		log.Info("dnsmasq configuration changed: restarting dnsmasq (leases are kept)")
		b.stop(&b.dnsmasq)
		b.dnsmasq.next = time.Time{}
	} else if hostsChanged && b.dnsmasq.running() {
		log.Info("hosts changed: dnsmasq re-reads its hosts file (SIGHUP)")
		_ = b.dnsmasq.cmd.Process.Signal(syscall.SIGHUP)
	}

	switch c.NFS {
	case NFSGanesha:
		if sameContent(c.path(fileExports), r.exports) && sameContent(c.path(fileGaneshaConf), c.ganeshaMain()) {
			return
		}
		if err := writeAtomic(c.path(fileExports), r.exports); err != nil {
			log.Error("cannot install the NFS exports", "err", err)
			return
		}
		if err := writeAtomic(c.path(fileGaneshaConf), c.ganeshaMain()); err != nil {
			log.Error("cannot install the ganesha configuration", "err", err)
			return
		}
		if b.ganesha.running() {
			// ganesha has no reload of its export list short of D-Bus; a restart is
			// quick, and clients of read-only images ride through it (hard mounts).
			log.Info("NFS exports changed: restarting ganesha")
			b.stop(&b.ganesha)
			b.ganesha.next = time.Time{}
		}
	case NFSKernel:
		if sameContent(c.ExportsFile, r.exports) && b.exportsApplied {
			return
		}
		b.exportsApplied = false
		if err := os.MkdirAll(filepath.Dir(c.ExportsFile), 0o755); err != nil {
			log.Error("cannot install the NFS exports", "err", err)
			return
		}
		if err := writeAtomic(c.ExportsFile, r.exports); err != nil {
			log.Error("cannot install the NFS exports", "file", c.ExportsFile, "err", err)
			return
		}
		if out, err := exec.Command(c.Exportfs, "-ra").CombinedOutput(); err != nil {
			log.Error("kernel NFS server: exportfs -ra failed", "err", fmt.Sprintf("%v: %s", err, out))
			return
		}
		b.exportsApplied = true
		log.Info("NFS exports changed: exportfs -ra done", "file", c.ExportsFile)
	}
}
