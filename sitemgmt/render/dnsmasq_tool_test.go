package render

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The rendered dnsmasq files checked by dnsmasq itself (Debian dnsmasq-base):
//   - dnsmasq --test on the main configuration ("syntax check OK");
//   - dnsmasq --test on the hosts file's lines as dhcp-host= options (--test does not read
//     the hosts file; a hosts file line has exactly the dhcp-host= syntax);
//   - a real start inside a private network namespace (unshare --net: only a loopback that
//     is down, so nothing is sent or received anywhere), which must read the hosts file
//     without complaint, and re-read it on SIGHUP after the modes changed: the reload path
//     Overtime relies on every 10 minutes.

func TestDnsmasqRealTool(t *testing.T) {
	dnsmasq := lookTool(t, "dnsmasq", "dnsmasq-base")
	unshare := lookTool(t, "unshare", "util-linux")
	for _, c := range []struct{ name, server string }{{"full", "boot1"}, {"proxy", "boot2"}, {"full-static", "boot3"}} {
		t.Run(c.name, func(t *testing.T) {
			site := testSite()
			dir := t.TempDir()
			hostsFile, tftp := filepath.Join(dir, "hosts"), filepath.Join(dir, "tftp")
			if err := os.Mkdir(tftp, 0o755); err != nil {
				t.Fatal(err)
			}
			d := testDnsmasq(site, c.server, hostsFile, tftp)
			conf := filepath.Join(dir, "dnsmasq.conf")
			writeRendered(t, conf, d.Config)
			writeRendered(t, hostsFile, d.Hosts)

			if out, err := dnsmasqTest(dnsmasq, conf); err != nil {
				t.Fatalf("main configuration: %v\n%s", err, out)
			}
			if out, err := dnsmasqTest(dnsmasq, hostsAsOptions(t, dir, conf, hostsFile)); err != nil {
				t.Fatalf("hosts file lines: %v\n%s", err, out)
			}

			// Every host in another mode, as after a schedule change: the new file must be
			// read on SIGHUP.
			for h, m := range map[string]string{"pc-a01": "cluster", "pc-a04": "desktop", "seminar": "maint"} {
				testModes[h], m = m, testModes[h]
				defer func(h, m string) { testModes[h] = m }(h, m)
			}
			var next bytes.Buffer
			if err := d.Hosts(&next); err != nil {
				t.Fatal(err)
			}
			out, err := dnsmasqRun(t, unshare, dnsmasq, dir, conf, hostsFile, next.Bytes())
			if err != nil {
				t.Fatalf("dnsmasq run: %v\n%s", err, out)
			}
			t.Logf("dnsmasq log:\n%s", out)
		})
	}
}

// TestDnsmasqCheckerFails: the checks above must fail on broken files.
func TestDnsmasqCheckerFails(t *testing.T) {
	dnsmasq := lookTool(t, "dnsmasq", "dnsmasq-base")
	unshare := lookTool(t, "unshare", "util-linux")
	site := testSite()
	dir := t.TempDir()
	hostsFile := filepath.Join(dir, "hosts")
	d := testDnsmasq(site, "boot1", hostsFile, dir)
	var conf bytes.Buffer
	if err := d.Config(&conf); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, append(conf.Bytes(), "dhcp-range=10.0.0.1,nonsense-mode\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := dnsmasqTest(dnsmasq, bad); err == nil {
		t.Errorf("dnsmasq --test accepted a broken dhcp-range:\n%s", out)
	}
	good := filepath.Join(dir, "good.conf")
	if err := os.WriteFile(good, conf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	badHosts := []byte("52:54:00:00:00:01,set:pool-x,set:mode-desktop,10.0.0.11,pc_underscore\n")
	if err := os.WriteFile(hostsFile, badHosts, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := dnsmasqRun(t, unshare, dnsmasq, dir, good, hostsFile, badHosts); err == nil {
		t.Errorf("dnsmasq run accepted a hosts file with a bad host name:\n%s", out)
	}
}

func writeRendered(t *testing.T, path string, render func(io.Writer) error) {
	t.Helper()
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dnsmasqTest runs dnsmasq --test on a configuration file.
func dnsmasqTest(dnsmasq, conf string) (string, error) {
	out, err := exec.Command(dnsmasq, "--test", "--conf-file="+conf).CombinedOutput()
	if err != nil {
		return string(out), err
	}
	if !strings.Contains(string(out), "syntax check OK") {
		return string(out), fmt.Errorf("no \"syntax check OK\"")
	}
	return string(out), nil
}

// hostsAsOptions writes a configuration that includes conf and repeats every hosts file
// line as a dhcp-host= option, so that --test parses them.
func hostsAsOptions(t *testing.T, dir, conf, hostsFile string) string {
	t.Helper()
	hosts, err := os.ReadFile(hostsFile)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("conf-file=" + conf + "\n")
	n := 0
	for _, l := range strings.Split(string(hosts), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		b.WriteString("dhcp-host=" + l + "\n")
		n++
	}
	if n == 0 {
		t.Fatalf("hosts file %s has no hosts", hostsFile)
	}
	p := filepath.Join(dir, "hosts-as-options.conf")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dnsmasqRun starts dnsmasq with conf in a new network namespace, waits until it has read
// the hosts file, writes next into the hosts file, sends SIGHUP and waits for the second
// read. It fails on any complaint dnsmasq logs.
func dnsmasqRun(t *testing.T, unshare, dnsmasq, dir, conf, hostsFile string, next []byte) (string, error) {
	t.Helper()
	args := []string{"--net"}
	if os.Geteuid() != 0 {
		args = append(args, "--map-root-user") // a user namespace makes the test user root in it
	}
	// --user=root: the files are in a private test directory that the unprivileged user
	// dnsmasq normally switches to cannot read.
	args = append(args, dnsmasq, "--keep-in-foreground", "--log-facility=-", "--conf-file="+conf,
		"--pid-file="+filepath.Join(dir, "dnsmasq.pid"), "--dhcp-leasefile="+filepath.Join(dir, "leases"), "--user=root")
	d := startDaemon(t, unshare, args...)
	defer d.stop()
	read := "read " + hostsFile
	if !waitFor(d, 10*time.Second, func() bool { return strings.Count(d.out.String(), read) >= 1 }) {
		return d.out.String(), fmt.Errorf("dnsmasq did not read %s (exited: %v, %v)", hostsFile, d.exited(), d.err)
	}
	if err := os.WriteFile(hostsFile, next, 0o644); err != nil {
		t.Fatal(err)
	}
	d.signal(syscall.SIGHUP)
	if !waitFor(d, 10*time.Second, func() bool { return strings.Count(d.out.String(), read) >= 2 }) {
		return d.out.String(), fmt.Errorf("dnsmasq did not re-read %s on SIGHUP", hostsFile)
	}
	out := d.out.String()
	if d.exited() {
		return out, fmt.Errorf("dnsmasq exited: %v", d.err)
	}
	for _, l := range strings.Split(out, "\n") {
		low := strings.ToLower(l)
		if strings.Contains(low, "bad ") || strings.Contains(low, "error") || strings.Contains(low, "fail") ||
			strings.Contains(low, "illegal") || strings.Contains(low, "unknown") {
			return out, fmt.Errorf("dnsmasq complained: %s", l)
		}
	}
	return out, nil
}
