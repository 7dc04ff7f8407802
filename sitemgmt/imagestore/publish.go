package imagestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/images/diskcheck"
	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Publishing a staged version (service.Images.Publish runs the steps in this order):
//
//  1. Stage: reserve the version (no upload into it runs meanwhile), list its staged
//     files with the sums taken while they streamed, check them against the request,
//     pick the root image and, for a course VM, check its disks. Nothing is changed yet.
//  2. (The catalogue judges the new version: authorisation and validation, a dry run.)
//  3. Move: write SHA256SUMS and rename the staging directory to IMAGE/VERSION. Every step
//     that can fail (a full store: 507) leaves the staging area as it was, so that the
//     same publish can be retried: SHA256SUMS is written whole or not at all (atomicfile)
//     and taken back, the rename moves the whole directory or nothing and is undone.
//  4. (The catalogue registers the version; if it refuses now, Move's undo puts the files
//     back into staging.)
//  5. Done: the sidecar records go only once the version is registered.

// Staged is a version's staged files, checked and ready to move into the store.
type Staged struct {
	Image, Version string
	Files          []artefact.File // with the sums taken while they streamed
	Names          []string        // the files' names, sorted
	Root           string          // the root image: its sha256 and size are the version's
	RootSHA256     string
	RootSize       int64
	st             *Store
	dir            string
	release        func()
}

// Stage reserves image's version for publishing and checks what is staged for it: no
// directory of the version in the store yet (409), at least one file, exactly req.Files when the request lists them, a root image (req.Root;
// by default root.squashfs when staged, else disk.qcow2, else the only file) and, for a
// course VM (kind), disks that run on every PC of its pool (images/diskcheck), whoever
// uploaded them. Release the reservation (Staged.Release) when done.
func (st *Store) Stage(ctx context.Context, image, version string, kind model.ImageKind, req wire.PublishRequest) (*Staged, error) {
	release, err := st.flight.exclusive(model.ImageVersionName(image, version))
	if err != nil {
		return nil, err
	}
	s := &Staged{Image: image, Version: version, st: st, dir: st.stagingDir(image, version), release: release}
	if err := st.CheckNew(image, version); err != nil {
		release()
		return nil, err
	}
	if err := s.check(ctx, kind, req); err != nil {
		release()
		return nil, err
	}
	return s, nil
}

// Release ends the reservation Stage took.
func (s *Staged) Release() { s.release() }

func (s *Staged) check(ctx context.Context, kind model.ImageKind, req wire.PublishRequest) error {
	files, sizes, err := staged(s.dir)
	if err != nil {
		return s.st.fail(s.Image, s.Version, "the staged files", err)
	}
	if len(files) == 0 {
		return model.Invalid("image %s version %s: nothing uploaded to publish", s.Image, s.Version)
	}
	var have []string
	for _, f := range files {
		have = append(have, f.Name)
	}
	sort.Strings(have)
	if req.Files != nil {
		want := append([]string(nil), req.Files...)
		sort.Strings(want)
		if !slices.Equal(want, have) {
			return model.Invalid("image %s version %s: staged files %v, the request expects %v; upload what is missing or discard the upload", s.Image, s.Version, have, want)
		}
	}
	root := req.Root
	switch {
	case root != "":
	case slices.Contains(have, model.ImageRoot):
		root = model.ImageRoot
	case slices.Contains(have, vmspec.DiskFile):
		root = vmspec.DiskFile
	case len(have) == 1:
		root = have[0]
	default:
		return model.Invalid("image %s version %s: which file is the root image? name it (root) among %v", s.Image, s.Version, have)
	}
	var rootSum string
	for _, f := range files {
		if f.Name == root {
			rootSum = f.SHA256
		}
	}
	if rootSum == "" {
		return model.Invalid("image %s version %s: root %s was not uploaded (staged: %v)", s.Image, s.Version, root, have)
	}
	// A course VM's disks run on every PC of its pool: checked here, whoever uploaded
	// them, before anything is published (images/diskcheck).
	if kind == model.ImageCourseVM {
		if err := s.st.checkCourseVM(ctx, s.Image, s.Version, s.dir, have); err != nil {
			return err
		}
	}
	s.Files, s.Names, s.Root, s.RootSHA256, s.RootSize = files, have, root, rootSum, sizes[root]
	return nil
}

