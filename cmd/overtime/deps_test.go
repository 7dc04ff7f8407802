package main

import (
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
)

// TestBinaryDeps: the overtime binary links neither the testing package (its flags and
// code do not belong in production) nor the test environments of internal/testenv, nor
// the development tools' packages (a throwaway slapd, network namespaces): those are
// cmd/overtime-dev's, which is never packaged.
func TestBinaryDeps(t *testing.T) {
	deps := testenv.Deps(t, "./cmd/overtime")
	const mod = "github.com/overtime-hpc/overtime/"
	forbidden := []string{"testing", mod + "internal/testenv", mod + "internal/slapdenv", mod + "internal/netns"}
	if bad := testenv.ForbiddenDeps(deps, forbidden); len(bad) > 0 {
		t.Errorf("cmd/overtime links %v (`go list -deps ./cmd/overtime` shows through which package)", bad)
	}
}
