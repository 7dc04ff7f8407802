package resolve

import (
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestImageGate: a host is only given a version its boot server reported verified; an
// unpinned mode falls back to the newest older one it holds, a pinned one does not; a
// boot server that never reported is not gated; a report with another sha256 does not
// count. pc-a1 is served by bs-a, pc-a2 by bs-b; Wednesday noon is desktop mode.
func TestImageGate(t *testing.T) {
	wed := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	night := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	other := strings.Repeat("f", 64)
	for _, tc := range []struct {
		name      string
		edit      func(*model.Site)
		host      string
		at        time.Time
		held      Held
		image     string // version given ("" = none)
		why, note string // substrings; "" = must be empty
		guest     string // guest version given ("" = none), or
		guestWhy  string
	}{
		{name: "not gated", host: "pc-a1", at: wed, held: nil, image: "2", guest: "8"},
		{name: "other server reported only", host: "pc-a1", at: wed, held: Held{"bs-b": {}}, image: "2", guest: "8"},
		{name: "holds newest", host: "pc-a1", at: wed, held: Held{"bs-a": {"desk/2": sha, "compute/8": sha}}, image: "2", guest: "8"},
		{name: "falls back to previous", host: "pc-a1", at: wed, held: Held{"bs-a": {"desk/1": sha, "compute/7": sha}},
			image: "1", note: "desk 2 is not yet verified on boot server bs-a: giving 1", guest: "7"},
		{name: "nothing held", host: "pc-a1", at: wed, held: Held{"bs-a": {}},
			image: "2", why: "image desk 2 is not yet verified on boot server bs-a (nor an older version)", guestWhy: "image compute 8 is not yet verified"},
		{name: "wrong sha256 does not count", host: "pc-a1", at: wed, held: Held{"bs-a": {"desk/2": other, "desk/1": sha, "compute/8": sha}}, image: "1", note: "giving 1", guest: "8"},
		{name: "current followed", edit: func(s *model.Site) { s.Images[0].Current = "1" }, host: "pc-a1", at: wed,
			held: Held{"bs-a": {"desk/1": sha, "desk/2": sha, "compute/8": sha}}, image: "1", guest: "8"},
		{name: "no fallback above current", edit: func(s *model.Site) { s.Images[0].Current = "1" }, host: "pc-a1", at: wed,
			held: Held{"bs-a": {"desk/2": sha, "compute/8": sha}}, image: "1", why: "desk 1 is not yet verified", guest: "8"},
		{name: "other host other server", host: "pc-a2", at: wed, held: Held{"bs-a": {}, "bs-b": {"desk/2": sha, "compute/8": sha}}, image: "2", guest: "8"},
		{name: "pinned not held: unavailable", host: "pc-b2", at: night, held: Held{"bs-a": {"desk/2": sha, "compute/8": sha}},
			image: "1", why: "image desk 1 (pinned) is not yet verified on boot server bs-a", guestWhy: "compute 7 (pinned)"},
		{name: "pinned held", host: "pc-b2", at: night, held: Held{"bs-a": {"desk/1": sha, "compute/7": sha}}, image: "1", guest: "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := testSite(t)
			if tc.edit != nil {
				tc.edit(site)
			}
			r := newResolver(t, site)
			a, err := r.Host(tc.host, Query{At: tc.at, Held: tc.held})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if a.Image != nil {
				got = a.Image.Version
			}
			if got != tc.image || !match(a.ImageUnavailable, tc.why) || !match(a.ImageNote, tc.note) {
				t.Errorf("image %q (unavailable %q, note %q), want %q (%q, %q)", got, a.ImageUnavailable, a.ImageNote, tc.image, tc.why, tc.note)
			}
			g := ""
			if a.Guest != nil {
				g = a.Guest.Resolved.Version
			}
			if g != tc.guest || !match(a.GuestUnavailable, tc.guestWhy) {
				t.Errorf("guest %q (%q), want %q (%q)", g, a.GuestUnavailable, tc.guest, tc.guestWhy)
			}
			// The boot menu shows an ungiven version unavailable with the reason.
			if b := a.Boot(); tc.why != "" && (b.Check == nil || !strings.Contains(b.Check(a.Mode, a.Image), tc.why)) {
				t.Errorf("boot menu check does not refuse %s", tc.host)
			}
		})
	}
}

func match(got, want string) bool {
	if want == "" {
		return got == ""
	}
	return strings.Contains(got, want)
}

