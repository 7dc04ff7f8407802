package wire

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// The JSON contract with the C side. The documents below are written to
// scheduler-plugin/testdata, where the C tests (make -C scheduler-plugin check) parse them
// with the sync daemon's and the SPANK plugin's production parsers and check every field.
// A field renamed or retyped here changes a fixture: this test fails until the fixtures
// are rewritten, and then the C tests fail until the C side follows.
//
// Rewrite the fixtures with: go test ./vocab/wire ./node-agent/agent -update
var update = flag.Bool("update", false, "rewrite scheduler-plugin/testdata/*.json from what Go produces now")

// fixtureDir is scheduler-plugin/testdata, relative to this package.
const fixtureDir = "../../scheduler-plugin/testdata"

// checkFixture compares v's encoding with the committed fixture (or rewrites it with
// -update). indent: the site manager's API indents its answers, the node agent does not.
func checkFixture(t *testing.T, name string, v any, indent bool) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(fixtureDir, name)
	if *update {
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./vocab/wire -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from what Go produces now; if the change is meant, rewrite it with -update and make the C side follow (make -C scheduler-plugin check)\ngot:\n%s\nwant:\n%s", file, buf.Bytes(), want)
	}
}

var fixtureStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fullJobReport has every field set, every action counted.
func fullJobReport() JobReport {
	r := JobReport{Job: "123", Host: "pc-a03", Mode: "desktop", Start: fixtureStart, End: fixtureStart.Add(200500 * time.Millisecond),
		Seconds: 200.5, ThrottledSeconds: 30, FrozenSeconds: 10.25, OwnerActiveFraction: 0.25, GuestCPUSeconds: 150.5,
		StealSeconds: 2.5, DesktopSlowdown: 0.004, SlowdownLow: 0.001, SlowdownHigh: 0.009,
		SlowdownMethod: "run-queue wait + memory canary", GuestSlowdown: 0.016,
		Actions:  map[model.GuestAction]int{model.ActionThrottle: 2, model.ActionFreeze: 1, model.ActionEvict: 1},
		Received: fixtureStart.Add(201 * time.Second)}
	r.Summary = ReportSummary(r)
	return r
}

// minimalJobReport leaves the optional fields out: no mode, no actions, not received yet.
func minimalJobReport() JobReport {
	r := JobReport{Job: "124", Host: "pc-a02", Start: fixtureStart, End: fixtureStart.Add(time.Minute), Seconds: 60}
	r.Summary = ReportSummary(r)
	return r
}

// slurmFeedFixture has a node in every state and feature combination the site manager
// produces (sitemgmt/slurmnode), optional fields absent where Go omits them, and two job
// reports, one of an array job (which the sync daemon cannot update and skips).
// fixtureBuild is a build id as a replica makes them: epoch 7 above bit 32, build 42.
const fixtureBuild = 7<<32 | 42

// slurmFeedDeltaFixture is the answer to a long poll with base=fixtureBuild: pc-a02's
// owner came.
func slurmFeedDeltaFixture() SlurmFeed {
	return SlurmFeed{
		Revision: 43,
		Build:    fixtureBuild + 1,
		Delta:    true,
		Nodes: []SlurmNode{
			{Name: "pc-a02", State: SlurmUp, Features: strings.Join([]string{FeatureOvertime, FeatureDesktop, FeatureOwnerActive}, ","), Weight: WeightOwnerActive,
				Comment: "overtime: mode desktop, owner owner-active, guest throttle, running (heartbeat 2026-11-22T10:00:05Z)"},
		},
		Reports: []JobReportLine{},
	}
}

func slurmFeedFixture() SlurmFeed {
	features := func(f ...string) string { return strings.Join(f, ",") }
	return SlurmFeed{
		Revision: 42,
		Build:    fixtureBuild,
		Nodes: []SlurmNode{
			{Name: "pc-a01", State: SlurmUp, Features: features(FeatureOvertime, FeatureDedicated), Weight: WeightDedicated,
				Comment: "overtime: mode cluster, owner after-hours, guest run, running (heartbeat 2026-11-22T10:00:00Z)"},
			{Name: "pc-a02", State: SlurmUp, Features: features(FeatureOvertime, FeatureDesktop, FeatureDeskEmpty), Weight: WeightDeskEmpty,
				Comment: "overtime: mode desktop, owner no-user, guest run, running (heartbeat 2026-11-22T10:00:00Z)"},
			{Name: "pc-a03", State: SlurmUp, Features: features(FeatureOvertime, FeatureDesktop, FeatureOwnerActive), Weight: WeightOwnerActive,
				CPUs: 8, MemoryMB: 15000, GPUs: 1},
			{Name: "pc-a04", State: SlurmFrozen, Features: features(FeatureOvertime, FeatureDesktop), Weight: WeightOwnerActive,
				Reason:  "overtime: guest on pc-a04 frozen: the owner needs the desktop",
				Comment: "overtime: mode desktop, owner owner-active, guest freeze, running (heartbeat 2026-11-22T10:00:00Z)"},
			{Name: "pc-a05", State: SlurmEvicted, Features: features(FeatureOvertime, FeatureDesktop), Weight: WeightOwnerActive,
				Reason:  "overtime: guest on pc-a05 evicted: the owner needed the desktop (owner-active)",
				Comment: "overtime: mode desktop, owner owner-active, guest evict, absent (heartbeat 2026-11-22T10:00:00Z)"},
			// A calibrated desktop: its weight within the desk-empty class (InterferenceWeight).
			{Name: "pc-a06", State: SlurmUp, Features: features(FeatureOvertime, FeatureDesktop, FeatureDeskEmpty),
				Weight:  InterferenceWeight(WeightDeskEmpty, &InterferenceProfile{CPUSlowdown: 0.021, MemorySlowdown: 0.094}),
				Comment: "overtime: mode desktop, owner no-user, guest run, running (heartbeat 2026-11-22T10:00:00Z), calibrated desktop slowdown cpu 2.1% memory 9.4%"},
			{Name: "pc-b1.lab", State: SlurmDown, Features: FeatureOvertime, Weight: WeightOwnerActive,
				Reason:  `overtime: guest on pc-b1.lab not running (crashed: domain "overtime-pc-b1" exited <&>)`,
				Comment: `overtime: guest on pc-b1.lab not running (crashed: domain "overtime-pc-b1" exited <&>)`},
		},
		Reports: []JobReportLine{
			{Job: "123", Host: "pc-a03", Summary: fullJobReport().Summary},
			{Job: "124_7", Host: "pc-a02", Summary: "overtime: job 124_7 on pc-a02"},
		},
	}
}

