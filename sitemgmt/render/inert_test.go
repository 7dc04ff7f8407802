package render

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Free text is inert in every rendered file: whatever text validation accepts (and, for
// the deciding rule and an unavailability reason, which are not validated, any text at
// all) changes only what is shown, never the structure a reader of the file sees.

// hostileTexts are free texts aimed at each format's syntax.
var hostileTexts = []string{
	"Desktop ; reboot",
	"Desktop || shell",
	"Desktop && chain http://evil/x",
	"a;b ; ; c",
	"x # comment",
	"#x",
	"${net0/mac} ${ip}",
	"'quoted' \"dq\" back\\slash",
	":label",
	"-- --key x --default",
	"^Hotkey ^x",
	"ENDTEXT",
	"\nLABEL evil\n  KERNEL x",
	"trailing \\",
	"MENU HIDE",
	"item evil x",
	"tab\there",
	"ä ö ü \u2028 \u00a0",
	strings.Repeat("; ", 150),
}

// randomTexts returns n random texts over the characters and tokens formats care about,
// seeded so failures reproduce.
func randomTexts(n int) []string {
	parts := []string{"||", "&&", ";", "#", "${", "}", "$", "'", "\"", "\\", "^", ":", "--", " ", " ", "a", "Z", "0", ",", "=",
		"\t", "\n", "\r", "ENDTEXT", "goto x", "reboot", "|", "&", "<", ">", "`", "ä", "*", "%", "@", "!", "?", "[", "]", "(", ")"}
	r := rand.New(rand.NewSource(1))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := r.Intn(12); k >= 0; k-- {
			b.WriteString(parts[r.Intn(len(parts))])
		}
		out[i] = b.String()
	}
	return out
}

// ipxeCommands is what real iPXE executes from a script (src/core/exec.c, script.c): lines
// starting with ':' are labels; every other line is split at whitespace into tokens; a
// token starting with '#' ends the line; the tokens "||", "&&" and ";" separate commands.
// It returns one entry per command: its name and the number of settings it expands.
func ipxeCommands(script string) []string {
	var cmds []string
	for n, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, ":") {
			cmds = append(cmds, fmt.Sprintf("%d label %s", n, line))
			continue
		}
		start := true
		for _, tok := range strings.Fields(line) {
			if strings.HasPrefix(tok, "#") {
				break
			}
			if tok == "||" || tok == "&&" || tok == ";" {
				cmds = append(cmds, fmt.Sprintf("%d %s", n, tok))
				start = true
				continue
			}
			if start {
				cmds = append(cmds, fmt.Sprintf("%d %s", n, tok))
				start = false
			}
			if strings.ContainsAny(tok, "$'\"\\") {
				cmds = append(cmds, fmt.Sprintf("%d expands or quotes %s", n, tok))
			}
		}
	}
	return cmds
}

// pxelinuxDirectives is the list of directives menu.c32 reads from a configuration: the
// keyword of every line (two words for MENU), with TEXT HELP bodies up to ENDTEXT as
// text, and every hotkey marker of a MENU LABEL.
func pxelinuxDirectives(cfg string) []string {
	var ds []string
	inHelp := false
	for n, line := range strings.Split(cfg, "\n") {
		f := strings.Fields(line)
		if inHelp {
			if len(f) > 0 && strings.EqualFold(f[0], "ENDTEXT") {
				inHelp = false
				ds = append(ds, fmt.Sprintf("%d ENDTEXT", n))
			}
			continue
		}
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		k := strings.ToUpper(f[0])
		if k == "MENU" && len(f) > 1 {
			k += " " + strings.ToUpper(f[1])
		}
		if k == "TEXT HELP" || k == "TEXT" {
			inHelp = true
		}
		if k == "MENU LABEL" && strings.Contains(line, "^") {
			k += " with hotkey"
		}
		ds = append(ds, fmt.Sprintf("%d %s", n, k))
	}
	return ds
}

// bootWithText is the fixture boot of pc-a01 whose free text (every mode's description,
// the deciding rule, the reason an image is unavailable) is text.
func bootWithText(t *testing.T, text string) Boot {
	site := testSite()
	for i := range site.Modes {
		site.Modes[i].Description = text
	}
	b := testBoot(t, site, "pc-a01", "", "desktop", "pool lab-a weekly "+text, "local", "maint", "desktop-next", "cluster")
	b.Check = func(m *model.Mode, v *model.ImageVersion) string {
		if m.Name == "cluster" {
			return "no kernel: " + text
		}
		return ""
	}
	return b
}

func renderBoot(t testing.TB, fn func(io.Writer, Boot) error, b Boot) string {
	t.Helper()
	var buf bytes.Buffer
	if err := fn(&buf, b); err != nil {
		t.Fatalf("render: %v", err)
	}
	return buf.String()
}

