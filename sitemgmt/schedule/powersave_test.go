package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// A power-save exception fills only slots the rest of the schedule gives to a
// local-disk mode; every other slot (desktop hours, lectures, maintenance, other
// exceptions, even ones that overlap it) wins.
func TestPowerSaveLayer(t *testing.T) {
	loc := mustLoc(t, "Europe/Berlin")
	at := func(d, h, m int) time.Time { return time.Date(2026, 12, d, h, m, 0, 0, loc) } // 2026-12-01 is a Tuesday
	s := baseSite("Europe/Berlin")                                                       // default: local
	addPool(s, "lab", "mon-fri 08:00-18:00 desktop", "wed 18:00-20:00 course-bio101")
	addHost(s, "pc1", "lab")
	addHost(s, "pc2", "lab")
	// Tuesday 18:00 to Thursday 09:00, through desktop hours, a weekly course slot and a
	// pool exam on Wednesday night.
	addException(s, "slurm-pc1", model.ExceptionPowerSave, "cluster", at(1, 18, 0), at(3, 9, 0), model.Target{Host: "pc1"})
	addException(s, "exam", "exam", "exam", at(2, 21, 0), at(2, 23, 0), model.Target{Pool: "lab"})
	e := mustCompile(t, s)
	const ps = `host pc1 exception "slurm-pc1" (power-save)`
	tests := []struct {
		name     string
		host     string
		t        time.Time
		mode     string
		level    Level
		rule     string
		next     time.Time
		nextMode string
	}{
		{"fills the local-disk night", "pc1", at(1, 19, 0), "cluster", LevelPowerSave, ps, at(2, 8, 0), "desktop"},
		{"desktop hours win", "pc1", at(2, 9, 0), "desktop", LevelPoolWeekly, `pool lab weekly "mon-fri 08:00-18:00 desktop"`, at(2, 18, 0), "course-bio101"},
		{"a lecture slot wins", "pc1", at(2, 18, 30), "course-bio101", LevelPoolWeekly, `pool lab weekly "wed 18:00-20:00 course-bio101"`, at(2, 20, 0), "cluster"},
		{"between lecture and exam", "pc1", at(2, 20, 0), "cluster", LevelPowerSave, ps, at(2, 21, 0), "exam"},
		{"an overlapping exam wins", "pc1", at(2, 22, 0), "exam", LevelPoolException, `pool lab exception "exam" (exam)`, at(2, 23, 0), "cluster"},
		{"after the exam until morning", "pc1", at(3, 1, 0), "cluster", LevelPowerSave, ps, at(3, 8, 0), "desktop"},
		{"before it starts", "pc1", at(1, 17, 50), "desktop", LevelPoolWeekly, `pool lab weekly "mon-fri 08:00-18:00 desktop"`, at(1, 18, 0), "cluster"},
		{"other hosts unaffected", "pc2", at(1, 19, 0), "local", LevelSiteDefault, "site default", at(2, 8, 0), "desktop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := e.At(tc.host, tc.t)
			if err != nil {
				t.Fatal(err)
			}
			if d.Mode != tc.mode || d.Level != tc.level || d.Rule != tc.rule || !d.Next.Equal(tc.next) || d.NextMode != tc.nextMode {
				t.Errorf("got %s %v %q next %s %s, want %s %v %q next %s %s", d.Mode, d.Level, d.Rule, d.Next, d.NextMode,
					tc.mode, tc.level, tc.rule, tc.next, tc.nextMode)
			}
		})
	}
	// The last night ends with the exception: Thursday 08:00 is desktop anyway, so the
	// next change after Wednesday 23:00 is 08:00 and afterwards the schedule is plain.
	if d, _ := e.At("pc1", at(3, 18, 30)); d.Mode != "local" || d.Level != LevelSiteDefault {
		t.Errorf("after the exception: %s %v", d.Mode, d.Level)
	}
}

func TestPowerSaveInvalid(t *testing.T) {
	loc := mustLoc(t, "Europe/Berlin")
	at := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, loc) }
	tests := []struct {
		name string
		edit func(s *model.Site)
		want string
	}{
		{"pool target", func(s *model.Site) {
			addException(s, "x", model.ExceptionPowerSave, "cluster", at(1, 18), at(2, 6), model.Target{Pool: "lab"})
		}, "targets hosts, not pool lab"},
		{"not a cluster mode", func(s *model.Site) {
			addException(s, "x", model.ExceptionPowerSave, "desktop", at(1, 18), at(2, 6), model.Target{Host: "pc1"})
		}, "must be of kind cluster, not desktop"},
		{"two power-save exceptions overlap", func(s *model.Site) {
			addException(s, "x", model.ExceptionPowerSave, "cluster", at(1, 18), at(2, 6), model.Target{Host: "pc1"})
			addException(s, "y", model.ExceptionPowerSave, "cluster", at(2, 0), at(2, 8), model.Target{Host: "pc1"})
		}, `exceptions "x" and "y" overlap`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSite("Europe/Berlin")
			addPool(s, "lab")
			addHost(s, "pc1", "lab")
			tc.edit(s)
			_, err := Compile(s)
			var ie *model.InvalidError
			if err == nil || !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Overlapping an ordinary host exception is no conflict: they are different layers.
	s := baseSite("Europe/Berlin")
	addPool(s, "lab")
	addHost(s, "pc1", "lab")
	addException(s, "x", model.ExceptionPowerSave, "cluster", at(1, 18), at(2, 6), model.Target{Host: "pc1"})
	addException(s, "repair", "maintenance", "maint", at(1, 20), at(1, 22), model.Target{Host: "pc1"})
	if _, err := Compile(s); err != nil {
		t.Fatalf("power-save and ordinary exception on one host: %v", err)
	}
}
