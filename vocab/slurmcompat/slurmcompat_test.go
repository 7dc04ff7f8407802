package slurmcompat

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, s := range []string{"22.05.8", "24.11.0", "22.05", "25.05.1.2", "2.6.9"} {
		if err := Valid(s); err != nil {
			t.Errorf("Valid(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "22", "22.05.8-4", "23.11.0-0rc1", "22.05.", ".22.05", "22..05", "v22.05",
		"22.05.8 ", "22.05.8\n", "12345.1", "1.2.3.4.5", "22.05.x", strings.Repeat("1.", 20) + "1"} {
		if err := Valid(s); err == nil {
			t.Errorf("Valid(%q) accepted", s)
		}
	}
}

func TestFromDebian(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"22.05.8-4+deb12u3", "22.05.8"},   // bookworm
		{"24.11.5-2", "24.11.5"},           // trixie
		{"24.05.4-1", "24.05.4"},           // SchedMD's packaging of a site's build
		{"1:23.02.7-1~bpo12+1", "23.02.7"}, // an epoch, a backport
		{"23.11.0~rc1-1", "23.11.0"},       // a pre-release
		{"22.05.8", "22.05.8"},             // native, no revision
	} {
		got, err := FromDebian(c.in)
		if err != nil || got != c.want {
			t.Errorf("FromDebian(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "-1", "git20240101-1", "22-1", "1:"} {
		if got, err := FromDebian(in); err == nil {
			t.Errorf("FromDebian(%q) = %q, want an error", in, got)
		}
	}
}

// Check follows Slurm's compatibility table (upgrades.html): the controller's release
// and the two (three from 24.11 on) releases before it, by the list of releases, never a
// newer slurmd; maintenance releases do not matter.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		ctld, d string
		want    Verdict
		why     string // part of the explanation
	}{
		// Same release, any maintenance level either way.
		{"22.05.8", "22.05.8", Compatible, "both of release 22.05"},
		{"22.05.2", "22.05.11", Compatible, ""},
		{"25.05", "25.05.1", Compatible, ""},
		// Two releases back on the nine-month cycle: 22.05 → 23.02 → 23.11.
		{"23.02.7", "22.05.8", Compatible, "accepts slurmd of 23.02, 22.05, 21.08"},
		{"23.11.4", "22.05.8", Compatible, ""},
		{"24.05.1", "22.05.8", TooOld, "accepts slurmd of 24.05, 23.11, 23.02, not 22.05"},
		{"24.05.1", "23.02.7", Compatible, ""},
		// Three back from 24.11 on: 24.11 takes 23.02, which 24.05 also takes.
		{"24.11.5", "23.02.7", Compatible, "24.11, 24.05, 23.11, 23.02"},
		{"24.11.5", "22.05.8", TooOld, ""},
		{"25.05.1", "23.11.4", Compatible, ""},
		{"25.05.1", "23.02.7", TooOld, ""},
		{"25.11.0", "24.05.1", Compatible, ""},
		{"25.11.0", "23.11.4", TooOld, ""},
		// Releases the list does not have are not made up: 23.05 and 24.02 never existed.
		{"24.05.1", "23.05.1", TooOld, ""},
		{"23.05.1", "22.05.8", Unknown, "not one this agent knows"},
		// Never newer than the controller, whatever the releases.
		{"22.05.8", "23.02.7", TooNew, "newer release"},
		{"22.05.8", "99.01", TooNew, ""},
		{"26.05.0", "26.11.0", TooNew, ""},
		// A controller newer than the table: what is certain, and what is not.
		{"26.05.0", "22.05.8", TooOld, "at least 7 releases after"},
		{"26.05.0", "24.05.1", TooOld, "at least 4"}, // 24.11, 25.05, 25.11 between, then 26.05
		{"26.05.0", "24.11.5", Unknown, "newer than the releases this agent knows"},
		{"26.05.0", "25.11.1", Unknown, ""},
		{"26.05.0", "26.05.2", Compatible, ""},
		// Versions missing or malformed: unknown, never a refusal.
		{"", "22.05.8", Unknown, "not known"},
		{"22.05.8", "", Unknown, "not known"},
		{"22.05.8-4", "22.05.8", Unknown, "slurmctld"},
		{"22.05.8", "x", Unknown, "slurmd"},
	} {
		got, why := Check(c.ctld, c.d)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("Check(slurmctld %q, slurmd %q) = %s (%s); want %s (…%s…)", c.ctld, c.d, got, why, c.want, c.why)
		}
	}
}

// The table is ordered, each controller's older releases are listed newest first and are
// releases before it; every release from 24.11 on accepts three, before it two.
func TestWindowsTable(t *testing.T) {
	for i, w := range windows {
		if i > 0 && !windows[i-1].release.before(w.release) {
			t.Errorf("row %d (%s) is not after row %d (%s)", i, w.release, i-1, windows[i-1].release)
		}
		want := 2
		if !w.release.before(Release{24, 11}) {
			want = 3
		}
		if len(w.older) != want || want > maxOlder {
			t.Errorf("%s accepts %d older releases, want %d (at most maxOlder %d)", w.release, len(w.older), want, maxOlder)
		}
		prev := w.release
		for _, o := range w.older {
			if !o.before(prev) {
				t.Errorf("%s: older release %s is not before %s", w.release, o, prev)
			}
			prev = o
		}
		// Consecutive: the older releases are the ones just before, as the table lists.
		for k, o := range w.older {
			if j := i - 1 - k; j >= 0 && windows[j].release != o {
				t.Errorf("%s: older release %d is %s, the table's release before is %s", w.release, k, o, windows[j].release)
			}
		}
	}
}
