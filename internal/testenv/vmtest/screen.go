package vmtest

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"time"
)

// Screendump writes the VM's screen (Config.Display) to path as a PNG and returns it
// decoded, so that a test can both keep the picture as an artefact of its run and look at
// it.
func (m *Monitor) Screendump(path string) (image.Image, error) {
	if _, err := m.Command("screendump", map[string]string{"filename": path, "format": "png"}); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("vmtest: screendump %s: %w", path, err)
	}
	return img, nil
}

// Colours counts the distinct colours of img (up to limit): a blank or text-mode screen has
// a handful, a graphical greeter or desktop (gradients, icons, anti-aliased text) many.
func Colours(img image.Image, limit int) int {
	seen := map[color.RGBA]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

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

// keyOf is the QEMU key (qcode) that types r on a US keyboard, and whether shift is held.
func keyOf(r rune) (key string, shift bool, ok bool) {
	switch {
	case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		return string(r), false, true
	case r >= 'A' && r <= 'Z':
		return string(r - 'A' + 'a'), true, true
	}
	plain := map[rune]string{' ': "spc", '\n': "ret", '\t': "tab", '-': "minus", '=': "equal", '.': "dot",
		',': "comma", '/': "slash", ';': "semicolon", '\'': "apostrophe", '[': "bracket_left",
		']': "bracket_right", '\\': "backslash", '`': "grave_accent"}
	if k, ok := plain[r]; ok {
		return k, false, true
	}
	shifted := map[rune]string{'_': "minus", '+': "equal", '>': "dot", '<': "comma", '?': "slash", ':': "semicolon",
		'"': "apostrophe", '{': "bracket_left", '}': "bracket_right", '|': "backslash", '~': "grave_accent",
		'!': "1", '@': "2", '#': "3", '$': "4", '%': "5", '^': "6", '&': "7", '*': "8", '(': "9", ')': "0"}
	if k, ok := shifted[r]; ok {
		return k, true, true
	}
	return "", false, false
}

// Type types text on the VM's keyboard as a person would on a US layout, one key at a
// time ("\n" is Return). A pause between keys lets a slow (emulated) guest's input stack
// take each one: a key's press and release are queued on QEMU's clock, and a graphical
// toolkit under TCG can drop keys that arrive in one burst.
func (m *Monitor) Type(text string, pause time.Duration) error {
	for _, r := range text {
		k, shift, ok := keyOf(r)
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

// Changed counts the pixels that differ between two screens (all of them if the sizes
// differ).
func Changed(a, b image.Image) int {
	ab, bb := a.Bounds(), b.Bounds()
	if ab != bb {
		return ab.Dx()*ab.Dy() + bb.Dx()*bb.Dy()
	}
	n := 0
	for y := ab.Min.Y; y < ab.Max.Y; y++ {
		for x := ab.Min.X; x < ab.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 {
				n++
			}
		}
	}
	return n
}
