// Package slurmlab runs a real Slurm cluster whose nodes are Overtime compute guests, for
// the Slurm integration tests, the benchmark and the demo: in one network namespace a
// bridge (the pool's LAN), munged and slurmctld (configless, dynamic nodes, the Overtime
// job_submit.lua), the site manager's API, dnsmasq for the guests' DHCP, one real
// `overtime-agent run` per desktop with the container backend, and the real sync daemon
// (scheduler-plugin/sync). Each guest is a container running munged and `slurmd -Z`
// with the Overtime SPANK plugin; owner activity is injected through a real terminal
// session in utmp (agentlab.Session).
//
// The lab's site manager serves TLS only, as a site's does: its certificate comes from a
// CA made for the lab, the agents' credentials pin that CA, the sync daemon and the power
// saving programs are given it (--ca-file), and the guests' munge key is no part of their
// image but handed to each agent as the guest's secret (overtime serve --munge-key) over
// that channel. Options.Capture records the lab's network to prove nothing secret
// crosses it in clear (internal/testenv/wirecap).
package slurmlab

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/agentlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/syncbuf"
	"github.com/overtime-hpc/overtime/internal/testenv/wirecap"
	"github.com/overtime-hpc/overtime/node-agent/agent"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Network of the lab: the bridge holds the controller, the API and every agent's address.
const (
	Bridge     = "br0"
	ServerIP   = "10.31.0.1" // slurmctld, site manager API, dnsmasq
	CtldPort   = 6817
	APIPort    = 8080
	Partition  = "pool"
	AgentPort  = 9101
	guestCPUs  = 2
	guestMemMB = 256
)

// Host is one desktop of the lab.
type Host struct {
	Name    string
	MAC     string // the desktop's MAC (the agent's --mac)
	IP      string // the agent's own address on the bridge (its --listen and --guest-url)
	GuestIP string // the guest's DHCP address
	Cluster bool   // the host's schedule puts it in cluster mode all day
	// LocalDisk: the schedule gives the host to its local disk all day, so it runs no
	// guest (and Start does not wait for its node) until power saving wakes it.
	LocalDisk bool
	Session   *agentlab.Session
	Agent     *Proc
	Token     string // the host's credential token
	tokenDir  string
}

// PowerActs is what the host's agent asked of the PC's power (its --power-command, one
// line per call: "reboot", "poweroff"); a lab PC stays on.
func (h *Host) PowerActs() string {
	b, _ := os.ReadFile(filepath.Join(h.tokenDir, "power-acts"))
	return string(b)
}

// Logout ends the host's terminal session (its utmp record goes): nobody is logged in.
func (h *Host) Logout() error {
	return os.WriteFile(filepath.Join(h.tokenDir, "utmp"), nil, 0o644)
}

// Options choose the hosts and the pool policy.
type Options struct {
	Hosts  []Host // Name, MAC, Cluster; addresses are assigned
	Policy string // YAML mapping of model.Policy for the pool
	// SlurmConf is appended to slurm.conf.
	SlurmConf string
	// PowerSave turns Slurm's power saving on with `overtime slurm resume|suspend` as
	// ResumeProgram/SuspendProgram (wrappers that log to PowerLog) and this SuspendTime.
	PowerSave time.Duration
	// Now is the site manager's fixed clock (testenv.Options.Now; zero: testenv's
	// default, a Wednesday in 2026). Tests of reservations give the real time, so that
	// the windows the site manager computes and the daemon's own clock agree.
	Now time.Time
	// SyncArgs are added to the sync daemon's command line (e.g. --warn-lead).
	SyncArgs []string
	// Users are the university's users the controller and submit host know (users.go).
	Users []User
	// Setup runs once the lab's network is up, before anything else starts in it (an NFS
	// server the guests mount at start, say).
	Setup func(*Lab)
	// GuestYAML is added to the modes' guest definitions, e.g. jobUsers and storage
	// ("jobUsers: {...}, storage: [...]").
	GuestYAML string
	// MPI puts Open MPI's runtime and PMIx into the guest image (image_mpi.go): jobs
	// compiled with mpicc run with `srun --mpi=pmix`.
	MPI bool
	// Capture records every packet in the lab's namespace (tcpdump on all of its
	// interfaces) from before munged and the first agent start; Lab.Capture.Stop ends it.
	Capture bool
}

