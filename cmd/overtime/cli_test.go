package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone database, so that zone tests do not depend on the machine

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Tests of the command tree as a whole; none needs a server.

// noServer is a site manager URL nothing listens on.
const noServer = "http://127.0.0.1:1"

// isolate keeps the environment and the user's config file out of a test.
func isolate(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OVERTIME_SERVER", "OVERTIME_USER", "OVERTIME_PASSWORD", "OVERTIME_PASSWORD_FILE", "OVERTIME_CONFIG", "OVERTIME_NEW_PASSWORD"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("HOME", dir)
}

// runCLI executes args on a fresh tree and returns the exit status and what went to
// stdout and stderr.
func runCLI(t *testing.T, root *cobra.Command, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(""))
	code = cmdline.Execute(root, args, &errb)
	return code, out.String(), errb.String()
}

// allCommands lists every command of the tree with its arguments below the root.
func allCommands(root *cobra.Command) map[string]*cobra.Command {
	cmds := map[string]*cobra.Command{}
	walkCommands(root, func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		cmds[path] = c
	})
	return cmds
}

// TestOutputFormatsOfEveryCommand walks the whole tree: a command that declares -o json
// and yaml gets to run with them, every other one refuses them as a usage error before
// it does anything. The commands' actions are replaced by a recorder, so that nothing
// (serve, agent run) really starts.
func TestOutputFormatsOfEveryCommand(t *testing.T) {
	isolate(t)
	root := newRoot()
	cmds := allCommands(root)
	ran := ""
	for path, c := range cmds {
		c.Run = nil
		c.RunE = func(*cobra.Command, []string) error { ran = path; return nil }
		c.Args = cobra.ArbitraryArgs                                                                     // only -o is under test here: no arguments,
		c.Flags().VisitAll(func(f *pflag.Flag) { delete(f.Annotations, cobra.BashCompOneRequiredFlag) }) // nor required flags
	}
	offered := 0
	for path, c := range cmds {
		for _, format := range []string{"json", "yaml"} {
			args := append(strings.Fields(path), "-o", format)
			ran = ""
			code, _, stderr := runCLI(t, root, args...)
			if offersOutput(c, format) {
				if code != 0 || ran != path {
					t.Errorf("overtime %s: offers %s but exit %d, ran %q: %s", strings.Join(args, " "), format, code, ran, stderr)
				}
				continue
			}
			if code != cmdline.ExitUsage || ran != "" || !strings.Contains(stderr, "does not offer -o "+format) {
				t.Errorf("overtime %s: exit %d, ran %q, stderr %q; want exit 2 and a refusal", strings.Join(args, " "), code, ran, stderr)
			}
		}
		if offersOutput(c, "json") {
			offered++
		}
	}
	// The declaration must name real commands: a sanity floor on how many offer it.
	if offered < len(structuredOutput)+5*len(entityKinds) {
		t.Errorf("only %d commands offer -o json", offered)
	}
}

