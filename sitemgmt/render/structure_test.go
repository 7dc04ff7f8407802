package render

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// iPXE and PXELINUX have no offline checker, so these tests check the structure every
// boot script must have, on every boot case: one default that is the scheduled mode (or
// the local disk when it cannot boot), every entry boots something, every failure path
// ends on the local disk, and no line carries anything but validated data.

func TestPXELinuxStructure(t *testing.T) {
	for _, bc := range bootCases() {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.boot(t)
			var buf bytes.Buffer
			if err := PXELinux(&buf, b); err != nil {
				t.Fatal(err)
			}
			checkPXELinux(t, buf.String(), bc.wantDefault)
		})
	}
}

func checkPXELinux(t tb, cfg, wantDefault string) {
	t.Helper()
	type label struct {
		name                     string
		kernel, localboot, dflt  bool
		disabled, hidden, initrd bool
	}
	var labels []*label
	var cur *label
	inText := false
	global := map[string]int{}
	for i, l := range strings.Split(strings.TrimSuffix(cfg, "\n"), "\n") {
		checkSafeLine(t, i+1, l, false)
		if inText {
			if l == "ENDTEXT" {
				inText = false
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		kw := strings.ToUpper(f[0])
		if kw == "MENU" && len(f) > 1 {
			kw += " " + strings.ToUpper(f[1])
		}
		if kw == "TEXT" {
			inText = true
			continue
		}
		if kw == "LABEL" {
			cur = &label{name: f[1]}
			labels = append(labels, cur)
			continue
		}
		if cur == nil {
			global[kw]++
			continue
		}
		switch kw {
		case "KERNEL":
			cur.kernel = true
			if !strings.HasPrefix(f[1], "http://") && !strings.HasPrefix(f[1], "https://") {
				t.Errorf("label %s: KERNEL %s is not a full URL", cur.name, f[1])
			}
		case "INITRD":
			cur.initrd = true
			if !strings.HasPrefix(f[1], "http://") && !strings.HasPrefix(f[1], "https://") {
				t.Errorf("label %s: INITRD %s is not a full URL", cur.name, f[1])
			}
		case "LOCALBOOT":
			cur.localboot = true
			if len(f) != 2 || f[1] != "0" {
				t.Errorf("label %s: %q, want LOCALBOOT 0", cur.name, l)
			}
		case "MENU DEFAULT":
			cur.dflt = true
		case "MENU DISABLE":
			cur.disabled = true
		case "MENU HIDE":
			cur.hidden = true
		case "APPEND":
			if !strings.HasPrefix(strings.Join(f[1:], " "), "ip=dhcp boot=overtime ") {
				t.Errorf("label %s: APPEND does not start with the Overtime command line: %q", cur.name, l)
			}
		case "MENU LABEL":
		default:
			t.Errorf("label %s: unexpected directive %q", cur.name, l)
		}
	}
	if inText {
		t.Errorf("TEXT HELP block not closed")
	}
	for _, kw := range []string{"UI", "MENU TITLE", "TIMEOUT", "ALLOWOPTIONS", "ONERROR"} {
		if global[kw] != 1 {
			t.Errorf("global %s appears %d times, want once", kw, global[kw])
		}
	}
	if !strings.Contains(cfg, "\nALLOWOPTIONS 0\n") || !strings.Contains(cfg, "\nONERROR "+labelLocalDisk+"\n") {
		t.Errorf("missing ALLOWOPTIONS 0 or ONERROR %s", labelLocalDisk)
	}
	defaults := 0
	names := map[string]bool{}
	for _, lb := range labels {
		if names[lb.name] {
			t.Errorf("label %s defined twice", lb.name)
		}
		names[lb.name] = true
		if lb.kernel == lb.localboot {
			t.Errorf("label %s: want exactly one of KERNEL and LOCALBOOT", lb.name)
		}
		if lb.dflt {
			defaults++
			if lb.name != wantDefault {
				t.Errorf("MENU DEFAULT on %s, want %s", lb.name, wantDefault)
			}
			if lb.disabled {
				t.Errorf("the default %s is disabled", lb.name)
			}
		}
		if lb.disabled && !lb.localboot {
			t.Errorf("disabled label %s must boot the local disk should it be started", lb.name)
		}
	}
	if defaults != 1 {
		t.Errorf("%d MENU DEFAULT lines, want exactly 1", defaults)
	}
	if !names[labelLocalDisk] {
		t.Errorf("no %s label for ONERROR", labelLocalDisk)
	}
}

func TestIPXEStructure(t *testing.T) {
	for _, bc := range bootCases() {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.boot(t)
			var buf bytes.Buffer
			if err := IPXE(&buf, b); err != nil {
				t.Fatal(err)
			}
			who := b.MAC + " (unknown)"
			if b.Host != nil {
				who = b.Host.Name
			}
			checkIPXE(t, buf.String(), bc.wantDefault, who)
		})
	}
	t.Run("chain", func(t *testing.T) {
		var buf bytes.Buffer
		if err := IPXEChain(&buf, "http://10.0.0.1:8080"); err != nil {
			t.Fatal(err)
		}
		s := buf.String()
		if !strings.Contains(s, "\nchain --replace --autofree http://10.0.0.1:8080/boot/ipxe/${netX/mac} || goto "+labelFailed+"\n") {
			t.Errorf("chain line missing:\n%s", s)
		}
		checkIPXE(t, s, "", "")
	})
}

