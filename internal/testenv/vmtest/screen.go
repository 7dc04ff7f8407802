package vmtest

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"time"

	"github.com/overtime-hpc/overtime/internal/screen"
)

// Screendump writes the VM's screen (Config.Display) to path as a PNG and returns it
// decoded, so that a test can both keep the picture as an artefact of its run and look at
// it.
func (m *Monitor) Screendump(path string) (image.Image, error) {
	if _, err := m.Command("screendump", map[string]string{"filename": path, "format": "png"}); err != nil {
		return nil, err
	}
	return screen.Load(path)
}

// Colours counts the distinct colours of img (up to limit): see screen.Colours.
func Colours(img image.Image, limit int) int { return screen.Colours(img, limit) }

// Share is the fraction of img's pixels within tol (per channel, 0–255) of c.
func Share(img image.Image, c color.RGBA, tol int) float64 {
	b := img.Bounds()
	n, hit := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			n++
			if near(int(r>>8), int(c.R), tol) && near(int(g>>8), int(c.G), tol) && near(int(bl>>8), int(c.B), tol) {
				hit++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(hit) / float64(n)
}

func near(a, b, tol int) bool { return a-b <= tol && b-a <= tol }

// Type types text on the VM's keyboard as a person would on a US layout, one key at a
// time ("\n" is Return). A pause between keys lets a slow (emulated) guest's input stack
// take each one: a key's press and release are queued on QEMU's clock, and a graphical
// toolkit under TCG can drop keys that arrive in one burst.
func (m *Monitor) Type(text string, pause time.Duration) error {
	for _, r := range text {
		k, shift, ok := screen.KeyOf(r)
		if !ok {
			return fmt.Errorf("vmtest: Type: no key for %q on a US keyboard", r)
		}
		keys := []string{k}
		if shift {
			keys = []string{"shift", k}
		}
		if err := m.SendKey(0, keys...); err != nil {
			return err
		}
		time.Sleep(pause)
	}
	return nil
}

// Screendump is Monitor().Screendump for a VM started with Config.Display.
func (vm *VM) Screendump(path string) (image.Image, error) {
	if !vm.cfg.Display {
		return nil, errors.New("vmtest: the VM has no display (Config.Display)")
	}
	return vm.mon.Screendump(path)
}

// Changed counts the pixels that differ between two screens: see screen.Changed.
func Changed(a, b image.Image) int { return screen.Changed(a, b) }

// absMax is the far end of an absolute pointer axis in QEMU's input events.
const absMax = 0x7fff

// Click moves the VM's pointer (its USB tablet: Config.Display) to at on a screen of
// size and presses and releases the left button there, as a person's click. The press
// and the release are two events apart, as a hand makes them.
func (m *Monitor) Click(at image.Point, size image.Point) error {
	if size.X <= 0 || size.Y <= 0 || !at.In(image.Rectangle{Max: size}) {
		return fmt.Errorf("vmtest: Click at %v: not on a %dx%d screen", at, size.X, size.Y)
	}
	type axis struct {
		Axis  string `json:"axis"`
		Value int    `json:"value"`
	}
	type button struct {
		Down   bool   `json:"down"`
		Button string `json:"button"`
	}
	type event struct {
		Type string `json:"type"`
		Data any    `json:"data"`
	}
	send := func(events ...event) error {
		_, err := m.Command("input-send-event", map[string]any{"events": events})
		return err
	}
	if err := send(event{"abs", axis{"x", at.X * absMax / size.X}}, event{"abs", axis{"y", at.Y * absMax / size.Y}}); err != nil {
		return err
	}
	if err := send(event{"btn", button{true, "left"}}); err != nil {
		return err
	}
	time.Sleep(100 * time.Millisecond) // a click's length: the guest sees a press, then a release
	return send(event{"btn", button{false, "left"}})
}
