package test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/agentlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

// The boot chain end to end: real PXE boots of QEMU VMs (SeaBIOS + iPXE ROM, OVMF + iPXE,
// and SeaBIOS + a plain PXE stack chaining lpxelinux.0) against the real slapd, `overtime serve` and `overtime bootserver` (dnsmasq,
// nfs-ganesha, rpcbind) in a network namespace, booting the test image (Debian's cloud
// kernel, this project's initramfs, a busybox root) from a read-only NFS squashfs under a
// tmpfs overlay.

// now is a Wednesday 10:30 in the site's zone: pool rule "desktop" applies.
const pxeNow = "2026-12-02T10:30:00+01:00"

// Deadlines are generous: under TCG, with several VMs on two cores, a boot takes a
// minute or more; they bound a hang, they do not measure anything.
const bootWithin = 6 * time.Minute

func pxeSite(l *bootlab.Lab, sum string, size int64) string {
	return fmt.Sprintf(`name: lab
timezone: Europe/Berlin
defaultMode: cluster
unknownMode: local-disk
bootServers:
  - name: bs1
    ip: %s
    httpURL: %s
    nfsRoot: %s
    dhcp: full
    interface: %s
    subnet: 10.20.0.0/24
    rangeFrom: 10.20.0.200
    rangeTo: 10.20.0.250
images:
  - name: testimg
    kind: desktop
    versions:
      - {version: v1, sha256: %s, size: %d, path: testimg/v1, created: "2026-11-20T09:00:00Z"}
  - name: gone
    kind: desktop
    versions:
      - {version: v1, sha256: %s, size: %d, path: gone/v1, created: "2026-11-20T09:00:00Z"}
modes:
  - name: desktop
    kind: desktop
    image: testimg
    kernelArgs: "console=ttyS0 panic=5"
    # Hostile display text (issue 13): what iPXE would run if it reached the menu's item
    # line as commands. The boot below must show none of it run.
    description: %s
  - {name: cluster, kind: cluster, image: testimg, kernelArgs: "console=ttyS0 panic=5 overtime.verify=sha256"}
  - {name: broken, kind: desktop, image: gone, kernelArgs: "console=ttyS0"}
  - {name: local-disk, kind: local-disk}
pools:
  - name: lab
    bootServer: bs1
    weekly:
      - mon-fri 08:00-18:00 desktop
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
  - {name: vm1, mac: "52:54:00:0a:00:01", ip: 10.20.0.11, pool: lab}
  - name: vm2
    mac: "52:54:00:0a:00:02"
    ip: 10.20.0.12
    pool: lab
    weekly:
      - daily 00:00-24:00 cluster
  - {name: vm3, mac: "52:54:00:0a:00:03", ip: 10.20.0.13, pool: lab}
  - name: vm4
    mac: "52:54:00:0a:00:04"
    ip: 10.20.0.14
    pool: lab
    weekly:
      - daily 00:00-24:00 broken
  - {name: vm5, mac: "52:54:00:0a:00:05", ip: 10.20.0.15, pool: lab}
exceptions:
  # vm3 sits an exam all day: its boot script has no menu and no way out (issue 15).
  - name: exam-vm3
    kind: exam
    description: %s
    start: 2026-12-02T08:00:00+01:00
    end: 2026-12-02T18:00:00+01:00
    mode: desktop
    targets: [{host: vm3}]
`, bootlab.ServerIP, bootlab.HTTPURL, l.Images, bootlab.Bridge, sum, size, sum, size, strconv.Quote(hostileDescription), strconv.Quote(hostileDescription))
}

// hostileDescription tries every way display text could become iPXE commands: command
// separators (;, &&, ||) and a comment (#); validation already refuses quotes,
// backslashes and '$' (settings expansion). Each injected
// command would stop the boot (poweroff, the iPXE shell), so a PC that lands in its mode
// proves none of them ran. (The words themselves are shown in the menu: that is fine.)
const hostileDescription = `Lab desktop ; poweroff && shell || poweroff ; shell # poweroff`

type pxeVM struct {
	*vmtest.VM
	t    *testing.T
	name string
}