var ipxeGotoRE = regexp.MustCompile(`goto (\S+)`)

// checkIPXE checks an iPXE script; wantDefault "" means a script without a menu.
func checkIPXE(t tb, script, wantDefault, who string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(script, "\n"), "\n")
	if lines[0] != "#!ipxe" {
		t.Fatalf("first line %q, want #!ipxe", lines[0])
	}
	labels := map[string]int{}
	items := map[string]bool{}
	var gotos []string
	chooses := 0
	block := ""
	echoed := false
	for i, l := range lines {
		checkSafeLine(t, i+1, l, true)
		switch {
		case strings.HasPrefix(l, ":"):
			block = l[1:]
			labels[block]++
			echoed = false
		case strings.HasPrefix(l, "item ") && !strings.HasPrefix(l, "item --gap -- "):
			items[strings.Fields(l)[1]] = true
		case strings.HasPrefix(l, "choose "):
			chooses++
			f := strings.Fields(l)
			if f[1] != "--default" || f[2] != wantDefault {
				t.Errorf("choose defaults to %s, want %s", f[2], wantDefault)
			}
		case strings.HasPrefix(l, "echo Overtime: "):
			echoed = true
		case strings.HasPrefix(l, "kernel ") || strings.HasPrefix(l, "initrd ") || strings.HasPrefix(l, "boot"):
			if !strings.HasSuffix(l, "|| goto "+labelFailed) {
				t.Errorf("line %d: %q does not fall back to %s on failure", i+1, l, labelFailed)
			}
			if !echoed || !strings.HasPrefix(block, "mode-") {
				t.Errorf("line %d: %q in block %s without an \"echo Overtime: HOST mode MODE\" first", i+1, l, block)
			}
			if strings.HasPrefix(l, "kernel ") && !strings.Contains(l, " ip=dhcp boot=overtime ") {
				t.Errorf("line %d: kernel line without the Overtime command line: %q", i+1, l)
			}
			if strings.HasPrefix(l, "boot") && !strings.HasPrefix(lines[i-1], "initrd ") && !strings.HasPrefix(lines[i-1], "kernel ") {
				t.Errorf("line %d: boot without a kernel before it", i+1)
			}
		case strings.HasPrefix(l, "sanboot ") || strings.HasPrefix(l, "iseq ") || l == "exit 1":
			if block != labelLocalDisk {
				t.Errorf("line %d: local boot %q outside %s", i+1, l, labelLocalDisk)
			}
		}
		for _, m := range ipxeGotoRE.FindAllStringSubmatch(l, -1) {
			gotos = append(gotos, m[1])
			// Only the menu dispatches to entries; once an entry runs, every path leads
			// to the failure handler or the local disk, never back into a network boot.
			if block != "" && m[1] != labelFailed && m[1] != labelLocalDisk {
				t.Errorf("line %d: %q in block %s jumps back to %s (boot loop)", i+1, l, block, m[1])
			}
		}
		if who != "" && strings.HasPrefix(l, "echo Overtime: ") && strings.Contains(l, " mode ") &&
			!strings.HasPrefix(l, "echo Overtime: "+who+" mode ") {
			t.Errorf("line %d: %q does not name the host as %q", i+1, l, who)
		}
	}
	for name, n := range labels {
		if n != 1 {
			t.Errorf("label :%s defined %d times", name, n)
		}
	}
	for _, g := range append(gotos, keys(items)...) {
		if g == "${target}" {
			continue
		}
		if labels[g] == 0 {
			t.Errorf("goto/item target %s has no label", g)
		}
	}
	for _, need := range []string{labelLocalDisk, labelFailed} {
		if labels[need] == 0 {
			t.Errorf("no :%s label", need)
		}
	}
	if wantDefault == "" {
		return
	}
	if chooses != 1 {
		t.Errorf("%d choose lines, want 1", chooses)
	}
	if !items[wantDefault] {
		t.Errorf("default %s is not a menu item", wantDefault)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkSafeLine: printable ASCII only; no quote, backslash or '$' except the iPXE
// variables the renderer itself writes.
func checkSafeLine(t tb, n int, l string, ipxe bool) {
	t.Helper()
	rest := l
	if ipxe {
		for _, v := range []string{"${platform}", "${target}", "${netX/mac}"} {
			rest = strings.ReplaceAll(rest, v, "")
		}
	}
	for _, r := range rest {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '$' {
			t.Errorf("line %d: unsafe character %q in %q", n, r, l)
		}
	}
	if ipxe && (strings.Contains(rest, "&&") && !strings.HasPrefix(l, "iseq ${platform} efi && ")) {
		t.Errorf("line %d: && in %q", n, l)
	}
}

// TestBootDefaults checks the default choice directly, including a scheduled mode with
// nothing to boot and duplicate or reordered Others.
func TestBootDefaults(t *testing.T) {
	site := testSite()
	b := testBoot(t, site, "pc-a01", "", "desktop", "r", "maint", "local", "desktop")
	p, err := b.plan()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range p.entries {
		got = append(got, e.label)
	}
	if strings.Join(got, " ") != "mode-desktop mode-local mode-maint" {
		t.Errorf("entries %v: want the scheduled mode first, then the others by name, without the scheduled mode again", got)
	}

	// A maintenance mode with neither image nor kernel cannot boot: local disk.
	bare := model.Mode{Name: "bare", Kind: model.KindMaintenance}
	b = testBoot(t, site, "pc-a01", "", "desktop", "r", "local")
	b.Mode, b.Image = &bare, nil
	p, err = b.plan()
	if err != nil {
		t.Fatal(err)
	}
	if p.def != "mode-local" || p.entries[0].missing == "" {
		t.Errorf("default %s, missing %q: want mode-local and a reason", p.def, p.entries[0].missing)
	}

	// Duplicate menu entries are a caller bug.
	b = testBoot(t, site, "pc-a01", "", "desktop", "r", "local", "local")
	if _, err := b.plan(); err == nil {
		t.Error("duplicate menu entries accepted")
	}

	// Timeouts: rounded up; zero and negative use the default, never "wait forever".
	for _, c := range []struct {
		d      time.Duration
		deci   int
		millis int64
	}{{0, 50, 5000}, {-time.Second, 50, 5000}, {time.Millisecond, 1, 1}, {1500 * time.Millisecond, 15, 1500}, {1501 * time.Millisecond, 16, 1501}} {
		b := testBoot(t, site, "pc-a01", "", "desktop", "")
		b.Timeout = c.d
		p, err := b.plan()
		if err != nil {
			t.Fatal(err)
		}
		if deciseconds(p.timeout) != c.deci || milliseconds(p.timeout) != c.millis {
			t.Errorf("timeout %v: %d/10 s, %d ms; want %d, %d", c.d, deciseconds(p.timeout), milliseconds(p.timeout), c.deci, c.millis)
		}
	}
}

// TestNoMACDefault: pxelinux.cfg/default names no MAC; the HTTP server renders it as an
// unknown PC, which must still boot.
func TestNoMACDefault(t *testing.T) {
	site := testSite()
	b := testBoot(t, site, "", "52:54:00:99:99:99", "local", "no MAC")
	b.MAC = ""
	var buf bytes.Buffer
	if err := PXELinux(&buf, b); err != nil {
		t.Fatal(err)
	}
	checkPXELinux(t, buf.String(), "mode-local")
	buf.Reset()
	if err := IPXE(&buf, b); err != nil {
		t.Fatal(err)
	}
	checkIPXE(t, buf.String(), "mode-local", "unknown PC")

	b.Host = site.Host("pc-a01")
	if err := IPXE(&buf, b); err == nil {
		t.Error("a known host without a MAC was accepted")
	}
}

// TestStandInServer: a site without boot servers gets a stand-in server with only an HTTP
// URL from the HTTP server; image modes cannot be mounted from it and fall back to the
// local disk instead of failing the whole script.
func TestStandInServer(t *testing.T) {
	site := testSite()
	b := testBoot(t, site, "", "52:54:00:99:99:99", "desktop", "", "maint")
	b.Server = &model.BootServer{Name: "self", HTTPURL: "http://192.0.2.10:8080", DHCP: model.DHCPFull}
	var buf bytes.Buffer
	if err := IPXE(&buf, b); err != nil {
		t.Fatal(err)
	}
	checkIPXE(t, buf.String(), labelLocalDisk, b.MAC+" (unknown)")
	if !strings.Contains(buf.String(), "has no NFS server") {
		t.Errorf("no reason given for the unavailable desktop:\n%s", buf.String())
	}
}

func TestKernelCommandLine(t *testing.T) {
	site := testSite()
	srv := site.BootServer("boot2")
	m := site.Mode("cluster")
	got, err := KernelCommandLine(srv, site.Host("pc-a04"), m, resolve(site, m))
	if err != nil {
		t.Fatal(err)
	}
	want := "ip=dhcp boot=overtime panic=30 overtime.root=nfs:nfs.example.org:/export/overtime/desktop/2026.11.21-1/root.squashfs " +
		"overtime.sha256=" + resolve(site, m).SHA256 + " overtime.size=6442450944 overtime.mode=cluster overtime.kind=cluster overtime.host=pc-a04 " +
		"overtime.url=http://boot2.example.org:8080/overtime overtime.guest=dedicated mitigations=auto"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Unknown host: no overtime.host; no image: no root and no sha256.
	got, err = KernelCommandLine(site.BootServer("boot1"), nil, site.Mode("maint"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want = "ip=dhcp boot=overtime panic=30 overtime.mode=maint overtime.kind=maintenance overtime.url=http://10.0.0.1:8080 console=ttyS0,115200n8"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A site whose API is HTTPS: the agent's URL beside the boot files'.
	tlsServer := *site.BootServer("boot1")
	tlsServer.APIURL = "https://overtime.example.org:8443/"
	got, err = KernelCommandLine(&tlsServer, nil, site.Mode("maint"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want = "ip=dhcp boot=overtime panic=30 overtime.mode=maint overtime.kind=maintenance overtime.url=http://10.0.0.1:8080 overtime.api=https://overtime.example.org:8443 console=ttyS0,115200n8"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	tlsServer.APIURL = "http://overtime.example.org:8443"
	if _, err := KernelCommandLine(&tlsServer, nil, site.Mode("maint"), nil); err == nil || !strings.Contains(err.Error(), "invalid API URL") {
		t.Errorf("a plain-HTTP API URL rendered: %v", err)
	}
}

func TestSlurmHostlist(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"pc-a03", "pc-a01", "pc-a02"}, "pc-a[01-03]"},
		{[]string{"pc-a01", "pc-a1", "pc-a2", "pc-a05", "pc-a06", "x"}, "pc-a[01,05-06],pc-a[1-2],x"},
		{[]string{"seminar"}, "seminar"},
		{[]string{"n9", "n10", "n11"}, "n9,n[10-11]"},
		{[]string{"r2d2"}, "r2d2"},
		{nil, ""},
	} {
		if got := SlurmHostlist(c.in); got != c.want {
			t.Errorf("SlurmHostlist(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestExportIDs: ids depend only on each version's directory, so adding and deleting
// other versions does not change them, and they are unique even when hashes collide.
func TestExportIDs(t *testing.T) {
	site := testSite()
	vs, err := publishedVersions(site)
	if err != nil {
		t.Fatal(err)
	}
	assignExportIDs(vs)
	before := map[string]uint16{}
	for _, v := range vs {
		before[v.version.Path] = v.id
	}

	// Add a version that sorts first and delete one: the others keep their ids.
	im := site.Image("desktop")
	im.Versions = append(im.Versions[1:], model.ImageVersion{Version: "0-early", SHA256: strings.Repeat("f", 64),
		Path: "desktop/0-early", Created: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)})
	vs, err = publishedVersions(site)
	if err != nil {
		t.Fatal(err)
	}
	assignExportIDs(vs)
	for _, v := range vs {
		if id, ok := before[v.version.Path]; ok && id != v.id {
			t.Errorf("%s: id changed from %d to %d", v.version.Path, id, v.id)
		}
	}

	// Many versions: all ids unique and in range; collisions go to the newer version.
	var many []published
	for i := 0; i < 2000; i++ {
		many = append(many, published{image: "x", version: &model.ImageVersion{
			Path:    "x/" + strings.Repeat("v", 1+i%7) + "-" + string(rune('a'+i%26)) + "-" + itoa3(i),
			Created: time.Unix(int64(i), 0)}})
	}
	assignExportIDs(many)
	seen := map[uint16]string{}
	for _, v := range many {
		if v.id < exportIDMin || int(v.id) >= exportIDMin+exportIDRange {
			t.Errorf("id %d out of range", v.id)
		}
		if other, dup := seen[v.id]; dup {
			t.Errorf("id %d used by %s and %s", v.id, other, v.version.Path)
		}
		seen[v.id] = v.version.Path
	}
	// The oldest version always gets its own hash slot.
	first := []published{many[0]}
	assignExportIDs(first)
	if first[0].id != many[0].id {
		t.Errorf("the oldest version's id depends on the others: %d alone, %d with them", first[0].id, many[0].id)
	}
}

func itoa3(i int) string {
	return string([]byte{byte('0' + i/1000%10), byte('0' + i/100%10), byte('0' + i/10%10), byte('0' + i%10)})
}

// tb is the part of testing.TB the structure checkers use, so that TestCheckersFail can
// run them on broken scripts and see them complain.
type tb interface {
	Helper()
	Errorf(format string, a ...any)
	Fatalf(format string, a ...any)
}

type recorder struct{ errs []string }

type fatal struct{}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) {
	r.Errorf(format, a...)
	panic(fatal{})
}

// failures runs a checker and returns what it reported.
func failures(check func(t tb)) (errs []string) {
	r := &recorder{}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatal); !ok {
				panic(v)
			}
		}
		errs = r.errs
	}()
	check(r)
	return r.errs
}

// TestCheckersFail: the structure checkers must reject scripts with the mistakes they are
// there to catch; otherwise the passing structure tests would mean nothing.
func TestCheckersFail(t *testing.T) {
	site := testSite()
	b := testBoot(t, site, "pc-a01", "", "desktop", "r", "local", "maint")
	var buf bytes.Buffer
	if err := PXELinux(&buf, b); err != nil {
		t.Fatal(err)
	}
	pxe := buf.String()
	buf.Reset()
	if err := IPXE(&buf, b); err != nil {
		t.Fatal(err)
	}
	ipxe := buf.String()
	if errs := failures(func(t tb) { checkPXELinux(t, pxe, "mode-desktop") }); len(errs) != 0 {
		t.Fatalf("good PXELINUX config rejected: %v", errs)
	}
	if errs := failures(func(t tb) { checkIPXE(t, ipxe, "mode-desktop", "pc-a01") }); len(errs) != 0 {
		t.Fatalf("good iPXE script rejected: %v", errs)
	}
	for name, broken := range map[string]string{
		"two defaults":    strings.Replace(pxe, "  LOCALBOOT 0\n", "  LOCALBOOT 0\n  MENU DEFAULT\n", 1),
		"wrong default":   strings.Replace(strings.Replace(pxe, "  MENU DEFAULT\n", "", 1), "LABEL mode-local\n", "LABEL mode-local\n  MENU DEFAULT\n", 1),
		"no kernel":       strings.Replace(pxe, "  KERNEL http://10.0.0.1:8080/files/maintenance/vmlinuz-6.12\n", "", 1),
		"injected line":   strings.Replace(pxe, "MENU TITLE ", "MENU TITLE \"$x\" ", 1),
		"kernel and boot": strings.Replace(pxe, "  LOCALBOOT 0\n", "  LOCALBOOT 0\n  KERNEL http://x/y\n", 1),
		"unclosed text":   strings.Replace(pxe, "ENDTEXT\n", "", 1),
		"no onerror":      strings.Replace(pxe, "ONERROR overtime-localdisk\n", "", 1),
	} {
		if broken == pxe {
			t.Fatalf("%s: mutation did not apply", name)
		}
		if errs := failures(func(t tb) { checkPXELinux(t, broken, "mode-desktop") }); len(errs) == 0 {
			t.Errorf("PXELINUX checker accepted a config with %s", name)
		}
	}
	for name, broken := range map[string]string{
		"wrong default":    strings.Replace(ipxe, "--default mode-desktop", "--default mode-maint", 1),
		"boot loop":        strings.Replace(ipxe, "goto overtime-localdisk\n\n:overtime-localdisk", "goto mode-desktop\n\n:overtime-localdisk", 1),
		"no fallback":      strings.Replace(ipxe, "initrd.img || goto overtime-failed", "initrd.img", 1),
		"no echo":          strings.Replace(ipxe, "echo Overtime: pc-a01 mode desktop\n", "", 1),
		"missing label":    strings.Replace(ipxe, ":mode-maint\n", ":mode-maintenance\n", 1),
		"chained command":  strings.Replace(ipxe, "Maintenance system", "Maintenance || shell && x", 1),
		"expanded setting": strings.Replace(ipxe, "menu Overtime", "menu ${ip} Overtime", 1),
		"not a script":     strings.Replace(ipxe, "#!ipxe\n", "", 1),
	} {
		if broken == ipxe {
			t.Fatalf("%s: mutation did not apply", name)
		}
		if errs := failures(func(t tb) { checkIPXE(t, broken, "mode-desktop", "pc-a01") }); len(errs) == 0 {
			t.Errorf("iPXE checker accepted a script with %s", name)
		}
	}
}

// A course-vm mode names its VM on the command line, for the node agent.
func TestKernelCommandLineCourseVM(t *testing.T) {
	site := testSite()
	for i := range site.Modes {
		m := &site.Modes[i]
		if m.VM == "" {
			continue
		}
		got, err := KernelCommandLine(site.BootServer("boot1"), nil, m, resolve(site, m))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, " overtime.vm="+m.VM+" ") {
			t.Errorf("mode %s: no overtime.vm=%s in %s", m.Name, m.VM, got)
		}
		return
	}
	t.Fatal("the test site has no course-vm mode")
}

