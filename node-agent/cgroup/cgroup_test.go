package cgroup_test

import (
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/cgroup/cgrouptest"
)

// TestConformance runs the behavioural suite on this machine's own layout: v1 (hybrid) on
// the development machines, v2 when run inside a VM with a unified hierarchy:
//
//	go test ./node-agent/cgroup/ -run Conformance -v
func TestConformance(t *testing.T) {
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("layout: %s", cgrouptest.Describe(h))
	cgrouptest.Conformance(t, h, cgrouptest.TestParent(t, h))
}

// TestConformanceUnifiedCore runs the controller-independent part of the suite through
// the v2 code paths on the cgroup2 mount: on a hybrid host that is the controller-less
// mount (cgroup.freeze, cgroup.kill, cgroup.events, cpu.stat usage_usec and PSI all work
// there), on a v2 host the unified hierarchy itself.
func TestConformanceUnifiedCore(t *testing.T) {
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	dir := h.UnifiedMount()
	if dir == "" {
		t.Log("no cgroup2 mount (legacy v1 layout): nothing to run")
		return
	}
	u, err := cgroup.NewUnified(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Version() != cgroup.V2 {
		t.Fatalf("NewUnified: version %s", u.Version())
	}
	cgrouptest.Core(t, u, cgrouptest.TestParent(t, u))
}
