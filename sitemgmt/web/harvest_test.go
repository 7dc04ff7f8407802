package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestHarvestPages(t *testing.T) {
	e := exampleUI(t)
	jr := wire.JobReport{Job: "4242", Host: "pc-a01", Mode: "desktop", Start: e.Now.Add(-3 * time.Hour), End: e.Now.Add(-time.Hour),
		Seconds: 7200, GuestCPUSeconds: 7200, DesktopSlowdown: 0.031, SlowdownLow: 0.02, SlowdownHigh: 0.045, SlowdownMethod: "canary-v1"}
	if _, err := e.Svc.Agents.PutJobReport(jr, e.Now); err != nil {
		t.Fatal(err)
	}
	// pc-a02's agent is calibrated and harvesting: 0.5 CPU-hours so far, slowdown 2%.
	hb := wire.Heartbeat{Host: "pc-a02", Time: e.Now, Mode: "desktop", OwnerState: "owner-idle", Action: "run", GuestState: "running",
		GuestCPUSeconds: 1800, Slowdown: 0.02, Cap: 0.5, CPUs: 4,
		Interference: &wire.InterferenceProfile{Measured: e.Now.Add(-time.Hour), CPUModel: "Test CPU", CPUs: 4, Cgroup: "v2", Backend: "qemu",
			CPUSlowdown: 0.05, MemorySlowdown: 0.08, StartCap: 0.5, Harvest: 0.7}}
	if _, err := e.Svc.Agents.PutHeartbeat(hb, e.Now, "10.20.0.12"); err != nil {
		t.Fatal(err)
	}
	admin := loginAs(t, e, "admin")
	code, body := admin.get("/ui/harvest")
	if code != http.StatusOK {
		t.Fatalf("harvest: %d", code)
	}
	// lab-a: 5 hosts, 1 report, 2.0 CPU-hours, slowdown 3.1%.
	mustContain(t, "harvest page", body, `href="/ui/harvest?pool=lab-a">lab-a</a></th>`, "<td>5</td><td>1</td><td>2.0</td><td>3.1%</td><td>3.1%</td><td>1</td><td>1</td><td>0.5</td><td>2.0%</td>", "lab-b")
	_, body = admin.get("/ui/harvest/hosts/pc-a02")
	mustContain(t, "calibrated host", body, "Test CPU", "memory-bound 8.0%", "guest cap 50.0%", "No job reports from this host")
	_, body = admin.get("/ui/harvest?pool=lab-a")
	mustContain(t, "lab-a's hosts", body, `href="/ui/harvest/hosts/pc-a01"`, `href="/ui/harvest/hosts/pc-a05"`)
	code, body = admin.get("/ui/harvest/hosts/pc-a01")
	if code != http.StatusOK {
		t.Fatalf("host harvest: %d", code)
	}
	mustContain(t, "host harvest", body, ">4242<", "3.1% (2.0–4.5%)", "canary-v1", "<svg", `<rect class="bar"`, "2.0 CPU-hours, slowdown 3.1% (1 reports)", "none since the site manager started")
	if strings.Count(body, `<rect class="bar"`) != 14 {
		t.Errorf("chart has %d bars, want 14", strings.Count(body, `<rect class="bar"`))
	}
	// A pool admin of lab-b sees neither lab-a nor its hosts.
	bob := loginAs(t, e, "bob")
	if _, body := bob.get("/ui/harvest"); strings.Contains(body, "lab-a") {
		t.Errorf("bob's harvest page shows lab-a")
	}
	if code, _ := bob.get("/ui/harvest/hosts/pc-a01"); code != http.StatusNotFound {
		t.Errorf("bob on pc-a01's harvest: %d, want 404", code)
	}
	if code, _ := bob.get("/ui/harvest?pool=lab-a"); code != http.StatusNotFound {
		t.Errorf("bob on lab-a's harvest: %d, want 404", code)
	}
}
