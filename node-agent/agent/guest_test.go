package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// failingLimit is a backend whose SetCPULimit fails.
type failingLimit struct{ fakeBackend }

func (b *failingLimit) SetCPULimit(context.Context, string, float64) error {
	return errors.New("cpu.max: read-only file system")
}

func testLifecycle(t *testing.T, b guest.Backend) *guestLifecycle {
	t.Helper()
	o := Options{Site: &fakeSite{}, ImageRoot: t.TempDir(), StateDir: t.TempDir(), HostCPUs: 4, HostMemMB: 8192,
		RestartBackoff: time.Second, MaxBackoff: time.Minute, Now: time.Now,
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Backends: map[model.GuestBackend]guest.Backend{model.BackendContainer: b}}
	return newGuestLifecycle(o, newMetrics(func() (float64, float64) { return 0, 0 }))
}

// ApplyLimit is the one place a running guest's limit changes: it records what the
// backend took, and a failure leaves the applied limit as it was.
func TestApplyLimit(t *testing.T) {
	ctx := context.Background()
	c := guestConfig(model.DefaultPolicy())
	be := &fakeBackend{}
	g := testLifecycle(t, be)
	if !g.Act(ctx, c, model.ActionRun, 0, nil) || !be.running {
		t.Fatal("the guest did not start")
	}
	for _, tc := range []struct {
		limit, wantFraction float64
	}{{1, 0.25}, {0.5, 0.125}, {0, 1}} {
		if err := g.ApplyLimit(ctx, c, tc.limit); err != nil {
			t.Fatal(err)
		}
		if be.limit != tc.limit || g.Applied().limit != tc.limit || g.CapFraction() != tc.wantFraction {
			t.Errorf("limit %v: backend %v, applied %v, fraction %v; want %v everywhere, fraction %v",
				tc.limit, be.limit, g.Applied().limit, g.CapFraction(), tc.limit, tc.wantFraction)
		}
	}

	bad := &failingLimit{}
	g = testLifecycle(t, bad)
	g.Act(ctx, c, model.ActionRun, 0, nil)
	if err := g.ApplyLimit(ctx, c, 1); err == nil || g.Applied().limit != 0 {
		t.Fatalf("failing backend: err %v, applied limit %v; want an error and the limit unchanged", err, g.Applied().limit)
	}
	c.Guest = nil
	if err := g.ApplyLimit(ctx, c, 1); err == nil {
		t.Fatal("a limit without a guest configured was accepted")
	}
}

// Act changes a running guest's limit unless keep says the applied one may stay.
func TestActKeepsLimitWhenTold(t *testing.T) {
	ctx := context.Background()
	c := guestConfig(model.DefaultPolicy())
	be := &fakeBackend{}
	g := testLifecycle(t, be)
	g.Act(ctx, c, model.ActionThrottle, 1, nil)
	calls := len(be.limits)
	if g.Act(ctx, c, model.ActionThrottle, 1.05, func(float64) bool { return true }) || len(be.limits) != calls {
		t.Fatalf("keep said stay: %d backend calls, want none", len(be.limits)-calls)
	}
	if !g.Act(ctx, c, model.ActionThrottle, 1.05, nil) || be.limit != 1.05 {
		t.Fatalf("no keep: limit %v, want 1.05", be.limit)
	}
}
