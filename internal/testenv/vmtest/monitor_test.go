package vmtest

import (
	"encoding/json"
	"image"
	"image/color"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
)

// TestMonitor: every VM has a QMP monitor. Without a NIC, a direct boot into the initrd's
// shell: QMP commands and human-monitor commands answer, and keys sent with SendKey reach
// the guest through the emulated PS/2 keyboard (atkbd) — read here from the first
// virtual terminal, which the kernel's keyboard handler feeds, so no evdev is needed.
func TestMonitor(t *testing.T) {
	t.Parallel()
	im := testimage.Get(t)
	vm := StartT(t, Config{Name: "monitor", Kernel: im.Path(testimage.Kernel), Initrd: im.Path(testimage.Initrd),
		Append: "console=ttyS0 loglevel=1 rdinit=/bin/sh"})

	// The monitor answers while the guest boots.
	ret, err := vm.Monitor().Command("query-status", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Running bool   `json:"running"`
		Status  string `json:"status"`
	}
	if err := json.Unmarshal(ret, &st); err != nil || !st.Running {
		t.Fatalf("query-status: %s (%v)", ret, err)
	}
	out, err := vm.Monitor().HMP("info status")
	if err != nil || !strings.Contains(out, "running") {
		t.Fatalf("HMP info status: %q, %v", out, err)
	}
	if _, err := vm.Monitor().Command("no-such-command", nil); err == nil || !strings.Contains(err.Error(), "CommandNotFound") {
		t.Errorf("unknown command: %v (want QEMU's CommandNotFound)", err)
	}

	if _, err := vm.Console.Expect(regexp.MustCompile(`built-in shell \(ash\)`), 120*time.Second); err != nil {
		t.Fatal(err)
	}
	// A reader on tty1 (canonical mode: a line arrives with the return key), its output in
	// a file; the marker tells that it runs before any key is sent.
	if _, err := vm.Console.Run("mkdir -p /dev /tmp && mount -t devtmpfs devtmpfs /dev && ((echo reading; head -n 1 /dev/tty1) >/tmp/keys 2>&1 &)", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Console.Run("until grep -q reading /tmp/keys; do sleep 0.1; done", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"o", "t", "ret"} {
		if err := vm.Monitor().SendKey(0, k); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := vm.Console.Run("until grep -q ot /tmp/keys; do sleep 0.1; done; cat /tmp/keys", 60*time.Second); err != nil {
		t.Fatalf("the keys did not reach tty1: %v", err)
	} else {
		t.Logf("tty1 read: %q", out)
	}
	vm.Stop()
	if _, err := vm.Monitor().Command("query-status", nil); err == nil {
		t.Error("a command after Stop succeeded")
	}
}

// TestScreendump: a VM with a display shows the initrd's text console on its VGA card; the
// screen read through the monitor is a PNG of the emulated card's size, and text typed on
// the keyboard reaches the guest (a file written by what was typed).
func TestScreendump(t *testing.T) {
	t.Parallel()
	im := testimage.Get(t)
	vm := StartT(t, Config{Name: "screen", Kernel: im.Path(testimage.Kernel), Initrd: im.Path(testimage.Initrd),
		Append: "console=ttyS0 loglevel=1 rdinit=/bin/sh", Display: true})
	if _, err := vm.Console.Expect(regexp.MustCompile(`built-in shell \(ash\)`), 120*time.Second); err != nil {
		t.Fatal(err)
	}
	// A shell on tty1, the VGA console: what the keyboard types runs there.
	if _, err := vm.Console.Run("mkdir -p /dev /tmp && mount -t devtmpfs devtmpfs /dev && (setsid sh -c 'exec sh </dev/tty1 >/dev/tty1 2>&1' &)", 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := vm.Monitor().Type("echo Typed-OK_1 >/tmp/typed\n", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if out, err := vm.Console.Run("until [ -s /tmp/typed ]; do sleep 0.1; done; cat /tmp/typed", 60*time.Second); err != nil || !strings.Contains(out, "Typed-OK_1") {
		t.Fatalf("typed text did not run on tty1: %v %q", err, out)
	}
	img, err := vm.Screendump(filepath.Join(t.TempDir(), "screen.png"))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 640 || b.Dy() < 400 {
		t.Errorf("screen %v, want at least 640x400", b)
	}
	// Text on black: more than one colour, and mostly the background.
	if n := Colours(img, 64); n < 2 {
		t.Errorf("%d colours on the screen: blank", n)
	}
	if s := Share(img, color.RGBA{0, 0, 0, 255}, 8); s < 0.5 {
		t.Errorf("black share %.2f of a text console, want most", s)
	}
	if err := vm.Monitor().Type("\u00e9", 0); err == nil {
		t.Error("Type of a character without a key succeeded")
	}
	// A click: QEMU takes the pointer's move and the button's press and release (the
	// events' form is QMP's); a place off the screen is refused before QEMU sees it.
	size := img.Bounds().Size()
	if err := vm.Monitor().Click(image.Pt(size.X-1, 0), size); err != nil {
		t.Errorf("Click: %v", err)
	}
	if err := vm.Monitor().Click(image.Pt(size.X, 0), size); err == nil {
		t.Error("Click off the screen succeeded")
	}
	noDisplay := StartT(t, Config{Name: "nodisplay", Kernel: im.Path(testimage.Kernel), Initrd: im.Path(testimage.Initrd),
		Append: "console=ttyS0 loglevel=1 rdinit=/bin/sh"})
	if _, err := noDisplay.Screendump(filepath.Join(t.TempDir(), "x.png")); err == nil {
		t.Error("Screendump without a display succeeded")
	}
}
