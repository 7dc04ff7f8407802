// Package artefact answers one question: is this image version directory what was
// published? Every published version directory (model.ImageVersion.Path below an image
// tree: the site manager's store, every boot server's export) holds its artefacts
// (vmlinuz, initrd.img, root.squashfs for desktop and compute images; the disk and vm.json
// of a course VM; the build manifest) and a SHA256SUMS file in GNU sha256sum format
// listing each of them, so that an administrator can check a copy with `sha256sum -c
// SHA256SUMS` and Overtime checks it with Verify.
package artefact

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
)

// SumsFile is the checksum list of a version directory.
const SumsFile = "SHA256SUMS"

// File is one artefact of a version.
type File struct {
	Name   string // a plain file name inside the version directory
	SHA256 string // lower-case hex
}

// Sum reads the file at path and returns its sha256 (lower-case hex) and size.
func Sum(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// ValidName says whether name may be an artefact's name: one path element of letters,
// digits, '.', '-', '_', not starting with '.', and not SumsFile itself.
func ValidName(name string) error {
	if name == "" || len(name) > 128 || name[0] == '.' || name == SumsFile {
		return fmt.Errorf("artefact name %q: must be a plain file name (letters, digits, . - _), not %s", name, SumsFile)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("artefact name %q: must be a plain file name (letters, digits, . - _)", name)
		}
	}
	return nil
}

// Format renders files as a SHA256SUMS document (sorted by name, text mode: two spaces).
func Format(files []File) []byte {
	fs := append([]File(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	var b bytes.Buffer
	for _, f := range fs {
		fmt.Fprintf(&b, "%s  %s\n", f.SHA256, f.Name)
	}
	return b.Bytes()
}

// Parse reads a SHA256SUMS document. It refuses anything but "HEX  NAME" lines (text or
// binary mode marker), bad names and duplicate names.
func Parse(data []byte) ([]File, error) {
	var files []File
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, " ")
		if !ok || len(name) < 2 || (name[0] != ' ' && name[0] != '*') {
			return nil, fmt.Errorf("%s line %d: not \"SHA256  NAME\"", SumsFile, n)
		}
		name = name[1:]
		if len(sum) != 64 || strings.Trim(strings.ToLower(sum), "0123456789abcdef") != "" {
			return nil, fmt.Errorf("%s line %d: %q is not a sha256", SumsFile, n, sum)
		}
		if err := ValidName(name); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", SumsFile, n, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s line %d: %s listed twice", SumsFile, n, name)
		}
		seen[name] = true
		files = append(files, File{Name: name, SHA256: strings.ToLower(sum)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s lists no file", SumsFile)
	}
	return files, nil
}

// Write checksums the named files of dir and writes dir/SHA256SUMS atomically.
func Write(dir string, names ...string) ([]File, error) {
	var files []File
	for _, name := range names {
		if err := ValidName(name); err != nil {
			return nil, err
		}
		sum, _, err := Sum(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: name, SHA256: sum})
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, SumsFile), Format(files), 0o644); err != nil {
		return nil, err
	}
	return files, nil
}

// Read reads dir/SHA256SUMS.
func Read(dir string) ([]File, error) {
	data, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return nil, err
	}
	files, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return files, nil
}

// ErrMismatch is wrapped by Verify's errors about content (missing, truncated or changed
// files), as opposed to errors reading the directory.
var ErrMismatch = errors.New("artefact does not match its checksum")

// Verify checks every file dir/SHA256SUMS lists. The error names the first file that is
// missing, not a regular file, or whose content differs.
func Verify(dir string) ([]File, error) {
	files, err := Read(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		p := filepath.Join(dir, f.Name)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %v", p, ErrMismatch, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: %w: not a regular file", p, ErrMismatch)
		}
		sum, size, err := Sum(p)
		if err != nil {
			return nil, err
		}
		if sum != f.SHA256 {
			return nil, fmt.Errorf("%s: %w: sha256 %s (%d bytes), %s says %s", p, ErrMismatch, sum, size, SumsFile, f.SHA256)
		}
	}
	return files, nil
}
