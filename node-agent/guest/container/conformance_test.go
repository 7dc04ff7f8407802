package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/guest/guesttest"
)

// conformanceHarness is the container backend's harness of the conformance suite.
func conformanceHarness(e *env, root string) guesttest.Harness {
	const marker = "etc/ot-conformance-scribble"
	return guesttest.Harness{
		Backend: func(*testing.T) guest.Backend { return e.backend(Options{}) },
		Spec: func(t *testing.T, name string) guest.Spec {
			s := e.spec(name, root, "while :; do :; done")
			s.StateDir = filepath.Join(t.TempDir(), "state")
			// Normal class: under the load of a full test run an idle-class loop may get
			// next to no CPU, and the suite measures it (the idle class is checked by
			// TestLifecycle*).
			s.CPUIdle = false
			return s
		},
		Busy: true,
		// Through /proc/PID/root the host writes into the guest's root: its overlay.
		Scribble: func(t *testing.T, s guest.Spec, st guest.Status) {
			if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(st.PID), "root", marker), []byte("run 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		Scribbled: func(t *testing.T, s guest.Spec, st guest.Status) bool {
			return !gone(filepath.Join("/proc", strconv.Itoa(st.PID), "root", marker))
		},
		Leftovers: func(s guest.Spec) []string {
			b := e.backend(Options{})
			out := []string{b.recordPath(s.Name), b.exitPath(s.Name)}
			g := b.group(s.Name)
			for k := range g.Paths() {
				out = append(out, g.Dir(k))
			}
			return out
		},
		// Stop keeps the console of the run that ended next to the state directory.
		Kept: func(s guest.Spec) []string { return []string{s.StateDir + ".console.prev"} },
		Caps: guesttest.Caps{Crash: guesttest.CrashInStatus, CrashReason: "killed by signal"},
	}
}

// TestConformance runs the guest backends' conformance suite on the container backend: a
// busybox tree as the base, a busy shell loop as init, each Backend instance over the same
// cgroup parent and run directory (an agent restarted).
func TestConformance(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	guesttest.Run(t, conformanceHarness(e, root))
}

// withoutFreeze is a container backend that cannot pause its guests, as a backend may
// declare (guesttest.Caps.NoFreeze): Freeze and Thaw give guest.ErrUnsupported.
type withoutFreeze struct{ guest.Backend }

func (withoutFreeze) Freeze(context.Context, string) error {
	return fmt.Errorf("container without a freezer: %w", guest.ErrUnsupported)
}

func (withoutFreeze) Thaw(context.Context, string) error {
	return fmt.Errorf("container without a freezer: %w", guest.ErrUnsupported)
}

// TestConformanceNoFreeze runs the suite on a backend that declares it cannot freeze: the
// freeze step asserts the documented error, and adopt and evict run without freezing.
func TestConformanceNoFreeze(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	h := conformanceHarness(e, root)
	h.Backend = func(*testing.T) guest.Backend { return withoutFreeze{e.backend(Options{})} }
	h.Caps.NoFreeze = true
	guesttest.Run(t, h)
}
