package agent

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The job API's answers as the SPANK plugin (scheduler-plugin/spank) receives them: the
// real handlers' bytes are written to scheduler-plugin/testdata/agent_job_*.json, which the
// C tests parse with the plugin's parsers (vocab/wire does the same for the feed and
// for reports with every field set).
//
// Rewrite the fixtures with: go test ./vocab/wire ./node-agent/agent -update
var update = flag.Bool("update", false, "rewrite scheduler-plugin/testdata/agent_job_*.json from the job handlers' answers")

const fixtureDir = "../../scheduler-plugin/testdata"

func TestJobAPIFixtures(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	psi := filepath.Join(t.TempDir(), "cpu.pressure")
	setStall := func(us string) {
		writeFile(t, psi, "some avg10=0.00 avg60=0.00 avg300=0.00 total="+us+"\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	}
	setStall("1000000")
	sig := newFakeSignals(t0)
	a, err := New(Options{Site: &fakeSite{}, MAC: testMAC, StateDir: t.TempDir(), DesktopCPUPressure: psi, Signals: sig,
		Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.JobHandler(mux)
	post := func(path string, wantCode int) []byte {
		t.Helper()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("POST", path, nil))
		if rec.Code != wantCode {
			t.Fatalf("POST %s: %d %s, want %d", path, rec.Code, rec.Body, wantCode)
		}
		return rec.Body.Bytes()
	}

	// The owner works at a desktop whose guest is throttled; the job starts, the guest is
	// frozen for 30 s, then the owner leaves and the guest runs at full speed until the
	// job ends.
	desk := inForce{host: "pc-a03", mode: "desktop", state: model.StateOwnerActive, active: true}
	throttled, frozen, run := desk, desk, desk
	throttled.action, throttled.throttled = model.ActionThrottle, true
	frozen.action, frozen.frozen = model.ActionFreeze, true
	run.action, run.state, run.active = model.ActionRun, model.StateNoUser, false
	a.jobs.cnt.fold(t0, throttled, true)
	now = t0.Add(10 * time.Second)
	start := post("/v1/jobs/123/start", http.StatusOK)
	now = t0.Add(70 * time.Second)
	a.jobs.cnt.fold(now, frozen, true)
	now = t0.Add(100 * time.Second)
	a.jobs.cnt.fold(now, run, true)
	now = t0.Add(130 * time.Second)
	setStall("7000000")
	// Over the job's 120 s the desktop worked 30 s and waited 1.5 s, the guest used 150 s
	// and waited 6 s: the guest lost 3.8%. The fixture is about the answer's bytes, not
	// the estimator (tested in its package): with the point estimate at the upper
	// attribution the slowdown is a round 1.5/30 = 5% that the C side can compare.
	defer func(v float64) { estimate.Attribution = v }(estimate.Attribution)
	estimate.Attribution = 1
	sig.advance(120*time.Second, 30*time.Second, 1500*time.Millisecond, 150*time.Second, 6*time.Second)
	end := post("/v1/jobs/123/end", http.StatusOK)
	noStart := post("/v1/jobs/123/end", http.StatusConflict)

	for _, f := range []struct {
		name string
		got  []byte
	}{
		{"agent_job_start.json", start},
		{"agent_job_end.json", end},
		{"agent_job_error.json", noStart},
	} {
		file := filepath.Join(fixtureDir, f.name)
		if *update {
			if err := os.WriteFile(file, f.got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go test ./node-agent/agent -update)", err)
		}
		if !bytes.Equal(f.got, want) {
			t.Errorf("%s differs from the handler's answer now; if the change is meant, rewrite it with -update and make the C side follow (make -C scheduler-plugin check)\ngot:  %s\nwant: %s", file, f.got, want)
		}
	}
}
