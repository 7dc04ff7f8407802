// Package translit makes free text (a description an administrator or lecturer typed)
// plain printable ASCII that still reads as what was typed, for the artefacts whose
// readers cannot be trusted with more: a greeter's session list, a boot menu, a comment
// in a configuration file. A character is never replaced by '?': "Übung für Müller"
// stays readable as "Uebung fuer Mueller", where "?bung f?r M?ller" would not.
package translit

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// spelled are letters and signs that lose meaning without their mark, or have no
// decomposition, spelled as their languages' own ASCII conventions spell them (German
// umlauts as ae/oe/ue, as in names and addresses).
var spelled = map[rune]string{
	'Ä': "Ae", 'Ö': "Oe", 'Ü': "Ue", 'ä': "ae", 'ö': "oe", 'ü': "ue", 'ß': "ss", 'ẞ': "SS",
	'Æ': "AE", 'æ': "ae", 'Œ': "OE", 'œ': "oe", 'Ø': "O", 'ø': "o", 'Å': "A", 'å': "a",
	'Ł': "L", 'ł': "l", 'Đ': "D", 'đ': "d", 'Ð': "D", 'ð': "d", 'Þ': "Th", 'þ': "th",
	'ı': "i", 'Ħ': "H", 'ħ': "h", 'ŋ': "ng", 'Ŋ': "NG", 'ĸ': "k", 'ſ': "s",
	'‘': "'", '’': "'", '‚': ",", '‛': "'", '“': "\"", '”': "\"", '„': "\"", '«': "<<", '»': ">>",
	'‹': "<", '›': ">", '–': "-", '—': "-", '‐': "-", '‑': "-", '−': "-", '…': "...",
	'•': "*", '·': ".", '×': "x", '÷': "/", '€': "EUR", '£': "GBP", '©': "(c)", '®': "(R)",
	'™': "(TM)", '°': " deg", '½': "1/2", '¼': "1/4", '¾': "3/4", '²': "2", '³': "3", '¹': "1",
	'µ': "u", 'μ': "u", '¿': "?", '¡': "!", '§': "S", '¶': "P",
}

// ASCII is s in printable ASCII (0x20-0x7e): a letter with a diacritic loses it (é → e),
// the letters of spelled are spelled out (ä → ae, ß → ss, ł → l, – → -), control
// characters and every kind of white space become a space, runs of spaces one, and
// what has no ASCII reading at all (another script, an emoji) is dropped; leading and
// trailing spaces are trimmed. The result may be empty: a caller that needs a label
// falls back to a name.
func ASCII(s string) string {
	var b strings.Builder
	space := false
	put := func(t string) {
		for _, c := range t {
			if c == ' ' {
				space = b.Len() > 0
				continue
			}
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteRune(c)
		}
	}
	for _, r := range s {
		switch {
		case r < 0x80 && r >= 0x20 && r != 0x7f:
			put(string(r))
		case unicode.IsSpace(r) || unicode.IsControl(r):
			put(" ")
		case spelled[r] != "":
			put(spelled[r])
		default:
			// The base letters of its canonical decomposition (é = e + U+0301), marks
			// dropped; nothing when it has no ASCII base.
			for _, d := range norm.NFD.String(string(r)) {
				if d >= 0x20 && d < 0x7f {
					put(string(d))
				}
			}
		}
	}
	return b.String()
}

// Cut shortens ASCII text to at most n bytes, ending in "..." when it was cut, at a
// word boundary where one is near.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return s[:n]
	}
	cut := s[:n-3]
	if i := strings.LastIndexByte(cut, ' '); i > n/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ") + "..."
}
