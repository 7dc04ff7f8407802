package resolve

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestMenuOffers: what a host's boot menu offers follows the kind of the exception that
// decides its mode. The local disk is always offered; maintenance only while a
// maintenance exception decides (whatever mode it sets); an exam offers nothing and
// tells the agent. The hosts' own exceptions win over their pool's, as for modes.
func TestMenuOffers(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(h int) time.Time { return time.Date(2026, 12, 2, h, 30, 0, 0, berlin) } // a Wednesday
	exc := func(name string, kind model.ExceptionKind, mode string, from, to int, tg model.Target) model.Exception {
		return model.Exception{Name: name, Kind: kind, Mode: mode, Description: "Room ; shell || exit # x",
			Start: time.Date(2026, 12, 2, from, 0, 0, 0, berlin), End: time.Date(2026, 12, 2, to, 0, 0, 0, berlin),
			Targets: []model.Target{tg}}
	}
	labA, pcA1 := model.Target{Pool: "lab-a"}, model.Target{Host: "pc-a1"}
	site := testSite(t)
	site.Exceptions = []model.Exception{
		exc("patchday", model.ExceptionMaintenance, "desktop", 9, 11, labA),
		exc("exam-bio", model.ExceptionExam, "desktop", 12, 14, labA),
		exc("exam-pc-a1", model.ExceptionExam, "desktop", 10, 11, pcA1),
		exc("repair-pc-a1", model.ExceptionMaintenance, "maint", 13, 14, pcA1),
		exc("talk", "lecture", "desktop", 15, 16, labA),
	}
	r := newResolver(t, site)
	for _, tc := range []struct {
		name        string
		host        string
		at          time.Time
		mode        string
		others      string
		exam, maint bool
	}{
		{"no exception: local disk only", "pc-a1", at(8), "desktop", "local", false, false},
		{"lab-b never opened", "pc-b1", at(9), "desktop", "local", false, false},
		{"pool maintenance opens the menu", "pc-a2", at(9), "desktop", "local,maint", false, true},
		{"host exam over pool maintenance", "pc-a1", at(10), "desktop", "", true, false},
		{"pool exam", "pc-a2", at(12), "desktop", "", true, false},
		{"host maintenance over pool exam", "pc-a1", at(13), "maint", "local", false, true},
		{"a lecture opens nothing", "pc-a2", at(15), "desktop", "local", false, false},
		{"after the exam the menu is back", "pc-a2", at(14), "desktop", "local", false, false},
		{"unknown PC: never an exam", "", at(12), "local", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a *Assignment
			if tc.host == "" {
				a = r.MAC("02:00:00:00:00:01", Query{At: tc.at})
			} else {
				a = must(r.Host(tc.host, Query{At: tc.at}))
			}
			var others []string
			for _, o := range a.Others {
				others = append(others, o.Mode.Name)
			}
			if a.Mode.Name != tc.mode || strings.Join(others, ",") != tc.others || a.Exam != tc.exam || a.MaintenanceOpen != tc.maint {
				t.Fatalf("mode %s others %v exam %v maintenance %v (rule %s), want %s %s %v %v",
					a.Mode.Name, others, a.Exam, a.MaintenanceOpen, a.Decision.Rule, tc.mode, tc.others, tc.exam, tc.maint)
			}
			b := a.Boot()
			if b.Exam != tc.exam {
				t.Fatalf("boot Exam = %v, want %v", b.Exam, tc.exam)
			}
			var ipxe, pxe bytes.Buffer
			if err := render.IPXE(&ipxe, b); err != nil {
				t.Fatal(err)
			}
			if err := render.PXELinux(&pxe, b); err != nil {
				t.Fatal(err)
			}
			// The maintenance system reaches the scripts only where it is opened.
			hasMaint := strings.Contains(ipxe.String(), "mode-maint") || strings.Contains(pxe.String(), "mode-maint")
			if hasMaint != (tc.maint || tc.mode == "maint") {
				t.Errorf("maintenance in the scripts: %v, want %v\n%s\n%s", hasMaint, !hasMaint, ipxe.String(), pxe.String())
			}
			if tc.exam && (strings.Contains(ipxe.String(), "choose") || !strings.Contains(pxe.String(), "NOESCAPE 1")) {
				t.Errorf("exam scripts are not locked:\n%s\n%s", ipxe.String(), pxe.String())
			}
			if tc.host == "" {
				return
			}
			cfg, err := a.AgentConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Exam != tc.exam {
				t.Errorf("agent config Exam = %v, want %v", cfg.Exam, tc.exam)
			}
			// No compute guest beside an exam; the desktop mode has one otherwise.
			if tc.exam && (cfg.Guest != nil || cfg.GuestUnavailable == "") || !tc.exam && tc.mode == "desktop" && cfg.Guest == nil {
				t.Errorf("agent config guest %+v (unavailable %q) in exam %v", cfg.Guest, cfg.GuestUnavailable, tc.exam)
			}
		})
	}
}
