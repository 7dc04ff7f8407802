package needs

import (
	"testing"
)

// TestServers: under -short the test is skipped (so the line after Servers never runs);
// without -short Servers returns and the test goes on.
func TestServers(t *testing.T) {
	ran := false
	t.Run("inner", func(t *testing.T) {
		Servers(t, "slapd")
		ran = true
	})
	if ran == testing.Short() {
		t.Errorf("short=%v: the test after Servers ran=%v, want %v", testing.Short(), ran, !testing.Short())
	}
}
