package render

import (
	"strings"

	"github.com/overtime-hpc/overtime/internal/translit"
)

// Free text (a mode's description, the deciding rule, why an entry is unavailable) is
// shown, never parsed. Validation (names.Text) keeps it to one line, but it may hold any
// punctuation, and punctuation means something in each format Overtime writes. So every
// free-text value passes through the function of the format it is written into, at the
// point where it is written: each reduces the text to characters that format can only
// read as text. They are allow-lists, so a character nobody thought of is replaced, not
// passed through; and what is replaced stays readable: the text is first made ASCII as
// it reads (internal/translit: "Übung" → "Uebung", “ ” → "), then a character the format
// may not take becomes its look-alike the format allows (lookalike: '"' → "'", '\' →
// '/', ';' → ','), or goes; never '?', which would make "Übung" "?bung".
//
// Formats and what their functions keep out:
//   - iPXE (ipxeText): the script is split into whitespace-separated tokens; a token "||",
//     "&&" or ";" ends the command and starts the next, a token starting with '#' starts a
//     comment, "${...}" expands a setting, quotes and '\' group and escape in newer iPXE.
//     Only letters, digits, space and . , : ( ) [ ] / + - _ = @ % ! ? * are left, so no
//     token can be a separator, comment, expansion or quote.
//   - PXELINUX (pxelinuxText): MENU LABEL and TEXT HELP take the rest of the line
//     literally, but '^' marks the entry's hotkey in menu.c32; quotes, '\' and '$' are
//     replaced as well so that the text is the same in both boot menus wherever possible.
//   - '#' comment lines (commentText) in every file: a comment ends at the line break,
//     which names.Text and the writer already refuse; '\' is replaced since slurm.conf and
//     exports(5) join a line ending in '\' with the next, and quotes and '$' for
//     consistency with the menus.
//
// Every function also transliterates non-ASCII, makes control characters spaces, and cuts
// the text at maxText characters ("..."), since it only ever fills one menu or comment
// line.

const maxText = 200

// ipxeText reduces free text to a literal for an iPXE command argument (item, echo).
func ipxeText(s string) string {
	return reduceText(s, func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" .,:()[]/+-_=@%!?*", r)
	})
}

// pxelinuxText reduces free text to a literal for a PXELINUX MENU LABEL or TEXT HELP line.
func pxelinuxText(s string) string {
	return reduceText(s, func(r rune) bool { return !strings.ContainsRune("^\"\\$", r) })
}

// commentText reduces free text to a literal for a '#' comment line.
func commentText(s string) string {
	return reduceText(s, func(r rune) bool { return !strings.ContainsRune("\"\\$", r) })
}

// lookalike is what a character a format may not take becomes: the first candidate the
// format allows; none allowed, the character goes.
var lookalike = map[rune][]string{
	'"': {"'"}, '`': {"'"}, '^': {"'"}, '\\': {"/"}, '$': {"S"}, '#': {"No."}, '&': {"+"}, ';': {","},
	'|': {"/"}, '<': {"("}, '>': {")"}, '{': {"("}, '}': {")"}, '~': {"-"},
}

// reduceText makes s printable ASCII (translit.ASCII), keeps the characters keep allows,
// puts the look-alike of every other one, and cuts the result at maxText characters.
func reduceText(s string, keep func(rune) bool) string {
	allowed := func(t string) bool {
		for _, r := range t {
			if !keep(r) {
				return false
			}
		}
		return true
	}
	var b strings.Builder
	n := 0
	for _, r := range translit.ASCII(s) {
		if n >= maxText {
			b.WriteString("...")
			break
		}
		if keep(r) {
			b.WriteRune(r)
			n++
			continue
		}
		for _, alt := range lookalike[r] {
			if allowed(alt) {
				b.WriteString(alt)
				n += len(alt)
				break
			}
		}
	}
	return b.String()
}
