package render

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Regenerate the golden files with: go test ./sitemgmt/render -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current renderers")

// bootCase is one host boot; every case renders an iPXE and a PXELINUX golden file.
type bootCase struct {
	name string
	boot func(t *testing.T) Boot
	// wantDefault is the label the menu must default to.
	wantDefault string
}

func bootCases() []bootCase {
	site := testSite()
	return []bootCase{
		{"desktop", func(t *testing.T) Boot {
			return testBoot(t, site, "pc-a01", "", "desktop", `pool lab-a weekly "mon-fri 08:00-18:00 desktop"`, "local", "maint")
		}, "mode-desktop"},
		{"cluster", func(t *testing.T) Boot {
			return testBoot(t, site, "pc-a02", "", "cluster", `pool lab-a weekly "mon-sun 18:00-24:00 cluster"`, "maint", "local", "desktop")
		}, "mode-cluster"},
		{"course-vm", func(t *testing.T) Boot {
			return testBoot(t, site, "pc-a03", "", "course-ml", "exception ml-lecture (lecture) 2026-11-23 14:00-16:00", "local")
		}, "mode-course-ml"},
		{"local-disk", func(t *testing.T) Boot {
			b := testBoot(t, site, "pc-a10", "", "local", "exception exam-week (exam)", "desktop", "maint")
			b.Until = time.Time{} // no change scheduled
			return b
		}, "mode-local"},
		{"maintenance", func(t *testing.T) Boot {
			b := testBoot(t, site, "pc-b1", "", "maint", "exception patchday (maintenance)", "local")
			b.Timeout = 0 // the default timeout applies
			return b
		}, "mode-maint"},
		{"image-missing", func(t *testing.T) Boot {
			return testBoot(t, site, "pc-a01", "", "desktop-next", "host pc-a01 weekly \"mon-fri 08:00-18:00 desktop-next\"", "local", "desktop")
		}, "mode-local"},
		{"image-missing-no-local", func(t *testing.T) Boot {
			return testBoot(t, site, "pc-a01", "", "desktop-next", "site default mode", "maint")
		}, labelLocalDisk},
		{"unknown-mac", func(t *testing.T) Boot {
			return testBoot(t, site, "", "52:54:00:99:99:99", "desktop", "unknown MAC: site unknown-host mode", "local")
		}, "mode-desktop"},
		// What a resolver gives a desktop outside and inside an opened maintenance window:
		// the maintenance system only in the second.
		{"maintenance-closed", func(t *testing.T) Boot {
			return testBoot(t, site, "pc-a01", "", "desktop", `pool lab-a weekly "mon-fri 08:00-18:00 desktop"`, "local")
		}, "mode-desktop"},
		{"maintenance-open", func(t *testing.T) Boot {
			return testBoot(t, site, "pc-a01", "", "desktop", `pool lab-a exception "patchday" (maintenance)`, "local", "maint")
		}, "mode-desktop"},
		{"pinned", func(t *testing.T) Boot {
			b := testBoot(t, site, "seminar", "", "desktop-old", "pool lab-c weekly \"mon-fri 00:00-24:00 desktop-old\"")
			b.Timeout = 1500 * time.Millisecond
			return b
		}, "mode-desktop-old"},
	}
}

// goldenCase renders one file.
type goldenCase struct {
	name   string
	render func(t *testing.T, w io.Writer) error
}

