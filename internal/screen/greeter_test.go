package screen

import (
	"image"
	"image/color"
	"path/filepath"
	"testing"
)

// The greeter's screens as booted desktops showed them (crops of screendumps kept by
// test/desktop_test.go), and the field GreeterFocus reads from each.
func TestGreeterFocus(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Field
	}{
		{"greeter-starting.png", NoField},             // drawn, PAM's first prompt not there yet
		{"greeter-name.png", NameField},               // the prompt came: the name entry focused
		{"greeter-password.png", PasswordField},       // a name taken, the password asked
		{"greeter-wrong-password.png", PasswordField}, // refused: the message under the fields
		{"desktop.png", NoField},                      // an Xfce session
	} {
		img, err := Load(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := GreeterFocus(img); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.file, got, tc.want)
		}
	}
}

// A ring of the focus colour with grey borders on both sides, or on none, is no entry of
// the greeter's: GreeterFocus does not guess.
func TestGreeterFocusAmbiguous(t *testing.T) {
	grey := color.RGBA{205, 199, 194, 255}
	for _, tc := range []struct {
		name         string
		above, below bool
	}{{"both", true, true}, {"neither", false, false}} {
		img := image.NewRGBA(image.Rect(0, 0, 300, 120))
		for y := 0; y < 120; y++ {
			for x := 0; x < 300; x++ {
				img.Set(x, y, color.White)
			}
		}
		for x := 50; x < 250; x++ {
			for _, y := range []int{40, 41, 72, 73} {
				img.Set(x, y, focusRing)
			}
			if tc.above {
				img.Set(x, 32, grey)
			}
			if tc.below {
				img.Set(x, 80, grey)
			}
		}
		for y := 40; y < 74; y++ {
			img.Set(50, y, focusRing)
			img.Set(249, y, focusRing)
		}
		if got := GreeterFocus(img); got != NoField {
			t.Errorf("%s: %s, want %s", tc.name, got, NoField)
		}
	}
}

// enlargeGray keeps the picture: the size grows k times, a flat area keeps its grey, and
// an edge becomes a ramp between its two sides (bilinear), not a step.
func TestEnlargeGray(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 2, 1))
	img.Set(0, 0, color.White)
	img.Set(1, 0, color.Black)
	g := enlargeGray(img, 3)
	if g.Bounds().Dx() != 6 || g.Bounds().Dy() != 3 {
		t.Fatalf("size %v, want 6x3", g.Bounds())
	}
	row := []uint8{}
	for x := 0; x < 6; x++ {
		row = append(row, g.GrayAt(x, 1).Y)
	}
	if row[0] != 255 || row[5] != 0 {
		t.Errorf("ends %d..%d, want 255..0: %v", row[0], row[5], row)
	}
	for x := 1; x < 6; x++ {
		if row[x] > row[x-1] {
			t.Errorf("not a ramp from white to black: %v", row)
		}
	}
	if row[2] == 255 || row[2] == 0 {
		t.Errorf("no grey between the two sides: %v", row)
	}
}
