package slapdenv

import "testing"

// StartT starts an attached slapd in a fresh t.TempDir() and stops it when the test ends.
// On failure the end of slapd.log is logged, which usually says why an operation failed.
func StartT(t testing.TB) *Server {
	t.Helper()
	return StartTWith(t, Options{})
}

// StartTWith is StartT with options (Attached is always set).
func StartTWith(t testing.TB, opts Options) *Server {
	t.Helper()
	opts.Attached = true
	s, err := Start(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("slapd.log (end):\n%s", s.LogTail(30))
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}
