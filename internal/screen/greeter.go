package screen

import (
	"image"
	"image/color"
)

// Field is the entry of LightDM's GTK greeter (hide-users: a name entry above a password
// entry) that has the keyboard focus.
type Field string

const (
	// NoField: no entry has the focus. The greeter focuses the name entry only when PAM's
	// first prompt arrives; until then (a greeter starting, or one drawn from the root
	// window's saved picture while its process starts) typed keys go nowhere.
	NoField Field = "none"
	// NameField: the name entry has the focus; a name typed now is taken.
	NameField Field = "name"
	// PasswordField: the password entry has the focus.
	PasswordField Field = "password"
)

// focusRing is the colour GTK's Adwaita theme draws around the focused entry (#3584e4).
var focusRing = color.RGBA{0x35, 0x84, 0xe4, 0xff}

// GreeterFocus says which of the greeter's entries has the keyboard focus, from the
// screen: a typist who cannot see that a field is focused loses keys (the reason the
// tests and the demo look before they type). The focused entry is the box drawn in the
// focus colour; the name entry has the password entry's grey border just below it, the
// password entry the name entry's just above it (with or without the message the greeter
// shows between its fields and buttons after a wrong password). Anything else (a
// desktop, a text console, a ring of another shape) is NoField.
func GreeterFocus(img image.Image) Field {
	ring, n := image.Rectangle{}, 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == focusRing.R && uint8(g>>8) == focusRing.G && uint8(bl>>8) == focusRing.B {
				ring = ring.Union(image.Rect(x, y, x+1, y+1))
				n++
			}
		}
	}
	// An entry's ring: a frame of at least a few hundred pixels, one text line high.
	if n < 200 || ring.Dy() < 20 || ring.Dy() > 60 || ring.Dx() < 100 || ring.Dx() > 600 {
		return NoField
	}
	x := (ring.Min.X + ring.Max.X) / 2
	above := border(img, x, ring.Min.Y-entryGap, ring.Min.Y)
	below := border(img, x, ring.Max.Y, ring.Max.Y+entryGap)
	switch {
	case below && !above:
		return NameField
	case above && !below:
		return PasswordField
	}
	return NoField
}

// entryGap bounds the space between the greeter's two entries (7 px drawn here).
const entryGap = 16

// border: a pixel of an unfocused entry's grey border in column x, rows [y0, y1).
func border(img image.Image, x, y0, y1 int) bool {
	for y := y0; y < y1; y++ {
		if !(image.Point{x, y}).In(img.Bounds()) {
			continue
		}
		r, g, bl, _ := img.At(x, y).RGBA()
		lo, hi := min(r, g, bl)>>8, max(r, g, bl)>>8
		if lo >= 150 && hi <= 225 && hi-lo <= 20 {
			return true
		}
	}
	return false
}
