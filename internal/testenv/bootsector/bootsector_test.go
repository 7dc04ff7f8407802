package bootsector

import (
	"bytes"
	"image/color"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

// The hand-assembled screen sector: the message starts where `mov si, msg` points, the
// colour byte is `mov al`'s operand, the signature ends the sector.
func TestScreenSector(t *testing.T) {
	s := ScreenSector("HI", Red)
	if len(s) != 512 || s[510] != 0x55 || s[511] != 0xaa {
		t.Fatalf("not a boot sector: %d bytes, signature %x", len(s), s[510:])
	}
	msgAt := int(s[0x1e]) | int(s[0x1f])<<8 // mov si, imm16 at 0x1d
	if s[0x1d] != 0xbe || msgAt != 0x7c00+len(screenCode) || !bytes.Equal(s[len(screenCode):len(screenCode)+3], []byte("HI\x00")) {
		t.Errorf("message at %#x, code ends at %#x", msgAt, 0x7c00+len(screenCode))
	}
	if s[colourAt-1] != 0xb0 || s[colourAt] != Red {
		t.Errorf("colour byte: %x %x", s[colourAt-1], s[colourAt])
	}
	if d := ScreenDisk("HI", Red, 4096); len(d) != 4096 || !bytes.Equal(d[:512], s) {
		t.Error("ScreenDisk does not start with ScreenSector")
	}
	for c, want := range map[byte]color.RGBA{0: {0, 0, 0, 255}, Red: {0xa8, 0, 0, 255}, 6: {0xa8, 0x57, 0, 255}, 15: {0xff, 0xff, 0xff, 255}} {
		if got := RGB(c); got != want {
			t.Errorf("RGB(%d) = %v, want %v", c, got, want)
		}
	}
}

// TestScreenDiskBoots: the screen variant really draws. QEMU (SeaBIOS, std VGA) boots it
// from the disk; its message arrives on COM1, and the VM's screen, read through the
// monitor, is mode 13h's (640x400: 320x200 doubled), at least 90% in the colour RGB says.
func TestScreenDiskBoots(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "screen.raw")
	if err := os.WriteFile(disk, ScreenDisk("BOOTSECTOR-SCREEN-RED\r\n", Red, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	vm := vmtest.StartT(t, vmtest.Config{Name: "screen", Firmware: vmtest.BIOSDisk, Disks: []string{disk}, Display: true, MemoryMB: 64})
	if _, err := vm.Console.Expect(regexp.MustCompile(`BOOTSECTOR-SCREEN-RED`), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "screen.png")
	var share float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		img, err := vm.Screendump(shot)
		if err != nil {
			t.Fatal(err)
		}
		share = vmtest.Share(img, RGB(Red), 4)
		if share >= 0.9 || time.Now().After(deadline) {
			// Mode 13h's 320x200, each pixel shown 2x2 (the mode doubles its lines and
			// halves its dot clock): the screen is 640x400.
			if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 400 {
				t.Errorf("screen %v, want mode 13h's 320x200 doubled, 640x400", b)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if share < 0.9 {
		t.Errorf("%.3f of the screen is %v, want at least 0.9", share, RGB(Red))
	}
	t.Logf("%.3f of the screen is %v", share, RGB(Red))
}
