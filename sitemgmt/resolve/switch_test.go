package resolve

import (
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// What the coming change asks of a running PC, per kind of change: the reboot reason (or
// none), the rule for a logged-in user and the label users see.
func TestNextSwitch(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(day, h, m int) time.Time { return time.Date(2026, 12, day, h, m, 0, 0, berlin) }
	// pc-b2 goes from the desktop straight to the cluster at 18:00.
	evening := func(s *model.Site) { s.Host("pc-b2").Weekly = []string{"daily 18:00-06:00 cluster"} }
	for _, tc := range []struct {
		name   string
		edit   func(*model.Site)
		host   string
		at     time.Time
		mode   string // the next mode
		reboot string // "" = in place
		rule   model.SwitchRule
		label  string
	}{
		{name: "desktop to local disk in the evening", host: "pc-a1", at: at(2, 17, 0),
			mode: "local", reboot: "the PC boots its local disk (local)", rule: model.SwitchWait, label: "local"},
		{name: "local disk to desktop in the morning (woken PCs restart)", host: "pc-a1", at: at(2, 7, 0),
			mode: "desktop", reboot: "the PC leaves local-disk for desktop", rule: model.SwitchWait, label: "desktop"},
		{name: "desktop to cluster on the same image and version: in place", host: "pc-b2", at: at(2, 17, 0),
			edit: func(s *model.Site) { s.Mode("cluster").ImageVersion = ""; evening(s) },
			mode: "cluster", reboot: "", rule: model.SwitchWait, label: "cluster"},
		{name: "desktop to cluster pinned to an older version", host: "pc-b2", at: at(2, 17, 0), edit: evening,
			mode: "cluster", reboot: "image desk 2 → 1", rule: model.SwitchWait},
		{name: "kernel arguments differ", host: "pc-b2", at: at(2, 17, 0),
			edit: func(s *model.Site) {
				s.Mode("cluster").ImageVersion = ""
				s.Mode("cluster").KernelArgs = "quiet"
				evening(s)
			},
			mode: "cluster", reboot: "kernel arguments", rule: model.SwitchWait},
		{name: "a course VM booked for a slot: forced, labelled by the exception", host: "pc-a1", at: at(2, 9, 30),
			edit: func(s *model.Site) {
				s.Images = append(s.Images, model.Image{Name: "bio-vm", Kind: model.ImageCourseVM, Pool: "lab-a"})
				s.Modes = append(s.Modes, model.Mode{Name: "bio", Kind: model.KindCourseVM, Image: "desk", VM: "bio-vm"})
				s.Exceptions = append(s.Exceptions, model.Exception{Name: "bio101", Kind: "lecture", Description: "BIO101 lab session",
					Start: at(2, 10, 0), End: at(2, 12, 0), Mode: "bio", Targets: []model.Target{{Pool: "lab-a"}}})
			},
			mode: "bio", reboot: "the course VM starts on a freshly booted desktop", rule: model.SwitchForce, label: "BIO101 lab session"},
		{name: "an exam on the same desktop mode: forced, restart", host: "pc-a1", at: at(2, 9, 55),
			edit: func(s *model.Site) {
				s.Modes = append(s.Modes, model.Mode{Name: "exam-desk", Kind: model.KindDesktop, Image: "desk", Description: "Exam desktop"})
				s.Exceptions = append(s.Exceptions, model.Exception{Name: "exam1", Kind: "exam",
					Start: at(2, 10, 0), End: at(2, 11, 0), Mode: "exam-desk", Targets: []model.Target{{Host: "pc-a1"}}})
			},
			mode: "exam-desk", reboot: "an exam starts on a freshly booted PC", rule: model.SwitchForce, label: "Exam desktop"},
		{name: "the pool's policy decides the rule", host: "pc-a1", at: at(2, 17, 0),
			edit: func(s *model.Site) {
				s.Pool("lab-a").Policy.Switch = map[string]model.SwitchRule{"local-disk": model.SwitchForce}
			},
			mode: "local", reboot: "the PC boots its local disk (local)", rule: model.SwitchForce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := testSite(t)
			if tc.edit != nil {
				tc.edit(site)
			}
			r := newResolver(t, site)
			h := site.Host(tc.host)
			cfg, err := r.AgentConfig(h, Query{At: tc.at}, Running{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.NextMode != tc.mode || cfg.NextReboot != tc.reboot || cfg.NextSwitch != tc.rule {
				t.Errorf("next %s, reboot %q, rule %s; want %s, %q, %s", cfg.NextMode, cfg.NextReboot, cfg.NextSwitch, tc.mode, tc.reboot, tc.rule)
			}
			if tc.label != "" && cfg.NextLabel != tc.label {
				t.Errorf("label %q, want %q", cfg.NextLabel, tc.label)
			}
		})
	}
}

// In an exam the configuration says so, and the change after it restarts the PC.
func TestExamConfig(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(h int) time.Time { return time.Date(2026, 12, 2, h, 0, 0, 0, berlin) }
	site := testSite(t)
	site.Exceptions = append(site.Exceptions, model.Exception{Name: "exam1", Kind: "exam",
		Start: at(10), End: at(11), Mode: "desktop", Targets: []model.Target{{Pool: "lab-a"}}})
	r := newResolver(t, site)
	cfg, err := r.AgentConfig(site.Host("pc-a1"), Query{At: at(10).Add(30 * time.Minute)}, Running{})
	if err != nil {
		t.Fatal(err)
	}
	// The exam keeps the weekly rule's mode: its end is a change all the same.
	if !cfg.Exam || !cfg.NextChange.Equal(at(11)) || cfg.NextMode != "desktop" || cfg.NextReboot != "the exam's lockdown ends" || cfg.NextSwitch != model.SwitchWait {
		t.Fatalf("in the exam: exam %v, next %s %s, reboot %q, rule %s", cfg.Exam, cfg.NextChange, cfg.NextMode, cfg.NextReboot, cfg.NextSwitch)
	}
	cfg, _ = r.AgentConfig(site.Host("pc-a1"), Query{At: at(9)}, Running{})
	if cfg.Exam || !cfg.NextChange.Equal(at(10)) || cfg.NextReboot != "an exam starts on a freshly booted PC" || cfg.NextSwitch != model.SwitchForce {
		t.Fatalf("before the exam: exam %v, next %s, reboot %q, rule %s", cfg.Exam, cfg.NextChange, cfg.NextReboot, cfg.NextSwitch)
	}
	cfg, _ = r.AgentConfig(site.Host("pc-b1"), Query{At: at(10).Add(30 * time.Minute)}, Running{})
	if cfg.Exam {
		t.Fatal("another pool's host is told it is in the exam")
	}
}

// A PC still running what it booted before the boundary is told to restart, by the rule
// of the mode in force; one that booted what the schedule gives now is not.
func TestRebootFrom(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := time.Date(2026, 12, 2, 18, 5, 0, 0, berlin) // lab-a: local disk from 18:00
	site := testSite(t)
	r := newResolver(t, site)
	h := site.Host("pc-a1")
	for _, tc := range []struct {
		booted Running
		reboot string
	}{
		{Running{Mode: "desktop"}, "the PC boots its local disk (local)"},
		{Running{Mode: "local"}, ""},
		{Running{}, ""},                     // not said: nothing to judge
		{Running{Mode: "no-such-mode"}, ""}, // a mode since deleted: follows at its next boot
	} {
		cfg, err := r.AgentConfig(h, Query{At: at}, tc.booted)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Reboot != tc.reboot {
			t.Errorf("booted %+v: reboot %q, want %q", tc.booted, cfg.Reboot, tc.reboot)
		}
	}
	// Evening: pc-b2 booted the desktop and the cluster (same image) is in force: in place.
	site = testSite(t)
	site.Mode("cluster").ImageVersion = ""
	r = newResolver(t, site)
	cfg, _ := r.AgentConfig(site.Host("pc-b2"), Query{At: time.Date(2026, 12, 2, 21, 0, 0, 0, berlin)}, Running{Mode: "desktop"})
	if cfg.Reboot != "" {
		t.Errorf("desktop booted, cluster in force: reboot %q", cfg.Reboot)
	}
	// An exam booted, its end passed: the lockdown must go.
	cfg, _ = r.AgentConfig(site.Host("pc-a1"), Query{At: time.Date(2026, 12, 2, 11, 0, 0, 0, berlin)}, Running{Mode: "desktop", Exam: true})
	if cfg.Reboot != "the exam's lockdown ends" || cfg.RebootSwitch != model.SwitchWait {
		t.Errorf("after an exam: reboot %q rule %s", cfg.Reboot, cfg.RebootSwitch)
	}
}
