package examfw

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
)

// Firewall loads and removes the exam's ruleset. NFT is the PC's; the agent's tests use
// a recording one.
type Firewall interface {
	// Apply replaces the exam's table with ruleset (Render's) in one transaction.
	Apply(ctx context.Context, ruleset []byte) error
	// Remove deletes the exam's table; nothing to delete is not an error.
	Remove(ctx context.Context) error
}

// NFT is the Firewall of a PC: the ruleset written atomically to File, then `nft -f
// File` (one transaction: the old table stays in force if the new one does not load).
type NFT struct {
	File string // e.g. paths.ExamRuleset
	// Command makes the nft command; nil: exec.CommandContext. Tests run nft inside a
	// network namespace through it.
	Command func(ctx context.Context, name string, args ...string) *exec.Cmd
}

func (n *NFT) cmd(ctx context.Context, args ...string) *exec.Cmd {
	if n.Command != nil {
		return n.Command(ctx, "nft", args...)
	}
	return exec.CommandContext(ctx, "nft", args...)
}

// Apply writes the ruleset and loads it.
func (n *NFT) Apply(ctx context.Context, ruleset []byte) error {
	if err := os.MkdirAll(filepath.Dir(n.File), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(n.File, ruleset, 0o644); err != nil {
		return err
	}
	return run(n.cmd(ctx, "-f", n.File), nil)
}

// Remove deletes the table: `nft delete table inet overtime_exam`, preceded in the same
// transaction by an add of the (empty) table, so that a table already gone (a second
// call, an agent restarted outside an exam) is no error. The ruleset file goes too.
func (n *NFT) Remove(ctx context.Context) error {
	in := fmt.Sprintf("table inet %s\ndelete table inet %s\n", Table, Table)
	if err := run(n.cmd(ctx, "-f", "-"), strings.NewReader(in)); err != nil {
		return err
	}
	if err := os.Remove(n.File); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func run(c *exec.Cmd, stdin *strings.Reader) error {
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if stdin != nil {
		c.Stdin = stdin
	}
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(c.Args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
