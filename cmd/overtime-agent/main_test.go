package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/cmdline"
)

// TestExitStatus: the agent follows overtime's exit convention (internal/cmdline): usage
// errors are 2, with where to find the usage.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"runn"}, cmdline.ExitUsage, "Did you mean this?\n\trun"},
		{[]string{"run", "--bogus"}, cmdline.ExitUsage, "unknown flag: --bogus"},
		{[]string{"run", "extra"}, cmdline.ExitUsage, `unknown command "extra"`},
		{[]string{"--version"}, 0, ""},
	} {
		var stderr bytes.Buffer
		root := newRoot()
		root.SetOut(io.Discard)
		if code := cmdline.Execute(root, tc.args, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.msg)
		}
	}
}
