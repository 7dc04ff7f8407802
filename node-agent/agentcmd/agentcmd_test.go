package agentcmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/overtime-hpc/overtime/internal/paths"
)

// TestTokenFile: the systemd credential (TPM) first, else the token the initramfs copied
// from the OVERTIME-ID partition.
func TestTokenFile(t *testing.T) {
	if got := TokenFile(""); got != paths.AgentToken {
		t.Errorf("no credentials directory: %s, want %s", got, paths.AgentToken)
	}
	dir := t.TempDir()
	if got := TokenFile(dir); got != paths.AgentToken {
		t.Errorf("no agent.token credential: %s, want %s", got, paths.AgentToken)
	}
	cred := filepath.Join(dir, "agent.token")
	// An empty credential (a site unit's fallback for PCs without a sealed blob).
	if err := os.WriteFile(cred, nil, 0o400); err != nil {
		t.Fatal(err)
	}
	if got := TokenFile(dir); got != paths.AgentToken {
		t.Errorf("empty credential: %s, want %s", got, paths.AgentToken)
	}
	if err := os.WriteFile(cred, []byte("ott_sealed\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if got := TokenFile(dir); got != cred {
		t.Errorf("sealed credential: %s, want %s", got, cred)
	}
}
