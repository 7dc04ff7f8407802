package wake

import (
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestLead(t *testing.T) {
	for _, tc := range []struct {
		name string
		boot []float64
		want time.Duration
	}{
		{"none measured: default", nil, DefaultBoot + Margin},
		{"zeros ignored", []float64{0, -1}, DefaultBoot + Margin},
		{"one", []float64{40}, 40*time.Second + Margin},
		{"odd: median", []float64{90, 30, 60}, 60*time.Second + Margin},
		{"even: mean of the middle two", []float64{30, 50, 70, 900}, 60*time.Second + Margin},
		{"an outlier does not drag it", []float64{45, 50, 55, 3600, 40}, 50*time.Second + Margin},
	} {
		if got := Lead(tc.boot); got != tc.want {
			t.Errorf("%s: Lead(%v) = %v, want %v", tc.name, tc.boot, got, tc.want)
		}
	}
}

func TestDue(t *testing.T) {
	b := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) // a lecture starts
	lecture := func(name string, off bool) Host {
		return Host{Name: name, Pool: "lab-a", Off: off, Next: b, NextMode: "bio101", NextKind: model.KindCourseVM}
	}
	boot := map[string][]float64{"lab-a": {60, 60, 60}, "lab-b": nil}
	leadA := 60*time.Second + Margin // 2 min
	for _, tc := range []struct {
		name  string
		host  Host
		now   time.Time
		want  bool
		wantD time.Time
	}{
		{"off, inside the lead", lecture("pc1", true), b.Add(-time.Minute), true, b.Add(-leadA)},
		{"off, exactly at the lead", lecture("pc1", true), b.Add(-leadA), true, b.Add(-leadA)},
		{"off, before the lead", lecture("pc1", true), b.Add(-leadA - time.Second), false, time.Time{}},
		{"off, at the boundary: too late", lecture("pc1", true), b, false, time.Time{}},
		{"on: no wake", lecture("pc1", false), b.Add(-time.Minute), false, time.Time{}},
		{"next is local disk: stays off", Host{Name: "pc1", Pool: "lab-a", Off: true, Next: b, NextMode: "windows", NextKind: model.KindLocalDisk}, b.Add(-time.Minute), false, time.Time{}},
		{"no change ahead", Host{Name: "pc1", Pool: "lab-a", Off: true}, b.Add(-time.Minute), false, time.Time{}},
		{"unmeasured pool: default lead", Host{Name: "pc9", Pool: "lab-b", Off: true, Next: b, NextMode: "desktop", NextKind: model.KindDesktop}, b.Add(-DefaultBoot), true, b.Add(-DefaultBoot - Margin)},
		{"unmeasured pool: not yet", Host{Name: "pc9", Pool: "lab-b", Off: true, Next: b, NextMode: "desktop", NextKind: model.KindDesktop}, b.Add(-DefaultBoot - Margin - time.Second), false, time.Time{}},
		{"cluster needs the PC too", Host{Name: "pc2", Pool: "lab-a", Off: true, Next: b, NextMode: "cluster", NextKind: model.KindCluster}, b.Add(-time.Minute), true, b.Add(-leadA)},
	} {
		got := Due([]Host{tc.host}, boot, tc.now)
		if (len(got) == 1) != tc.want {
			t.Errorf("%s: Due = %+v, want due=%v", tc.name, got, tc.want)
			continue
		}
		if tc.want {
			w := got[0]
			if w.ID != ID(tc.host.Name, b) || w.Host != tc.host.Name || !w.Boundary.Equal(b) || !w.Due.Equal(tc.wantD) || w.Mode != tc.host.NextMode {
				t.Errorf("%s: wake %+v, want due %v", tc.name, w, tc.wantD)
			}
		}
	}
	// Several hosts: sorted, each once.
	got := Due([]Host{lecture("pc3", true), lecture("pc1", true), lecture("pc2", false)}, boot, b.Add(-time.Minute))
	if len(got) != 2 || got[0].Host != "pc1" || got[1].Host != "pc3" {
		t.Fatalf("Due = %+v", got)
	}
	if ID("pc1", b) != "sched-pc1-1796205600" {
		t.Errorf("ID = %s", ID("pc1", b))
	}
}