// Lab is a running cluster.
type Lab struct {
	T        testing.TB
	Dir      string
	NS       *netns.NS
	Env      *testenv.Env
	Bin      string // overtime
	AgentBin string // overtime-agent
	Sync     *Proc  // overtime-slurm-sync
	Ctld     *Proc
	Hosts    []*Host
	API      string // http://10.31.0.1:8080
	Conf     string // slurm.conf
	Policy   string
	// GuestYAML: Options.GuestYAML; PutSite writes it.
	GuestYAML string
	// PowerLog collects the output of the power saving programs (Options.PowerSave).
	PowerLog string
	// CAFile is the lab's site CA: what the API's certificate chains to and the agents'
	// credentials pin.
	CAFile string
	// MungeKey is the cluster's munge key (controller and guests).
	MungeKey []byte
	// Capture is the recording of the lab's network (Options.Capture; nil else).
	Capture  *wirecap.Capture
	munge    string // munge socket
	extra    string // Options.SlurmConf
	password string // file with the site admin's password (sync daemon, power saving)
}

// Proc is a process of the lab with its output.
type Proc struct {
	Cmd  *exec.Cmd
	Out  *syncbuf.Buffer
	done chan struct{}
}

// Stop kills the process and waits.
func (p *Proc) Stop() {
	if p == nil {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Exited reports whether the process ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

var (
	buildOnce sync.Once
	buildErr  error
)

// BuildC builds scheduler-plugin (the SPANK plugin and the sync daemon) once per process.
func BuildC(t testing.TB) (spankSO, syncBin, jobSubmit string) {
	t.Helper()
	needs.Servers(t, "a C compiler and the Slurm headers (Debian packages)")
	root := testenv.RepoRoot(t)
	buildOnce.Do(func() {
		out, err := exec.Command("make", "-s", "-C", filepath.Join(root, "scheduler-plugin")).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("make -C scheduler-plugin: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(root, "scheduler-plugin/spank/spank_overtime.so"),
		filepath.Join(root, "scheduler-plugin/sync/overtime-slurm-sync"),
		filepath.Join(root, "scheduler-plugin/spank/job_submit.lua")
}

// Start brings the lab up with every guest registered in Slurm and the sync daemon
// running.
func Start(t testing.TB, opt Options) *Lab {
	t.Helper()
	needs.Servers(t, "root (network namespaces)", "slurmctld", "munge", "dnsmasq", "slapd")
	spankSO, syncBin, jobSubmit := BuildC(t)
	l := &Lab{T: t, Dir: t.TempDir(), Bin: bootlab.Binary(t), AgentBin: bootlab.AgentBinary(t), Policy: opt.Policy, GuestYAML: opt.GuestYAML, extra: opt.SlurmConf}
	ns, err := netns.New("otslurm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	l.NS = ns
	l.installUsers(opt.Users)
	if err := ns.AddBridge(Bridge, ServerIP+"/24"); err != nil {
		t.Fatal(err)
	}
	for i := range opt.Hosts {
		h := opt.Hosts[i]
		h.IP = fmt.Sprintf("10.31.0.%d", 2+i)
		h.GuestIP = fmt.Sprintf("10.31.0.%d", 101+i)
		if err := ns.IP("addr", "add", h.IP+"/24", "dev", Bridge); err != nil {
			t.Fatal(err)
		}
		l.Hosts = append(l.Hosts, &h)
	}
	if opt.Capture {
		l.Capture = wirecap.Start(t, ns.Command, "any", filepath.Join(l.Dir, "lab.pcap"))
	}
	if opt.Setup != nil {
		opt.Setup(l)
	}

	// Munge: one key for the controller and the guests. The guests get it from their
	// agent, which fetched it from the site manager over TLS (GET
	// /api/v1/agent/guest-secrets, as `overtime serve --munge-key` hands it out); their
	// image holds none.
	key := make([]byte, 1024)
	rand.Read(key)
	l.MungeKey = key
	mungeDir := filepath.Join(l.Dir, "munge")
	os.MkdirAll(mungeDir, 0o755) // munged wants its socket directory searchable by all
	os.WriteFile(filepath.Join(mungeDir, "munge.key"), key, 0o600)
	l.munge = filepath.Join(mungeDir, "munge.socket.2")
	munged := l.start("munged", ns.Command("munged", "--foreground", "--force", "-S", l.munge,
		"--key-file="+filepath.Join(mungeDir, "munge.key"), "--pid-file="+filepath.Join(mungeDir, "munged.pid"),
		"--log-file="+filepath.Join(mungeDir, "munged.log"), "--seed-file="+filepath.Join(mungeDir, "munged.seed")))
	l.waitFor("munged socket", 20*time.Second, func() bool { _, err := os.Stat(l.munge); return err == nil }, munged)

	// The site manager, reachable from the namespace over TLS only.
	l.Env = testenv.New(t, testenv.Options{Now: opt.Now, TLS: true, TLSIPs: []net.IP{net.ParseIP(ServerIP)},
		API: api.Options{MungeKeyFile: filepath.Join(mungeDir, "munge.key")}})
	l.CAFile = l.Env.CAFile
	ln, err := ns.Listen("tcp", fmt.Sprintf("%s:%d", ServerIP, APIPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: l.Env.API, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(tls.NewListener(ln, l.Env.TLSConfig))
	t.Cleanup(func() { srv.Close() })
	l.API = fmt.Sprintf("https://%s:%d", ServerIP, APIPort)

	// The guest image, published like any image version.
	imgDir := filepath.Join(l.Dir, "images", "compute", "v1")
	os.MkdirAll(imgDir, 0o755)
	img, err := buildGuestImage(filepath.Join(l.Dir, "imgbuild"), spankSO, opt.MPI, map[string]string{
		"MUNGE_SOCKET": l.munge, "CONF_SERVER": fmt.Sprintf("%s:%d", ServerIP, CtldPort),
		"GUEST_CPUS": fmt.Sprint(guestCPUs), "GUEST_MEMORY_MB": fmt.Sprint(guestMemMB),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(img, filepath.Join(imgDir, "root.squashfs")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(l.Dir, "imgbuild"))
	l.PutSite()
	l.password = filepath.Join(l.Dir, "admin.password")
	os.WriteFile(l.password, []byte(testenv.AdminPassword+"\n"), 0o600)
	if opt.PowerSave > 0 {
		l.extra += l.powerSaveConf(opt.PowerSave)
	}

	// DHCP for the guests.
	var dhcpHosts []string
	for _, h := range l.Hosts {
		gm, err := agent.GuestMAC(h.MAC)
		if err != nil {
			t.Fatal(err)
		}
		dhcpHosts = append(dhcpHosts, "--dhcp-host="+gm+","+h.GuestIP+","+h.Name)
	}
	l.start("dnsmasq", ns.Command("dnsmasq", append([]string{"--keep-in-foreground", "--no-daemon", "--conf-file=/dev/null",
		"--port=0", "--interface=" + Bridge, "--bind-interfaces", "--except-interface=lo",
		"--dhcp-range=10.31.0.100,10.31.0.200,255.255.255.0,1h", "--dhcp-leasefile=" + filepath.Join(l.Dir, "leases"),
		"--pid-file=" + filepath.Join(l.Dir, "dnsmasq.pid"), "--log-dhcp"}, dhcpHosts...)...))

	// slurmctld.
	l.writeSlurmConf(jobSubmit, spankSO)
	l.Ctld = l.start("slurmctld", l.slurmCmd("slurmctld", "-D", "-i", "-f", l.Conf))
	l.waitFor("slurmctld", 60*time.Second, func() bool {
		return l.Slurm("scontrol", "ping") != "" && strings.Contains(l.Slurm("scontrol", "ping"), "is UP")
	}, l.Ctld)

	// One agent per desktop. A guest outlives its agent by design (limits in the cgroup,
	// adoption after a restart), so the lab stops the guests itself: before (a run that
	// was killed) and after.
	for _, h := range l.Hosts {
		killGuest(h.Name)
		t.Cleanup(func() { killGuest(h.Name) })
		l.startAgent(h)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("--- guest %s console:\n%s", h.Name, tail(l.GuestLog(h), 4000))
			}
		})
	}
	for _, h := range l.Hosts {
		h := h
		if h.LocalDisk {
			continue
		}
		l.waitFor("node "+h.Name+" registered", 60*time.Second, func() bool {
			return strings.Contains(l.Slurm("scontrol", "-o", "show", "node", h.Name), "NodeName="+h.Name)
		}, h.Agent)
	}

	// The sync daemon.
	l.Sync = l.start("overtime-slurm-sync", l.slurmCmd(syncBin, append([]string{"--server", l.API, "--ca-file", l.CAFile, "--user", "admin",
		"--password-file", l.password, "--wait", "25", "--resync", "10"}, opt.SyncArgs...)...))
	return l
}

// powerSaveConf writes ResumeProgram and SuspendProgram wrappers (slurmctld passes only
// the hostlist, so server and credentials are in the wrapper, as in production) and
// returns the slurm.conf lines that enable power saving.
func (l *Lab) powerSaveConf(suspendTime time.Duration) string {
	l.PowerLog = filepath.Join(l.Dir, "power.log")
	etc := filepath.Join(l.Dir, "etc")
	os.MkdirAll(etc, 0o755)
	var conf strings.Builder
	for _, verb := range []string{"resume", "suspend"} {
		wrapper := filepath.Join(etc, "overtime-"+verb)
		script := fmt.Sprintf("#!/bin/sh\n# Slurm %sProgram: Overtime power saving (docs/slurm.md).\nexport SLURM_CONF=%s\necho \"$(date -u +%%FT%%TZ) %s $*\" >>%s\nexec %s --server %s --ca-file %s --user admin --password-file %s slurm %s \"$@\" >>%s 2>&1\n",
			strings.ToUpper(verb[:1])+verb[1:], filepath.Join(etc, "slurm.conf"), verb, l.PowerLog, l.Bin, l.API, l.CAFile, l.password, verb, l.PowerLog)
		os.WriteFile(wrapper, []byte(script), 0o755)
		fmt.Fprintf(&conf, "%sProgram=%s\n", strings.ToUpper(verb[:1])+verb[1:], wrapper)
	}
	fmt.Fprintf(&conf, "SuspendTime=%d\nSuspendTimeout=10\nResumeTimeout=120\n", int(suspendTime.Seconds()))
	// Without PrivateData=cloud a powered-down CLOUD node vanishes from scontrol and sinfo,
	// even for root: a test reading pc3 after SuspendTimeout would find no node at all
	// (slurm.conf(5); docs/slurm.md recommends it to administrators for the same reason).
	conf.WriteString("PrivateData=cloud\n")
	return conf.String()
}

// slurmCmd is a command in the namespace with the lab's slurm.conf.
func (l *Lab) slurmCmd(name string, args ...string) *exec.Cmd {
	c := l.NS.Command(name, args...)
	c.Env = append(os.Environ(), "SLURM_CONF="+l.Conf)
	return c
}

// Slurm runs a Slurm client command (scontrol, sbatch, squeue, ...) and returns its
// output ("" on failure).
func (l *Lab) Slurm(name string, args ...string) string {
	out, err := l.SlurmErr(name, args...)
	if err != nil {
		return ""
	}
	return out
}

// SlurmErr is Slurm with the error (which carries the output).
func (l *Lab) SlurmErr(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := l.NS.CommandContext(ctx, name, args...)
	c.Env = append(os.Environ(), "SLURM_CONF="+l.Conf)
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (l *Lab) start(name string, c *exec.Cmd) *Proc {
	l.T.Helper()
	return startProc(l.T, name, c)
}

// startProc starts c, stops it when the test ends, and logs its output if the test failed.
func startProc(t testing.TB, name string, c *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: c, Out: &syncbuf.Buffer{}, done: make(chan struct{})}
	c.Stdout, c.Stderr = p.Out, p.Out
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { c.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- %s output:\n%s", name, tail(p.Out.String(), 6000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// waitFor polls cond until deadline; p (optional) exiting early fails at once.
func (l *Lab) waitFor(what string, d time.Duration, cond func() bool, p *Proc) {
	l.T.Helper()
	waitFor(l.T, what, d, cond, p)
}

func waitFor(t testing.TB, what string, d time.Duration, cond func() bool, p *Proc) {
	t.Helper()
	exited := func() bool { return p != nil && p.Exited() }
	var held bool
	poll.WaitEvery(d, 100*time.Millisecond, func() bool {
		held = cond()
		return held || exited()
	})
	switch {
	case held:
	case exited():
		t.Fatalf("waiting for %s: process exited:\n%s", what, tail(p.Out.String(), 4000))
	default:
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// PutSite applies the lab's site (pool policy l.Policy).
func (l *Lab) PutSite() {
	l.T.Helper()
	sum, size := agentlab.SHA256File(l.T, filepath.Join(l.Dir, "images/compute/v1/root.squashfs"))
	policy := l.Policy
	if policy == "" {
		policy = "{}"
	}
	var hosts strings.Builder
	for _, h := range l.Hosts {
		fmt.Fprintf(&hosts, "  - name: %s\n    mac: %q\n    pool: lab\n", h.Name, h.MAC)
		switch {
		case h.Cluster:
			hosts.WriteString("    weekly:\n      - daily 00:00-24:00 cluster\n")
		case h.LocalDisk:
			hosts.WriteString("    weekly:\n      - daily 00:00-24:00 local\n")
		}
	}
	guestExtra := ""
	if l.GuestYAML != "" {
		guestExtra = ", " + l.GuestYAML
	}
	doc := fmt.Sprintf(`name: slurmlab
timezone: Europe/Berlin
defaultMode: desktop
bootServers:
  - {name: bs1, ip: %[1]s, httpURL: "http://%[1]s:8080", dhcp: full, subnet: 10.31.0.0/24}
images:
  - name: compute
    kind: compute
    versions:
      - {version: v1, sha256: %[2]s, size: %[3]d, path: compute/v1, created: "2026-11-20T09:00:00Z"}
  - name: desk
    kind: desktop
    versions:
      - {version: v1, sha256: %[2]s, size: %[3]d, path: desk/v1, created: "2026-11-20T09:00:00Z"}
modes:
  - name: desktop
    kind: desktop
    image: desk
    guest: {image: compute, backend: container, vcpus: %[6]d, memoryMB: %[7]d, network: bridged, bridge: %[4]s, kernelArgs: /init%[9]s}
  - name: cluster
    kind: cluster
    image: desk
    guest: {image: compute, backend: container, vcpus: %[6]d, memoryMB: %[7]d, network: bridged, bridge: %[4]s, kernelArgs: /init%[9]s}
  - name: local
    kind: local-disk
  - name: maint
    kind: maintenance
    image: desk
pools:
  - name: lab
    bootServer: bs1
    policy: %[5]s
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
%[8]s`, ServerIP, sum, size, Bridge, policy, guestCPUs, guestMemMB, hosts.String(), guestExtra)
	var s model.Site
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		l.T.Fatalf("site: %v\n%s", err, doc)
	}
	if err := l.Env.Admin().Send(http.MethodPut, "/api/v1/site", nil, &s, nil); err != nil {
		l.T.Fatalf("apply site: %v", err)
	}
}

func (l *Lab) writeSlurmConf(jobSubmit, spankSO string) {
	l.Conf = writeSlurmConf(l.T, l.Dir, ServerIP, "socket="+l.munge, l.extra, jobSubmit, slurmPluginDir+":"+filepath.Dir(spankSO), "required")
}

// writeSlurmConf writes dir/etc/slurm.conf (and what configless hands the nodes with it)
// for a controller at ip and returns its path. authInfo is slurm.conf's AuthInfo ("" for
// munge's default socket); pluginDir is PluginDir (every directory must exist on every
// node); plugstack is "required" or "optional" for the Overtime SPANK plugin.
func writeSlurmConf(t testing.TB, dir, ip, authInfo, extra, jobSubmit, pluginDir, plugstack string) string {
	etc := filepath.Join(dir, "etc")
	os.MkdirAll(etc, 0o755)
	state := filepath.Join(dir, "ctld-state")
	os.MkdirAll(state, 0o700)
	confPath := filepath.Join(etc, "slurm.conf")
	if authInfo != "" {
		authInfo = "AuthInfo=" + authInfo + "\n"
	}
	conf := fmt.Sprintf(`# Overtime Slurm lab (internal/testenv/slurmlab): configless, dynamic nodes.
ClusterName=overtime-lab
SlurmctldHost=%[9]s(%[1]s)
MailProg=/bin/true
SlurmctldPort=%[2]d
SlurmdPort=6818
SlurmctldParameters=enable_configless,cloud_reg_addrs
AuthType=auth/munge
%[3]sCredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[4]s
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmctldLogFile=%[5]s/slurmctld.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
PluginDir=%[7]s
MaxNodeCount=32
TreeWidth=65533
ReturnToService=1
SlurmdTimeout=300
MessageTimeout=5
JobRequeue=1
KillWait=5
JobSubmitPlugins=lua
# Slurm refuses a constraint naming a feature no node has now; this never-used node
# declares the features Overtime sets at run time (docs/slurm.md).
NodeName=overtime-features State=FUTURE CPUs=1 Features=dedicated,desktop,desk-empty,owner-active
Nodeset=overtime Feature=overtime
PartitionName=%[6]s Nodes=overtime Default=YES MaxTime=INFINITE State=UP
`, ip, CtldPort, authInfo, state, etc, Partition, pluginDir, "", shortHostname())
	os.WriteFile(confPath, []byte(conf+extra), 0o644)
	// The controller and the submit host need the plugin for --desktop; the guests get
	// plugstack.conf with the configless configuration and read the agent's address
	// from the file their init wrote.
	// slurmd 22.05 loads a cgroup plugin even with proctrack/linuxproc and task/none;
	// the container guest has no cgroup filesystem of its own (docs/slurm.md), so the v1
	// plugin is named outright instead of autodetected from /sys/fs/cgroup.
	os.WriteFile(filepath.Join(etc, "cgroup.conf"), []byte("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"), 0o644)
	// A relative plugin path is searched in PluginDir: Debian's directory (the guests
	// have the plugin there) and then the build directory (this machine, the submit host).
	os.WriteFile(filepath.Join(etc, "plugstack.conf"), []byte(plugstack+" spank_overtime.so agent=file:/run/overtime/agent-url tasks=idle\n"), 0o644)
	b, err := os.ReadFile(jobSubmit)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(etc, "job_submit.lua"), b, 0o644)
	return confPath
}

func (l *Lab) startAgent(h *Host) {
	l.T.Helper()
	cred, err := l.Env.Admin().CreateHostCredential(context.Background(), h.Name)
	if err != nil {
		l.T.Fatal(err)
	}
	h.tokenDir = filepath.Join(l.Dir, "agent-"+h.Name)
	os.MkdirAll(filepath.Join(h.tokenDir, "input"), 0o755)
	// The credential file as `overtime host credential --out` writes it: the token and
	// the pin of the lab's CA, so the agent talks TLS to that CA's server only.
	if cred.CAPin == "" {
		l.T.Fatal("the lab's host credential pins no CA")
	}
	h.Token = cred.Token
	token := filepath.Join(h.tokenDir, "token")
	os.WriteFile(token, []byte(client.Credential{Token: cred.Token, CAPin: cred.CAPin}.File()), 0o600)
	utmp := filepath.Join(h.tokenDir, "utmp")
	h.Session = agentlab.NewSession(l.T, utmp)
	listen := fmt.Sprintf("%s:%d", h.IP, AgentPort)
	// The PC's power, as the agent would switch it: recorded, never this machine's.
	power := filepath.Join(h.tokenDir, "power")
	os.WriteFile(power, []byte("#!/bin/sh\necho \"$1\" >> "+filepath.Join(h.tokenDir, "power-acts")+"\n"), 0o755)
	h.Agent = l.start("agent "+h.Name, l.NS.NetCommand(l.AgentBin, "run", "--server", l.API, "--token-file", token,
		"--mac", h.MAC, "--state-dir", filepath.Join(h.tokenDir, "state"), "--image-root", filepath.Join(l.Dir, "images"),
		"--listen", listen, "--guest-url", "http://"+listen, "--utmp", utmp, "--input-dir", filepath.Join(h.tokenDir, "input"),
		"--refresh", "5s", "--heartbeat", "5s", "--check", "2s", "--restart-backoff", "1s", "--power-command", power,
		// A calibration would freeze the guest and load the shared cores for minutes.
		"--calibrate", "off"))
}

// Host finds a lab host by name.
func (l *Lab) Host(name string) *Host {
	for _, h := range l.Hosts {
		if h.Name == name {
			return h
		}
	}
	l.T.Fatalf("no host %s", name)
	return nil
}

// Node returns scontrol's one-line record of a node as key=value pairs.
func (l *Lab) Node(name string) map[string]string {
	return parseKV(l.Slurm("scontrol", "-o", "show", "node", name))
}

// Job returns scontrol's one-line record of a job.
func (l *Lab) Job(id string) map[string]string {
	return parseKV(l.Slurm("scontrol", "-o", "show", "job", id))
}

// parseKV splits scontrol -o output. Values may contain spaces (Reason=...), so a key
// starts only at a word that looks like Key=.
func parseKV(s string) map[string]string {
	out := map[string]string{}
	s = strings.TrimSpace(s)
	var key string
	for _, w := range strings.Split(s, " ") {
		if k, v, ok := strings.Cut(w, "="); ok && k != "" && isKey(k) {
			key = k
			out[key] = v
			continue
		}
		if key != "" {
			out[key] += " " + w
		}
	}
	return out
}

func isKey(k string) bool {
	for _, r := range k {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == ':' || r == '_' || r == '/') {
			return false
		}
	}
	return k[0] >= 'A' && k[0] <= 'Z'
}

// GuestLog is the console of a host's guest.
func (l *Lab) GuestLog(h *Host) string {
	dir := filepath.Join(h.tokenDir, "state", "guest", "overtime-"+h.Name)
	prev, _ := os.ReadFile(dir + ".console.prev")
	b, _ := os.ReadFile(filepath.Join(dir, "console.log"))
	return string(prev) + string(b)
}

// GuestFile reads a file inside a host's running container guest (through /proc/PID/root
// of one of its processes): what a job wrote there.
func (l *Lab) GuestFile(h *Host, path string) ([]byte, error) {
	hi, err := cgroup.Detect()
	if err != nil {
		return nil, err
	}
	pids, err := hi.Group("overtime/guest-overtime-" + h.Name).AllProcs()
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("guest of %s runs no process", h.Name)
	}
	return os.ReadFile(fmt.Sprintf("/proc/%d/root/%s", pids[0], strings.TrimPrefix(path, "/")))
}

// shortHostname: slurmctld runs only where the host name matches SlurmctldHost.
func shortHostname() string {
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(h, ".")
	return h
}

// killGuest kills every process of a host's container guest and removes its cgroup (the
// agent's default parent, overtime/guest-overtime-NAME).
func killGuest(host string) {
	h, err := cgroup.Detect()
	if err != nil {
		return
	}
	g := h.Group("overtime/guest-overtime-" + host)
	if !g.Exists() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = g.Kill(ctx)
	_ = g.Remove()
}
