package test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/internal/testenv/cupstest"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// The seed system's whole chain with real images and real packages: the desktop image
// (Debian 12, systemd, LightDM and Xfce, the overtime-agent .deb of this checkout) PXE-boots in QEMU
// from its squashfs over NFS; the packaged agent service starts with the credential the
// initramfs took from the PC's OVERTIME-ID disk, fetches its configuration and the munge
// key, and starts the compute-guest image (Debian's slurmd and munge, the overtime-slurm
// .deb) as a container through crun; its slurmd registers with a real slurmctld as a
// dynamic node, and a job submitted with sbatch runs on it. Then a student uses the seat:
// the console and the graphical greeter, their home on the university's file server,
// the room's printer, and in a lecture's slot the course VM as their session.

// desktopNow is a Wednesday 10:30 in the site's zone.
const desktopNow = "2026-12-02T10:30:00+01:00"

// Generous: under TCG a Debian desktop with systemd boots in minutes, not seconds. The
// deadlines bound a hang; they measure nothing (docs/benchmarks/images.md does).
const desktopBootWithin = 12 * time.Minute

const guestInitArgs = "/usr/lib/overtime/guest-init --conf-server " + bootlab.ServerIP + ":6817"

// desktopSite is the lab's site: desk1 in pool lab boots defaultMode, cluster (the guest
// runs whatever the owner does) or harvest (the desktop whose guest takes the idle
// cycles: the owner's activity decides); its guest has guestVCPUs vCPUs.
func desktopSite(l *bootlab.Lab, desk, compute *imagetest.Image, defaultMode string, guestVCPUs int) string {
	_, dsum, dsize := desk.Root()
	_, csum, csize := compute.Root()
	return fmt.Sprintf(`name: lab
timezone: Europe/Berlin
defaultMode: %[11]s
unknownMode: local-disk
bootServers:
  - name: bs1
    ip: %[1]s
    httpURL: %[2]s
    # The API over HTTPS (the lab's CA, which desk1's credential pins); httpURL serves
    # the boot files alone, on plain HTTP for the firmware.
    apiURL: %[13]s
    nfsRoot: %[3]s
    dhcp: full
    interface: %[4]s
    subnet: 10.20.0.0/24
    rangeFrom: 10.20.0.200
    rangeTo: 10.20.0.250
images:
  - name: desktop
    kind: desktop
    versions:
      - {version: v1, sha256: %[5]s, size: %[6]d, path: desktop/v1, created: "2026-11-20T09:00:00Z"}
  - name: compute
    kind: compute
    versions:
      - {version: v1, sha256: %[7]s, size: %[8]d, path: compute/v1, created: "2026-11-20T09:00:00Z"}
  # The lecturer's VM: its versions come with overtime image import.
  - {name: demo-vm, kind: course-vm, pool: lab}
modes:
  - name: cluster
    kind: cluster
    image: desktop
    # The journal on the console: what the test reads when something fails.
    kernelArgs: "console=ttyS0 systemd.journald.forward_to_console=1"
    # The university's users run their jobs as themselves, with their homes from the
    # cluster's file server, mounted in the guest alone (docs/slurm.md "5a").
    guest: &guest {image: compute, backend: container, vcpus: %[10]d, memoryMB: 384, network: bridged, bridge: br0, kernelArgs: %[9]q,
      jobUsers: {uids: ["1000000-1999999"], gids: ["1000000-1999999"]},
      storage: [{server: %[12]s, export: /export/hpc, path: /home}]}
  - name: harvest
    kind: desktop
    image: desktop
    kernelArgs: "console=ttyS0 systemd.journald.forward_to_console=1"
    guest: *guest
  # A lecturer's slot: the desktop boots, and the greeter offers the course VM as the
  # session, from its read-only image.
  - name: lecture
    kind: course-vm
    image: desktop
    vm: demo-vm
    kernelArgs: "console=ttyS0 systemd.journald.forward_to_console=1"
  # An exam's: the desktop alone.
  - name: desktop
    kind: desktop
    image: desktop
    kernelArgs: "console=ttyS0 systemd.journald.forward_to_console=1"
  - {name: local-disk, kind: local-disk}
pools:
  - name: lab
    bootServer: bs1
    # Switches of an empty room spread over 10 s (the default 2 minutes would only make
    # the test wait).
    policy: {switchSpread: 10s}
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
  - {name: desk1, mac: "52:54:00:0d:00:01", ip: 10.20.0.21, pool: lab}
`, bootlab.ServerIP, bootlab.HTTPURL, l.Images, bootlab.Bridge, dsum, dsize, csum, csize, guestInitArgs, guestVCPUs, defaultMode, clusterStorageIP, bootlab.APIURL)
}

