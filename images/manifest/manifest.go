// Package manifest reads manifest.json, the description images/build.sh writes into every
// built image version directory and lists in its SHA256SUMS (images/artefact): the
// recipe, the build's keys, the kernel and every Debian package with its version
// (docs/images.md). The node agent reads a compute guest's to learn the Slurm its
// slurmd is (vocab/slurmcompat).
package manifest

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is the manifest's name in a version directory.
const File = "manifest.json"

// maxSize bounds what Read takes: a desktop image's ~2,000 packages are ~150 KB.
const maxSize = 8 << 20

// Manifest is the part of manifest.json Overtime reads.
type Manifest struct {
	Recipe   string    `json:"recipe"`
	Key      string    `json:"key"`
	Suite    string    `json:"suite"`
	Kernel   string    `json:"kernel"`
	Built    string    `json:"built"`
	Packages []Package `json:"packages"`
}

// Package is one Debian package the image carries (dpkg-query in the built root).
type Package struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	InstalledKiB int64  `json:"installedKiB"`
}

// Read reads dir's manifest.
func Read(dir string) (*Manifest, error) {
	f, err := os.Open(filepath.Join(dir, File))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if len(b) > maxSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", f.Name(), maxSize)
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return m, nil
}

// Parse decodes a manifest.
func Parse(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Package is the version of the Debian package name in the image ("" if it has none).
func (m *Manifest) Package(name string) string {
	for _, p := range m.Packages {
		if p.Name == name {
			return p.Version
		}
	}
	return ""
}
