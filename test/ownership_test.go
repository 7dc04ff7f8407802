package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
)

// The administrators' site file and a lecturer's bookings live side by side: `site
// apply` deletes what the file manages and no longer lists, and leaves the bookings made
// through the API alone (docs/site-file.md, "Ownership").
func TestSiteApplyKeepsBookings(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	c := cli{t: t, bin: bootlab.Binary(t), env: []string{"OVERTIME_SERVER=" + env.HTTP.URL}, root: testenv.RepoRoot(t)}
	const example = "docs/examples/site.yaml"
	mustRun := func(user, pw string, args ...string) string {
		t.Helper()
		out, errs, code := c.run(user, pw, args...)
		if code != 0 {
			t.Fatalf("overtime %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	mustRun("admin", testenv.AdminPassword, "site", "apply", "-f", example)
	cmd := exec.Command(c.bin, "user", "add", "carol")
	cmd.Env = append(os.Environ(), "OVERTIME_SERVER="+env.HTTP.URL, "OVERTIME_USER=admin", "OVERTIME_PASSWORD="+testenv.AdminPassword, "OVERTIME_NEW_PASSWORD=carol-secret")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("user add carol: %v %s", err, out)
	}

	// carol, lecturer of lab-a, books an extra course slot and a weekly one.
	const booked = "sat 10:00-12:00 course-bio101"
	mustRun("carol", "carol-secret", "exception", "add", "bio-extra", "--kind", "lecture", "--start", "2026-12-05 14:00", "--end", "2026-12-05 16:00", "--mode", "course-bio101", "--pool", "lab-a")
	mustRun("carol", "carol-secret", "schedule", "add", "--pool", "lab-a", booked)

	// The next apply of the unchanged file changes nothing: the bookings are not the file's.
	if out := mustRun("admin", testenv.AdminPassword, "site", "apply", "-f", example); strings.TrimSpace(out) != "no changes" {
		t.Fatalf("apply after bookings: %q", out)
	}
	site, err := env.Store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e := site.Exception("bio-extra"); e == nil || e.Owner != "carol" {
		t.Fatalf("exception bio-extra after apply: %+v", e)
	}
	if p := site.Pool("lab-a"); p.RuleOwners[booked] != "carol" {
		t.Fatalf("lab-a after apply: %+v", p)
	}

	// The export names the bookings with their owner; applying it changes nothing.
	exported := mustRun("admin", testenv.AdminPassword, "site", "export")
	if !strings.Contains(exported, "owner: carol") || !strings.Contains(exported, booked+": carol") {
		t.Fatalf("export does not show the bookings:\n%s", exported)
	}
	f := filepath.Join(t.TempDir(), "exported.yaml")
	if err := os.WriteFile(f, []byte(exported), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustRun("admin", testenv.AdminPassword, "site", "apply", "-f", f); strings.TrimSpace(out) != "no changes" {
		t.Fatalf("applying the export: %q", out)
	}

	// A file without the exam and without lab-b's Saturday rule deletes both, and only them.
	data, err := os.ReadFile(filepath.Join(c.root, example))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\nexceptions:")
	j := strings.Index(text, "\nroles:")
	if i < 0 || j < i {
		t.Fatal("example site file has no exceptions section before roles")
	}
	text = text[:i] + text[j:]
	text = strings.Replace(text, "      - sat 09:00-14:00 desktop\n", "", 1)
	smaller := filepath.Join(t.TempDir(), "smaller.yaml")
	if err := os.WriteFile(smaller, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRun("admin", testenv.AdminPassword, "site", "apply", "-f", smaller)
	if got := strings.Fields(strings.ReplaceAll(strings.TrimSpace(out), "\n", " ")); strings.Join(got, " ") != "~ pool lab-b (weekly) - exception exam-2026-12-09" {
		t.Fatalf("apply of the smaller file: %q", out)
	}
	site, err = env.Store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if site.Exception("exam-2026-12-09") != nil || site.Exception("bio-extra") == nil {
		t.Errorf("exceptions after the smaller apply: %+v", site.Exceptions)
	}
	if w := site.Pool("lab-b").Weekly; len(w) != 1 {
		t.Errorf("lab-b rules: %q", w)
	}
	if w := site.Pool("lab-a").Weekly; len(w) != 5 || w[4] != booked {
		t.Errorf("lab-a rules: %q", w)
	}

	// Bookings go the way they came: their owner (or an administrator) deletes them.
	mustRun("carol", "carol-secret", "schedule", "remove", "--pool", "lab-a", booked)
	mustRun("carol", "carol-secret", "exception", "delete", "bio-extra")
	if out := mustRun("admin", testenv.AdminPassword, "site", "apply", "-f", smaller); strings.TrimSpace(out) != "no changes" {
		t.Fatalf("apply after the bookings are gone: %q", out)
	}
}