// checkCourseVM asks images/diskcheck whether the files staged in dir may be published
// as version of course-VM image: a refusal is model.Invalid naming the image, version,
// file and reason; a failure of the check is *Failure (its detail may name the store's
// directories, which the client is never told).
func (st *Store) checkCourseVM(ctx context.Context, image, version, dir string, files []string) error {
	err := diskcheck.CourseVMVersion(ctx, dir, files, diskcheck.Options{})
	switch {
	case err == nil:
		return nil
	case diskcheck.IsRefusal(err):
		st.log.Info("course VM refused", "image", image, "version", version, "reason", err)
		return model.Invalid("image %s version %s: %v", image, version, err)
	}
	st.log.Error("checking a course VM's disks", "image", image, "version", version, "err", err)
	return &Failure{Msg: "image " + image + " version " + version + ": the disks could not be checked (the server's log says why); nothing was published", Err: err}
}

// Move writes SHA256SUMS from the sums taken while streaming and renames the staging
// directory to IMAGE/VERSION, durably, with world-readable files (they are exported
// read-only to every PC). On failure the staging area is as it was. undo moves the
// version back to staging (the catalogue refused it after all), so that a retry finds
// the files where it looks for them.
func (s *Staged) Move() (undo func(), err error) {
	st := s.st
	sums := filepath.Join(s.dir, artefact.SumsFile)
	if err := atomicfile.WriteFile(sums, artefact.Format(s.Files), 0o644); err != nil {
		return nil, st.fail(s.Image, s.Version, artefact.SumsFile, err)
	}
	unstage := func() { os.Remove(sums) }
	final := filepath.Join(st.Root, filepath.FromSlash(model.VersionPath(s.Image, s.Version)))
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		unstage()
		return nil, st.fail(s.Image, s.Version, "the image's directory", err)
	}
	// The staging directory and its files were made 0755/0600 by CreateTemp: published
	// artefacts are world-readable.
	for _, f := range s.Files {
		if err := os.Chmod(filepath.Join(s.dir, f.Name), 0o644); err != nil {
			unstage()
			return nil, st.fail(s.Image, s.Version, f.Name, err)
		}
	}
	if err := os.Rename(s.dir, final); err != nil {
		unstage()
		return nil, st.fail(s.Image, s.Version, "the version's directory", err)
	}
	restage := func() {
		if rerr := os.Rename(final, s.dir); rerr != nil {
			st.log.Error("image store: moving a failed publication back to staging failed", "image", s.Image, "version", s.Version, "err", rerr)
			return
		}
		unstage()
	}
	// The rename is durable before the catalogue names the version. Some file systems
	// (FUSE, network) cannot sync a directory at all: only a real failure counts.
	if err := syncDir(filepath.Dir(final)); err != nil && (Full(err) || errors.Is(err, syscall.EIO)) {
		restage()
		return nil, st.fail(s.Image, s.Version, "the version's directory", err)
	}
	return restage, nil
}

// Done removes what only staging needed, once the version is registered: the sums'
// records and the image's staging directory, when it is empty now.
func (s *Staged) Done() {
	final := filepath.Join(s.st.Root, filepath.FromSlash(model.VersionPath(s.Image, s.Version)))
	for _, f := range s.Files {
		os.Remove(filepath.Join(final, RecordName(f.Name)))
	}
	os.Remove(filepath.Dir(s.dir))
}

// staged lists the artefacts staged in dir with their sums: the files, not the dot
// files (parts in progress, records). A file without a record of its stream (or whose
// size differs from it) is hashed now.
func staged(dir string) ([]artefact.File, map[string]int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var files []artefact.File
	sizes := map[string]int64{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() || artefact.ValidName(name) != nil {
			continue
		}
		sum, size := "", int64(-1)
		if b, err := os.ReadFile(filepath.Join(dir, RecordName(name))); err == nil {
			if rec, ok := ParseRecord(b); ok {
				sum, size = rec.SHA256, rec.Size
			}
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, err
		}
		if sum == "" || fi.Size() != size {
			if sum, size, err = artefact.Sum(filepath.Join(dir, name)); err != nil {
				return nil, nil, err
			}
		}
		files = append(files, artefact.File{Name: name, SHA256: sum})
		sizes[name] = size
	}
	return files, sizes, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
