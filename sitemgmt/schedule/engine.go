package schedule

import (
	"fmt"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Level says which kind of rule decided a mode. Lower levels are more specific and win.
// The zero value is not a level, so that an unset Decision is not mistaken for a host
// exception.
type Level int

const (
	LevelHostException Level = iota + 1
	LevelPoolException
	LevelHostWeekly
	LevelPoolWeekly
	LevelSiteDefault
	// LevelPowerSave: a power-save exception (Slurm's ResumeProgram) fills a slot that
	// the levels above give to a local-disk mode, and only such a slot.
	LevelPowerSave
)

func (l Level) String() string {
	switch l {
	case LevelHostException:
		return "host exception"
	case LevelPoolException:
		return "pool exception"
	case LevelHostWeekly:
		return "host weekly"
	case LevelPoolWeekly:
		return "pool weekly"
	case LevelSiteDefault:
		return "site default"
	case LevelPowerSave:
		return "power save"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// Decision is the effective mode of a host at an instant and why, plus when it next
// changes, so that callers (boot scripts, the node agent, the UI) can tell users what
// happens next and schedule their own re-evaluation without polling.
type Decision struct {
	Mode     string    // effective mode name
	Level    Level     // kind of rule that decided
	Rule     string    // human-readable deciding rule, e.g. `host pc001 weekly "mon-fri 08:00-18:00 desktop"`
	Next     time.Time // next instant the effective mode changes, in the site's zone; zero if it never does
	NextMode string    // the mode from Next on ("" when Next is zero)
	// ExceptionKind is the kind of the exception that decided (exception and power-save
	// levels; "" for weekly rules and defaults). Kinds are informational to the schedule,
	// but what a boot menu offers depends on them: an exam locks the menu, a maintenance
	// exception opens the maintenance entry.
	ExceptionKind model.ExceptionKind
}

// source is what can decide a weekly slot: one pool rule, one host rule or the default.
type source struct {
	mode     uint16
	level    Level
	hostRule int32  // LevelHostWeekly: index into hostSched.ruleTexts (texts name the host, tables are shared)
	text     string // Decision.Rule for the other levels
}

// weekTable is the merged weekly schedule of one (pool rules, host rules) combination.
// src holds per slot an index into sources (a source, not just a mode, so that the
// deciding rule can be named); run holds per slot the number of slots until the MODE
// changes, cyclically, or 0 if the mode is the same all week. Together they answer
// "mode now and next change" with two array reads.
type weekTable struct {
	src     [slotsPerWeek]uint16
	run     [slotsPerWeek]uint16
	sources []source
}

// span is one exception at one target. A target's spans are sorted by start and do not
// overlap (Compile checks), so they are also sorted by end and can be binary searched.
type span struct {
	start, end time.Time
	mode       uint16
	text       string
	kind       model.ExceptionKind
}

type poolSched struct {
	exc   []span
	plain *hostSched // shared by the pool's hosts without own rules or exceptions
}

type hostSched struct {
	table     *weekTable
	ruleTexts []string
	pool      *poolSched
	exc       []span
	powerSave []span // power-save exceptions, sorted, not overlapping
}

// Engine answers schedule questions for one compiled site. It is immutable, so one
// Engine can serve any number of goroutines; a changed site is compiled anew and
// swapped in.
type Engine struct {
	loc         *time.Location
	modes       []string
	yields      []bool // by mode: a local-disk mode, which power-save exceptions may fill
	hosts       map[string]*hostSched
	order       []*hostSched // by index in the compiled site's Hosts
	unknownMode string
	unknownRule string
}

// Location is the site's time zone, in which weekly rules are read.
func (e *Engine) Location() *time.Location { return e.loc }
