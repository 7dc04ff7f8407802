package main

import (
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
)

// TestBinaryDeps: the overtime binary links neither the testing package (its flags and
// code do not belong in production) nor the test environments of internal/testenv.
func TestBinaryDeps(t *testing.T) {
	deps := testenv.Deps(t, "./cmd/overtime")
	if bad := testenv.ForbiddenDeps(deps, []string{"testing", "github.com/overtime-hpc/overtime/internal/testenv"}); len(bad) > 0 {
		t.Errorf("cmd/overtime links %v (`go list -deps ./cmd/overtime` shows through which package)", bad)
	}
}
