package agentcmd

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// TestBenchCommands: constructors appended to BenchCommands become subcommands of bench.
func TestBenchCommands(t *testing.T) {
	saved := BenchCommands
	t.Cleanup(func() { BenchCommands = saved })
	BenchCommands = append(BenchCommands, func() *cobra.Command { return &cobra.Command{Use: "extra"} })
	c := NewBenchCmd()
	for _, name := range []string{"guest-load", "desktop-load", "noop", "extra"} {
		if sub, _, err := c.Find([]string{name}); err != nil || sub.Name() != name {
			t.Errorf("bench %s: %v", name, err)
		}
	}
}

func TestDesktopLoadJSON(t *testing.T) {
	c := NewBenchCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetArgs([]string{"desktop-load", "wakeup", "--seconds", "0.1", "--json"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	var r interference.Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Workload != "wakeup" || r.Work < 10 || len(r.LatencyUs) != int(r.Work) {
		t.Errorf("result %+v", r)
	}
}