// slurmReservationsFixture has a window with and without an exception, one in progress
// (starting at Now) and one clipped at the horizon, on two nodes.
func slurmReservationsFixture() SlurmReservations {
	return SlurmReservations{
		Now:            fixtureStart,
		HorizonSeconds: 7 * 86400,
		Windows: []SlurmWindow{
			{Node: "pc-a01", Start: fixtureStart, End: fixtureStart.Add(2 * time.Hour), Mode: "local",
				Reason: "overtime: local now"},
			{Node: "pc-a01", Start: fixtureStart.Add(24 * time.Hour), End: fixtureStart.Add(26 * time.Hour), Mode: "course-bio",
				Reason: "overtime: course-bio at Mon 11:00"},
			{Node: "pc-b1.lab", Start: fixtureStart.Add(30 * time.Minute), End: fixtureStart.Add(7 * 24 * time.Hour), Mode: "desktop",
				Exception: "exam-1", Reason: "overtime: desktop (exception exam-1) at 11:30"},
		},
	}
}

func TestFixtures(t *testing.T) {
	for _, f := range []struct {
		name   string
		v      any
		indent bool
	}{
		// GET /api/v1/slurm/nodes (sitemgmt/api writes indented JSON), parsed by
		// scheduler-plugin/sync/feed.c.
		{"slurm_feed.json", slurmFeedFixture(), true},
		{"slurm_feed_delta.json", slurmFeedDeltaFixture(), true},
		// GET /api/v1/slurm/reservations, parsed by scheduler-plugin/sync/resv.c.
		{"slurm_reservations.json", slurmReservationsFixture(), true},
		// POST /v1/jobs/{id}/end and /progress on the node agent (compact JSON), parsed by
		// scheduler-plugin/spank/report.c. node-agent/agent writes the handlers' own
		// answers (agent_job_*.json); these two cover every field and no optional one.
		{"job_report.json", fullJobReport(), false},
		{"job_report_minimal.json", minimalJobReport(), false},
	} {
		t.Run(f.name, func(t *testing.T) { checkFixture(t, f.name, f.v, f.indent) })
	}
	if err := fullJobReport().Validate(); err != nil {
		t.Errorf("full report fixture is not a valid report: %v", err)
	}
	if err := minimalJobReport().Validate(); err != nil {
		t.Errorf("minimal report fixture is not a valid report: %v", err)
	}
}

// job_submit.lua turns --desktop into constraints on node features; Slurm rejects a job
// whose constraint names a feature no node has, so every feature the script names must be
// one the sync daemon sets (the Feature constants).
func TestJobSubmitLuaFeatures(t *testing.T) {
	const file = "../../scheduler-plugin/spank/job_submit.lua"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	known := []string{FeatureOvertime, FeatureDedicated, FeatureDesktop, FeatureDeskEmpty, FeatureOwnerActive}
	// The CONSTRAINT table: ["avoid"] = "dedicated|desk-empty",
	table := regexp.MustCompile(`(?s)local CONSTRAINT = \{(.*?)\n\}`).FindSubmatch(b)
	if table == nil {
		t.Fatalf("%s: no CONSTRAINT table found", file)
	}
	entries := regexp.MustCompile(`\["([a-z-]+)"\]\s*=\s*"([^"]*)"`).FindAllSubmatch(table[1], -1)
	if len(entries) == 0 {
		t.Fatalf("%s: CONSTRAINT table has no constraint strings", file)
	}
	for _, e := range entries {
		for _, f := range strings.FieldsFunc(string(e[2]), func(r rune) bool { return r == '|' || r == '&' }) {
			if !slices.Contains(known, f) {
				t.Errorf("%s: --desktop=%s names feature %q, which the sync daemon never sets (known: %v)", file, e[1], f, known)
			}
		}
	}
}
