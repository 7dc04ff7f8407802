package translit

import "testing"

func TestASCII(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"BIO101 practical (read-only course VM)", "BIO101 practical (read-only course VM)"},
		{"Übung für Müller – Straße", "Uebung fuer Mueller - Strasse"},
		{"Café Crème, naïve façade", "Cafe Creme, naive facade"},
		{"Łódź, Øresund, Ærø", "Lodz, Oresund, AEro"},
		{"„Zitat“ … «guillemets»", "\"Zitat\" ... <<guillemets>>"},
		{"tab\tand\nnew line\r\x00 end  ", "tab and new line end"},
		{"  lead", "lead"},
		{"数学 Mathe 🎓", "Mathe"},
		{"数学", ""},
		{"Ångström 5µm", "Angstroem 5um"},
	} {
		got := ASCII(tc.in)
		if got != tc.want {
			t.Errorf("ASCII(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, c := range []byte(got) {
			if c < 0x20 || c > 0x7e {
				t.Errorf("ASCII(%q) has byte %#x", tc.in, c)
			}
		}
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly ten", 11, "exactly ten"},
		{"Course VM: a very long description of the lecture", 24, "Course VM: a very..."},
		{"Course VM: averyveryverylongword", 20, "Course VM: averyv..."},
	} {
		if got := Cut(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
