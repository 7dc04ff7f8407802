package test

// The compute guest's VM form as an HPC user meets it (issue 29, "QEMU guests: the same
// users and mounts"): the real compute-guest image, run by a real `overtime-agent run`
// with the QEMU backend (a private libvirtd on the lab's bridge), boots its own kernel
// and Overtime's initramfs from its read-only disk under a tmpfs overlay
// (overtime.root=disk:), reads its host name, size, the agent's URL, its storage and the
// munge key (fetched by the agent over TLS) from the configuration disk, mounts the
// cluster's NFS storage with its own kernel and joins the real slurmctld as the PC's
// node. A university user's job runs there as that user and writes their home on the
// file server; another user's private file stays closed to it. Storage that does not
// answer keeps the guest from starting slurmd, and the agent says why.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/agentlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/libvirtenv"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/internal/testenv/syncbuf"
)

// The PC whose agent runs the VM guest: the agent's address on the lab's bridge.
const (
	vmHost      = "vpc1"
	vmHostMAC   = "52:54:00:0e:00:01"
	vmHostIP    = "10.20.0.31"
	vmAgentPort = 9101
)

// vmGuestSite is the lab's site: vpc1 in cluster mode all day, its guest the compute
// image under QEMU on the bridge, guest-init as its init (arguments after the kernel's
// "--") with the controller for configless Slurm, and storage.
func vmGuestSite(l *bootlab.Lab, compute *imagetest.Image, storage string) string {
	_, sum, size := compute.Root()
	return fmt.Sprintf(`name: lab
timezone: Europe/Berlin
defaultMode: cluster
bootServers:
  - {name: bs1, ip: %[1]s, httpURL: %[2]s, apiURL: %[3]s, nfsRoot: %[4]s, dhcp: full, interface: %[5]s,
     subnet: 10.20.0.0/24, rangeFrom: 10.20.0.200, rangeTo: 10.20.0.250}
images:
  - name: compute
    kind: compute
    versions:
      - {version: v1, sha256: %[6]s, size: %[7]d, path: compute/v1, created: "2026-11-20T09:00:00Z"}
  # The PC's own image: this PC is the test machine, which boots nothing of the lab's.
  - name: desk
    kind: desktop
    versions:
      - {version: v1, sha256: %[6]s, size: %[7]d, path: desk/v1, created: "2026-11-20T09:00:00Z"}
modes:
  - name: cluster
    kind: cluster
    image: desk
    guest: {image: compute, backend: qemu, vcpus: 1, memoryMB: 768, network: bridged, bridge: %[5]s,
      kernelArgs: "init=/usr/lib/overtime/guest-init -- --conf-server %[1]s:6817",
      storage: [%[8]s]}
pools:
  - {name: lab, bootServer: bs1, policy: {desktopLoad: 100, freezePressure: 100}}
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
  - {name: %[9]s, mac: "%[10]s", pool: lab}
`, bootlab.ServerIP, bootlab.HTTPURL, bootlab.APIURL, l.Images, bootlab.Bridge, sum, size, storage, vmHost, vmHostMAC)
}