func TestWanted(t *testing.T) {
	site := testSite(t)
	site.Images[0].Current = "1"
	r := newResolver(t, site)
	keys := func(server string) string {
		var k []string
		for _, w := range r.Wanted(server) {
			k = append(k, w.Key())
		}
		return strings.Join(k, " ")
	}
	// bs-a serves pc-a1 (desktop mode) and, as the site's first boot server, lab-b's
	// pc-b1 and pc-b2 (desktop, and cluster pinned to desk 1 and compute 7): desk 1 is
	// current, 2 is staged; compute 8 is current.
	if got, want := keys("bs-a"), "compute/7 compute/8 desk/1 desk/2"; got != want {
		t.Errorf("bs-a wants %q, want %q", got, want)
	}
	// bs-b serves pc-a2 (lab-a's desktop rule) and, like every boot server, the hosts
	// that have none of their own (lab-b) when it is the instance they ask.
	if got, want := keys("bs-b"), "compute/7 compute/8 desk/1 desk/2"; got != want {
		t.Errorf("bs-b wants %q, want %q", got, want)
	}
}

// TestBlockers: what keeps image gc from removing a version.
func TestBlockers(t *testing.T) {
	wed := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name   string
		edit   func(*model.Site)
		held   Held
		booted []Booted
		want   map[string]string // IMAGE/VERSION -> substring of a blocker; "" = removable
	}{
		{name: "current, newest and pins", edit: func(s *model.Site) {
			s.Images[0].Versions = append(s.Images[0].Versions, model.ImageVersion{Version: "0", SHA256: sha, Path: "desk/0", Created: day(1).Add(-time.Hour)})
		}, want: map[string]string{"desk/0": "", "desk/1": "mode cluster is pinned to it", "desk/2": "newest version", "compute/7": "guest is pinned", "compute/8": "newest"}},
		{name: "staged above current", edit: func(s *model.Site) { s.Images[1].Current = "7" },
			want: map[string]string{"compute/8": "newer than the current version", "compute/7": "current version"}},
		{name: "fallback in use", edit: func(s *model.Site) {
			s.Modes[1].ImageVersion, s.Modes[1].Guest.Version = "", ""
		}, held: Held{"bs-a": {"desk/1": sha, "compute/8": sha}, "bs-b": {"desk/2": sha, "compute/8": sha}},
			want: map[string]string{"desk/1": "host pc-a1 boots it now", "compute/7": ""}},
		{name: "booted", edit: func(s *model.Site) {
			s.Modes[1].ImageVersion, s.Modes[1].Guest.Version = "", ""
		}, booted: []Booted{{Host: "pc-b1", Versions: []string{"desk/1"}, At: wed}, {Host: "gone", Versions: []string{"compute/7"}, At: wed}},
			want: map[string]string{"desk/1": "host pc-b1 was given it", "compute/7": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := testSite(t)
			if tc.edit != nil {
				tc.edit(site)
			}
			r := newResolver(t, site)
			got := r.Blockers(Query{At: wed, Held: tc.held}, tc.booted)
			for k, want := range tc.want {
				b := strings.Join(got[k], "; ")
				if want == "" && b != "" || want != "" && !strings.Contains(b, want) {
					t.Errorf("%s: blockers %q, want %q", k, b, want)
				}
			}
		})
	}
}

// A course VM is gated like every image: the current version where its boot server
// verified it, else the newest older one it holds.
func TestCourseVMGate(t *testing.T) {
	site := testSite(t)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	site.Images = append(site.Images, model.Image{Name: "chem-vm", Kind: model.ImageCourseVM, Pool: "lab-a", Versions: []model.ImageVersion{
		{Version: "ws1", SHA256: sha, Path: "chem-vm/ws1", Created: day(5)},
		{Version: "ws2", SHA256: sha, Path: "chem-vm/ws2", Created: day(6)},
	}})
	site.Modes = append(site.Modes, model.Mode{Name: "lecture", Kind: model.KindCourseVM, Image: "desk", VM: "chem-vm"})
	site.Hosts[0].Weekly = []string{"wed 10:00-14:00 lecture"}
	wed := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		held      Held
		want, why string
	}{
		{"not gated", nil, "ws2", ""},
		{"current held", Held{"bs-a": {"desk/2": sha, "chem-vm/ws2": sha}}, "ws2", ""},
		{"previous held", Held{"bs-a": {"desk/2": sha, "chem-vm/ws1": sha}}, "ws1", ""},
		{"none held", Held{"bs-a": {"desk/2": sha}}, "", "chem-vm ws2 is not yet verified on boot server bs-a"},
	} {
		a, err := newResolver(t, site).Host("pc-a1", Query{At: wed, Held: tc.held})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if a.CourseVM != nil {
			got = a.CourseVM.Resolved.Version
		}
		if got != tc.want || !match(a.CourseVMUnavailable, tc.why) {
			t.Errorf("%s: course VM %q (%q), want %q (%q)", tc.name, got, a.CourseVMUnavailable, tc.want, tc.why)
		}
	}
}
