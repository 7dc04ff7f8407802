package synth

import (
	"testing"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
)

// The generated site must be one the site manager accepts, or the benchmarks measure
// error paths.
func TestSiteIsValid(t *testing.T) {
	s := Site(10000, 200, 1)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Compile(s); err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 10000 || len(s.Pools) != 200 || len(s.BootServers) != 10 {
		t.Fatalf("got %d hosts %d pools %d servers", len(s.Hosts), len(s.Pools), len(s.BootServers))
	}
}

// The target shape (100,000 hosts, 2,000 pools, 50 boot servers) is valid too:
// every host address is unique on its boot server's subnet.
func TestTargetShapeIsValid(t *testing.T) {
	s := SiteOn(100000, 2000, 50, 1)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Compile(s); err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 100000 || len(s.Pools) != 2000 || len(s.BootServers) != 50 {
		t.Fatalf("got %d hosts %d pools %d servers", len(s.Hosts), len(s.Pools), len(s.BootServers))
	}
}