func TestDesktopImageRunsSlurmJob(t *testing.T) {
	desk := imagetest.Get(t, "desktop")
	compute := imagetest.Get(t, "compute-guest")
	if desk.Package("overtime-agent") == "" || compute.Package("overtime-slurm") == "" || compute.Package("slurmd") == "" {
		t.Fatalf("the images lack Overtime's packages: desktop overtime-agent %q, guest overtime-slurm %q slurmd %q",
			desk.Package("overtime-agent"), compute.Package("overtime-slurm"), compute.Package("slurmd"))
	}
	pc := startDesktop(t, desk, compute, "cluster", 1)
	l, vm, ctl, homes, cups, expect := pc.l, pc.vm, pc.ctl, pc.homes, pc.cups, pc.expect
	hpc := pc.hpc
	startCampusServers(t, l)

	// The boot chain: menu, initramfs (bridge for the guest, credential, NFS squashfs
	// root), systemd.
	expect(`Overtime: desk1 mode cluster\b`, desktopBootWithin)
	expect(`overtime: bridge br0 over `, desktopBootWithin)
	expect(`overtime: host credential: /run/overtime/agent.token from /dev/vd[a-z]+`, desktopBootWithin)
	expect(`Welcome to .*Debian GNU/Linux 12`, desktopBootWithin)

	// The packaged agent reports to the site manager with its guest running.
	var st wire.AgentStatus
	bootlab.Eventually(t, "a heartbeat from desk1's agent with its guest running", desktopBootWithin, func() bool {
		out, err := l.Run("agent", "status", "desk1", "-o", "json")
		if err != nil || json.Unmarshal([]byte(out), &st) != nil {
			return false
		}
		return st.GuestState == "running"
	})

	// Its guest's slurmd registered as a dynamic node with the CPUs and memory it was given.
	bootlab.Eventually(t, "desk1 registered in Slurm", 5*time.Minute, func() bool {
		return strings.Contains(ctl.Slurm("scontrol", "-o", "show", "node", "desk1"), "NodeName=desk1")
	})
	node := ctl.Slurm("scontrol", "-o", "show", "node", "desk1")
	for _, want := range []string{"CPUTot=1 ", "RealMemory=384 ", "AvailableFeatures=overtime"} {
		if !strings.Contains(node, want) {
			t.Errorf("node desk1: no %q in %s", want, node)
		}
	}

	// A job runs on it.
	out, err := ctl.SlurmErr("sbatch", "-o", "/dev/null", "-w", "desk1", "--wrap", "test \"$(hostname)\" = overtime-desk1")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Submitted batch job (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sbatch: %q", out)
	}
	var job string
	bootlab.Eventually(t, "job "+m[1]+" finished", 5*time.Minute, func() bool {
		job = ctl.Slurm("scontrol", "-o", "show", "job", m[1])
		return regexp.MustCompile(`JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)`).MatchString(job)
	})
	if !strings.Contains(job, "JobState=COMPLETED") || !strings.Contains(job, "ExitCode=0:0") || !strings.Contains(job, "NodeList=desk1") {
		t.Fatalf("job %s did not complete on desk1: %s", m[1], job)
	}
	// The SPANK plugin in the guest reported the job to the agent, which sent the report on.
	bootlab.Eventually(t, "job "+m[1]+"'s report in the site manager", time.Minute, func() bool {
		_, err := l.Run("job-report", m[1], "--host", "desk1")
		return err == nil
	})

	// The student submits a job of their own: it runs as them in the guest, in their
	// home on the cluster's file server, which the guest mounted for its jobs (the
	// desktop's kernel is the NFS client, so this is the real NFS path).
	out, err = ctl.SlurmAs(student, "sbatch", "--parsable", "-w", "desk1", "--chdir=/home/student", "-o", "/home/student/job-%j.out",
		"--wrap", "id; echo written by the job > /home/student/from-the-job.txt")
	if err != nil {
		t.Fatal(err)
	}
	// --parsable: the job id alone on its line (the submit host's optional SPANK plugin
	// may warn before it).
	sm := regexp.MustCompile(`(?m)^(\d+)$`).FindStringSubmatch(out)
	if sm == nil {
		t.Fatalf("sbatch --parsable as the student: %q", out)
	}
	sid := sm[1]
	bootlab.Eventually(t, "the student's job "+sid+" finished", 5*time.Minute, func() bool {
		job = ctl.Slurm("scontrol", "-o", "show", "job", sid)
		return regexp.MustCompile(`JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)`).MatchString(job)
	})
	if !strings.Contains(job, "JobState=COMPLETED") {
		t.Fatalf("the student's job %s: %s", sid, job)
	}
	for name, want := range map[string]string{"job-" + sid + ".out": "uid=1234567(student) gid=1234500", "from-the-job.txt": "written by the job"} {
		f := filepath.Join(hpc.dir, "student", name)
		b, err := os.ReadFile(f)
		var st syscall.Stat_t
		if err != nil || syscall.Stat(f, &st) != nil || !strings.Contains(string(b), want) || st.Uid != 1234567 || st.Gid != 1234500 {
			t.Fatalf("the file server's %s: %v, %q, owner %d:%d; want %q owned by the student (1234567:1234500)", f, err, b, st.Uid, st.Gid, want)
		}
	}

	// A student at the desk: the PC wrote its seat configuration at boot (before sssd and
	// the login prompt), and the student logs in at the console's prompt with their
	// university account (sssd, ldaps to the university with the site's CA), gets their
	// uid and group, prints on the room's print server with plain lp, and logs out.
	expect(`seat-config: wrote [0-9]+ files`, time.Minute)
	loginAtPrompt(t, vm, expect, "ldap-pw")
	id, err := vm.Console.Run("id -un; id -u; id -gn; pwd", 2*time.Minute)
	if err != nil || !strings.Contains(id, "student\n1234567\nstudents\n/home/student\n") {
		t.Fatalf("the student's session: %v\n%q", err, id)
	}
	// Their home is theirs on the university's file server.
	checkServerHome(t, vm, homes)
	// The guest's mount of the cluster's storage is the guest's alone: the desktop's
	// mount table has the student's own home only.
	if out, err := vm.Console.Run(`awk '$5 ~ /^\/mnt\/storage/ || $(NF-1) ~ /^`+clusterStorageIP+`:/ {print "GUEST-MOUNT", $5}' /proc/self/mountinfo`, time.Minute); err != nil ||
		regexp.MustCompile(`(?m)^GUEST-MOUNT \S+\r?$`).MatchString(out) {
		t.Fatalf("the desktop sees the guest's storage: %v\n%s", err, out)
	}
	if out, err := vm.Console.Run("cat /run/overtime/seat.status; echo 'Exercise sheet 3' | lp", time.Minute); err != nil || !strings.Contains(out, "ok\n") {
		t.Fatalf("the seat's status and lp: %v\n%s", err, out)
	}
	var jobs []cupstest.Job
	if !poll.Wait(time.Minute, func() bool { jobs = cups.Jobs(t); return len(jobs) > 0 }) ||
		len(jobs) != 1 || jobs[0].User != "student" || jobs[0].Data != "Exercise sheet 3\n" {
		t.Fatalf("the print server has %+v, want the student's page\n%s", jobs, cups.Logs())
	}
	if err := vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	// Logged out everywhere: the home was unmounted (a new login mounts it afresh), and
	// with the home server down a login still works, into a temporary home that says so.
	checkHomeLifecycle(t, vm, homes, expect)

	// At the PC's screen and keyboard: the greeter, a wrong password, the student's Xfce
	// session (test/seat_graphical_test.go); the student on the console asks logind.
	consoleLogin(t, vm, expect, "ldap-pw")
	shots := testenv.ArtefactDir(t, "desktop-seat")
	g := checkSeatGreeter(t, vm, shots)

	// A lecturer's course VM: imported (a tiny raw disk whose boot sector fills the screen
	// with red and prints a line on the serial port), and booked for desk1 in two minutes
	// (the site's clock is put before it). The room's policy: a lecture waits for the
	// student's logout, and a session nobody has touched for 4 minutes is logged out.
	disk := filepath.Join(t.TempDir(), "demo.raw")
	if err := os.WriteFile(disk, bootsector.ScreenDisk("OVERTIME-COURSE-VM-UP\r\n", bootsector.Red, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	l.MustRun("image", "import", disk, "--image", "demo-vm", "--pool", "lab", "--version", "ws26", "--memory", "64")
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("switchSpread: 10s\nswitch: {lecture: wait}\nlogoutIdle: 4m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.MustRun("pool", "set", "lab", "--policy-file", policy)
	l.RestartServe("2026-12-02T11:48:00+01:00")
	// The university moves its homes to its SMB file server, as an Active Directory site
	// keeps them (the PC takes it at its next boot, the lecture's).
	cifsHomes(t, l)
	l.MustRun("schedule", "add", "--host", "desk1", "wed 11:50-13:00 lecture")
	// The student left their session long ago: its notifications say that the PC switches
	// at their logout and that the session ends soon; the console session ends, the agent
	// logs the abandoned one out, and the switch that waited restarts the PC.
	checkAbandoned(t, g, expect)
	// From here on nobody is logged out for idleness (a course VM booting under TCG takes
	// minutes without a key pressed), and a forced switch gives 2 minutes after its
	// boundary (checkCountdown).
	policy = filepath.Join(t.TempDir(), "policy-lecture.yaml")
	if err := os.WriteFile(policy, []byte("switchSpread: 10s\nswitch: {lecture: wait}\nswitchGrace: 2m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.MustRun("pool", "set", "lab", "--policy-file", policy)
	expect(`reboot: Restarting system`, 5*time.Minute)

	// In the lecture's slot: the student's home comes over SMB now, and they get the
	// course VM as their session, full screen.
	expect(`Overtime: desk1 mode lecture\b`, desktopBootWithin)
	expect(`Welcome to .*Debian GNU/Linux 12`, desktopBootWithin)
	consoleLogin(t, vm, expect, "ldap-pw")
	checkCIFSHome(t, vm, homes)
	checkCourseVMSession(t, g)
	// Outside an exam the campus network is open.
	if got := reach(t, g, otherServer); !strings.Contains(got, "OTHER-SERVER") {
		t.Fatalf("a campus server outside the exam: %q", got)
	}

	// The university moves the desktops' logins to its Kerberos realm (a real KDC; PCs
	// take it at their next boot). The student logs in at the greeter again, picking the
	// Linux desktop from its session menu instead of the slot's course VM; an exam booked
	// for desk1 from now on restarts the PC under them: the countdown is on their screen.
	kdc := startStudentKDC(t, pc)
	kerberosLogin(t, l)
	g.typeName("student")
	g.chooseSession(1) // "Course VM: demo-vm", then "Xfce Session"
	g.enterPassword("student", "ldap-pw")
	g.waitXfce("xfce-in-course-slot")
	l.MustRun("exception", "add", "final-exam", "--kind", "exam", "--mode", "desktop", "--host", "desk1",
		"--start", "2026-12-02 11:00", "--end", "2026-12-02 15:00", "--allow", examServer)
	checkCountdown(t, g, expect)
	if err := vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	expect(`reboot: Restarting system`, 5*time.Minute)

	// The exam: the student logs in with their Kerberos password (the KDC's, not the
	// directory's) and holds a ticket; the seat is locked and the network limited.
	expect(`Overtime: desk1 mode desktop\b`, desktopBootWithin)
	expect(`Welcome to .*Debian GNU/Linux 12`, desktopBootWithin)
	consoleLogin(t, vm, expect, studentKrbPW)
	checkKerberosSession(t, pc, kdc)
	checkExam(t, g, expect)
	// The university's directory goes down while the PC runs: the console's prompt and
	// the greeter say so.
	checkDirectoryNotice(t, g, pc)
}

// desktopPC is one booted desktop (desk1) with what is around it: the boot lab, the
// Slurm controller its guest registers with, the university's home server and the
// room's print server. The desktop test and the seat benchmark share it.
type desktopPC struct {
	l     *bootlab.Lab
	vm    *vmtest.VM
	ctl   *slurmlab.Controller
	homes *homeServer
	hpc   *clusterStorage // the cluster's file server, the guest's /home
	cups  *cupstest.Server
	// secrets is the site manager's --desktop-secrets directory (the bind password,
	// keytabs/HOST.keytab), read at every PC's request.
	secrets string
	// directory is the university's directory (ldaps) where the PC reaches it;
	// Close takes it off the network.
	directory *bootlab.Exposed
	expect    func(re string, within time.Duration)
	on        time.Time // QEMU started: the PC's power button
}

// startDesktop starts the lab and its servers, publishes the desktop image desk and the
// compute guest, and powers desk1 on (2 vCPUs, 2 GiB, a screen) into defaultMode
// (desktopSite).
func startDesktop(t testing.TB, desk, compute *imagetest.Image, defaultMode string, guestVCPUs int) *desktopPC {
	t.Helper()
	mungeKey := slurmlab.NewMungeKey(t, t.TempDir())
	// The university a student comes from, and the room's print server, reachable at the
	// boot server's address like servers of the campus network.
	uni, secrets := studentDirectory(t)
	// TLS: the PC boots from plain HTTP and talks to the site manager over HTTPS only, its
	// credential pinning the lab's CA; no --insecure-http, so the munge key and the
	// directory's bind password cross the bridge encrypted or not at all.
	l := bootlab.Start(t, bootlab.Options{Now: desktopNow, TLS: true, ServeArgs: []string{"--munge-key", mungeKey, "--desktop-secrets", secrets}})
	directory := l.Expose(t, bootlab.ServerIP+":636", strings.TrimPrefix(uni.LDAPSURL, "ldaps://"))
	cups := cupstest.StartWith(t, "lab-printer", cupstest.Options{Addr: bootlab.ServerIP + ":631", Command: l.NS.Command})
	homes := startHomeServer(t, l)
	hpc := startClusterStorage(t, l, student)
	l.CopyImage(desk.Dir, "desktop/v1")
	l.CopyImage(compute.Dir, "compute/v1")
	l.Apply(desktopSite(l, desk, compute, defaultMode, guestVCPUs) + seatSite(t, uni) + homesSite())
	l.StartBootServer()
	ctl := slurmlab.StartController(t, l.NS, bootlab.ServerIP, mungeKey, student)

	// The PC's credential, on its OVERTIME-ID disk (no TPM in the VM).
	tokFile := filepath.Join(t.TempDir(), "desk1.token")
	l.MustRun("host", "credential", "desk1", "--out", tokFile)
	tok, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	// Issued over TLS, it pins the lab's CA: the PC's agent and seat then talk TLS only,
	// to a server that CA vouches for (a heartbeat below is the proof they did).
	if !regexp.MustCompile(`(?m)^ca-pin sha256:[0-9a-f]{64}$`).Match(tok) {
		t.Fatalf("desk1's credential pins no CA:\n%s", regexp.MustCompile(`(?m)^[^c].*$`).ReplaceAllString(string(tok), "TOKEN"))
	}
	if err := l.NS.AddTap("tapd1", bootlab.Bridge); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "desk1")
	os.MkdirAll(dir, 0o755)
	on := time.Now()
	vm := vmtest.StartT(t, vmtest.Config{Name: "desk1", Dir: dir, NS: l.NS, Tap: "tapd1", MAC: "52:54:00:0d:00:01",
		Firmware: vmtest.BIOS, Disks: []string{idDisk(t, "ext4", strings.TrimSpace(string(tok)))}, MemoryMB: 2048, CPUs: 2, Display: true})
	pc := &desktopPC{l: l, vm: vm, ctl: ctl, homes: homes, hpc: hpc, cups: cups, secrets: secrets, directory: directory, on: on}
	pc.expect = func(re string, within time.Duration) {
		t.Helper()
		if _, err := vm.Console.Expect(regexp.MustCompile(re), within); err != nil {
			t.Fatalf("desk1: %v", err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- desk1 console (end):\n%s", vm.Console.Tail(6000))
			t.Logf("--- slurmctld log (end):\n%s", tail(ctl.Log(), 4000))
			if out, err := l.Run("agent", "status", "desk1"); err == nil {
				t.Logf("--- desk1's last heartbeat:\n%s", out)
			}
		}
	})
	return pc
}

// student is the university's user of the desktop test, as the Slurm controller knows
// them (through the directory in a real site; from its files here).
var student = slurmlab.User{Name: "student", UID: 1234567, GID: 1234500}

// studentDirectory starts the university's directory of the desktop test: a POSIX user
// student (uid 1234567, password ldap-pw) in group students, with a certificate valid
// for the lab's server address; and the site manager's desktop secrets (the bind
// password of the service account PCs search with).
func studentDirectory(t testing.TB) (*unidir.Dir, string) {
	uni := unidir.StartFor(t, net.ParseIP(bootlab.ServerIP))
	uni.AddPosixUser(t, unidir.PosixUser{UID: "student", UIDNumber: 1234567, GIDNumber: 1234500, CN: "Stu Dent", Password: "ldap-pw"})
	uni.AddPosixGroup(t, "students", 1234500, "student")
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "bind-password"), []byte(uni.ServicePW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return uni, secrets
}

// seatSite is the site file's seat: logins from the university directory over ldaps at
// the lab's server address, and the room's print server there.
func seatSite(t testing.TB, uni *unidir.Dir) string {
	return fmt.Sprintf(`desktopLogin:
  provider: ldap
  uris: [ldaps://%[1]s:636]
  searchBase: %[2]s
  bindDN: %[3]s
  caCert: |
    %[4]s
printing: {server: "%[1]s:631", defaultPrinter: lab-printer}
`, bootlab.ServerIP, unidir.BaseDN, uni.ServiceDN, strings.ReplaceAll(strings.TrimSpace(uni.CA.PEM(t)), "\n", "\n    "))
}
