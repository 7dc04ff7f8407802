// Package test holds cross-component end-to-end tests: the real `overtime` binary against
// a real site manager (slapd + service + API).
package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
)

type cli struct {
	t    *testing.T
	bin  string
	env  []string
	root string
}

// run executes the CLI and returns stdout, stderr and the exit code.
func (c cli) run(user, pw string, args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = c.root
	cmd.Env = append(append(os.Environ(), c.env...), "OVERTIME_USER="+user, "OVERTIME_PASSWORD="+pw)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (c cli) admin(args ...string) (string, string, int) {
	return c.run("admin", testenv.AdminPassword, args...)
}

func TestCLI(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	c := cli{t: t, bin: bootlab.Binary(t), env: []string{"OVERTIME_SERVER=" + env.HTTP.URL}, root: testenv.RepoRoot(t)}

	out, errs, code := c.admin("site", "apply", "-f", "docs/examples/site.yaml")
	if code != 0 || !strings.Contains(out, "+ host pc-a01") || !strings.Contains(out, "+ pool lab-a") {
		t.Fatalf("site apply: %d\n%s\n%s", code, out, errs)
	}
	out, _, code = c.admin("site", "apply", "-f", "docs/examples/site.yaml")
	if code != 0 || strings.TrimSpace(out) != "no changes" {
		t.Fatalf("second apply: %d %q", code, out)
	}
	exported, _, code := c.admin("site", "export")
	if code != 0 {
		t.Fatalf("export failed")
	}
	f := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(f, []byte(exported), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code = c.admin("site", "apply", "-f", f)
	if code != 0 || strings.TrimSpace(out) != "no changes" {
		t.Fatalf("applying the export: %d %q %s", code, out, errs)
	}

	// mode-at prints the mode alone on the first line, then rule and next change.
	out, _, code = c.admin("mode-at", "pc-a01", "2026-12-02 10:30")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || lines[0] != "course-bio101" || !strings.Contains(lines[1], "wed 10:00-12:00 course-bio101") || !strings.Contains(lines[2], "12:00") {
		t.Fatalf("mode-at: %d\n%s", code, out)
	}

	// Users for the role checks.
	for _, u := range []string{"alice", "bob"} {
		cmd := exec.Command(c.bin, "user", "add", u)
		cmd.Env = append(os.Environ(), "OVERTIME_SERVER="+env.HTTP.URL, "OVERTIME_USER=admin", "OVERTIME_PASSWORD="+testenv.AdminPassword, "OVERTIME_NEW_PASSWORD="+u+"-secret")
		if o, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("user add %s: %v %s", u, err, o)
		}
	}

	csv := filepath.Join(t.TempDir(), "hosts.csv")
	os.WriteFile(csv, []byte("name,mac,ip,pool\npc-c01,52:54:00:0c:00:01,10.20.0.31,lab-b\npc-c02,52:54:00:0c:00:0g,10.20.0.32,lab-b\n"), 0o644)
	good := filepath.Join(t.TempDir(), "good.csv")
	os.WriteFile(good, []byte("pc-c01,52:54:00:0c:00:01,10.20.0.31,lab-b\n"), 0o644)
	pub := filepath.Join(t.TempDir(), "root.squashfs")
	os.WriteFile(pub, []byte("not really squashfs"), 0o644)

	// Each failure: exit status 1, one line on stderr naming the problem, nothing written.
	for _, tc := range []struct {
		name     string
		user, pw string
		args     []string
		code     int
		out, err string
	}{
		{"hostname with space", "admin", testenv.AdminPassword, []string{"host", "add", "pc x", "--mac", "52:54:00:0c:00:09", "--pool", "lab-a"}, 1, "", "invalid hostname"},
		{"invalid MAC", "admin", testenv.AdminPassword, []string{"host", "add", "pc-x", "--mac", "52:54:00:0c:00", "--pool", "lab-a"}, 1, "", "invalid MAC"},
		{"duplicate MAC", "admin", testenv.AdminPassword, []string{"host", "add", "pc-x", "--mac", "52:54:00:0a:00:01", "--pool", "lab-a"}, 1, "", "duplicate MAC"},
		{"CSV with a bad row", "admin", testenv.AdminPassword, []string{"host", "import", csv}, 1, "", "line 3"},
		{"re-added rule", "admin", testenv.AdminPassword, []string{"schedule", "add", "--pool", "lab-b", "sat 09:00-14:00 desktop"}, 1, "", `rule "sat 09:00-14:00 desktop" already exists on pool lab-b`},
		{"mode in use", "admin", testenv.AdminPassword, []string{"mode", "delete", "desktop"}, 1, "", "mode desktop is used by exception exam-2026-12-09 (targets pool lab-a, 2026-12-09 08:00-13:00), pool lab-a (rule"},
		{"boot server in use", "admin", testenv.AdminPassword, []string{"bootserver", "delete", "bs1"}, 1, "", "boot server bs1 is used by pool lab-a, pool lab-b; delete or change them first"},
		{"overlapping rule", "admin", testenv.AdminPassword, []string{"schedule", "add", "--pool", "lab-b", "wed 17:00-19:00 maintenance"}, 1, "", "overlap"},
		{"other pool's admin", "bob", "bob-secret", []string{"host", "delete", "pc-a01"}, 1, "", "may not"},
		{"wrong password", "alice", "nope", []string{"host", "list"}, 1, "", "invalid credentials"},
		{"unknown mode in exception", "admin", testenv.AdminPassword, []string{"exception", "add", "x1", "--kind", "exam", "--start", "2026-12-10 08:00", "--end", "2026-12-10 09:00", "--mode", "party", "--pool", "lab-a"}, 1, "", "unknown mode"},
		{"pool admin adds in own pool", "alice", "alice-secret", []string{"host", "add", "pc-a09", "--mac", "52-54-00-0A-00-09", "--ip", "10.20.0.19", "--pool", "lab-a"}, 0, "+ host pc-a09", ""},
		{"pool admin adds a rule", "alice", "alice-secret", []string{"schedule", "add", "--host", "pc-a09", "sun 10:00-12:00 maintenance"}, 0, "~ host pc-a09", ""},
		{"schedule list", "alice", "alice-secret", []string{"schedule", "list", "--host", "pc-a09"}, 0, "sun 10:00-12:00 maintenance", ""},
		{"exception with local times", "admin", testenv.AdminPassword, []string{"exception", "add", "exam-2", "--kind", "exam", "--start", "2026-12-16 08:00", "--end", "2026-12-16 12:00", "--mode", "desktop", "--pool", "lab-b"}, 0, "+ exception exam-2", ""},
		{"CSV import without a terminal to confirm on", "admin", testenv.AdminPassword, []string{"host", "import", good}, 1, "+ host pc-c01 (mac 52:54:00:0c:00:01", "rerun with --yes"},
		{"CSV import", "admin", testenv.AdminPassword, []string{"host", "import", good, "--yes"}, 0, "+ host pc-c01", ""},
		{"CSV import again", "admin", testenv.AdminPassword, []string{"host", "import", good, "--yes"}, 0, "0 to add, 0 to change, 1 unchanged", ""},
		{"publish an image version", "admin", testenv.AdminPassword, []string{"image", "publish", "bio101-vm", "ws2026-9", "--path", "bio101-vm/ws2026-9", "--file", pub}, 0, "bio101-vm", ""},
		{"render dnsmasq", "dave", "x", []string{"render", "dnsmasq"}, 1, "", "invalid credentials"},
		{"render dnsmasq hosts", "admin", testenv.AdminPassword, []string{"render", "dnsmasq-hosts", "--boot-server", "bs1"}, 0, "pc-a09", ""},
		{"host list filtered", "admin", testenv.AdminPassword, []string{"host", "list", "--pool", "lab-b"}, 0, "pc-c01", ""},
		{"set a field", "admin", testenv.AdminPassword, []string{"pool", "set", "lab-b", "--room", "Room 0.15"}, 0, "~ pool lab-b", ""},
		{"DNS servers handed out", "admin", testenv.AdminPassword, []string{"bootserver", "set", "bs1", "--dns-server", "10.20.0.53", "--dns-server", "192.0.2.53", "--domain", "cs.example.org"}, 0, "~ bootserver bs1 (dnsServers, domain)", ""},
		{"render dnsmasq with DNS", "admin", testenv.AdminPassword, []string{"render", "dnsmasq", "--boot-server", "bs1"}, 0, "dhcp-option=option:dns-server,10.20.0.53,192.0.2.53\ndhcp-option=option:domain-name,cs.example.org\n", ""},
		{"DNS domain with a comma", "admin", testenv.AdminPassword, []string{"bootserver", "set", "bs1", "--domain", "cs.example.org,8.8.8.8"}, 1, "", "invalid DNS domain"},
		{"four DNS servers", "admin", testenv.AdminPassword, []string{"bootserver", "set", "bs1", "--dns-server", "10.0.0.1", "--dns-server", "10.0.0.2", "--dns-server", "10.0.0.3", "--dns-server", "10.0.0.4"}, 1, "", "at most 3"},
		{"DNS servers cleared", "admin", testenv.AdminPassword, []string{"bootserver", "set", "bs1", "--dns-server", "", "--domain", ""}, 0, "~ bootserver bs1 (dnsServers, domain)", ""},
		{"whoami", "alice", "alice-secret", []string{"whoami"}, 0, "pool-admin:lab-a", ""},
	} {
		before, _ := env.Store.Load(t.Context())
		out, errs, code := c.run(tc.user, tc.pw, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.err) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q", tc.name, code, out, errs, tc.code, tc.out, tc.err)
			continue
		}
		if tc.code != 0 {
			if strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("%s: error is not one line: %q", tc.name, errs)
			}
			after, _ := env.Store.Load(t.Context())
			if len(after.Hosts) != len(before.Hosts) || len(after.Exceptions) != len(before.Exceptions) {
				t.Errorf("%s: failed but changed the directory", tc.name)
			}
		}
	}
}
