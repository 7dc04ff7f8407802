// Package slurmcompat answers whether a compute guest's slurmd can join the site's
// controller: what a Slurm version may be (Valid), the Slurm version a Debian package
// version carries (FromDebian), and Slurm's compatibility window between a slurmctld and
// an older slurmd (Check). It is pure; the site manager validates the controller's
// version the sync daemon reports with it, and the node agent decides with it whether to
// start a guest (docs/slurm.md "The guest's Slurm").
//
// Slurm's rule (https://slurm.schedmd.com/upgrades.html, "Compatibility Window"; the
// daemons' upgrade order there: slurmdbd, then slurmctld, then slurmd): a slurmd may be
// of the controller's major release or of one of the releases the controller is
// compatible with, which are the previous two major releases, and since 24.11 (the
// six-month cycle) the previous three; it is never of a newer release than slurmctld.
// Maintenance releases within a major release speak the same protocol, so only the major
// release (YY.MM) counts. The releases are a list, not arithmetic on YY.MM: the cycle was
// nine months until 24.05 (22.05, 23.02, 23.11, 24.05) and six since (24.11, 25.05, ...).
package slurmcompat

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// versionRE is a Slurm version as the site manager accepts it: 2 to 4 dot-separated
// numbers of at most 4 digits (22.05.8; a release alone, 22.05, is enough to judge).
var versionRE = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,4}){1,3}$`)

// Valid says whether s may be a Slurm version: digits and dots, as SLURM_VERSION_STRING
// without a pre-release suffix (22.05.8, 24.11.0), at most 19 characters.
func Valid(s string) error {
	if !versionRE.MatchString(s) {
		return fmt.Errorf("invalid Slurm version %q: want 2 to 4 numbers of at most 4 digits separated by dots, e.g. 22.05.8", s)
	}
	return nil
}

// FromDebian is the Slurm version of a Debian package version: without the epoch
// ("1:") and the Debian revision (after the last '-'), the leading numbers and dots
// (22.05.8-4+deb12u3 → 22.05.8; SchedMD's own packages: 24.05.4-1 → 24.05.4; a
// pre-release 23.11.0~rc1-1 → 23.11.0).
func FromDebian(v string) (string, error) {
	up := v
	if _, after, ok := strings.Cut(up, ":"); ok {
		up = after
	}
	if i := strings.LastIndexByte(up, '-'); i >= 0 {
		up = up[:i]
	}
	end := strings.IndexFunc(up, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end >= 0 {
		up = up[:end]
	}
	up = strings.TrimRight(up, ".")
	if Valid(up) != nil {
		return "", fmt.Errorf("package version %q carries no Slurm version", v)
	}
	return up, nil
}

// Release is a Slurm major release, YY.MM (22.05).
type Release struct{ Year, Month int }

func (r Release) String() string { return fmt.Sprintf("%02d.%02d", r.Year, r.Month) }

func (r Release) before(o Release) bool {
	return r.Year < o.Year || r.Year == o.Year && r.Month < o.Month
}

// ReleaseOf is the major release of a valid version (22.05.8 → 22.05).
func ReleaseOf(version string) (Release, error) {
	if err := Valid(version); err != nil {
		return Release{}, err
	}
	f := strings.Split(version, ".")
	y, _ := strconv.Atoi(f[0])
	m, _ := strconv.Atoi(f[1])
	return Release{y, m}, nil
}

// window is one release's row of Slurm's compatibility table: the older releases whose
// slurmd (and commands) its slurmctld accepts.
type window struct {
	release Release
	older   []Release
}

// windows is Slurm's table, oldest first (upgrades.html for 23.02 on; before it each
// release's RELEASE_NOTES, "can be upgraded from version X or Y"). Add each new release
// here: a controller of a release not listed is judged only as far as the list allows
// (Check).
var windows = []window{
	{Release{20, 11}, []Release{{20, 2}, {19, 5}}},
	{Release{21, 8}, []Release{{20, 11}, {20, 2}}},
	{Release{22, 5}, []Release{{21, 8}, {20, 11}}},
	{Release{23, 2}, []Release{{22, 5}, {21, 8}}},
	{Release{23, 11}, []Release{{23, 2}, {22, 5}}},
	{Release{24, 5}, []Release{{23, 11}, {23, 2}}},
	{Release{24, 11}, []Release{{24, 5}, {23, 11}, {23, 2}}},
	{Release{25, 5}, []Release{{24, 11}, {24, 5}, {23, 11}}},
	{Release{25, 11}, []Release{{25, 5}, {24, 11}, {24, 5}}},
}

// maxOlder is the most older releases any release has accepted (3 since 24.11): a
// controller newer than the table's newest cannot accept a slurmd more releases back.
const maxOlder = 3

// Verdict is Check's answer.
type Verdict int

const (
	// Unknown: cannot tell (a version is missing or malformed, or a release the table
	// does not know and cannot rule out). The guest starts as before.
	Unknown Verdict = iota
	// Compatible: this slurmd joins this slurmctld.
	Compatible
	// TooOld: the slurmd's release is older than the controller accepts.
	TooOld
	// TooNew: the slurmd's release is newer than the controller's.
	TooNew
)

func (v Verdict) String() string {
	switch v {
	case Compatible:
		return "compatible"
	case TooOld:
		return "too old"
	case TooNew:
		return "too new"
	}
	return "unknown"
}

// Check judges a slurmd of version slurmd against a slurmctld of version slurmctld
// (either "" when not known). why says in words what the verdict rests on (for logs and
// reasons): the releases the controller accepts, or why it cannot tell.
func Check(slurmctld, slurmd string) (v Verdict, why string) {
	if slurmctld == "" || slurmd == "" {
		return Unknown, "the controller's or the guest's Slurm version is not known"
	}
	ctld, err := ReleaseOf(slurmctld)
	if err != nil {
		return Unknown, "slurmctld: " + err.Error()
	}
	d, err := ReleaseOf(slurmd)
	if err != nil {
		return Unknown, "slurmd: " + err.Error()
	}
	switch {
	case d == ctld:
		return Compatible, fmt.Sprintf("slurmd and slurmctld are both of release %s", ctld)
	case ctld.before(d):
		return TooNew, fmt.Sprintf("slurmd %s is of a newer release than slurmctld %s (%s after %s): a slurmd is never newer than its controller", slurmd, slurmctld, d, ctld)
	}
	if i := slices.IndexFunc(windows, func(w window) bool { return w.release == ctld }); i >= 0 {
		w := windows[i]
		accepted := accepts(w)
		if slices.Contains(w.older, d) {
			return Compatible, fmt.Sprintf("slurmctld %s accepts slurmd of %s", ctld, accepted)
		}
		return TooOld, fmt.Sprintf("slurmctld %s accepts slurmd of %s, not %s", ctld, accepted, d)
	}
	newest := windows[len(windows)-1].release
	if newest.before(ctld) {
		// A controller newer than the table: every listed release after d lies between
		// the two, and the controller itself is one more.
		between := 0
		for _, w := range windows {
			if d.before(w.release) {
				between++
			}
		}
		if between+1 > maxOlder {
			return TooOld, fmt.Sprintf("slurmctld %s is at least %d releases after slurmd %s; no Slurm release accepts more than %d older ones", ctld, between+1, d, maxOlder)
		}
		return Unknown, fmt.Sprintf("slurmctld release %s is newer than the releases this agent knows (up to %s)", ctld, newest)
	}
	return Unknown, fmt.Sprintf("slurmctld release %s is not one this agent knows", ctld)
}

// accepts lists a window's releases, newest first, the controller's own included.
func accepts(w window) string {
	s := []string{w.release.String()}
	for _, r := range w.older {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}

// SlurmdPackages are the Debian packages that carry slurmd: Debian's own and the one
// SchedMD's packaging (debian/ in the Slurm sources) builds.
var SlurmdPackages = []string{"slurmd", "slurm-smd-slurmd"}
