package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"exited with status 1; console: guest-init: ERROR: no munge key\r\n", 200, "exited with status 1; console: guest-init: ERROR: no munge key"},
		{"a\nb\t\tc\x7f d", 200, "a b c d"},
		{"abcdef", 4, "a…"},
		{"ääää", 6, "ä…"}, // never cut inside a character
	} {
		got := OneLine(c.in, c.max)
		if got != c.want || len(got) > c.max || !utf8.ValidString(got) {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	// Whatever it returns passes the heartbeat's check.
	h := Heartbeat{GuestReason: OneLine(strings.Repeat("x\n", 500), MaxGuestReason)}
	if err := h.Validate(); err != nil {
		t.Error(err)
	}
}