// Boot.Check marks the scheduled entry unavailable with its reason, and the menu
// defaults to the local disk instead of fetching files that are not there.
func TestBootCheckMakesEntryUnavailable(t *testing.T) {
	site := testSite()
	h := site.Host("pc-a04")
	m := site.Mode("desktop")
	b := Boot{MAC: h.MAC, Host: h, Server: site.BootServer(site.HostBootServer(h)), Mode: m, Image: resolve(site, m),
		Check: func(m *model.Mode, v *model.ImageVersion) string {
			return "image desktop has no vmlinuz on the boot server"
		}}
	var ipxe, pxe bytes.Buffer
	if err := IPXE(&ipxe, b); err != nil {
		t.Fatal(err)
	}
	if err := PXELinux(&pxe, b); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"ipxe": ipxe.String(), "pxelinux": pxe.String()} {
		if !strings.Contains(out, "UNAVAILABLE: image desktop has no vmlinuz on the boot server") {
			t.Errorf("%s: reason not shown:\n%s", name, out)
		}
		if strings.Contains(out, "/vmlinuz") {
			t.Errorf("%s: still loads the missing kernel:\n%s", name, out)
		}
	}
	if !strings.Contains(ipxe.String(), "choose --default "+labelLocalDisk) {
		t.Errorf("iPXE menu does not default to the local disk:\n%s", ipxe.String())
	}
}

