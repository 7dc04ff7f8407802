package screen

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// textScale is how much Text enlarges a screen before reading it: the greeter's and the
// desktop's 9-10 point text at 96 dpi is too small for Tesseract, which reads the same
// screens nearly word for word at three times the size (docs/screenshots/seat).
const textScale = 3

// Text reads the words on img with Tesseract (the tesseract-ocr package), its lines
// joined by single spaces. Tests check what a screen says (the greeter's notice, a
// countdown) by its words: a picture's pixels change with every theme and font.
// Recognition is not exact; compare a few distinctive words, not whole sentences.
func Text(img image.Image) (string, error) {
	dir, err := os.MkdirTemp("", "overtime-screen-text-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "screen.png")
	f, err := os.Create(in)
	if err != nil {
		return "", err
	}
	if err := png.Encode(f, enlargeGray(img, textScale)); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	// --psm 11: sparse text in no particular order (a panel, a dialog, notifications),
	// not the columns of a page.
	cmd := exec.Command("tesseract", in, "stdout", "--psm", "11")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("screen: tesseract: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.Join(strings.Fields(string(out)), " "), nil
}

// enlargeGray is img in grey, k times the size, interpolated bilinearly (a blocky
// enlargement reads worse).
func enlargeGray(img image.Image, k int) *image.Gray {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	grey := make([]float64, w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			grey[y*w+x] = float64(color.GrayModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.Gray).Y)
		}
	}
	out := image.NewGray(image.Rect(0, 0, w*k, h*k))
	for y := 0; y < h*k; y++ {
		fy := max((float64(y)+0.5)/float64(k)-0.5, 0)
		y0 := int(fy)
		y1, ay := min(y0+1, h-1), fy-float64(y0)
		for x := 0; x < w*k; x++ {
			fx := max((float64(x)+0.5)/float64(k)-0.5, 0)
			x0 := int(fx)
			x1, ax := min(x0+1, w-1), fx-float64(x0)
			top := grey[y0*w+x0]*(1-ax) + grey[y0*w+x1]*ax
			bottom := grey[y1*w+x0]*(1-ax) + grey[y1*w+x1]*ax
			out.Pix[y*out.Stride+x] = uint8(top*(1-ay) + bottom*ay + 0.5)
		}
	}
	return out
}
