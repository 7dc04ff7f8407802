package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/manifest"
	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/slurmcompat"
	"github.com/overtime-hpc/overtime/vocab/wire"
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

// writeManifest writes the manifest.json of the image version directory imageRoot/path
// (as images/build.sh does) listing pkgs (name → Debian version); nil: no manifest.
func writeManifest(t *testing.T, imageRoot, path string, pkgs map[string]string) {
	t.Helper()
	dir := filepath.Join(imageRoot, filepath.FromSlash(path))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if pkgs == nil {
		return
	}
	m := manifest.Manifest{Recipe: "compute-guest", Packages: []manifest.Package{{Name: "munge", Version: "0.5.15-2"}}}
	for name, v := range pkgs {
		m.Packages = append(m.Packages, manifest.Package{Name: name, Version: v})
	}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, manifest.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A compute guest whose slurmd would not join the site's controller is not started: its
// reason (the heartbeat's, so Slurm's node reason and `overtime agent status`) names both
// versions and what to do. A version not known on either side starts the guest as
// before.
func TestGuestRefusedWhenSlurmWouldNotJoin(t *testing.T) {
	ctx := context.Background()
	const bookworm = "22.05.8-4+deb12u3"
	for _, tc := range []struct {
		name      string
		slurmctld string
		pkgs      map[string]string // the image's manifest (nil: none)
		start     bool
		reason    []string
	}{
		{"slurmd three releases behind", "25.05.1", map[string]string{"slurmd": bookworm}, false,
			[]string{"not started: slurmd 22.05.8 (image compute 1) too old for slurmctld 25.05.1", "images/recipes/compute-guest, SLURM_DEBS="}},
		{"the site's own build newer than the controller", "22.05.8", map[string]string{"slurm-smd-slurmd": "23.02.7-1"}, false,
			[]string{"slurmd 23.02.7 (image compute 1) newer than slurmctld 22.05.8", "build the compute image with the controller's Slurm"}},
		{"one release behind", "23.02.7", map[string]string{"slurmd": bookworm}, true, nil},
		{"the same release", "22.05.2", map[string]string{"slurmd": bookworm}, true, nil},
		{"controller not known", "", map[string]string{"slurmd": bookworm}, true, nil},
		{"no manifest", "25.05.1", nil, true, nil},
		{"no slurmd in the image", "25.05.1", map[string]string{"openmpi-bin": "4.1.4-3"}, true, nil},
		{"a controller release the table cannot judge", "23.05.1", map[string]string{"slurmd": bookworm}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := &fakeBackend{}
			g := testLifecycle(t, be)
			c := guestConfig(model.DefaultPolicy())
			c.SlurmctldVersion = tc.slurmctld
			writeManifest(t, g.imageRoot, c.Guest.Resolved.Path, tc.pkgs)
			g.Act(ctx, c, model.ActionRun, 0, nil)
			if be.running != tc.start {
				t.Fatalf("guest running %v, want %v", be.running, tc.start)
			}
			st := g.LastStatus()
			if tc.start {
				if st.Reason != "" {
					t.Fatalf("a started guest has the reason %q", st.Reason)
				}
				return
			}
			if st.State != guest.StateAbsent {
				t.Errorf("state %q, want absent", st.State)
			}
			for _, want := range tc.reason {
				if !strings.Contains(st.Reason, want) {
					t.Errorf("reason %q does not say %q", st.Reason, want)
				}
			}
			// The whole reason fits the heartbeat: what to do is never cut off.
			if len(st.Reason) > wire.MaxGuestReason || wire.OneLine(st.Reason, wire.MaxGuestReason) != st.Reason {
				t.Errorf("reason of %d bytes is cut in the heartbeat (at most %d): %q", len(st.Reason), wire.MaxGuestReason, st.Reason)
			}
		})
	}
}

// The reason keeps what to do whatever the image's names: long ones are left out.
func TestSlurmMismatchReasonFits(t *testing.T) {
	for _, tc := range []struct{ image, version string }{
		{"compute-guest", "2026.12.01-1"},
		{strings.Repeat("c", 63), strings.Repeat("9", 63)},
	} {
		e := &slurmMismatch{slurmctld: "25.05.1", slurmd: "22.05.8", verdict: slurmcompat.TooOld, image: tc.image, version: tc.version}
		r := notStarted + e.Error()
		if len(r) > wire.MaxGuestReason || !strings.HasSuffix(r, "SLURM_DEBS=DIR") || !strings.Contains(r, "22.05.8") || !strings.Contains(r, "25.05.1") {
			t.Errorf("image %s: reason of %d bytes (at most %d): %q", tc.image, len(r), wire.MaxGuestReason, r)
		}
	}
}

