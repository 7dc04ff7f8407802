package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What build.sh writes (its printf lines), trimmed to a few packages.
const built = `{
  "recipe": "compute-guest",
  "key": "0123456789abcdef",
  "baseKey": "fedcba9876543210",
  "chain": ["compute-guest"],
  "recipeRevision": "unknown",
  "suite": "bookworm", "kernel": "6.1.0-28-cloud-amd64",
  "sourceDateEpoch": 1764000000,
  "built": "2025-11-24T16:00:00Z",
  "files": {
    "root.squashfs": {"size": 123, "sha256": "00"}
  },
  "packages": [
    {"name": "munge", "version": "0.5.15-2", "installedKiB": 420},
    {"name": "slurmd", "version": "22.05.8-4+deb12u3", "installedKiB": 1234}
  ]
}
`

func TestRead(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, File), []byte(built), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Recipe != "compute-guest" || m.Suite != "bookworm" || len(m.Packages) != 2 || m.Packages[1].InstalledKiB != 1234 {
		t.Fatalf("read %+v", m)
	}
	if v := m.Package("slurmd"); v != "22.05.8-4+deb12u3" {
		t.Errorf("slurmd %q", v)
	}
	if v := m.Package("slurmctld"); v != "" {
		t.Errorf("a package the image does not have: %q", v)
	}

	if _, err := Read(t.TempDir()); !os.IsNotExist(err) {
		t.Errorf("no manifest: %v, want not-exist", err)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, File), []byte(`{"packages": "slurmd"}`), 0o644)
	if _, err := Read(bad); err == nil || !strings.Contains(err.Error(), File) {
		t.Errorf("a manifest that does not decode: %v", err)
	}
	big := t.TempDir()
	os.WriteFile(filepath.Join(big, File), []byte(`{"recipe": "`+strings.Repeat("x", maxSize)+`"}`), 0o644)
	if _, err := Read(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversized manifest: %v", err)
	}
}
