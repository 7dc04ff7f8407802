package bootserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Image distribution (docs/publishing.md): the boot server pulls the version directories
// its hosts need from the site manager's store into ExportRoot, verifies each before it
// counts, and reports what it holds verified; the site manager gives a host only versions
// its boot server reported.
//
//   - GET /api/v1/bootservers/{name}/images: the versions to hold (Wanted);
//   - a missing version directory is fetched file by file from /images/PATH/NAME (the
//     store, served like boot files) into a temporary directory next to its place,
//     SHA256SUMS first; it is checked with artefact.Verify and against the catalogue's
//     sha256 of the root image, then renamed into place (one rename: NFS clients and
//     `overtime serve` see the whole directory or none; version directories are immutable);
//   - a directory already there (placed by hand, or the store itself on a one-machine
//     site) is verified the same way, or, without a SHA256SUMS, by the root image's sha256;
//     verification is remembered by file size and mtime (StateDir/images.json), so that an
//     unchanged 4 GB image is hashed once, not at every round or restart;
//   - a corrupt directory is never reported; one this boot server fetched itself is
//     removed and fetched again at the next round;
//   - directories this boot server fetched whose version is no longer in the catalogue
//     (`overtime image gc`) are deleted; nothing it did not fetch is ever deleted, nor a
//     directory inside or around one a version still uses;
//   - a version lives in IMAGE/VERSION; one an older catalogue stated elsewhere is
//     skipped when its path is another version's directory, or inside or around one;
//   - POST /api/v1/bootservers/{name}/images: every version held verified (needs the
//     boot server's own account: a boot-server role for it).

const (
	fileImagesState = "images.json"
	tmpPrefix       = ".overtime-fetch-"
)

// imageState is what StateDir/images.json keeps across restarts.
type imageState struct {
	// Owned are the version directories (paths below ExportRoot) this boot server
	// fetched: the only ones it deletes.
	Owned []string `json:"owned"`
	// Verified: path -> what was verified (file name -> size and mtime at that moment).
	Verified map[string]verifiedDir `json:"verified"`
}

type verifiedDir struct {
	RootSHA256 string               `json:"rootSHA256"`
	Files      map[string]fileStamp `json:"files"`
}

type fileStamp struct {
	Size  int64 `json:"size"`
	MTime int64 `json:"mtime"` // ns
}

// ImageStats counts what image syncs did (the benchmark reads them).
type ImageStats struct {
	BytesFetched    atomic.Int64
	VersionsFetched atomic.Int64
	Refused         atomic.Int64 // fetched or found copies that failed verification
}

func (c *Config) loadImageState() *imageState {
	st := &imageState{Verified: map[string]verifiedDir{}}
	data, err := os.ReadFile(c.path(fileImagesState))
	if err == nil {
		if err := json.Unmarshal(data, st); err != nil {
			c.Log.Warn("image state unreadable; verifying every image again", "err", err)
			st = &imageState{Verified: map[string]verifiedDir{}}
		}
	}
	if st.Verified == nil {
		st.Verified = map[string]verifiedDir{}
	}
	return st
}

func (c *Config) saveImageState(st *imageState) error {
	sort.Strings(st.Owned)
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(c.path(fileImagesState), data, 0o644)
}

// stamp is the size and mtime of every file of dir that SHA256SUMS lists (and of
// SHA256SUMS itself), or of the root image when there is no SHA256SUMS.
func stamp(dir string, names []string) (map[string]fileStamp, error) {
	out := map[string]fileStamp{}
	for _, n := range names {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", n)
		}
		out[n] = fileStamp{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}
	}
	return out, nil
}

// verifyDir checks the version directory dir against SHA256SUMS and the catalogue's sha256
// of the root image (want), or, without SHA256SUMS, the root image alone. A directory
// whose stamps match an earlier verification is not hashed again.
func (c *Config) verifyDir(st *imageState, rel, dir, want string) error {
	var listed []string
	files, err := artefact.Read(dir)
	switch {
	case err == nil:
		listed = []string{artefact.SumsFile}
		for _, f := range files {
			listed = append(listed, f.Name)
		}
	case errors.Is(err, fs.ErrNotExist):
		listed = []string{model.ImageRoot}
	default:
		return fmt.Errorf("%w: %v", artefact.ErrMismatch, err)
	}
	stamps, err := stamp(dir, listed)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", dir, artefact.ErrMismatch, err)
	}
	if v, ok := st.Verified[rel]; ok && v.RootSHA256 == want && mapsEqual(v.Files, stamps) {
		return nil
	}
	delete(st.Verified, rel)
	if files != nil {
		if files, err = artefact.Verify(dir); err != nil {
			return err
		}
		if !imagestore.ListsRoot(files, want) { // the site manager's store is held to the same rule
			return fmt.Errorf("%s: %w: %s lists no root image with the published sha256 %s", dir, artefact.ErrMismatch, artefact.SumsFile, want)
		}
	} else {
		sum, _, err := artefact.Sum(filepath.Join(dir, model.ImageRoot))
		if err != nil {
			return err
		}
		if sum != want {
			return fmt.Errorf("%s: %w: sha256 %s, published %s", filepath.Join(dir, model.ImageRoot), artefact.ErrMismatch, sum, want)
		}
	}
	st.Verified[rel] = verifiedDir{RootSHA256: want, Files: stamps}
	return nil
}