func startPXE(t *testing.T, l *bootlab.Lab, name, mac, tap string, fw vmtest.Firmware, disks ...string) *pxeVM {
	t.Helper()
	if err := l.NS.AddTap(tap, bootlab.Bridge); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	vm := vmtest.StartT(t, vmtest.Config{Name: name, Dir: dir, NS: l.NS, Tap: tap, MAC: mac, Firmware: fw, Disks: disks})
	return &pxeVM{VM: vm, t: t, name: name}
}

// expect waits for a console line; on failure the test fails with the console's tail.
func (v *pxeVM) expect(re string, within time.Duration) []string {
	v.t.Helper()
	m, err := v.Console.Expect(regexp.MustCompile(re), within)
	if err != nil {
		v.t.Fatalf("%s: %v", v.name, err)
	}
	return m
}

func (v *pxeVM) run(cmd string) string {
	v.t.Helper()
	out, err := v.Console.Run(cmd, time.Minute)
	if err != nil {
		v.t.Fatalf("%s: %v", v.name, err)
	}
	return out
}

// landed waits for the boot to reach the test image's shell and checks the mode the
// boot loader announced, the mode the booted system was given, and the root.
func (v *pxeVM) landed(mode string) {
	v.t.Helper()
	// iPXE's echo from the per-host script: the menu's decision.
	v.expect(`Overtime: `+v.name+` mode `+mode+`\b`, bootWithin)
	// The initramfs and the booted system: what the kernel command line carried.
	v.expect(`overtime-test: up mode=`+mode+` host=`+v.name+`\b`, bootWithin)
	v.expect(`overtime-test# `, time.Minute)
}

// checkStateless checks from inside the booted system that / is an overlay on a
// read-only squashfs loop-mounted from a read-only NFS mount, with a tmpfs upper layer.
func (v *pxeVM) checkStateless() {
	v.t.Helper()
	mounts := v.run("cat /proc/mounts")
	root := regexp.MustCompile(`(?m)^\S+ / overlay (\S+)`).FindStringSubmatch(mounts)
	if root == nil {
		v.t.Fatalf("%s: / is not an overlay:\n%s", v.name, mounts)
	}
	nfs := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(bootlab.ServerIP) + `:(\S+) (\S+) nfs4? (\S+)`).FindStringSubmatch(mounts)
	if nfs == nil || !strings.HasPrefix(nfs[3], "ro,") && !strings.Contains(nfs[3], ",ro,") {
		v.t.Fatalf("%s: no read-only NFS mount from the boot server:\n%s", v.name, mounts)
	}
	if !regexp.MustCompile(`(?m)^/dev/loop\d+ \S+ squashfs ro[, ]`).MatchString(mounts) {
		v.t.Fatalf("%s: no read-only squashfs loop mount:\n%s", v.name, mounts)
	}
	// Writes work (they land in RAM) but never reach the image.
	v.run("echo written-by-test > /etc/overtime-marker && cat /etc/overtime-marker")
	if out, err := v.Console.Run("touch "+nfs[2]+"/x", time.Minute); err == nil {
		v.t.Fatalf("%s: the NFS mount %s is writable: %s", v.name, nfs[2], out)
	}
}

