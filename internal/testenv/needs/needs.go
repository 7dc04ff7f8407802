// Package needs marks tests that need more than Go: real servers (slapd, dnsmasq,
// slurmctld, nfs-ganesha, QEMU, libvirtd), root, or tools from Debian packages. Such
// tests skip under `go test -short` (`make check`, the fast lane that runs without root
// and without the packages) and run otherwise (`make test`), where a missing server is a
// failure rather than a silent skip.
//
// It is a leaf package so that every test environment under internal/testenv, and tests
// of the packages those environments import, can call it without an import cycle.
package needs

import (
	"strings"
	"testing"
)

// Servers skips t under -short, naming what it needs, e.g. Servers(t, "slapd") or
// Servers(t, "root", "ip netns"). Every environment starter's testing helper calls it
// first, so a test that starts an environment needs no call of its own; tests that run
// root-only or packaged tools directly call it themselves.
func Servers(t testing.TB, what ...string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: skipped under -short (run without -short, as root with the Debian packages: make test)", strings.Join(what, ", "))
	}
}
