package service

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func profileAt(at time.Time, cpu float64) *wire.InterferenceProfile {
	return &wire.InterferenceProfile{Measured: at, Kernel: "6.8.0", CPUModel: "i5", CPUs: 8, Cgroup: "v2",
		Backend: "container", CPUSlowdown: cpu, MemorySlowdown: 0.02, StartCap: 0.5, Harvest: 0.8}
}

// The site manager keeps a host's last calibration from heartbeat to heartbeat (the agent
// sends it only until its configuration carries it back), takes a later one, never an
// older one, rejects an invalid one, and writes the heartbeat document only when the
// profile changes (not at every heartbeat that repeats it).
func TestInterferenceProfileKept(t *testing.T) {
	svc := memService(t)
	cs := &countingStore{}
	svc.useState(cs)
	ctx := context.Background()
	seq := uint64(0)
	post := func(p *wire.InterferenceProfile) error {
		t.Helper()
		seq++
		at := t0.Add(time.Duration(seq) * time.Second)
		_, err := svc.Agents.PutHeartbeat(wire.Heartbeat{Host: "pc1", Instance: "i", Seq: seq, Time: at, OwnerState: model.StateNoUser,
			Interference: p, Slowdown: 0.004, Cap: 0.5}, at, "")
		if err == nil {
			err = svc.FlushState(ctx)
		}
		return err
	}
	if svc.Agents.InterferenceProfile("pc1") != nil {
		t.Fatal("profile before any heartbeat")
	}
	if err := post(nil); err != nil {
		t.Fatal(err)
	}
	writes := cs.puts
	first := profileAt(t0, 0.03)
	if err := post(first); err != nil {
		t.Fatal(err)
	}
	if cs.puts != writes+1 {
		t.Errorf("a new profile made %d writes, want 1", cs.puts-writes)
	}
	if !strings.Contains(string(cs.docs["heartbeats/pc1"]), `"cpuSlowdown":0.03`) {
		t.Errorf("stored heartbeat lacks the profile: %s", cs.docs["heartbeats/pc1"])
	}
	writes = cs.puts
	for range 3 { // the agent repeats it, then stops once its configuration echoes it
		if err := post(first); err != nil {
			t.Fatal(err)
		}
	}
	if err := post(nil); err != nil {
		t.Fatal(err)
	}
	if cs.puts != writes {
		t.Errorf("repeating the same profile made %d writes, want 0", cs.puts-writes)
	}
	if p := svc.Agents.InterferenceProfile("pc1"); p == nil || p.CPUSlowdown != 0.03 {
		t.Fatalf("profile after heartbeats without one: %+v", p)
	}
	if err := post(profileAt(t0.Add(-time.Hour), 0.5)); err != nil {
		t.Fatal(err)
	}
	if p := svc.Agents.InterferenceProfile("pc1"); p.CPUSlowdown != 0.03 {
		t.Errorf("an older profile replaced the newer: %+v", p)
	}
	if err := post(profileAt(t0.Add(time.Hour), 0.07)); err != nil {
		t.Fatal(err)
	}
	if p := svc.Agents.InterferenceProfile("pc1"); p.CPUSlowdown != 0.07 {
		t.Errorf("a later profile was not taken: %+v", p)
	}
	bad := profileAt(t0.Add(2*time.Hour), -1)
	err := post(bad)
	var ie *model.InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "cpuSlowdown") {
		t.Errorf("invalid profile: %v, want an invalid error naming cpuSlowdown", err)
	}
	if p := svc.Agents.InterferenceProfile("pc1"); p.CPUSlowdown != 0.07 {
		t.Errorf("an invalid profile was kept: %+v", p)
	}
	// Another replica that accepted a later heartbeat before it saw the profile wrote
	// the host's document without one: the profile stays.
	doc := []byte(`{"rev":` + "99999999999999999" + `,"status":{"host":"pc1","instance":"i","seq":1000,"time":"2026-12-02T11:00:00Z","received":"2026-12-02T11:00:00Z"}}`)
	svc.mergeDoc(stateBeats, "pc1", doc, false, true)
	if st, _, _ := svc.Agents.Status("pc1", t0); st.Seq != 1000 || st.Interference == nil || st.Interference.CPUSlowdown != 0.07 {
		t.Errorf("merging a replica's heartbeat without the profile: %+v", st)
	}
}