func TestComputeGuestVMRunsSlurmJob(t *testing.T) {
	compute := imagetest.Get(t, "compute-guest")
	u1 := slurmlab.User{Name: "u1234567", UID: 1234567, GID: 1234567}
	u2 := slurmlab.User{Name: "u7654321", UID: 7654321, GID: 7654321}
	mungeKey := slurmlab.NewMungeKey(t, t.TempDir())
	// The site manager over TLS only; the munge key is the guests' secret.
	l := bootlab.Start(t, bootlab.Options{TLS: true, ServeArgs: []string{"--munge-key", mungeKey}})
	hpc := startClusterStorage(t, l, u1, u2)
	private := filepath.Join(hpc.dir, u2.Name, "private.txt")
	if err := os.WriteFile(private, []byte("u7654321's own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(private, int(u2.UID), int(u2.GID))
	l.CopyImage(compute.Dir, "compute/v1")
	home := fmt.Sprintf("{server: %s, export: /export/hpc, path: /home}", clusterStorageIP)
	l.Apply(vmGuestSite(l, compute, home))
	l.StartBootServer() // DHCP for the guest
	ctl := slurmlab.StartController(t, l.NS, bootlab.ServerIP, mungeKey, u1, u2)
	lv := libvirtenv.Start(t, l.NS)

	// The PC's agent, on the bridge at its own address, with its credential (pinning the
	// lab's CA) and the image tree as its NFS mount of the boot server would show it.
	if err := l.NS.IP("addr", "add", vmHostIP+"/24", "dev", bootlab.Bridge); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	l.MustRun("host", "credential", vmHost, "--out", tokFile)
	utmp := filepath.Join(dir, "utmp")
	agentlab.NewSession(t, utmp)
	os.MkdirAll(filepath.Join(dir, "input"), 0o755)
	stateDir := filepath.Join(dir, "state")
	listen := fmt.Sprintf("%s:%d", vmHostIP, vmAgentPort)
	power := filepath.Join(dir, "power")
	os.WriteFile(power, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	ag := l.NS.NetCommand(bootlab.AgentBinary(t), "run", "--server", bootlab.APIURL, "--token-file", tokFile,
		"--mac", vmHostMAC, "--state-dir", stateDir, "--image-root", l.Images, "--libvirt-uri", lv.URI,
		"--listen", listen, "--guest-url", "http://"+listen, "--utmp", utmp, "--input-dir", filepath.Join(dir, "input"),
		"--refresh", "2s", "--heartbeat", "2s", "--check", "2s", "--restart-backoff", "2s", "--power-command", power,
		"--calibrate", "off")
	agentLog := &syncbuf.Buffer{}
	ag.Stdout, ag.Stderr = agentLog, agentLog
	ag.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ag.Process.Kill(); ag.Wait() })

	console := filepath.Join(stateDir, "guest", "overtime-"+vmHost, "console.log")
	read := func() string { c, _ := os.ReadFile(console); return string(c) }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- guest console (end):\n%s", tail(read(), 6000))
			t.Logf("--- agent log (end):\n%s", tail(agentLog.String(), 4000))
			t.Logf("--- slurmctld log (end):\n%s", tail(ctl.Log(), 3000))
		}
	})

	// The guest registers as vpc1 and is idle: booted from its disk under the overlay,
	// configured from its configuration disk, the cluster's storage mounted.
	bootlab.Eventually(t, "node "+vmHost+" idle in Slurm", 6*time.Minute, func() bool {
		return strings.Contains(ctl.Slurm("sinfo", "-h", "-N", "-n", vmHost, "-o", "%T"), "idle")
	})
	c := read()
	for _, want := range []string{
		"overtime: image disk:/dev/vda:", // the initramfs took the image from its disk
		"overtime: root: overlay",        // under a tmpfs overlay
		"guest-init: configuration from /dev/vdb",
		"guest-init: cluster storage " + clusterStorageIP + ":/export/hpc at /home",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("the guest's console lacks %q", want)
		}
	}
	if !regexp.MustCompile(`guest-init: vpc1: 1 CPUs, \d+ MB, controller 10\.20\.0\.1:6817, agent http://10\.20\.0\.31:9101`).MatchString(c) {
		t.Errorf("guest-init did not start slurmd as vpc1 with the agent's settings")
	}

	// runJob submits script as u1234567 to vpc1 with its output in their home on the file
	// server and returns that output once the job has left the queue.
	runJob := func(t *testing.T, output, script string, args ...string) string {
		t.Helper()
		out, err := ctl.SlurmAs(u1, "sbatch", append([]string{"--parsable", "-w", vmHost, "--chdir=/home/u1234567",
			"--output=/home/u1234567/" + output}, append(args, script)...)...)
		if err != nil {
			t.Fatal(err)
		}
		// The job id is the last line: the submit host lacks the (optional) SPANK plugin,
		// and sbatch says so first.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		id := strings.TrimSpace(lines[len(lines)-1])
		bootlab.Eventually(t, "job "+id+" ended", 4*time.Minute, func() bool {
			return strings.TrimSpace(ctl.Slurm("squeue", "-h", "-j", id, "-o", "%T")) == ""
		})
		b, err := os.ReadFile(filepath.Join(hpc.dir, u1.Name, output))
		if err != nil {
			t.Fatalf("job %s: its output is not on the file server: %v", id, err)
		}
		return string(b)
	}

	t.Run("a job runs as its user and writes its home", func(t *testing.T) {
		script := filepath.Join(ctl.Dir, "job.sh")
		os.WriteFile(script, []byte(`#!/bin/sh
echo "uid=$(id -u) gid=$(id -g) user=$(id -un) home=$(grep '^u1234567:' /etc/passwd | cut -d: -f6)"
echo "written in a VM guest" > /home/u1234567/from-the-vm.txt
if cat /home/u7654321/private.txt 2>/dev/null; then echo "LEAK: read u7654321's private file"; else echo "other user's file: denied"; fi
`), 0o755)
		got := runJob(t, "job.out", script)
		t.Logf("the job's output:\n%s", got)
		for _, want := range []string{"uid=1234567 gid=1234567 user=u1234567 home=/home/u1234567\n", "other user's file: denied\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("job output lacks %q", want)
			}
		}
		if strings.Contains(got, "LEAK") {
			t.Error("the job read another user's private file")
		}
		// Nothing of Slurm's or Overtime's own in the user's output (the SPANK plugin's
		// AdminComment update once logged an error there).
		if strings.Contains(got, "error") {
			t.Error("an error in the job's output")
		}
		// On the server, what the job wrote is the user's.
		for _, f := range []string{"from-the-vm.txt", "job.out"} {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(hpc.dir, u1.Name, f), &st); err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if st.Uid != u1.UID || st.Gid != u1.GID {
				t.Errorf("%s is %d:%d on the file server, want 1234567:1234567", f, st.Uid, st.Gid)
			}
		}
	})

	t.Run("MPI within the guest", func(t *testing.T) {
		// The ring of TestSlurmMPI, built here with Debian's mpicc, two ranks in the one
		// guest (its one vCPU overcommitted) over shared memory with CMA, started by
		// srun --mpi=pmix: the image's own libpmix2 and Open MPI runtime.
		if _, err := exec.LookPath("mpicc"); err != nil {
			t.Fatalf("mpicc: %v (scripts/deps.sh installs openmpi-bin and libopenmpi-dev)", err)
		}
		src, bin := filepath.Join(t.TempDir(), "ring.c"), filepath.Join(hpc.dir, u1.Name, "ring")
		os.WriteFile(src, []byte(mpiRing), 0o644)
		if out, err := exec.Command("mpicc", "-O2", "-Wall", "-o", bin, src).CombinedOutput(); err != nil {
			t.Fatalf("mpicc: %v\n%s", err, out)
		}
		os.Chown(bin, int(u1.UID), int(u1.GID))
		script := filepath.Join(ctl.Dir, "mpi.sh")
		os.WriteFile(script, []byte("#!/bin/sh\nexport "+strings.Join(mpiEnv, " ")+"\nexec srun --mpi=pmix -n2 -O /home/u1234567/ring\n"), 0o755)
		got := runJob(t, "mpi.out", script, "-n2", "-O")
		t.Logf("the MPI job's output:\n%s", got)
		if !strings.Contains(got, "ring ok 2 ranks on 1 nodes, 2-2 per node") || !strings.Contains(got, "rank 0 of 2 on vpc1,") {
			t.Errorf("MPI ring in the VM guest: want \"ring ok 2 ranks on 1 nodes, 2-2 per node\", rank 0 on vpc1 (the guest's host name)")
		}
	})

	t.Run("storage that does not answer", func(t *testing.T) {
		// The site now names a file server nobody answers for: the agent starts the guest
		// again with it, guest-init's mount fails, the guest powers off before slurmd,
		// and the agent reports why from the guest's console.
		l.Apply(vmGuestSite(l, compute, "{server: 10.20.0.199, export: /export/home, path: /home}"))
		want := "guest stopped: cluster storage 10.20.0.199:/export/home at /home: mount failed"
		bootlab.Eventually(t, "the agent's status naming the mount", 4*time.Minute, func() bool {
			out, _ := l.Run("agent", "status", vmHost)
			return strings.Contains(out, want)
		})
		out, _ := l.Run("agent", "status", vmHost)
		t.Logf("agent status:\n%s", out)
	})
}
