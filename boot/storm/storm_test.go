package storm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRaise(t *testing.T) {
	procSys = t.TempDir() + "/"
	defer func() { procSys = "/proc/sys/" }()
	list := []Sysctl{{Key: "net.core.low", Value: 100}, {Key: "net.core.high", Value: 100}, {Key: "net.core.missing", Value: 100}}
	if err := os.MkdirAll(filepath.Join(procSys, "net/core"), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"low": "10\n", "high": "200\n"} {
		if err := os.WriteFile(filepath.Join(procSys, "net/core", k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	changes, err := Raise(list)
	if err == nil || !strings.Contains(err.Error(), "net.core.missing=100") {
		t.Fatalf("error %v, want one naming net.core.missing", err)
	}
	want := []Change{{Key: "net.core.low", Old: 10, New: 100}, {Key: "net.core.high", Old: 200, New: 200}}
	for i, w := range want {
		if c := changes[i]; c.Key != w.Key || c.Old != w.Old || c.New != w.New || c.Err != nil {
			t.Errorf("change %d = %+v, want %+v", i, c, w)
		}
	}
	if v, _ := Read("net.core.low"); v != 100 {
		t.Errorf("net.core.low = %d after Raise, want 100", v)
	}
	if v, _ := Read("net.core.high"); v != 200 {
		t.Errorf("net.core.high = %d after Raise, want 200 (never lowered)", v)
	}
}

func TestLeaseMax(t *testing.T) {
	for _, c := range []struct{ hosts, rng, want int }{{10, 50, 1000}, {1000, 0, 1000}, {1200, 0, 1200}, {1000, 16382, 17382}} {
		if got := LeaseMax(c.hosts, c.rng); got != c.want {
			t.Errorf("LeaseMax(%d, %d) = %d, want %d", c.hosts, c.rng, got, c.want)
		}
	}
}