func mapsEqual(a, b map[string]fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// fetch downloads version w into a temporary directory below ExportRoot, verifies it
// and renames it to its place.
func (c *Config) fetchVersion(ctx context.Context, st *imageState, w wire.BootImage, stats *ImageStats) error {
	dst := filepath.Join(c.ExportRoot, filepath.FromSlash(w.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), tmpPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left to remove
	base := "/images/" + escapePath(w.Path) + "/"
	sums, err := os.Create(filepath.Join(tmp, artefact.SumsFile))
	if err != nil {
		return err
	}
	n, err := c.Client.Download(ctx, base+artefact.SumsFile, sums)
	stats.BytesFetched.Add(n)
	if cerr := sums.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", artefact.SumsFile, err)
	}
	files, err := artefact.Read(tmp)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := c.fetchFile(ctx, base+url.PathEscape(f.Name), filepath.Join(tmp, f.Name), stats); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	if err := c.verifyDir(st, w.Path, tmp, w.SHA256); err != nil {
		delete(st.Verified, w.Path)
		stats.Refused.Add(1)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes 0700; NFS clients read it
		return err
	}
	v := st.Verified[w.Path]
	if err := os.Rename(tmp, dst); err != nil {
		delete(st.Verified, w.Path)
		return err
	}
	st.Verified[w.Path] = v // same files, same stamps: rename keeps them
	if !slices.Contains(st.Owned, w.Path) {
		st.Owned = append(st.Owned, w.Path)
	}
	stats.VersionsFetched.Add(1)
	syncDir(filepath.Dir(dst))
	return nil
}

func (c *Config) fetchFile(ctx context.Context, urlPath, dst string, stats *ImageStats) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	n, err := c.Client.Download(ctx, urlPath, f)
	stats.BytesFetched.Add(n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i := range parts {
		parts[i] = url.PathEscape(parts[i])
	}
	return strings.Join(parts, "/")
}

// SyncImagesOnce runs one round: fetch and verify what the site manager wants this boot
// server to hold, delete what it fetched and the catalogue no longer has, and report
// what it holds verified. It returns the held list (also when the report failed).
func (c *Config) SyncImagesOnce(ctx context.Context, stats *ImageStats) ([]wire.BootImage, error) {
	if stats == nil {
		stats = &ImageStats{}
	}
	var want wire.BootImages
	if _, err := c.Client.Get("/api/v1/bootservers/"+url.PathEscape(c.Name)+"/images", nil, &want); err != nil {
		return nil, fmt.Errorf("wanted images: %w", err)
	}
	var catalogue []model.Image
	if _, err := c.Client.Get("/api/v1/images", nil, &catalogue); err != nil {
		return nil, fmt.Errorf("image catalogue: %w", err)
	}
	st := c.loadImageState()
	defer func() {
		if err := c.saveImageState(st); err != nil {
			c.Log.Error("saving the image state failed", "err", err)
		}
	}()
	c.cleanTemp()

	// Every version of the catalogue whose directory is here and verifies is held; what
	// is wanted and missing (or a corrupt copy of ours) is fetched.
	wanted := map[string]bool{}
	for _, w := range want.Wanted {
		wanted[w.Key()] = true
	}
	inUse := map[string]bool{}
	shared := overlapping(catalogue)
	var held []wire.BootImage
	var firstErr error
	for _, im := range catalogue {
		for _, v := range im.Versions {
			inUse[v.Path] = true
			b := wire.BootImage{Image: im.Name, Version: v.Version, Path: v.Path, SHA256: v.SHA256, Size: v.Size}
			if names.RelPath("path", v.Path) != nil || names.SHA256(v.SHA256) != nil {
				continue // the site manager validates; never trust a path blindly
			}
			// A version lives in IMAGE/VERSION (model.VersionPath; the site manager
			// refuses any other path for what it writes now). An older catalogue may
			// state another path: such a version is skipped when its directory is, or is
			// inside or around, another version's, so that it never verifies, replaces or
			// deletes what belongs to another version.
			if v.Path != model.VersionPath(im.Name, v.Version) && shared[v.Path] {
				c.Log.Warn("image version skipped: its path is another version's directory (or inside or around one)", "image", im.Name, "version", v.Version, "path", v.Path)
				continue
			}
			dir := filepath.Join(c.ExportRoot, filepath.FromSlash(v.Path))
			_, statErr := os.Stat(dir)
			if statErr == nil {
				err := c.verifyDir(st, v.Path, dir, v.SHA256)
				if err == nil {
					held = append(held, b)
					continue
				}
				stats.Refused.Add(1)
				c.Log.Error("image version refused: not what was published", "image", im.Name, "version", v.Version, "dir", dir, "err", err)
				if !slices.Contains(st.Owned, v.Path) || !wanted[b.Key()] {
					continue // not ours to replace, or not needed
				}
				if err := os.RemoveAll(dir); err != nil {
					c.Log.Error("removing a corrupt image copy failed", "dir", dir, "err", err)
					continue
				}
			} else if !errors.Is(statErr, fs.ErrNotExist) || !wanted[b.Key()] {
				continue
			}
			start := time.Now()
			before := stats.BytesFetched.Load()
			if err := c.fetchVersion(ctx, st, b, stats); err != nil {
				c.Log.Error("fetching image version failed", "image", im.Name, "version", v.Version, "err", err)
				if firstErr == nil {
					firstErr = fmt.Errorf("image %s %s: %w", im.Name, v.Version, err)
				}
				continue
			}
			c.Log.Info("image version fetched and verified", "image", im.Name, "version", v.Version,
				"bytes", stats.BytesFetched.Load()-before, "seconds", time.Since(start).Seconds())
			held = append(held, b)
		}
	}
	// What we fetched and the catalogue no longer has (image gc) goes.
	kept := st.Owned[:0]
	for _, p := range st.Owned {
		if inUse[p] || names.RelPath("path", p) != nil || aroundAny(p, inUse) {
			kept = append(kept, p)
			continue
		}
		dir := filepath.Join(c.ExportRoot, filepath.FromSlash(p))
		if err := os.RemoveAll(dir); err != nil {
			c.Log.Error("removing an image version no longer published failed", "dir", dir, "err", err)
			kept = append(kept, p)
			continue
		}
		delete(st.Verified, p)
		c.Log.Info("image version no longer published: removed", "dir", dir)
	}
	st.Owned = kept
	if held == nil {
		held = []wire.BootImage{}
	}
	if err := c.Client.Send("POST", "/api/v1/bootservers/"+url.PathEscape(c.Name)+"/images", nil, wire.BootImagesReport{Held: held}, nil); err != nil {
		return held, fmt.Errorf("reporting held images: %w", err)
	}
	return held, firstErr
}

// overlapping marks the catalogue's version paths that another version's path equals,
// is inside or is around.
func overlapping(catalogue []model.Image) map[string]bool {
	count := map[string]int{}
	for _, im := range catalogue {
		for _, v := range im.Versions {
			count[v.Path]++
		}
	}
	out := map[string]bool{}
	for p, n := range count {
		if n > 1 {
			out[p] = true
		}
		for q := p; strings.Contains(q, "/"); {
			q = q[:strings.LastIndexByte(q, '/')]
			if count[q] > 0 {
				out[p], out[q] = true, true
			}
		}
	}
	return out
}

// aroundAny: deleting directory p would delete part of, or all of, a directory in use.
func aroundAny(p string, inUse map[string]bool) bool {
	for q := range inUse {
		if model.PathsOverlap(p, q) {
			return true
		}
	}
	return false
}

// cleanTemp removes fetch directories a previous run left (killed half way).
func (c *Config) cleanTemp() {
	_ = filepath.WalkDir(c.ExportRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			_ = os.RemoveAll(p)
			return filepath.SkipDir
		}
		// Version directories hold files, not more directories worth walking deeply;
		// bound the walk to the image tree's usual depth (image/version).
		if rel, _ := filepath.Rel(c.ExportRoot, p); strings.Count(rel, string(filepath.Separator)) >= 3 {
			return filepath.SkipDir
		}
		return nil
	})
}

// imageLoop runs SyncImages every Refresh until ctx ends, in its own goroutine: a
// multi-GB fetch must not hold up dnsmasq's configuration.
func (c *Config) imageLoop(ctx context.Context, stats *ImageStats) {
	if stats == nil {
		stats = &ImageStats{}
	}
	t := time.NewTicker(c.Refresh)
	defer t.Stop()
	failing := ""
	for {
		_, err := c.SyncImagesOnce(ctx, stats)
		switch {
		case err != nil && err.Error() != failing:
			c.Log.Warn("image sync: "+err.Error(), "hint", hint(err))
			failing = err.Error()
		case err == nil && failing != "":
			c.Log.Info("image sync works again")
			failing = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func hint(err error) string {
	if strings.Contains(err.Error(), "may not report") {
		return "give this boot server's account a boot-server role: overtime role add NAME --role boot-server --boot-server BS --member UID"
	}
	return ""
}
