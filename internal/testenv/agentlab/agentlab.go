// Package agentlab sets up what a node agent test or benchmark needs around the real
// `overtime-agent run`: the site manager (slapd + API, internal/testenv) with a desktop
// whose mode runs the test image as a guest, the host credential, the image export as
// the agent sees it, a private libvirtd for QEMU guests, and a logged-in terminal session
// through which owner activity is injected the way the kernel reports it (a key read by
// the session's shell from a real pseudo-terminal).
package agentlab

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/libvirtenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/syncbuf"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// MAC of the lab's desktop, pc1; its guest is GuestName.
const (
	MAC       = "52:54:00:0b:00:01"
	GuestName = "overtime-pc1"
)

// Options choose the guest backend and the pool's policy (YAML of model.Policy).
type Options struct {
	Backend    model.GuestBackend // qemu (default) or container
	Policy     string             // YAML mapping, e.g. "{idleAfter: 3s, hold: 2s}"
	GuestArgs  string             // guest kernelArgs (container: the init command line)
	ExtraFlags []string           // more `overtime-agent run` flags
}

// Lab is a running set-up.
type Lab struct {
	T       testing.TB
	Env     *testenv.Env
	Libvirt *libvirtenv.Env // nil for containers
	Bin     string          // overtime-agent
	Dir     string
	Session *Session
	Metrics string   // host:port of the agent's /metrics
	Args    []string // `overtime-agent run` flags
	opt     Options
	sum     string
	size    int64
}

