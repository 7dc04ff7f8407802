package imagestore

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/names"
)

// The staging area is where a lecturer's bytes wait to be published. Without bounds a
// lecturer could fill the store for everyone by uploading and never publishing: each
// staged file records who uploaded it, what one user keeps staged is bounded
// (DefaultStagedPerUser), and a staged version nobody touched for DefaultStagingTTL is
// removed at the next upload.
const (
	DefaultStagedPerUser = 128 << 30
	DefaultStagingTTL    = 7 * 24 * time.Hour
)

// Record is what the store keeps beside a staged file (RecordName): the sha256 and size
// taken while it streamed, and the uploader.
type Record struct {
	SHA256 string
	Size   int64
	UID    string
}

// RecordName is the name of file's record in its staging directory: a dot file, so that
// it is never a staged artefact itself.
func RecordName(file string) string { return "." + file + ".sha256" }

// Format is the record's content: "SHA256 SIZE UID\n".
func (r Record) Format() []byte {
	return []byte(r.SHA256 + " " + strconv.FormatInt(r.Size, 10) + " " + r.UID + "\n")
}

// ParseRecord reads a record; one without an uploader (written before records named
// one) has UID "".
func ParseRecord(b []byte) (Record, bool) {
	f := strings.Fields(string(b))
	if len(f) < 2 || len(f) > 3 || names.SHA256(f[0]) != nil {
		return Record{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n < 0 {
		return Record{}, false
	}
	r := Record{SHA256: f[0], Size: n}
	if len(f) == 3 {
		r.UID = f[2]
	}
	return r, true
}

// stagedVersions lists the staging directories below root: IMAGE/VERSION of each.
func stagedVersions(root string) ([][2]string, error) {
	base := filepath.Join(root, Incoming)
	images, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, im := range images {
		if !im.IsDir() {
			continue
		}
		vers, err := os.ReadDir(filepath.Join(base, im.Name()))
		if err != nil {
			return nil, err
		}
		for _, v := range vers {
			if v.IsDir() {
				out = append(out, [2]string{im.Name(), v.Name()})
			}
		}
	}
	return out, nil
}

// StagedBytes is what uid keeps staged below root: the sizes of the staged files whose
// records name uid (files still streaming are bounded by the uploads in flight).
func StagedBytes(root, uid string) (int64, error) {
	vers, err := stagedVersions(root)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, v := range vers {
		dir := filepath.Join(root, Incoming, v[0], v[1])
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // discarded or published meanwhile
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".sha256") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			if r, ok := ParseRecord(b); ok && r.UID == uid {
				total += r.Size
			}
		}
	}
	return total, nil
}

// SweepStaging removes the staged versions below root that nobody touched for longer
// than ttl (the newest modification of the directory and its files) and that busy does
// not report in use (an upload or publish in flight: busy("IMAGE/VERSION")). It returns
// the removed IMAGE/VERSION names.
func SweepStaging(root string, ttl time.Duration, now time.Time, busy func(key string) bool) ([]string, error) {
	vers, err := stagedVersions(root)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, v := range vers {
		key := v[0] + "/" + v[1]
		dir := filepath.Join(root, Incoming, v[0], v[1])
		if busy(key) || !untouchedSince(dir, now.Add(-ttl)) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return removed, err
		}
		os.Remove(filepath.Dir(dir)) // the image's staging directory, when empty now
		removed = append(removed, key)
	}
	return removed, nil
}

// untouchedSince: dir and everything directly in it were last modified before t.
func untouchedSince(dir string, t time.Time) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.ModTime().Before(t) {
		return false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(t) {
			return false
		}
	}
	return true
}