// TestExitStatus: 2 for what is wrong with the command line, 1 for a failure, and an
// unknown subcommand of a group is an error with suggestions, not its help.
func TestExitStatus(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		args       []string
		code       int
		stderr     string // substring
		stdoutHelp bool
	}{
		{[]string{"frobnicate"}, cmdline.ExitUsage, `unknown command "frobnicate" for "overtime"`, false},
		{[]string{"hots"}, cmdline.ExitUsage, "Did you mean this?\n", false},
		{[]string{"hots"}, cmdline.ExitUsage, "\thost\n", false},
		{[]string{"host", "frobnicate"}, cmdline.ExitUsage, `unknown command "frobnicate" for "overtime host"`, false},
		{[]string{"host", "lst"}, cmdline.ExitUsage, "Did you mean this?\n\tlist", false},
		{[]string{"slurm", "resme", "pc01"}, cmdline.ExitUsage, "resume", false},
		{[]string{"agent", "stauts"}, cmdline.ExitUsage, "status", false},
		{[]string{"host", "list", "--bogus"}, cmdline.ExitUsage, "unknown flag: --bogus", false},
		{[]string{"host", "list", "extra"}, cmdline.ExitUsage, "unknown command", false},
		{[]string{"host", "show"}, cmdline.ExitUsage, "accepts 1 arg(s), received 0", false},
		{[]string{"mode-at", "a", "b", "c"}, cmdline.ExitUsage, "accepts between 1 and 2 arg(s)", false},
		{[]string{"slurm", "resume", "--for", "soon", "pc01"}, cmdline.ExitUsage, `invalid argument "soon" for "--for"`, false},
		{[]string{"host", "list", "-o", "xml"}, cmdline.ExitUsage, `unknown output format "xml"`, false},
		{[]string{"site", "apply"}, cmdline.ExitUsage, `required flag(s) "file" not set`, false},
		{[]string{"schedule", "list"}, cmdline.ExitUsage, "give exactly one of --pool or --host", false},
		{[]string{"host", "credential", "pc1", "--revoke", "--out", "f"}, cmdline.ExitUsage, "exclude each other", false},
		{[]string{"whoami", "extra"}, cmdline.ExitUsage, "unknown command", false},
		{[]string{"host", "list", "--server", noServer}, cmdline.ExitFailure, "cannot reach the site manager", false},
		{[]string{"user", "passwd", "--server", noServer}, cmdline.ExitUsage, "whose password?", false},
		{[]string{"site", "apply", "-f", "/nonexistent/site.yaml"}, cmdline.ExitFailure, "no such file", false},
		{[]string{"host"}, 0, "", true},
		{[]string{}, 0, "", true},
		{[]string{"help", "host"}, 0, "", true},
	} {
		code, stdout, stderr := runCLI(t, newRoot(), tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("overtime %s: exit %d, stderr %q; want exit %d, stderr ~%q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.stderr)
		}
		if tc.stdoutHelp != strings.Contains(stdout, "Usage:") {
			t.Errorf("overtime %s: help printed %v, want %v: %q", strings.Join(tc.args, " "), !tc.stdoutHelp, tc.stdoutHelp, stdout)
		}
		if code == cmdline.ExitFailure && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("overtime %s: a failure is not one line: %q", strings.Join(tc.args, " "), stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	isolate(t)
	version, commit = "v1.2.3", "0123abc"
	t.Cleanup(func() { version, commit = "dev", "" })
	want := "overtime v1.2.3 (commit 0123abc)\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, out, errs := runCLI(t, newRoot(), args...); code != 0 || out != want {
			t.Errorf("overtime %v: exit %d, %q %q; want %q", args, code, out, errs, want)
		}
	}
	code, out, _ := runCLI(t, newRoot(), "version", "-o", "json")
	var b buildInfo
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || b != (buildInfo{"v1.2.3", "0123abc"}) {
		t.Errorf("version -o json: %d %v %q", code, err, out)
	}
	// Without -ldflags the commit is never empty.
	commit = ""
	if b := currentBuild(); b.Commit == "" {
		t.Error("no commit without -ldflags")
	}
}

// TestManPages: one page per available command, named after its path.
func TestManPages(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	code, out, errs := runCLI(t, newRoot(), "docs", "man", dir)
	if code != 0 {
		t.Fatalf("docs man: %d %s", code, errs)
	}
	root := newRoot()
	want := manPageNames(root)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("man pages:\n got %v\nwant %v", got, want)
	}
	if !strings.Contains(out, fmt.Sprintf("%d man pages written", len(want))) {
		t.Errorf("docs man said %q", out)
	}
	// Every command of the tree that a user can call has its page.
	walkCommands(root, func(c *cobra.Command) {
		if c.IsAvailableCommand() {
			name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Contains(b, []byte(".TH \"OVERTIME\" \"1\"")) {
				t.Errorf("man page of %q: %v", c.CommandPath(), err)
			}
		}
	})
	for _, must := range []string{"overtime.1", "overtime-host-list.1", "overtime-user-passwd.1", "overtime-completion-bash.1"} {
		if !slices.Contains(got, must) {
			t.Errorf("no %s", must)
		}
	}
}