// Start builds the lab; the agent is not started (StartAgent).
func Start(t testing.TB, opt Options) *Lab {
	t.Helper()
	needs.Servers(t, "root", "libvirtd and QEMU, or cgroups for containers", "the test image (Debian packages)")
	if opt.Backend == "" {
		opt.Backend = model.BackendQEMU
	}
	img := testimage.Get(t)
	l := &Lab{T: t, opt: opt, Dir: t.TempDir(), Bin: bootlab.AgentBinary(t)}
	l.sum, l.size = SHA256File(t, img.Path(testimage.Root))
	// The site manager serves TLS with the site's CA, and the agent's credential pins it:
	// the channel of a site (docs/node-agent.md "The channel").
	l.Env = testenv.New(t, testenv.Options{TLS: true})
	l.PutSite(opt.Policy)
	if opt.Backend == model.BackendQEMU {
		l.Libvirt = libvirtenv.Start(t, nil)
	}
	imageRoot := filepath.Join(l.Dir, "images")
	if err := os.MkdirAll(filepath.Join(imageRoot, "compute/v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{testimage.Kernel, testimage.Initrd, testimage.Root} {
		if err := os.Symlink(img.Path(f), filepath.Join(imageRoot, "compute/v1", f)); err != nil {
			t.Fatal(err)
		}
	}
	cred, err := l.Env.Admin().CreateHostCredential(context.Background(), "pc1")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(l.Dir, "agent.token")
	if cred.CAPin == "" {
		t.Fatal("the credential pins no CA")
	}
	if err := os.WriteFile(tokenFile, []byte(client.Credential{Token: cred.Token, CAPin: cred.CAPin}.File()), 0o600); err != nil {
		t.Fatal(err)
	}
	utmp := filepath.Join(l.Dir, "utmp")
	l.Session = NewSession(t, utmp)
	inputDir := filepath.Join(l.Dir, "input") // the host has no input devices
	os.MkdirAll(inputDir, 0o755)
	l.Metrics = FreePort(t)
	// The PC's power, as the agent would switch it: recorded, never this machine's.
	power := filepath.Join(l.Dir, "power")
	if err := os.WriteFile(power, []byte("#!/bin/sh\necho \"$1\" >> "+filepath.Join(l.Dir, "power-acts")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l.Args = []string{"--server", l.Env.HTTP.URL, "--token-file", tokenFile, "--mac", MAC,
		"--state-dir", filepath.Join(l.Dir, "state"), "--image-root", imageRoot,
		"--listen", l.Metrics, "--utmp", utmp, "--input-dir", inputDir, "--power-command", power,
		// A calibration would freeze the guest and load the shared cores for minutes.
		"--calibrate", "off"}
	if l.Libvirt != nil {
		l.Args = append(l.Args, "--libvirt-uri", l.Libvirt.URI)
	}
	l.Args = append(l.Args, opt.ExtraFlags...)
	return l
}

// StateDir is the agent's --state-dir.
func (l *Lab) StateDir() string { return filepath.Join(l.Dir, "state") }

// PutSite applies the lab's site with a pool policy (YAML mapping; "" = defaults).
func (l *Lab) PutSite(policy string) {
	l.T.Helper()
	if policy == "" {
		policy = "{}"
	}
	args := l.opt.GuestArgs
	if args == "" && l.opt.Backend == model.BackendQEMU {
		args = "panic=-1"
	}
	doc := fmt.Sprintf(`name: lab
timezone: Europe/Berlin
defaultMode: desktop
bootServers:
  - {name: bs1, ip: 10.30.0.1, httpURL: "http://10.30.0.1:8080", dhcp: full, subnet: 10.30.0.0/24}
images:
  - name: compute
    kind: compute
    versions:
      - {version: v1, sha256: %[1]s, size: %[2]d, path: compute/v1, created: "2026-11-20T09:00:00Z"}
  - name: desk
    kind: desktop
    versions:
      - {version: v1, sha256: %[1]s, size: %[2]d, path: desk/v1, created: "2026-11-20T09:00:00Z"}
modes:
  - name: desktop
    kind: desktop
    image: desk
    guest: {image: compute, backend: %[3]s, vcpus: 1, memoryMB: 256, network: none, kernelArgs: %[4]q}
pools:
  - name: lab
    bootServer: bs1
    policy: %[5]s
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
  - {name: pc1, mac: "%[6]s", pool: lab}
`, l.sum, l.size, l.opt.Backend, args, policy, MAC)
	var s model.Site
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		l.T.Fatal(err)
	}
	if err := l.Env.Admin().Send(http.MethodPut, "/api/v1/site", nil, &s, nil); err != nil {
		l.T.Fatalf("apply site: %v", err)
	}
}

// Session is a logged-in terminal session as the agent's utmp sensor sees it: a utmp
// USER_PROCESS record (remote, like ssh) for a real pseudo-terminal.
type Session struct {
	Master, Slave *os.File
	Line          string
}

// OpenPTY opens a pseudo-terminal pair, closed when the test ends; line is the slave's
// name below /dev ("pts/N"). A command given the slave as stdin sees a terminal.
func OpenPTY(t testing.TB) (master, slave *os.File, line string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	line = "pts/" + strconv.Itoa(n)
	s, err := os.OpenFile("/dev/"+line, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s, line
}

// NewSession opens a pseudo-terminal and writes its utmp record to utmp.
func NewSession(t testing.TB, utmp string) *Session {
	t.Helper()
	m, s, line := OpenPTY(t)
	// struct utmp (x86-64 glibc, 384 bytes): type, pid, line, id, user, host, ..., tv.
	rec := make([]byte, 384)
	binary.LittleEndian.PutUint16(rec[0:], 7) // USER_PROCESS
	binary.LittleEndian.PutUint32(rec[4:], uint32(os.Getpid()))
	copy(rec[8:40], line)
	copy(rec[40:44], strings.TrimPrefix(line, "pts/")) // ut_id: the terminal number
	copy(rec[44:76], "student")
	copy(rec[76:332], "10.30.0.99")
	binary.LittleEndian.PutUint32(rec[340:], uint32(time.Now().Unix()))
	if err := os.WriteFile(utmp, rec, 0o644); err != nil {
		t.Fatal(err)
	}
	return &Session{Master: m, Slave: s, Line: line}
}

// Key types one line: the terminal passes it to the slave, where the "shell" reads it.
// It returns the instant just before the key was written.
func (s *Session) Key() (time.Time, error) {
	at := time.Now()
	if _, err := s.Master.Write([]byte("x\n")); err != nil {
		return at, err
	}
	_, err := s.Slave.Read(make([]byte, 16))
	return at, err
}

// Agent is `overtime-agent run` as a separate process.
type Agent struct {
	Cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

// StartAgent runs the agent with the lab's flags; it is killed at cleanup.
func (l *Lab) StartAgent() *Agent {
	t := l.T
	t.Helper()
	a := &Agent{Cmd: exec.Command(l.Bin, append([]string{"run"}, l.Args...)...), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	a.Cmd.Stdout, a.Cmd.Stderr = a.out, a.out
	a.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.Cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		a.Kill()
		if t.Failed() {
			t.Logf("agent log:\n%s", a.Log())
		}
	})
	return a
}

// Kill sends SIGKILL and reaps.
func (a *Agent) Kill() {
	_ = a.Cmd.Process.Kill()
	<-a.done
}

// Log is the agent's output so far.
func (a *Agent) Log() string { return a.out.String() }

// Metric reads one sample of the agent's /metrics ("" when absent).
func (l *Lab) Metric(name string) string {
	resp, err := http.Get("http://" + l.Metrics + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

// FreePort is a free loopback TCP address.
func FreePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// CgroupFile is the path of a cgroup v1 controller file (this machine's layout).
func CgroupFile(ctrl, rel, file string) string {
	return filepath.Join("/sys/fs/cgroup", ctrl, rel, file)
}

// ReadCgroupInt reads an integer cgroup file; -2 when it cannot.
func ReadCgroupInt(ctrl, rel, file string) int64 {
	b, err := os.ReadFile(CgroupFile(ctrl, rel, file))
	if err != nil {
		return -2
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -2
	}
	return v
}

var emulatorRE = regexp.MustCompile(`(?m)^\d+:cpu:(/\S+)/emulator$`)

// QEMUCgroup is a QEMU domain's cgroup v1 cpu path (the parent of its emulator group).
func QEMUCgroup(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if m := emulatorRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// QEMUPID is the QEMU process of a domain (0 when none).
func QEMUPID(name string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "guest="+name+",") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// SHA256File is an image file's digest and size, as a published image version records them.
func SHA256File(t testing.TB, p string) (string, int64) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}