func TestPXEBoot(t *testing.T) {
	img := testimage.Dir(t)
	sum, size := agentlab.SHA256File(t, filepath.Join(img, "root.squashfs"))
	l := bootlab.Start(t, bootlab.Options{Now: pxeNow})
	l.CopyImage(img, "testimg/v1")
	l.Apply(pxeSite(l, sum, size))
	l.StartBootServer()

	// Malformed and unknown requests to the boot endpoints of the live server.
	for path, want := range map[string]int{
		"/boot/ipxe/not-a-mac":                      400,
		"/boot/ipxe/52:54:00:0a:00:01%0aecho":       400,
		"/pxelinux.cfg/01-zz-zz-zz-zz-zz-zz":        400,
		"/images/testimg/v1/%2e%2e/%2e%2e/etc/host": 400,
		"/images/testimg/v1/vmlinuz":                200,
		"/boot/ipxe/52:54:00:ff:ff:ff":              200, // unknown PC: the configured default
	} {
		code, body, err := l.HTTPGet(bootlab.HTTPURL + path)
		if err != nil || code != want {
			t.Errorf("GET %s: %d %v, want %d", path, code, err, want)
		}
		if strings.HasSuffix(path, "ff:ff:ff") && !strings.Contains(body, "choose --default mode-local-disk") {
			t.Errorf("unknown MAC does not get the site's unknown-host mode:\n%s", body)
		}
	}
	// The exam host's scripts as served: no menu, no local disk, no prompt.
	for path, check := range map[string]func(string) bool{
		"/boot/ipxe/52:54:00:0a:00:03": func(b string) bool {
			return !strings.Contains(b, "choose") && !strings.Contains(b, "local-disk") && strings.Contains(b, " overtime.exam=1 ")
		},
		"/pxelinux.cfg/01-52-54-00-0a-00-03": func(b string) bool {
			return !strings.Contains(b, "MENU") && strings.Contains(b, "\nNOESCAPE 1\n") && strings.Count(b, "\nLABEL ") == 1
		},
	} {
		code, body, err := l.HTTPGet(bootlab.HTTPURL + path)
		if err != nil || code != 200 || !check(body) {
			t.Errorf("GET %s: %d %v, not an exam script:\n%s", path, code, err, body)
		}
	}

	// Five PCs at once: vm1 (BIOS) follows the pool's desktop rule, vm3 (UEFI) sits an
	// exam in desktop mode, vm2 has a host rule for cluster, vm4's mode boots an image
	// whose files are missing, vm5 (BIOS with a plain PXE ROM) takes the PXELINUX path.
	// The VMs boot in parallel; the checks below read each console in turn.
	// vm1 and vm3 are PCs without a TPM: their host credential is on a local disk
	// labelled OVERTIME-ID (ext4 for vm1, vfat for vm3); vm2 has no disk at all.
	tokens := map[string]string{"vm1": randomToken(t), "vm3": randomToken(t)}
	vms := map[string]*pxeVM{
		"vm1": startPXE(t, l, "vm1", "52:54:00:0a:00:01", "tap1", vmtest.BIOS, idDisk(t, "ext4", tokens["vm1"])),
		"vm2": startPXE(t, l, "vm2", "52:54:00:0a:00:02", "tap2", vmtest.BIOS),
		"vm3": startPXE(t, l, "vm3", "52:54:00:0a:00:03", "tap3", vmtest.UEFI, idDisk(t, "vfat", tokens["vm3"])),
		"vm4": startPXE(t, l, "vm4", "52:54:00:0a:00:04", "tap4", vmtest.BIOS),
		"vm5": startPXE(t, l, "vm5", "52:54:00:0a:00:05", "tap5", vmtest.BIOSPXE),
	}
	t.Run("image missing falls back to the local disk", func(t *testing.T) {
		v := vms["vm4"]
		// The menu shows why (the line is cut at the screen width), and its default is the
		// site's local-disk mode.
		v.expect(`broken - UNAVAILABLE: image gone v1 has no vmlinuz on the boot server`, bootWithin)
		v.expect(`Overtime: vm4 mode local-disk`, time.Minute)
		v.expect(`Overtime: booting the local disk`, time.Minute)
		// The VM has no disk: iPXE gives control back to the firmware. The boot server
		// is not asked again for another try from the script (no loop through it).
		if _, err := v.Console.Expect(regexp.MustCompile(`unreachable`), 5*time.Second); err == nil {
			t.Error("a failed local disk boot was reported as an unreachable boot server")
		}
		v.Stop()
	})
	t.Run("vm5 boots desktop through PXELINUX", func(t *testing.T) {
		v := vms["vm5"]
		v.t = t
		v.landedPXELinux(l, "52:54:00:0a:00:05", "10.20.0.15", "desktop")
		v.checkStateless()
		v.Stop() // PXELINUX proven; free the CPU
	})
	for _, c := range []struct{ name, mode string }{{"vm1", "desktop"}, {"vm2", "cluster"}, {"vm3", "desktop"}} {
		t.Run(c.name+" boots "+c.mode, func(t *testing.T) {
			v := vms[c.name]
			v.t = t
			v.landed(c.mode)
			v.checkStateless()
			v.checkCredential(tokens[c.name])
			// landed: the menu was built from a description made to run commands
			// (hostileDescription), and iPXE ran none of them.
			switch c.name {
			case "vm1":
				// iPXE draws its menu's title on the serial console too: the probe
				// vm3's check relies on sees a menu where there is one.
				if !strings.Contains(v.Console.Output(), "Overtime: vm1 - desktop") {
					t.Errorf("vm1: no boot menu on the console:\n%s", v.Console.Tail(4000))
				}
			case "vm3":
				// The exam: straight into its mode, no menu drawn, and the booted
				// system is told (the desktop's lockdown reads overtime.exam=1).
				out := v.Console.Output()
				if strings.Contains(out, "Overtime: vm3 - ") || !strings.Contains(out, "Overtime: vm3 mode desktop (exam)") {
					t.Errorf("vm3: the exam host was shown a menu or not told it is in an exam:\n%s", v.Console.Tail(4000))
				}
				if cmdline := v.run("cat /proc/cmdline"); !strings.Contains(cmdline, " overtime.exam=1") {
					t.Errorf("vm3: kernel command line without overtime.exam=1: %s", cmdline)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	vms["vm3"].Stop() // UEFI proven; free the CPU for the reboots

	t.Run("schedule change and reboot lands the other mode, pristine", func(t *testing.T) {
		v := vms["vm1"]
		v.t = t
		l.MustRun("schedule", "add", "--host", "vm1", "wed 10:00-12:00 cluster")
		if err := v.Console.Send("reboot -f"); err != nil {
			t.Fatal(err)
		}
		v.landed("cluster")
		v.checkCredential(tokens["vm1"])
		if out, err := v.Console.Run("test ! -e /etc/overtime-marker", time.Minute); err != nil {
			t.Fatalf("a file written before the reboot survived it: %v %s", err, out)
		}
	})

	t.Run("boot server restarted mid-boot", func(t *testing.T) {
		v := vms["vm2"]
		v.t = t
		if err := v.Console.Send("reboot -f"); err != nil {
			t.Fatal(err)
		}
		// The kernel is loaded: take the whole boot server away (dnsmasq, ganesha,
		// rpcbind) before the initramfs asks for its address and its root.
		v.expect(`Linux version`, bootWithin)
		l.StopBootServer()
		// The initramfs asks for an address while there is no DHCP server (and no NFS
		// server); the boot server comes back and the PC's retries get through.
		v.expect(`overtime: configuring the network`, bootWithin)
		l.StartBootServer()
		v.expect(`overtime-test: up mode=cluster host=vm2\b`, bootWithin)
	})
}

// randomToken is a host credential of the form hostcred issues (any bytes would do).
func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "ott_" + hex.EncodeToString(b)
}

// idDisk makes a raw disk image whose whole-disk file system (ext4 or vfat) is labelled
// OVERTIME-ID and holds agent.token (root, 0600), without mounting anything.
func idDisk(t testing.TB, fstype, token string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(src, "agent.token")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "id-"+fstype+".img")
	var cmds [][]string
	switch fstype {
	case "ext4":
		cmds = [][]string{{"mkfs.ext4", "-q", "-L", "OVERTIME-ID", "-E", "root_owner=0:0", "-d", src, img, "8M"}}
	case "vfat":
		cmds = [][]string{{"mkfs.vfat", "-n", "OVERTIME-ID", "-C", img, "8192"}, {"mcopy", "-i", img, tok, "::agent.token"}}
	default:
		t.Fatalf("idDisk: file system %s", fstype)
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s (Debian packages e2fsprogs, dosfstools, mtools)", strings.Join(c, " "), err, out)
		}
	}
	return img
}

// checkCredential checks the host credential the initramfs took from the OVERTIME-ID disk
// (token "" = the VM has none): its content (by hash: printing it would put it on the
// console), owner and mode, and that neither the kernel command line nor anything on the
// console shows it.
func (v *pxeVM) checkCredential(token string) {
	v.t.Helper()
	const file = "/run/overtime/agent.token"
	// What the initramfs said in this boot (landed has read past it).
	console := v.Console.Output()
	boot := console[max(strings.LastIndex(console, "Linux version"), 0):]
	said := func(re string) {
		v.t.Helper()
		if !regexp.MustCompile(re).MatchString(boot) {
			v.t.Errorf("%s: the boot did not log %s; its console:\n%s", v.name, re, boot)
		}
	}
	if token == "" {
		said(`overtime: host credential: no file system labelled OVERTIME-ID`)
		if out, err := v.Console.Run("test ! -e "+file, time.Minute); err != nil {
			v.t.Fatalf("%s: %s exists without an OVERTIME-ID disk: %v %s", v.name, file, err, out)
		}
		return
	}
	said(`overtime: host credential: ` + file + ` from /dev/vd[a-z]+ \(LABEL=OVERTIME-ID, read-only\)`)
	sum := sha256.Sum256([]byte(token + "\n"))
	out := v.run("stat -c '%u:%g %a %s' " + file + " && sha256sum " + file)
	want := fmt.Sprintf("0:0 600 %d\n%x  %s", len(token)+1, sum, file)
	if strings.TrimSpace(out) != want {
		v.t.Errorf("%s: %s is\n%s\nwant\n%s", v.name, file, out, want)
	}
	// The disk is unmounted again and was never mounted writable.
	if mounts := v.run("cat /proc/mounts"); strings.Contains(mounts, "/dev/vd") {
		v.t.Errorf("%s: the OVERTIME-ID disk is still mounted:\n%s", v.name, mounts)
	}
	cmdline := v.run("cat /proc/cmdline")
	if !strings.Contains(cmdline, "boot=overtime") {
		v.t.Fatalf("%s: cat /proc/cmdline printed %q", v.name, cmdline)
	}
	if strings.Contains(cmdline, token) {
		v.t.Errorf("%s: the token is on the kernel command line", v.name)
	}
	if strings.Contains(v.Console.Output(), token) {
		v.t.Errorf("%s: the token appeared on the console", v.name)
	}
}

// landedPXELinux follows a BIOS PC with a plain PXE ROM (vmtest.BIOSPXE) down the
// PXELINUX path to the test image's shell and checks each step on its console and on the
// boot server: DHCP without iPXE's user class gave it lpxelinux.0 over TFTP; lpxelinux
// (with DHCP option 210 as its path prefix) fetched its per-MAC configuration and
// menu.c32 over HTTP (neither is on the TFTP root: a menu drawn with this host's title
// proves both); the default entry's kernel and initrd came over HTTP; and the booted
// kernel's command line is the entry's APPEND as rendered.
func (v *pxeVM) landedPXELinux(l *bootlab.Lab, mac, ip, mode string) {
	v.t.Helper()
	cfgURL := bootlab.HTTPURL + "/pxelinux.cfg/01-" + strings.ReplaceAll(mac, ":", "-")
	code, cfg, err := l.HTTPGet(cfgURL)
	if err != nil || code != 200 {
		v.t.Fatalf("GET %s: %d %v", cfgURL, code, err)
	}
	entry := regexp.MustCompile(`(?m)^LABEL mode-` + mode + `\n  MENU LABEL .*\n  MENU DEFAULT\n  KERNEL (\S+)\n  INITRD (\S+)\n  APPEND (.*)$`).FindStringSubmatch(cfg)
	if entry == nil {
		v.t.Fatalf("%s: no default entry for mode %s in %s:\n%s", v.name, mode, cfgURL, cfg)
	}
	kernel, initrd, appendArgs := entry[1], entry[2], entry[3]
	if !strings.HasPrefix(kernel, bootlab.HTTPURL+"/") || !strings.HasPrefix(initrd, bootlab.HTTPURL+"/") {
		v.t.Fatalf("%s: kernel %s and initrd %s are not on the boot server's HTTP URL", v.name, kernel, initrd)
	}
	v.expect(`overtime-test: up mode=`+mode+` host=`+v.name+`\b`, bootWithin)
	v.expect(`overtime-test# `, time.Minute)
	// What the PXE stack, lpxelinux and menu.c32 printed, in this order. Read from the
	// whole console without escape sequences and carriage returns: SeaBIOS's serial
	// console puts cursor movements into the middle of words ("P\r\x1b[14;02HXELINUX").
	plain := strings.ReplaceAll(ansiEscape.ReplaceAllString(v.Console.Output(), ""), "\r", "")
	rest := plain
	for _, re := range []string{
		// The PXE stack's DHCP (as a PXE ROM, not as iPXE) named lpxelinux.0 ...
		`vmtest: PXE boot file lpxelinux\.0 from ` + regexp.QuoteMeta(bootlab.ServerIP),
		`tftp://` + regexp.QuoteMeta(bootlab.ServerIP) + `/lpxelinux\.0\.\.\. ok`,
		// ... which ran, loaded ldlinux.c32, the configuration and menu.c32, whose menu
		// has this host's title ...
		`PXELINUX \d+\.\d+ lwIP `,
		`Overtime: ` + v.name + ` - ` + mode + ` until `,
		`Automatic boot in`,
		// ... and booted the default entry's kernel and initrd, over HTTP.
		`Loading ` + regexp.QuoteMeta(kernel) + `\.\.\. ?ok`,
		`Loading ` + regexp.QuoteMeta(initrd) + `\.\.\. ?ok`,
		`Linux version`,
	} {
		loc := regexp.MustCompile(re).FindStringIndex(rest)
		if loc == nil {
			v.t.Fatalf("%s: %q not on the console (in this order); the console:\n%s", v.name, re, plain)
		}
		rest = rest[loc[1]:]
	}
	// PXELINUX puts BOOT_IMAGE= first and initrd= last around the APPEND line.
	want := "BOOT_IMAGE=" + kernel + " " + appendArgs + " initrd=" + initrd
	if got := strings.TrimSpace(v.run("cat /proc/cmdline")); got != want {
		v.t.Errorf("%s: kernel command line\n%s\nwant the rendered entry's\n%s", v.name, got, want)
	}
	// The boot server's side: DHCP answered without the ipxe tag and with option 210,
	// and TFTP carried lpxelinux.0 and nothing else to this PC.
	log, err := os.ReadFile(filepath.Join(l.Dir, "bootserver.log"))
	if err != nil {
		v.t.Fatal(err)
	}
	var xid string
	if m := regexp.MustCompile(`dnsmasq-dhcp\[\d+\]: (\d+) DHCPACK\(\S+\) ` + regexp.QuoteMeta(ip+" "+mac)).FindSubmatch(log); m != nil {
		xid = string(m[1])
	} else {
		v.t.Fatalf("%s: no DHCPACK for %s in the boot server's log", v.name, mac)
	}
	var dhcp, tftp []string
	for _, line := range strings.Split(string(log), "\n") {
		switch {
		case strings.Contains(line, "]: "+xid+" "):
			dhcp = append(dhcp, line)
		case strings.Contains(line, "dnsmasq-tftp") && strings.Contains(line, ip):
			tftp = append(tftp, line)
		}
	}
	exchange := strings.Join(dhcp, "\n")
	for _, re := range []string{`user class: PXEClient"`, `tags: known, bios, br0"`, `option: 67 bootfile-name  lpxelinux\.0"`} {
		if !regexp.MustCompile(re).MatchString(exchange) {
			v.t.Errorf("%s: the DHCP exchange does not show %s:\n%s", v.name, re, exchange)
		}
	}
	// Option 210, which dnsmasq logs as hex bytes, cut off after 14 of them.
	prefix := bootlab.HTTPURL + "/"
	opt210 := regexp.MustCompile(`sent size: *(\d+) option:210 +([0-9a-f:]+)`).FindStringSubmatch(exchange)
	if opt210 == nil || opt210[1] != strconv.Itoa(len(prefix)) ||
		!strings.HasPrefix(hexColons(prefix), strings.TrimSuffix(opt210[2], ":")) {
		v.t.Errorf("%s: the DHCP exchange does not send option 210 %q:\n%s", v.name, prefix, exchange)
	}
	if len(tftp) != 1 || !strings.Contains(tftp[0], "/lpxelinux.0 to "+ip+`"`) {
		v.t.Errorf("%s: TFTP should have carried lpxelinux.0 alone to %s:\n%s", v.name, ip, strings.Join(tftp, "\n"))
	}
}

// hexColons is s as dnsmasq logs an option's bytes: 68:74:74:70:...
func hexColons(s string) string {
	h := make([]string, len(s))
	for i := range len(s) {
		h[i] = fmt.Sprintf("%02x", s[i])
	}
	return strings.Join(h, ":")
}

// ansiEscape matches the terminal control sequences menu.c32 and SeaBIOS's serial
// console write.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
