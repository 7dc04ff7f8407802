package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/agentlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
)

// On a terminal `overtime host import` shows the changes and writes only after a yes.
func TestHostImportAsksOnATerminal(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	c := cli{t: t, bin: bootlab.Binary(t), env: []string{"OVERTIME_SERVER=" + env.HTTP.URL}, root: testenv.RepoRoot(t)}
	if out, errs, code := c.admin("site", "apply", "-f", "docs/examples/site.yaml"); code != 0 {
		t.Fatalf("site apply: %s%s", out, errs)
	}
	// A German spreadsheet: BOM, ';', CRLF, columns in its own order.
	csv := filepath.Join(t.TempDir(), "hosts.csv")
	if err := os.WriteFile(csv, []byte("\ufeffPool;Name;MAC;IP\r\nlab-b;pc-b01;52:54:00:0b:00:01;10.20.0.99\r\nlab-b;pc-b09;52-54-00-0B-00-09;\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		answer string
		code   int
		hosts  int // hosts in lab-b afterwards
	}{
		{"n\n", 1, 3},
		{"\n", 1, 3}, // the default is no
		{"y\n", 0, 4},
	} {
		master, slave, _ := agentlab.OpenPTY(t)
		cmd := exec.Command(c.bin, "host", "import", csv)
		cmd.Env = append(os.Environ(), "OVERTIME_SERVER="+env.HTTP.URL, "OVERTIME_USER=admin", "OVERTIME_PASSWORD="+testenv.AdminPassword)
		var out, errb bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &errb
		// Typed ahead: the terminal keeps the line until the command reads it.
		if _, err := master.Write([]byte(tc.answer)); err != nil {
			t.Fatal(err)
		}
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		preview := "hosts.csv: 1 to add, 1 to change, 0 unchanged\n  ~ host pc-b01: ip 10.20.0.21 -> 10.20.0.99\n  + host pc-b09 (mac 52:54:00:0b:00:09, ip (none), pool lab-b)\nWrite these changes? [y/N] "
		if code != tc.code || !strings.Contains(out.String(), preview) {
			t.Errorf("answer %q: exit %d\nstdout %s\nstderr %s", tc.answer, code, out.String(), errb.String())
		}
		site, err := env.Store.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, h := range site.Hosts {
			if h.Pool == "lab-b" {
				n++
			}
		}
		if n != tc.hosts {
			t.Errorf("answer %q: %d hosts in lab-b, want %d", tc.answer, n, tc.hosts)
		}
	}
}
