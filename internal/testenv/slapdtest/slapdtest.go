// Package slapdtest holds the testing.TB helpers of internal/slapdenv: a throwaway slapd
// per test, stopped when the test ends. They live apart from slapdenv because
// `overtime-dev slapd` uses slapdenv's starter, and no binary may link the testing
// package.
package slapdtest

import (
	"testing"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// StartT starts an attached slapd in a fresh t.TempDir() and stops it when the test ends.
// On failure the end of slapd.log is logged, which usually says why an operation failed.
func StartT(t testing.TB) *slapdenv.Server {
	t.Helper()
	return StartTWith(t, slapdenv.Options{})
}

// StartTWith is StartT with options (Attached is always set).
func StartTWith(t testing.TB, opts slapdenv.Options) *slapdenv.Server {
	t.Helper()
	needs.Servers(t, "slapd")
	opts.Attached = true
	s, err := slapdenv.Start(t.TempDir(), opts)
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

// StartReplicatedT starts n attached slapd servers as multi-provider replicas of one
// another (slapdenv.StartReplicated), each in its own t.TempDir(), stopped when the test
// ends; on failure the end of each one's slapd.log is logged.
func StartReplicatedT(t testing.TB, n int, opts slapdenv.Options) []*slapdenv.Server {
	t.Helper()
	needs.Servers(t, "slapd")
	opts.Attached = true
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	servers, err := slapdenv.StartReplicated(dirs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if t.Failed() {
				t.Logf("slapd.log of serverID %d, %s (end):\n%s", s.ServerID, s.URL, s.LogTail(30))
			}
			if err := s.Stop(); err != nil {
				t.Error(err)
			}
		}
	})
	return servers
}
