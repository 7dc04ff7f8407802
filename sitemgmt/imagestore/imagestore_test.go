package imagestore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// TestRemoveVersions: only the removed version's own IMAGE/VERSION directory goes; a
// path that is not derived, one a remaining version overlaps, one being uploaded, a
// symbolic link and a missing directory are left (the last without a reason).
func TestRemoveVersions(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{"desk/1", "desk/2", "desk/busy", "vm/1", Incoming + "/desk/3"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "f"), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "desk", "link")); err != nil {
		t.Fatal(err)
	}
	site := &model.Site{Images: []model.Image{
		{Name: "desk", Versions: []model.ImageVersion{{Version: "2", Path: "desk/2"}}},
		{Name: "vm", Versions: []model.ImageVersion{{Version: "old", Path: "vm/1/x"}}}, // an older release's path inside vm/1
	}}
	removed := []wire.BootImage{
		{Image: "desk", Version: "1", Path: "desk/1"},                 // deleted
		{Image: "desk", Version: "x", Path: "desk/2"},                 // not its own directory
		{Image: "desk", Version: "3", Path: Incoming},                 // not its own directory
		{Image: "vm", Version: "1", Path: "vm/1"},                     // a remaining version is inside it
		{Image: "desk", Version: "busy", Path: "desk/busy"},           // being published
		{Image: "desk", Version: "link", Path: "desk/link"},           // a symbolic link
		{Image: "desk", Version: "gone", Path: "desk/gone"},           // not there: nothing to do
		{Image: ".incoming", Version: "desk", Path: ".incoming/desk"}, // not an image name
	}
	lock := func(image, version string) (func(), error) {
		if version == "busy" {
			return nil, errors.New("in progress")
		}
		return func() {}, nil
	}
	deleted, left, err := RemoveVersions(root, site, removed, lock)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []string{"desk/1"}) {
		t.Errorf("deleted %v, want desk/1", deleted)
	}
	var why []string
	for _, l := range left {
		why = append(why, l.String())
	}
	want := []string{
		`image desk version x: its path "desk/2" is not its own directory desk/x`,
		`image desk version 3: its path ".incoming" is not its own directory desk/3`,
		"image vm version 1: image vm version old still uses vm/1/x",
		"image desk version busy: an upload or publish of it is in progress",
		"image desk version link: its directory is a symbolic link",
		"image .incoming version desk: not a valid image and version name",
	}
	if len(why) != len(want) {
		t.Fatalf("left %q", why)
	}
	for i := range want {
		if !strings.HasPrefix(why[i], want[i]) {
			t.Errorf("left %q, want %q…", why[i], want[i])
		}
	}
	for _, d := range []string{"desk/2/f", "desk/busy/f", "vm/1/f", Incoming + "/desk/3/f"} {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "desk", "link")); err != nil {
		t.Errorf("symbolic link removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "desk", "1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("desk/1 still there: %v", err)
	}
}
