package model

import (
	"strings"
	"testing"
	"time"
)

// TestCheckVersionPaths: a written version lives in IMAGE/VERSION, whatever it states;
// a version an earlier release stored with another path is kept as it is.
func TestCheckVersionPaths(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cur := &Site{Images: []Image{
		{Name: "desk", Versions: []ImageVersion{{Version: "1", SHA256: sha('a'), Path: "desk/1", Created: t0}}},
		{Name: "vm", Versions: []ImageVersion{{Version: "old", SHA256: sha('b'), Path: "elsewhere/old", Created: t0}}},
	}}
	for _, tc := range []struct {
		path, err string
	}{
		{path: "vm/2"},
		{path: "", err: ""}, // filled in by Normalize
		{path: "desk/1", err: `image vm version 2: path "desk/1" is not the version's own directory: a version lives in vm/2`},
		{path: ".incoming", err: "a version lives in vm/2"},
		{path: ".incoming/vm/2", err: "a version lives in vm/2"},
		{path: "vm", err: "a version lives in vm/2"},
		{path: "vm/2/x", err: "a version lives in vm/2"},
		{path: "elsewhere/old", err: "a version lives in vm/2"},
	} {
		next := cur.Clone()
		next.Image("vm").Versions = append(next.Image("vm").Versions, ImageVersion{Version: "2", SHA256: sha('c'), Path: tc.path, Created: t0})
		if err := next.Normalize(); err != nil {
			t.Fatal(err)
		}
		err := CheckVersionPaths(cur, next)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("path %q: %v, want %q", tc.path, err, tc.err)
		}
		if tc.path == "" && next.Image("vm").Version("2").Path != "vm/2" {
			t.Errorf("a version without a path got %q", next.Image("vm").Version("2").Path)
		}
	}
	// An older version's stated path is kept; changing it is a new statement.
	next := cur.Clone()
	if err := CheckVersionPaths(cur, next); err != nil {
		t.Errorf("unchanged older version: %v", err)
	}
	next.Image("vm").Versions[0].Path = "desk"
	if err := CheckVersionPaths(cur, next); err == nil || !strings.Contains(err.Error(), "a version lives in vm/old") {
		t.Errorf("older version moved to another path: %v", err)
	}
}
