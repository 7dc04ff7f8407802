package container

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/guest"
)

// fakeBusctl stands in for busctl talking to systemd: StartTransientUnit makes the scope's
// group (in every directory of $OT_FAKE_SCOPE_DIRS) and moves the PID into it, as systemd
// does; StopUnit removes it. It logs its arguments.
const fakeBusctl = `#!/bin/sh
echo "$*" >> "$OT_FAKE_BUSCTL_LOG"
[ "$1 $2 $3 $4 $5" = "call --system org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager" ] || { echo "unexpected call: $*" >&2; exit 1; }
case "$6" in
StartTransientUnit)
	[ "$7 $9 ${10} ${14} ${17} ${19} ${23} ${24} ${25}" = "ssa(sv)a(sa(sv)) fail 5 Slice Delegate true PIDs au 1" ] || { echo "bad StartTransientUnit: $*" >&2; exit 1; }
	for d in $OT_FAKE_SCOPE_DIRS; do
		mkdir -p "$d/${16}/$8" && echo "${26}" > "$d/${16}/$8/cgroup.procs" || exit 1
	done
	echo 'o "/org/freedesktop/systemd1/job/42"'
	;;
StopUnit)
	for d in $OT_FAKE_SCOPE_DIRS; do
		rmdir "$d"/*.slice/"$8" 2>/dev/null
	done
	echo 'o "/org/freedesktop/systemd1/job/43"'
	;;
*) echo "unexpected method $6" >&2; exit 1 ;;
esac
`

// The systemd placement path (a delegated scope made through busctl, the guest in its
// "guest" sub-group) against a stand-in for systemd, below the test's cgroup.
func TestSystemdScopePlacement(t *testing.T) {
	e := newEnv(t)
	root, _ := buildBase(t, t.TempDir(), false)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "busctl"), []byte(fakeBusctl), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "busctl.log")
	var dirs []string
	for k := range e.parent.Paths() {
		dirs = append(dirs, e.parent.Dir(k))
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("OT_FAKE_BUSCTL_LOG", log)
	t.Setenv("OT_FAKE_SCOPE_DIRS", strings.Join(dirs, " "))

	b := e.backend(Options{})
	b.systemd = true
	b.scopeRoot = e.parent
	if err := b.Available(context.Background()); err != nil {
		t.Fatal(err)
	}
	name := randName("ot-scope")
	s := e.spec(name, root, "while :; do sleep 1; done")
	s.CPULimit = 0.25
	st := start(t, b, s)
	unit := scopeUnit(name)
	scope := e.parent.Child("overtime.slice").Child(unit)
	g := scope.Child("guest")
	if st.Cgroup != g.Path() || b.group(name).Path() != g.Path() {
		t.Fatalf("Status.Cgroup %s, want %s", st.Cgroup, g.Path())
	}
	in, err := e.h.FindByPID(st.PID)
	if err != nil || in.Path() != g.Path() {
		t.Fatalf("init in %v (%v), want %s", in, err, g.Path())
	}
	if p, _ := scope.Procs(); len(p) != 0 {
		t.Fatalf("processes left in the scope itself: %v", p)
	}
	checkCgroupFiles(t, e.h, g, 0.25, 128<<20)

	if err := b.Stop(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	checkGone(t, b, s)
	for k := range scope.Paths() {
		if d := scope.Dir(k); !gone(d) {
			t.Errorf("scope directory %s left", d)
		}
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "StartTransientUnit ssa(sv)a(sa(sv)) "+unit+" fail") ||
		!strings.Contains(lines[0], " PIDs au 1 ") || !strings.HasSuffix(lines[1], "StopUnit ss "+unit+" fail") {
		t.Fatalf("busctl calls:\n%s", calls)
	}
	if st, _ := b.Status(context.Background(), name); st.State != guest.StateAbsent {
		t.Fatalf("after Stop: %+v", st)
	}
}
