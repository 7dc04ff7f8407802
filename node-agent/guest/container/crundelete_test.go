package container

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crun's `delete --force` can fail on a guest whose processes stop has just killed
// ("open pidfd: No such file or directory": CI's TestSlurmReservations, whose guest then
// never started again). With the guest's cgroups gone its state is removed anyway; while
// anything of it may still run, the error stands and the state stays.
func TestCrunDeleteOfAStoppedGuest(t *testing.T) {
	dir := t.TempDir()
	crun := filepath.Join(t.TempDir(), "crun")
	// A crun that fails every delete the way crun 1.8 did.
	if err := os.WriteFile(crun, []byte("#!/bin/sh\necho 'open pidfd: No such file or directory' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var notes []string
	b := &Backend{o: Options{Crun: crun, RunDir: dir, Logf: func(f string, a ...any) { notes = append(notes, f) }}}
	state := filepath.Join(dir, "crun", "overtime-pc2")
	for _, tc := range []struct {
		processesGone bool
		wantErr       bool
	}{{false, true}, {true, false}} {
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(state, "status"), []byte(`{"pid": 4711}`), 0o600); err != nil {
			t.Fatal(err)
		}
		err := b.crunDelete(context.Background(), "overtime-pc2", tc.processesGone)
		_, serr := os.Stat(state)
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), "open pidfd") || serr != nil):
			t.Errorf("processes may run: err %v, state %v; want crun's error and the state kept", err, serr)
		case !tc.wantErr && (err != nil || !os.IsNotExist(serr)):
			t.Errorf("processes gone: err %v, state %v; want nil and the state removed", err, serr)
		}
	}
	if len(notes) != 1 {
		t.Errorf("notes %q, want one about the removed state", notes)
	}
	// Nothing left to delete: crun is not even asked.
	if err := b.crunDelete(context.Background(), "overtime-pc2", false); err != nil {
		t.Errorf("absent state: %v", err)
	}
}
