// Package screen looks at a PC's screen as QEMU dumps it (PNG) and types on its keyboard:
// what tells a graphical greeter or desktop from a text console (Colours), whether the
// screen changed (Changed), and the QEMU key that types a character (KeyOf). The tests'
// VM harness (internal/testenv/vmtest) and the demo's `overtime-dev screen` share it; it
// links no testing package.
package screen

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
)

// Load decodes a PNG file.
func Load(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("screen: %s: %w", path, err)
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

// KeyOf is the QEMU key (qcode, as QMP's send-key and the human monitor's sendkey name
// it) that types r on a US keyboard, and whether shift is held.
func KeyOf(r rune) (key string, shift bool, ok bool) {
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
