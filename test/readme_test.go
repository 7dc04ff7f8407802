package test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
)

// TestREADMETour runs the README's tour as written, command by command, against a real
// slapd and `overtime serve`, with the `overtime` built from this tree first in PATH.
// The tour's `export` line is honoured except for OVERTIME_SERVER, which points at the
// test server (the tour reaches the server only through $OVERTIME_SERVER). Commands run
// in a scratch directory that sees the repository's docs/, so files the tour writes
// (pc-a01.token) stay out of the tree.
func TestREADMETour(t *testing.T) {
	root := testenv.RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := tourCommands(t, string(readme))
	if len(cmds) < 10 {
		t.Fatalf("found only %d commands in the README's tour: %q", len(cmds), cmds)
	}

	env := testenv.New(t, testenv.Options{})
	bin := bootlab.Binary(t)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "docs"), filepath.Join(dir, "docs")); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"PATH": filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME": dir, // no user configuration of whoever runs the test
	}
	for _, cmd := range cmds {
		if rest, ok := strings.CutPrefix(cmd, "export "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				vars[k] = strings.Trim(v, `"'`)
			}
			vars["OVERTIME_SERVER"] = env.HTTP.URL
			continue
		}
		c := exec.Command("bash", "-o", "pipefail", "-c", cmd)
		c.Dir = dir
		c.Env = os.Environ()
		for k, v := range vars {
			c.Env = append(c.Env, k+"="+v)
		}
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			t.Fatalf("README tour: %s\n%v\n%s", cmd, err, out.String())
		}
		t.Logf("$ %s\n%s", cmd, out.String())
	}
}

// tourCommands returns the commands of the ```sh blocks in the README's "## A tour"
// section, up to its first subheading: continuation lines joined, blank lines dropped.
func tourCommands(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## A tour\n")
	if !ok {
		t.Fatal(`README.md has no "## A tour" section`)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	var cmds []string
	inBlock := false
	pending := ""
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
		case strings.HasPrefix(line, "```"):
			inBlock = false
		case inBlock && strings.HasSuffix(line, `\`):
			pending += strings.TrimSuffix(line, `\`)
		case inBlock && strings.TrimSpace(pending+line) != "":
			cmds = append(cmds, strings.TrimSpace(pending+line))
			pending = ""
		}
	}
	return cmds
}
