package model

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/names"
)

// What a compute guest gives the jobs of the site's users (docs/slurm.md "Users, storage
// and MPI in guests"): their own uids and gids, and the cluster's file systems.

// GuestJobUsers are the uid and gid ranges of the site's users whose jobs a container guest
// runs. The guest's user namespace maps them unchanged (a job's uid 1234567 is uid 1234567
// on the desktop's kernel too), so that the cluster's NFS servers see the user's own ids
// and its files keep their owners; the guest's own accounts (0-65535) stay shifted to
// GuestRootIDBase. A range is "FIRST-LAST" (inclusive) or one id.
type GuestJobUsers struct {
	UIDs []string `json:"uids,omitempty" yaml:"uids,omitempty"`
	GIDs []string `json:"gids,omitempty" yaml:"gids,omitempty"`
}

// GuestRootIDBase is the desktop's uid (and gid) of a container guest's root: the guest's
// ids 0..GuestOwnIDs-1 are GuestRootIDBase.. on the desktop. It is the last 64 Ki block of
// the range systemd reserves for container ids (524288…1879048191, systemd's
// docs/UIDS-GIDS.md), far from the desktop users' ids (local and the directory's).
const GuestRootIDBase uint32 = 0x6FFF0000

// GuestOwnIDs is how many ids a container guest has for its own accounts (root, munge,
// slurm, nobody...): 0..65535, shifted to GuestRootIDBase.
const GuestOwnIDs = 65536

// maxJobIDRanges bounds the ranges of one kind: the kernel takes at most 340 lines in a
// uid_map, one of which is the guest's own block.
const maxJobIDRanges = 32

// IDRange is an inclusive range of uids or gids.
type IDRange struct{ First, Last uint32 }

func (r IDRange) String() string {
	if r.First == r.Last {
		return strconv.FormatUint(uint64(r.First), 10)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Count is how many ids the range holds.
func (r IDRange) Count() uint64 { return uint64(r.Last) - uint64(r.First) + 1 }

// ParseIDRange reads "FIRST-LAST" or "ID". 4294967295 ((uid_t)-1) is no id.
func ParseIDRange(s string) (IDRange, error) {
	a, b, isRange := strings.Cut(s, "-")
	if !isRange {
		b = a
	}
	first, err1 := strconv.ParseUint(a, 10, 32)
	last, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil || a == "" || b == "" || a[0] == '+' || b[0] == '+' {
		return IDRange{}, fmt.Errorf("invalid id range %q: use FIRST-LAST (decimal, inclusive) or one id", s)
	}
	if first > last {
		return IDRange{}, fmt.Errorf("invalid id range %q: %d comes after %d", s, first, last)
	}
	if last >= 1<<32-1 {
		return IDRange{}, fmt.Errorf("invalid id range %q: 4294967295 is no id ((uid_t)-1)", s)
	}
	return IDRange{uint32(first), uint32(last)}, nil
}

// JobIDRanges parses and checks one kind's ranges ("uids", "gids"): each outside the
// desktop's own ids (0-65535: its system and local accounts — a job's id there would be
// that account on the desktop's kernel) and the guest's own block at GuestRootIDBase, and
// no two overlapping. The result is sorted.
func JobIDRanges(kind string, in []string) ([]IDRange, error) {
	if len(in) > maxJobIDRanges {
		return nil, fmt.Errorf("%d %s ranges (at most %d)", len(in), kind, maxJobIDRanges)
	}
	own := IDRange{GuestRootIDBase, GuestRootIDBase + GuestOwnIDs - 1}
	var out []IDRange
	for _, s := range in {
		r, err := ParseIDRange(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", kind, err)
		}
		if r.First < GuestOwnIDs {
			return nil, fmt.Errorf("%s range %s overlaps the desktop's own ids 0-%d (its system and local accounts): a job's id there would be that account on the desktop", kind, r, GuestOwnIDs-1)
		}
		if r.overlaps(own) {
			return nil, fmt.Errorf("%s range %s overlaps %s, the desktop's ids of the guest's own accounts", kind, r, own)
		}
		for _, o := range out {
			if r.overlaps(o) {
				return nil, fmt.Errorf("%s ranges %s and %s overlap", kind, o, r)
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b IDRange) int { return int(int64(a.First) - int64(b.First)) })
	return out, nil
}

func (r IDRange) overlaps(o IDRange) bool { return r.First <= o.Last && o.First <= r.Last }

// Validate checks both kinds' ranges; a guest that names users needs both.
func (u GuestJobUsers) Validate() error {
	if len(u.UIDs) == 0 || len(u.GIDs) == 0 {
		return fmt.Errorf("jobUsers: give both uids and gids (the ranges of the site's users and of their groups)")
	}
	if _, err := JobIDRanges("uids", u.UIDs); err != nil {
		return fmt.Errorf("jobUsers: %v", err)
	}
	if _, err := JobIDRanges("gids", u.GIDs); err != nil {
		return fmt.Errorf("jobUsers: %v", err)
	}
	return nil
}

// GuestStorage is one of the cluster's NFS file systems (home, scratch) that a compute
// guest mounts for its jobs: inside the guest only, read-write, never on the desktop's
// side (the container backend mounts it in the guest's private mount namespace; a VM's
// init mounts it itself).
type GuestStorage struct {
	Server string `json:"server" yaml:"server"` // NFS server: IPv4 address or DNS name
	Export string `json:"export" yaml:"export"` // the exported path on the server
	Path   string `json:"path" yaml:"path"`     // the mount point in the guest
}

func (s GuestStorage) String() string { return s.Server + ":" + s.Export + " at " + s.Path }

// maxGuestStorage bounds a guest's file systems.
const maxGuestStorage = 16

// reservedGuestPaths are the guest system's own trees: a cluster file system mounted on
// or under one would hide or replace what the guest runs (its programs, its
// configuration, slurmd's spool, the secrets the agent hands over).
var reservedGuestPaths = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
	"/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var/lib", "/var/log", "/var/run", "/var/spool"}

// ValidateGuestStorage checks a guest's file systems: valid server, export and mount path
// (none of the guest system's own trees, none nested in another), at most 16.
func ValidateGuestStorage(list []GuestStorage) error {
	if len(list) > maxGuestStorage {
		return fmt.Errorf("%d storage entries (at most %d)", len(list), maxGuestStorage)
	}
	for i, s := range list {
		if err := names.NFSServer(s.Server); err != nil {
			return fmt.Errorf("storage %d: %v", i+1, err)
		}
		if err := names.AbsPath("export", s.Export); err != nil {
			return fmt.Errorf("storage %d: %v", i+1, err)
		}
		if err := names.AbsPath("mount path", s.Path); err != nil || path.Clean(s.Path) != s.Path {
			return fmt.Errorf("storage %d: invalid mount path %q: an absolute, clean path in the guest such as /home", i+1, s.Path)
		}
		for _, r := range reservedGuestPaths {
			if s.Path == "/" || s.Path == r || strings.HasPrefix(s.Path, r+"/") || strings.HasPrefix(r, s.Path+"/") {
				return fmt.Errorf("storage %d: mount path %s would cover the guest's own %s", i+1, s.Path, r)
			}
		}
		for _, o := range list[:i] {
			if o.Path == s.Path || strings.HasPrefix(s.Path, o.Path+"/") || strings.HasPrefix(o.Path, s.Path+"/") {
				return fmt.Errorf("storage %d: mount path %s nests with %s (%s)", i+1, s.Path, o.Path, o)
			}
		}
	}
	return nil
}