// checkBootTextInert renders the boot scripts with text and with plain text and compares
// what iPXE and menu.c32 would execute.
func checkBootTextInert(t *testing.T, text string) {
	t.Helper()
	plain, hostile := bootWithText(t, "plain words"), bootWithText(t, text)
	want, got := ipxeCommands(renderBoot(t, IPXE, plain)), ipxeCommands(renderBoot(t, IPXE, hostile))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("text %q changes the iPXE commands:\n got %q\nwant %q\n%s", text, got, want, renderBoot(t, IPXE, hostile))
	}
	want, got = pxelinuxDirectives(renderBoot(t, PXELinux, plain)), pxelinuxDirectives(renderBoot(t, PXELinux, hostile))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("text %q changes the PXELINUX directives:\n got %q\nwant %q\n%s", text, got, want, renderBoot(t, PXELinux, hostile))
	}
}

func TestFreeTextInertInBootScripts(t *testing.T) {
	for _, text := range append(append([]string{}, hostileTexts...), randomTexts(500)...) {
		checkBootTextInert(t, text)
	}
}

// FuzzFreeTextInert: go test -fuzz FuzzFreeTextInert ./sitemgmt/render. Without -fuzz the
// seeds run as a test.
func FuzzFreeTextInert(f *testing.F) {
	for _, s := range hostileTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkBootTextInert(t, text)
	})
}

// The site's other free text (pool descriptions and rooms, image and exception
// descriptions, mode descriptions) reaches no other file: dnsmasq, Slurm, NFS exports and
// kernel command lines render byte-identically whatever it says.
func TestFreeTextAbsentFromConfigs(t *testing.T) {
	render := func(site *model.Site) string {
		var b strings.Builder
		for _, srv := range []string{"boot1", "boot2", "boot3"} {
			d := testDnsmasq(site, srv, "/var/lib/overtime/dnsmasq.hosts", "/srv/tftp")
			for _, fn := range []func(io.Writer) error{d.Config, d.Hosts} {
				if err := fn(&b); err != nil {
					t.Fatal(err)
				}
			}
			if err := Ganesha(&b, site, site.BootServer(srv), DefaultNFSRoot); err != nil {
				t.Fatal(err)
			}
		}
		if err := Exports(&b, site, DefaultNFSRoot, "10.0.0.0/16"); err != nil {
			t.Fatal(err)
		}
		if err := SlurmNodes(&b, site, modeOf(site)); err != nil {
			t.Fatal(err)
		}
		for _, m := range site.Modes {
			cl, err := KernelCommandLine(site.BootServer("boot1"), site.Host("pc-a01"), &m, resolve(site, &m))
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(cl + "\n")
		}
		return b.String()
	}
	want := render(testSite())
	for _, text := range append(append([]string{}, hostileTexts...), randomTexts(50)...) {
		if names.Text("description", text) != nil {
			continue // refused at write time; the boot scripts are tested with it anyway
		}
		site := testSite()
		for i := range site.Pools {
			site.Pools[i].Description, site.Pools[i].Room = text, text
		}
		for i := range site.Modes {
			site.Modes[i].Description = text
		}
		for i := range site.Images {
			site.Images[i].Description = text
		}
		for i := range site.Exceptions {
			site.Exceptions[i].Description = text
		}
		if err := site.Validate(); err != nil {
			t.Fatalf("text %q accepted by names.Text, refused by Validate: %v", text, err)
		}
		if got := render(site); got != want {
			t.Errorf("text %q changed a configuration file", text)
		}
	}
}

// The text functions are allow-lists: check each against the syntax of its format.
func TestTextFunctions(t *testing.T) {
	all := make([]rune, 0, 0x100)
	for r := rune(0); r < 0x100; r++ {
		all = append(all, r)
	}
	s := string(all) + "\u2028"
	for name, c := range map[string]struct {
		fn     func(string) string
		banned string
	}{
		"ipxe":     {ipxeText, "|&;#$'\"\\{}\t<>`^~"},
		"pxelinux": {pxelinuxText, "^\"\\$\t"},
		"comment":  {commentText, "\"\\$\t"},
	} {
		out := c.fn(s)
		for _, r := range out {
			if r < 0x20 || r > 0x7e || strings.ContainsRune(c.banned, r) {
				t.Errorf("%s: %q survives", name, r)
			}
		}
		if got := c.fn(strings.Repeat("a", 300)); got != strings.Repeat("a", maxText)+"..." {
			t.Errorf("%s: long text not cut: %q", name, got)
		}
		if got := c.fn("Stateless desktop (Debian 13), room 1.23"); got != "Stateless desktop (Debian 13), room 1.23" {
			t.Errorf("%s: plain text changed: %q", name, got)
		}
	}
}
