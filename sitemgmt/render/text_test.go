package render

import "testing"

// Free text stays readable in every format: transliterated, its syntax characters
// replaced by look-alikes the format allows, never by '?'.
func TestTextReadable(t *testing.T) {
	for _, c := range []struct {
		in, ipxe, pxelinux, comment string
	}{
		{"Übung für Müller", "Uebung fuer Mueller", "Uebung fuer Mueller", "Uebung fuer Mueller"},
		{`pool lab weekly "wed 11:50-13:00 lecture"`, "pool lab weekly wed 11:50-13:00 lecture",
			"pool lab weekly 'wed 11:50-13:00 lecture'", "pool lab weekly 'wed 11:50-13:00 lecture'"},
		{"„Statistik“ – Kurs #2; a|b", "Statistik - Kurs No.2, a/b", "'Statistik' - Kurs #2; a|b", "'Statistik' - Kurs #2; a|b"},
		{`C:\tmp ^x $5`, "C:/tmp x S5", "C:/tmp 'x S5", "C:/tmp ^x S5"},
	} {
		if got := ipxeText(c.in); got != c.ipxe {
			t.Errorf("ipxeText(%q) = %q, want %q", c.in, got, c.ipxe)
		}
		if got := pxelinuxText(c.in); got != c.pxelinux {
			t.Errorf("pxelinuxText(%q) = %q, want %q", c.in, got, c.pxelinux)
		}
		if got := commentText(c.in); got != c.comment {
			t.Errorf("commentText(%q) = %q, want %q", c.in, got, c.comment)
		}
	}
}
