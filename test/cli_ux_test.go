package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestCLIConventions: the real binary against a real site manager: users managed from the
// command line with passwords never on argv, the client config file, -o json, the one
// time format, and exit status 2 for usage errors.
func TestCLIConventions(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	bin := bootlab.Binary(t)
	home := t.TempDir()
	// run executes the CLI with only the given OVERTIME_* variables and stdin.
	run := func(stdin string, vars map[string]string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "TZ=UTC"} // times must come out in the site's zone all the same
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdin = strings.NewReader(stdin)
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
	as := func(user, pw string) map[string]string {
		return map[string]string{"OVERTIME_SERVER": env.HTTP.URL, "OVERTIME_USER": user, "OVERTIME_PASSWORD": pw}
	}
	admin := as("admin", testenv.AdminPassword)
	mustRun := func(stdin string, vars map[string]string, args ...string) string {
		t.Helper()
		out, errs, code := run(stdin, vars, args...)
		if code != 0 {
			t.Fatalf("overtime %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}
	listUsers := func() []model.User {
		t.Helper()
		var users []model.User
		if err := json.Unmarshal([]byte(mustRun("", admin, "user", "list", "-o", "json")), &users); err != nil {
			t.Fatal(err)
		}
		return users
	}
	hasUser := func(uid string) bool {
		for _, u := range listUsers() {
			if u.UID == uid {
				return true
			}
		}
		return false
	}

	// A user's life: added with the password on stdin, changes it, is deleted.
	mustRun("grace-secret\n", admin, "user", "add", "grace", "--name", "Grace H.", "--new-password-file", "-")
	if !hasUser("grace") {
		t.Fatal("user list lacks grace")
	}
	if out := mustRun("", admin, "user", "list"); !regexp.MustCompile(`(?m)^grace\s+Grace H\.$`).MatchString(out) {
		t.Errorf("user list table:\n%s", out)
	}
	mustRun("grace-new-secret\n", as("grace", "grace-secret"), "user", "passwd", "--new-password-file", "-")
	if _, errs, code := run("", as("grace", "grace-secret"), "whoami"); code != 1 || !strings.Contains(errs, "invalid credentials") {
		t.Errorf("old password after passwd: exit %d %s", code, errs)
	}
	if _, errs, code := run("x-secret-pw\n", as("grace", "grace-new-secret"), "user", "passwd", "dave", "--new-password-file", "-"); code != 1 || !strings.Contains(errs, "only change their own") {
		t.Errorf("grace sets dave's password: exit %d %s", code, errs)
	}
	mustRun("", admin, "user", "delete", "grace")
	if hasUser("grace") {
		t.Error("grace still listed after delete")
	}

	// The config file instead of the environment; a password in it needs mode 0600.
	cfgDir := filepath.Join(home, ".config", "overtime")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgDir, "config.yaml")
	os.WriteFile(cfg, []byte("server: "+env.HTTP.URL+"\nuser: alice\npassword: alice-secret\n"), 0o600)
	os.Chmod(cfg, 0o600)
	var who struct {
		UID   string   `json:"uid"`
		Roles []string `json:"roles"`
	}
	if err := json.Unmarshal([]byte(mustRun("", nil, "whoami", "-o", "json")), &who); err != nil || who.UID != "alice" {
		t.Errorf("whoami from the config file: %+v %v", who, err)
	}
	os.Chmod(cfg, 0o644)
	if _, errs, code := run("", nil, "whoami"); code != 1 || !strings.Contains(errs, "readable by others") {
		t.Errorf("password in a world-readable config: exit %d %s", code, errs)
	}
	os.Remove(cfg)

	// One time form in tables; RFC 3339 in JSON.
	out := mustRun("", admin, "exception", "list")
	if !regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CET`).MatchString(out) {
		t.Errorf("exception list times:\n%s", out)
	}
	var exc []model.Exception
	if err := json.Unmarshal([]byte(mustRun("", admin, "exception", "list", "-o", "json")), &exc); err != nil || len(exc) == 0 || exc[0].Start.IsZero() {
		t.Errorf("exception list -o json: %v %+v", err, exc)
	}
	var ch struct {
		DryRun  bool     `json:"dryRun"`
		Changes []string `json:"changes"`
	}
	if err := json.Unmarshal([]byte(mustRun("", admin, "pool", "set", "lab-b", "--room", "B 2.01", "--dry-run", "-o", "json")), &ch); err != nil || !ch.DryRun || len(ch.Changes) != 1 {
		t.Errorf("pool set -o json: %+v %v", ch, err)
	}

	// Usage errors: exit 2, and nothing is asked of the server.
	for _, args := range [][]string{
		{"host", "frobnicate"},
		{"render", "dnsmasq", "-o", "json"},
		{"host", "list", "--bogus"},
		{"user", "delete"},
	} {
		if _, errs, code := run("", admin, args...); code != 2 || !strings.Contains(errs, "--help' for usage") {
			t.Errorf("overtime %s: exit %d %s", strings.Join(args, " "), code, errs)
		}
	}
	if out, _, code := run("", nil, "version"); code != 0 || !strings.HasPrefix(out, "overtime ") || !strings.Contains(out, "commit") {
		t.Errorf("version: %d %q", code, out)
	}
}