func goldenCases() []goldenCase {
	site := testSite()
	var cs []goldenCase
	for _, bc := range bootCases() {
		bc := bc
		cs = append(cs,
			goldenCase{"ipxe-" + bc.name, func(t *testing.T, w io.Writer) error { return IPXE(w, bc.boot(t)) }},
			goldenCase{"pxelinux-" + bc.name, func(t *testing.T, w io.Writer) error { return PXELinux(w, bc.boot(t)) }},
		)
	}
	for _, ec := range examCases() {
		if !ec.golden {
			continue
		}
		ec := ec
		cs = append(cs,
			goldenCase{"ipxe-" + ec.name, func(t *testing.T, w io.Writer) error { return IPXE(w, ec.boot(t)) }},
			goldenCase{"pxelinux-" + ec.name, func(t *testing.T, w io.Writer) error { return PXELinux(w, ec.boot(t)) }},
		)
	}
	cs = append(cs, goldenCase{"ipxe-chain", func(t *testing.T, w io.Writer) error {
		return IPXEChain(w, "http://10.0.0.1:8080/")
	}})
	for _, srv := range []struct{ name, server string }{{"full", "boot1"}, {"proxy", "boot2"}, {"full-static", "boot3"}} {
		d := testDnsmasq(site, srv.server, "/var/lib/overtime/dnsmasq/"+srv.server+".hosts", "/srv/tftp")
		cs = append(cs,
			goldenCase{"dnsmasq-" + srv.name + ".conf", func(t *testing.T, w io.Writer) error { return d.Config(w) }},
			goldenCase{"dnsmasq-" + srv.name + ".hosts", func(t *testing.T, w io.Writer) error { return d.Hosts(w) }},
		)
	}
	cs = append(cs,
		goldenCase{"slurm-nodes.conf", func(t *testing.T, w io.Writer) error { return SlurmNodes(w, site, modeOf(site)) }},
		goldenCase{"ganesha.conf", func(t *testing.T, w io.Writer) error {
			return Ganesha(w, site, site.BootServer("boot1"), "")
		}},
		goldenCase{"ganesha-nfsroot.conf", func(t *testing.T, w io.Writer) error {
			return Ganesha(w, site, site.BootServer("boot2"), "")
		}},
		goldenCase{"exports", func(t *testing.T, w io.Writer) error {
			return Exports(w, site, "", "10.0.0.0/16")
		}},
	)
	return cs
}

func testDnsmasq(site *model.Site, server, hostsFile, tftpRoot string) Dnsmasq {
	return Dnsmasq{Site: site, Server: site.BootServer(server), HostsFile: hostsFile, TFTPRoot: tftpRoot}
}

// TestGolden renders every case and compares it with testdata/NAME.golden.
func TestGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			if seen[c.name] {
				t.Fatalf("duplicate case %s", c.name)
			}
			seen[c.name] = true
			var buf bytes.Buffer
			if err := c.render(t, &buf); err != nil {
				t.Fatalf("render: %v", err)
			}
			got := buf.Bytes()
			checkCommon(t, c.name, got)

			// Deterministic: a second render is byte-identical.
			var again bytes.Buffer
			if err := c.render(t, &again); err != nil {
				t.Fatalf("second render: %v", err)
			}
			if !bytes.Equal(got, again.Bytes()) {
				t.Fatalf("two renders of the same input differ")
			}

			file := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test ./sitemgmt/render -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run with -update after checking the change):\n%s", file, lineDiff(string(want), string(got)))
			}
		})
	}
	// No stale golden files: every file in testdata belongs to a case.
	if !*update {
		files, _ := filepath.Glob(filepath.Join("testdata", "*.golden"))
		for _, f := range files {
			if !seen[strings.TrimSuffix(filepath.Base(f), ".golden")] {
				t.Errorf("golden file %s belongs to no case; delete it", f)
			}
		}
	}
}

// checkCommon holds for every rendered file: the "generated" header near the top, only
// printable ASCII (plus tabs) and newline-terminated lines.
func checkCommon(t *testing.T, name string, out []byte) {
	t.Helper()
	s := string(out)
	if !strings.HasSuffix(s, "\n") {
		t.Errorf("%s: does not end with a newline", name)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	head := lines[0]
	if head == "#!ipxe" && len(lines) > 1 {
		head = lines[1]
	}
	if head != "# "+generated {
		t.Errorf("%s: first comment is %q, want the generated-by-Overtime header", name, head)
	}
	for i, l := range lines {
		for _, r := range l {
			if (r < 0x20 && r != '\t') || r > 0x7e {
				t.Errorf("%s line %d: non-printable character %q in %q", name, i+1, r, l)
			}
		}
		if strings.ContainsAny(l, "\r\\") {
			t.Errorf("%s line %d: carriage return or backslash in %q", name, i+1, l)
		}
	}
}

// lineDiff is a minimal diff for failure messages: the first differing lines.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	n := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			if n++; n == 10 {
				b.WriteString("...\n")
				break
			}
		}
	}
	return b.String()
}
