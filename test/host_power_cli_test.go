package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// TestHostPowerCLI: `overtime host reboot|poweroff|wake`, `host power-status` and `audit`
// from the real binary: per-host accepted/refused lines, exit 1 when any host is refused,
// -o json, 403 for a lecturer, exit 2 for usage errors.
func TestHostPowerCLI(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	bin := bootlab.Binary(t)
	run := func(user, pw string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OVERTIME_SERVER=" + env.HTTP.URL, "OVERTIME_USER=" + user, "OVERTIME_PASSWORD=" + pw}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	// pc-a01's agent is alive with a user logged in; pc-a02's with nobody.
	admin := env.Admin()
	for host, sessions := range map[string]int{"pc-a01": 1, "pc-a02": 0} {
		cred, err := admin.CreateHostCredential(context.Background(), host)
		if err != nil {
			t.Fatal(err)
		}
		c := env.Client("", "")
		c.Token = cred.Token
		if err := c.Heartbeat(context.Background(), wire.Heartbeat{Instance: "i", Seq: 1, Mode: "course-bio101", OwnerState: model.StateNoUser, Sessions: sessions}); err != nil {
			t.Fatal(err)
		}
	}

	out, errs, code := run("alice", "alice-secret", "host", "poweroff", "pc-a[01-02]", "--reason", "room cleaning")
	if code != 1 || !strings.Contains(errs, "1 of 2 hosts refused: pc-a01") {
		t.Errorf("poweroff: exit %d, stderr %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "HOST") || !strings.Contains(lines[1], "pc-a01") || !strings.Contains(lines[1], "refused") ||
		!strings.Contains(lines[1], "logged in") || !strings.Contains(lines[2], "pc-a02") || !strings.Contains(lines[2], "accepted") {
		t.Errorf("poweroff table:\n%s", out)
	}
	out, _, code = run("alice", "alice-secret", "host", "reboot", "pc-a01", "--force", "-o", "json")
	var res wire.HostPowerResponse
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Hosts) != 1 || !res.Hosts[0].Accepted {
		t.Errorf("reboot -o json: exit %d %s", code, out)
	}
	if _, errs, code := run("carol", "carol-secret", "host", "reboot", "pc-a01"); code != 1 || !strings.Contains(errs, "never changes how a PC boots") {
		t.Errorf("lecturer: exit %d %s", code, errs)
	}
	if _, _, code := run("alice", "alice-secret", "host", "wake"); code != 2 {
		t.Errorf("wake without hosts: exit %d, want 2", code)
	}
	out, _, code = run("dave", "dave-secret", "host", "power-status")
	if code != 0 || !strings.Contains(out, "poweroff") || !strings.Contains(out, "reboot (force)") || !strings.Contains(out, "pending") {
		t.Errorf("power-status:\n%s", out)
	}
	// 24 hours back from the site manager's (fixed) clock; the CLI counts a duration from
	// this machine's real one (a fixed "24h" stopped finding the entries a day after the
	// test's date).
	back := (time.Since(env.Now) + 24*time.Hour).Truncate(time.Second)
	out, _, code = run("dave", "dave-secret", "audit", "--host", "pc-a01", "--since", back.String())
	if code != 0 || !strings.Contains(out, "poweroff pc-a01,pc-a02: 1 accepted, 1 refused (reason: room cleaning)") || !strings.Contains(out, "alice") {
		t.Errorf("audit:\n%s", out)
	}
	t.Logf("overtime audit --host pc-a01:\n%s", out)
	// --detail: a site change with its fields, old → new.
	out, _, code = run("admin", testenv.AdminPassword, "audit", "--detail")
	if code != 0 || !regexp.MustCompile(`\+ host pc-a01\n(.*\n)*?\s+mac: "52:54:00:0a:00:01"\n`).MatchString(out) {
		t.Errorf("audit --detail lacks the added host's fields:\n%s", out)
	}
}
