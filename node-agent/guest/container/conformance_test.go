package container

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/node-agent/guest/guesttest"
)

// TestConformance runs the guest backends' conformance suite on the container backend: a
// busybox tree as the base, a busy shell loop as init, each Backend instance over the same
// cgroup parent and run directory (an agent restarted).
func TestConformance(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	const marker = "etc/ot-conformance-scribble"
	guesttest.Run(t, guesttest.Harness{
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
	})
}