// TestNoFlagShadowsAGlobalOne: a command's own flag may not reuse the name of a global
// one (render --server once meant a boot server, hiding the site manager's URL).
func TestNoFlagShadowsAGlobalOne(t *testing.T) {
	root := newRoot()
	walkCommands(root, func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if root.PersistentFlags().Lookup(f.Name) != nil || (f.Shorthand != "" && root.PersistentFlags().ShorthandLookup(f.Shorthand) != nil) {
				t.Errorf("%s --%s shadows the global flag", c.CommandPath(), f.Name)
			}
		})
	})
	render, _, _ := root.Find([]string{"render"})
	if render.Flags().Lookup("boot-server") == nil {
		t.Error("render has no --boot-server")
	}
}

// TestOneTimeFormat: table output shows times in one form, and no command formats a
// time any other way.
func TestOneTimeFormat(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err) // time/tzdata is linked in: this cannot depend on the machine
	}
	g := &globals{zone: berlin}
	ts := time.Date(2026, 12, 2, 9, 30, 5, 0, time.UTC)
	if got := g.formatTime(ts); got != "2026-12-02 10:30:05 CET" {
		t.Errorf("formatTime = %q", got)
	}
	if got := g.formatTime(time.Time{}); got != "-" {
		t.Errorf("formatTime(zero) = %q", got)
	}
	// Before the site's zone is known, the local one, named.
	if got, want := (&globals{}).formatTime(ts), ts.Local().Format("2006-01-02 15:04:05 MST"); got != want {
		t.Errorf("formatTime without the site's zone = %q, want %q", got, want)
	}
	files, _ := filepath.Glob("*.go")
	formatCall := regexp.MustCompile(`\.Format\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "output.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if formatCall.Match(b) {
			t.Errorf("%s formats a time itself: use formatTime", f)
		}
	}
}

// TestCompletion: names come from the server for arguments and flags; without a server
// there are no suggestions and no error.
func TestCompletion(t *testing.T) {
	isolate(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		names := map[string]string{
			"/api/v1/hosts": `[{"name":"pc-a01"},{"name":"pc-a02"},{"name":"pc-b01"}]`,
			"/api/v1/pools": `[{"name":"lab-a"},{"name":"lab-b"}]`,
			"/api/v1/modes": `[{"name":"desktop"},{"name":"cluster"}]`,
			"/api/v1/users": `[{"uid":"alice","name":"Alice"}]`,
		}[r.URL.Path]
		if names == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(names))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		server string
		args   []string
		want   []string
	}{
		{srv.URL, []string{"host", "show", "pc-a"}, []string{"pc-a01", "pc-a02"}},
		{srv.URL, []string{"host", "show", "pc-a01", ""}, nil}, // one argument only
		{srv.URL, []string{"mode-at", ""}, []string{"pc-a01", "pc-a02", "pc-b01"}},
		{srv.URL, []string{"slurm", "resume", "pc-a01", "pc"}, []string{"pc-a02", "pc-b01"}},
		{srv.URL, []string{"schedule", "list", "--pool", ""}, []string{"lab-a", "lab-b"}},
		{srv.URL, []string{"host", "list", "--pool", "lab-b"}, []string{"lab-b"}},
		{srv.URL, []string{"exception", "add", "x", "--mode", "d"}, []string{"desktop"}},
		{srv.URL, []string{"user", "passwd", ""}, []string{"alice"}},
		{srv.URL, []string{"render", "dns"}, []string{"dnsmasq", "dnsmasq-hosts"}},
		{srv.URL, []string{"pool", "show", ""}, []string{"lab-a", "lab-b"}},
		{srv.URL, []string{"image", "show", ""}, nil}, // the server answers 404
		{noServer, []string{"host", "show", ""}, nil},
		{noServer, []string{"schedule", "add", "--host", "pc"}, nil},
	} {
		args := append([]string{cobra.ShellCompRequestCmd, "--server", tc.server}, tc.args...)
		code, out, errs := runCLI(t, newRoot(), args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got, directive := lines[:len(lines)-1], lines[len(lines)-1]
		if code != 0 || !slices.Equal(got, tc.want) && !(len(got) == 0 && tc.want == nil) || directive != ":4" {
			t.Errorf("complete %v: exit %d, %q (%s); want %q and :4 (no file completion)", tc.args, code, got, errs, tc.want)
		}
	}
	// The completion scripts (cobra's; they write to the process's stdout).
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if c, _, err := newRoot().Find([]string{"completion", shell}); err != nil || c.Name() != shell {
			t.Errorf("no completion %s: %v", shell, err)
		}
	}
}

// TestClientConfig: flag > environment > config file > default, and the rules of the
// file itself.
func TestClientConfig(t *testing.T) {
	type want struct{ server, user, password, err string }
	for _, tc := range []struct {
		name   string
		config string      // content of $XDG_CONFIG_HOME/overtime/config.yaml ("" none)
		mode   os.FileMode // of the config file
		env    map[string]string
		flags  []string
		want   want
	}{
		{name: "defaults", want: want{server: defaultServer}},
		{name: "config file", config: "server: http://cfg:8080\nuser: carol\npassword-file: ~/pw\n", mode: 0o644,
			want: want{server: "http://cfg:8080", user: "carol", password: "from-file"}},
		{name: "environment beats the file", config: "server: http://cfg:8080\nuser: carol\n", mode: 0o644,
			env:  map[string]string{"OVERTIME_SERVER": "http://env:8080", "OVERTIME_USER": "dave", "OVERTIME_PASSWORD": "env-pw"},
			want: want{server: "http://env:8080", user: "dave", password: "env-pw"}},
		{name: "flags beat the environment", config: "server: http://cfg:8080\n", mode: 0o644,
			env:   map[string]string{"OVERTIME_SERVER": "http://env:8080", "OVERTIME_PASSWORD": "env-pw"},
			flags: []string{"--server", "http://flag:8080", "--user", "erin", "--password-file", "PWFILE"},
			want:  want{server: "http://flag:8080", user: "erin", password: "from-file"}},
		{name: "password in a private file", config: "user: carol\npassword: in-config\n", mode: 0o600,
			want: want{server: defaultServer, user: "carol", password: "in-config"}},
		{name: "password in a file others may read", config: "user: carol\npassword: in-config\n", mode: 0o640,
			want: want{err: "readable by others"}},
		{name: "environment password beats the file's", config: "password: in-config\n", mode: 0o600,
			env: map[string]string{"OVERTIME_PASSWORD": "env-pw"}, want: want{server: defaultServer, password: "env-pw"}},
		{name: "unknown key", config: "sever: http://typo\n", mode: 0o644, want: want{err: "sever"}},
		{name: "--config names a missing file", flags: []string{"--config", "/nonexistent/overtime.yaml"}, want: want{err: "no such file"}},
		{name: "$OVERTIME_CONFIG names a missing file", env: map[string]string{"OVERTIME_CONFIG": "/nonexistent/overtime.yaml"}, want: want{err: "no such file"}},
		{name: "missing password file", config: "password-file: /nonexistent/pw\n", mode: 0o644, want: want{err: "password file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			home := os.Getenv("HOME")
			pwFile := filepath.Join(home, "pw")
			if err := os.WriteFile(pwFile, []byte("from-file\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.config != "" {
				dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "overtime")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				f := filepath.Join(dir, "config.yaml")
				if err := os.WriteFile(f, []byte(tc.config), tc.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(f, tc.mode); err != nil { // not subject to the umask
					t.Fatal(err)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			root, g := newRootGlobals()
			flags := slices.Clone(tc.flags)
			for i := range flags {
				flags[i] = strings.ReplaceAll(flags[i], "PWFILE", pwFile)
			}
			if err := root.PersistentFlags().Parse(flags); err != nil {
				t.Fatal(err)
			}
			s, err := g.resolve(false)
			if tc.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want.err) {
					t.Fatalf("error %v, want ~%q", err, tc.want.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := (want{server: s.server, user: s.user, password: s.password}); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