// A refusal holds for its controller and image version without reading the image again
// or backing off; a new image version or a controller upgrade is tried at once.
func TestGuestSlurmRefusalFollowsConfig(t *testing.T) {
	ctx := context.Background()
	be := &fakeBackend{}
	g := testLifecycle(t, be)
	c := guestConfig(model.DefaultPolicy())
	c.SlurmctldVersion = "25.05.1"
	writeManifest(t, g.imageRoot, "compute/1", map[string]string{"slurmd": "22.05.8-4+deb12u3"})
	writeManifest(t, g.imageRoot, "compute/2", map[string]string{"slurm-smd-slurmd": "25.05.1-1"})
	if g.Act(ctx, c, model.ActionRun, 0, nil); be.running || !strings.HasPrefix(g.LastStatus().Reason, "not started: ") {
		t.Fatalf("refused guest: running %v, reason %q", be.running, g.LastStatus().Reason)
	}
	// Not read again: without its manifest the image would now start (unknown version).
	os.Remove(filepath.Join(g.imageRoot, "compute", "1", manifest.File))
	for i := 0; i < 3; i++ {
		if g.Act(ctx, c, model.ActionRun, 0, nil) || be.running {
			t.Fatalf("attempt %d: the refused guest started or something changed", i)
		}
	}
	if !g.RetryAt().IsZero() {
		t.Fatalf("a refusal backs off until %s; it should wait for a new configuration instead", g.RetryAt())
	}
	// The site publishes an image with the controller's Slurm: it starts at once.
	c.Guest.Resolved = model.ImageVersion{Version: "2", Path: "compute/2"}
	if !g.Act(ctx, c, model.ActionRun, 0, nil) || !be.running || g.LastStatus().Reason != "" {
		t.Fatalf("the new image version: running %v, reason %q", be.running, g.LastStatus().Reason)
	}

	// A refusal lifted by another controller version reported for the same image (22.05
	// is outside 24.05's window, inside 23.02's).
	g = testLifecycle(t, be)
	be.running = false
	writeManifest(t, g.imageRoot, "compute/1", map[string]string{"slurmd": "22.05.8-4+deb12u3"})
	c = guestConfig(model.DefaultPolicy())
	c.SlurmctldVersion = "24.05.1"
	if g.Act(ctx, c, model.ActionRun, 0, nil); be.running {
		t.Fatal("22.05 slurmd started beside a 24.05 controller")
	}
	c.SlurmctldVersion = "23.02.7"
	if g.Act(ctx, c, model.ActionRun, 0, nil); !be.running {
		t.Fatalf("22.05 slurmd beside a 23.02 controller did not start: %q", g.LastStatus().Reason)
	}
}

// The agent's heartbeat carries the refusal at once (not at the next status check): the
// site manager's Slurm feed turns it into the node's reason.
func TestHeartbeatSaysWhyGuestRefused(t *testing.T) {
	be := &fakeBackend{}
	roots := t.TempDir()
	a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), ImageRoot: roots, HostCPUs: 4, HostMemMB: 8192,
		Signals: newFakeSignals(time.Now()), Backends: map[model.GuestBackend]guest.Backend{model.BackendContainer: be},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := guestConfig(model.DefaultPolicy())
	c.SlurmctldVersion = "24.11.5"
	writeManifest(t, roots, c.Guest.Resolved.Path, map[string]string{"slurmd": "22.05.8-4+deb12u3"})
	if err := checkConfig(c, testMAC); err != nil {
		t.Fatal(err)
	}
	a.apply(context.Background(), c, "api")
	hb := a.LastHeartbeat()
	if be.running || hb.GuestState != "absent" || !strings.Contains(hb.GuestReason, "slurmctld 24.11.5") || !strings.Contains(hb.GuestReason, "SLURM_DEBS") {
		t.Fatalf("heartbeat guest %q reason %q (running %v), want absent with the Slurm reason", hb.GuestState, hb.GuestReason, be.running)
	}
	if err := hb.Validate(); err != nil {
		t.Fatal(err)
	}

	// A configuration with a controller version that is not one is refused whole.
	bad := guestConfig(model.DefaultPolicy())
	bad.SlurmctldVersion = "24.11.5-1"
	if err := checkConfig(bad, testMAC); err == nil || !strings.Contains(err.Error(), "slurmctldVersion") {
		t.Fatalf("a bad controller version: %v", err)
	}
}
