package sensor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

// TestInputInVM: the input sensor on a real evdev device. The host has no /dev/input and
// no uinput, so the test boots the test image (images/testimage: Debian's cloud kernel,
// whose i8042 and AT keyboard drivers are built in; the root's init loads evdev.ko) in
// QEMU from a read-only NVMe disk (the kernel's NVMe driver is built in, so initramfs-
// tools' local script mounts it without further modules), with a second NVMe disk, a
// squashfs with the statically built internal/inputprobe. The probe runs sensor.Input on
// the VM's /dev/input; the test presses keys on the emulated PS/2 keyboard through QEMU's
// monitor (QMP send-key) and checks that each press arrives as an Event whose time (the
// kernel's timestamp) lies between a mark the probe printed just before the key was sent
// and the moment the probe received it; the release, 100 ms later, follows within the
// coalescing window. The latencies are logged: sendkey to the event line on the host's
// console (dominated by TCG and the serial console), and, in the guest, the kernel's
// timestamp to the sensor's Event.
func TestInputInVM(t *testing.T) {
	im := testimage.Get(t)
	if !slices.Contains(im.RootModules, "evdev") {
		t.Fatalf("the test image's root lacks evdev (modules %v)", im.RootModules)
	}
	dir := t.TempDir()

	// The probe, static, on a squashfs disk of its own.
	disk := filepath.Join(dir, "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(disk, "inputprobe"), "./node-agent/sensor/internal/inputprobe")
	build.Dir = testimage.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build inputprobe: %v\n%s", err, out)
	}
	probeImg := filepath.Join(dir, "probe.squashfs")
	if out, err := exec.Command("mksquashfs", disk, probeImg, "-noappend", "-all-root", "-no-progress").CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v\n%s", err, out)
	}

	vm := vmtest.StartT(t, vmtest.Config{Name: "input",
		Kernel: im.Path(testimage.Kernel), Initrd: im.Path(testimage.Initrd),
		Append: "console=ttyS0 root=/dev/nvme0n1 rootfstype=squashfs ro",
		Extra: []string{
			"-drive", "file=" + im.Path(testimage.Root) + ",if=none,id=root,format=raw,readonly=on",
			"-device", "nvme,drive=root,serial=otroot",
			"-drive", "file=" + probeImg + ",if=none,id=probe,format=raw,readonly=on",
			"-device", "nvme,drive=probe,serial=otprobe",
		}})
	con := vm.Console
	expect := func(re string, within time.Duration) []string {
		t.Helper()
		m, err := con.Expect(regexp.MustCompile(re), within)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	run := func(cmd string) string {
		t.Helper()
		out, err := con.Run(cmd, 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	boot := time.Now()
	expect(`overtime-test: modules[^\r\n]* evdev`, 180*time.Second)
	expect(`overtime-test: root /dev/nvme0n1 / squashfs ro`, 30*time.Second)
	expect(`overtime-test# `, 60*time.Second)
	t.Logf("booted to the shell in %v", time.Since(boot))

	// The probe's disk, found by its serial number.
	run(`for c in /sys/class/nvme/nvme*; do grep -q otprobe $c/serial && d=$(basename $c)n1; done; mkdir -p /tmp/probe && mount -t squashfs -o ro /dev/$d /tmp/probe`)
	t.Logf("input devices in the VM:\n%s", run(`for d in /sys/class/input/event*; do echo "$(basename $d): $(cat $d/device/name)"; done`))

	if err := con.Send("/tmp/probe/inputprobe"); err != nil {
		t.Fatal(err)
	}
	kbd := expect(`inputprobe: device /dev/input/(event\d+) "AT Translated Set 2 keyboard"`, 60*time.Second)[1]
	t.Logf("keyboard: %s", kbd)

	const presses = 8
	keys := []string{"o", "v", "e", "r", "t", "i", "m", "e"}
	eventRE := `inputprobe: event input:(event\d+) (\d+) (\d+)\r?\n`
	var hostLat, guestLat []time.Duration
	var lastRecv time.Time
	for i := 0; i < presses; i++ {
		// A quiet period of more than the coalescing window since the last event, so that
		// the press is the first input after quiet: it must go out without delay. (A pause
		// between key presses, not a synchronisation.)
		if !lastRecv.IsZero() {
			time.Sleep(time.Until(lastRecv.Add(DefaultCoalesce + 100*time.Millisecond)))
		}
		if err := con.Send(fmt.Sprintf("mark %d", i)); err != nil {
			t.Fatal(err)
		}
		mark := nsTime(t, expect(fmt.Sprintf(`inputprobe: mark %d (\d+)`, i), 30*time.Second)[1])

		sent := time.Now()
		if err := vm.Monitor().SendKey(0, keys[i]); err != nil {
			t.Fatal(err)
		}
		m := expect(eventRE, 30*time.Second)
		seen := time.Now()
		at, recv := nsTime(t, m[2]), nsTime(t, m[3])
		if m[1] != kbd {
			t.Errorf("press %d: event from %s, want the keyboard %s", i, m[1], kbd)
		}
		if at.Before(mark) || at.After(recv) {
			t.Errorf("press %d: event time %v outside [mark %v, received %v]", i, at, mark, recv)
		}
		hostLat = append(hostLat, seen.Sub(sent))
		guestLat = append(guestLat, recv.Sub(at))

		// The release (100 ms later): coalesced, it follows within the window.
		m = expect(eventRE, 30*time.Second)
		relAt, relRecv := nsTime(t, m[2]), nsTime(t, m[3])
		if !relAt.After(at) {
			t.Errorf("press %d: release time %v not after the press's %v", i, relAt, at)
		}
		if d := relRecv.Sub(recv); d > DefaultCoalesce+250*time.Millisecond {
			t.Errorf("press %d: release event %v after the press's (window %v)", i, d, DefaultCoalesce)
		}
		lastRecv = time.Now()
	}
	if err := con.Send("quit"); err != nil {
		t.Fatal(err)
	}
	expect(`inputprobe: done`, 30*time.Second)

	t.Logf("%d key presses (TCG: %s); latency sendkey -> event line on the host console: %s", presses, vm.Accel, stats(hostLat))
	t.Logf("in the guest, kernel timestamp -> sensor Event received: %s", stats(guestLat))
	for i, d := range guestLat {
		// The first input after a quiet period is not held back: the sensor adds no
		// coalescing delay (under TCG, scheduling alone takes a few ms).
		if d >= DefaultCoalesce {
			t.Errorf("press %d: %v from the kernel's timestamp to the Event (the first input after quiet must not wait for the window)", i, d)
		}
	}
}

func nsTime(t *testing.T, s string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, n)
}

// stats is "min X, median Y, p90 Z, max W".
func stats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1)+0.5)] }
	parts := []string{
		"min " + s[0].Round(10*time.Microsecond).String(),
		"median " + q(0.5).Round(10*time.Microsecond).String(),
		"p90 " + q(0.9).Round(10*time.Microsecond).String(),
		"max " + s[len(s)-1].Round(10*time.Microsecond).String(),
	}
	return strings.Join(parts, ", ")
}