// A mode whose compute guest is bridged asks the initramfs for the bridge (default br0,
// or the guest's); NAT, none and guest-less modes do not.
func TestKernelCommandLineBridge(t *testing.T) {
	site := testSite()
	base := *site.Mode("cluster")
	for _, c := range []struct {
		guest *model.Guest
		want  string // "" = no overtime.bridge
	}{
		{nil, ""},
		{&model.Guest{Image: "x"}, "br0"},
		{&model.Guest{Image: "x", Network: model.NetBridged, Bridge: "lan1"}, "lan1"},
		{&model.Guest{Image: "x", Network: model.NetNAT}, ""},
		{&model.Guest{Image: "x", Network: model.NetNone}, ""},
	} {
		m := base
		m.Guest = c.guest
		got, err := KernelCommandLine(site.BootServer("boot1"), site.Host("pc-a04"), &m, resolve(site, &m))
		if err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(got, " overtime.bridge=")
		if c.want == "" && has || c.want != "" && !strings.Contains(got, " overtime.bridge="+c.want+" ") {
			t.Errorf("guest %+v: want bridge %q in %s", c.guest, c.want, got)
		}
	}
	m := base
	m.Guest = &model.Guest{Image: "x", Bridge: "br0 reboot"}
	if _, err := KernelCommandLine(site.BootServer("boot1"), site.Host("pc-a04"), &m, resolve(site, &m)); err == nil {
		t.Error("a bridge name with a blank was rendered")
	}
}
