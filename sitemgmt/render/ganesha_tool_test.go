package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The rendered nfs-ganesha exports checked by the real ganesha.nfsd (Debian nfs-ganesha
// and nfs-ganesha-vfs). ganesha has no syntax-check mode, so the test starts it in the
// foreground on a temporary configuration that %includes the rendered file, with the
// CONFIG and EXPORT log components at INFO: ganesha then logs every configuration error
// ("Config File (...)") and every export it created, and the test stops it again.
//
// The core parameters are NFSv4 only, on 127.0.0.1 and a free port, without NLM and
// RQUOTA: NFSv3 would have to register with rpcbind, which a test machine does not run.
// ganesha narrows the rendered "Protocols = 3, 4" to 4 with a warning, which is expected.

// ganeshaWith runs ganesha.nfsd on rendered until it has initialized, and returns its log.
func ganeshaWith(t *testing.T, dir, rendered string) (string, error) {
	t.Helper()
	ganesha := lookTool(t, "ganesha.nfsd", "nfs-ganesha nfs-ganesha-vfs")
	exports := filepath.Join(dir, "overtime-exports.conf")
	if err := os.WriteFile(exports, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	recovery := filepath.Join(dir, "recovery")
	if err := os.MkdirAll(recovery, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "ganesha.conf")
	main := fmt.Sprintf(`NFS_CORE_PARAM {
	Protocols = 4;
	NFS_Port = %d;
	Bind_addr = 127.0.0.1;
	Enable_NLM = false;
	Enable_RQUOTA = false;
}
NFSv4 {
	RecoveryBackend = fs;
	RecoveryRoot = "%s";
	Graceless = true;
}
LOG {
	COMPONENTS {
		CONFIG = INFO;
		EXPORT = INFO;
	}
}
%%include "%s"
`, freePort(t), recovery, exports)
	if err := os.WriteFile(conf, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "ganesha.log")
	d := startDaemon(t, ganesha, "-F", "-f", conf, "-L", log, "-p", filepath.Join(dir, "ganesha.pid"), "-N", "NIV_EVENT")
	readLog := func() string { b, _ := os.ReadFile(log); return string(b) }
	ok := waitFor(d, 30*time.Second, func() bool { return strings.Contains(readLog(), "NFS SERVER INITIALIZED") })
	d.stop()
	out := readLog()
	if !ok {
		return out + d.out.String(), fmt.Errorf("ganesha did not initialize (exited: %v, %v)", d.exited(), d.err)
	}
	var errs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "Config File (") || strings.Contains(l, ":CONFIG :CRIT") ||
			strings.Contains(l, ":CONFIG :MAJ") || strings.Contains(l, ":CONFIG :FATAL") {
			errs = append(errs, l)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("configuration errors:\n%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

var ganeshaCreatedRE = regexp.MustCompile(`Export (\d+) created at pseudo \((\S+)\) with path \((\S+)\)`)

func TestGaneshaRealTool(t *testing.T) {
	site := testSite()
	dir := t.TempDir()
	root := filepath.Join(dir, "images")
	var want []string
	for _, im := range site.Images {
		for _, v := range im.Versions {
			// The VFS FSAL exports only directories that exist.
			if err := os.MkdirAll(filepath.Join(root, v.Path), 0o755); err != nil {
				t.Fatal(err)
			}
			want = append(want, filepath.Join(root, v.Path)+" "+filepath.Join(root, v.Path)) // Pseudo = Path
		}
	}
	var buf bytes.Buffer
	if err := Ganesha(&buf, site, site.BootServer("boot1"), root); err != nil {
		t.Fatal(err)
	}
	rendered := buf.String()
	log, err := ganeshaWith(t, dir, rendered)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	t.Logf("ganesha log:\n%s", log)
	created := map[string]string{}
	for _, m := range ganeshaCreatedRE.FindAllStringSubmatch(log, -1) {
		created[m[2]+" "+m[3]] = m[1]
	}
	for _, w := range want {
		id, ok := created[w]
		if !ok {
			t.Errorf("ganesha did not create the export %s; log:\n%s", w, log)
			continue
		}
		if !strings.Contains(rendered, "Export_Id = "+id+";") {
			t.Errorf("export %s got id %s, which the rendered file does not give", w, id)
		}
	}
	if len(created) != len(want) {
		t.Errorf("ganesha created %d exports, want %d", len(created), len(want))
	}
}

// TestGaneshaCheckerFails: the check must notice a configuration ganesha rejects.
func TestGaneshaCheckerFails(t *testing.T) {
	site := testSite()
	dir := t.TempDir()
	root := filepath.Join(dir, "images")
	for _, im := range site.Images {
		for _, v := range im.Versions {
			if err := os.MkdirAll(filepath.Join(root, v.Path), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	var buf bytes.Buffer
	if err := Ganesha(&buf, site, site.BootServer("boot1"), root); err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(buf.String(), "\tSquash = Root_Squash;\n", "\tSquash = Root_Squash;\n\tNo_Such_Option = 1;\n", 1)
	if broken == buf.String() {
		t.Fatal("mutation did not apply")
	}
	log, err := ganeshaWith(t, dir, broken)
	if err == nil || !strings.Contains(err.Error(), "No_Such_Option") {
		t.Errorf("a configuration with an unknown option was not reported: %v; log:\n%s", err, log)
	}
}
