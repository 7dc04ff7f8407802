package test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/screen"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// screen.Text reads what a booted PC's screen says (Tesseract, from scripts/deps.sh): the
// words of the idle-logout notification on a screendump of the student's Xfce session,
// and none of them on the greeter's.
func TestScreenText(t *testing.T) {
	needs.Servers(t, "tesseract")
	for _, tc := range []struct {
		shot       string
		want, none []string
	}{
		{"notifications.png", []string{"You will be logged out", "Nobody has used this PC for 4 minutes"}, nil},
		{"greeter.png", []string{"Log In", "Cancel"}, []string{"logged out"}},
	} {
		img, err := screen.Load(filepath.Join("..", "docs", "screenshots", "seat", tc.shot))
		if err != nil {
			t.Fatal(err)
		}
		text, err := screen.Text(img)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: no %q in %q", tc.shot, w, text)
			}
		}
		for _, w := range tc.none {
			if strings.Contains(text, w) {
				t.Errorf("%s: %q in %q", tc.shot, w, text)
			}
		}
	}
}
