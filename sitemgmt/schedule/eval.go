package schedule

import (
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

const (
	slotSeconds = slotMinutes * 60
	weekSeconds = 7 * 86400
	// The Unix epoch was a Thursday; shifting by three days puts Monday 00:00 at a
	// multiple of weekSeconds, so the week slot is plain arithmetic on local seconds.
	epochToMonday = 3 * 86400
)

// At evaluates the named host at t.
func (e *Engine) At(hostName string, t time.Time) (Decision, error) {
	hs := e.hosts[hostName]
	if hs == nil {
		return Decision{}, model.Invalid("unknown host %q", hostName)
	}
	return e.eval(hs, t), nil
}

// AtHost evaluates h at t without allocating. h must belong to the compiled site (it is
// found by name); a host the engine does not know gets the unknown-host answer, so that
// a host added after the last Compile boots safely rather than into a guess.
func (e *Engine) AtHost(h *model.Host, t time.Time) Decision {
	hs := e.hosts[h.Name]
	if hs == nil {
		return e.AtUnknown(t)
	}
	return e.eval(hs, t)
}

// AtEach evaluates every host of the compiled site at t, calling fn with the host's
// index in the site's Hosts and its decision: what a whole-site view (slurm.conf, the
// overview, power saving) needs, without a look-up by name per host (at 100,000 hosts
// the name look-ups were half the time, issue 18).
func (e *Engine) AtEach(t time.Time, fn func(i int, d Decision)) {
	for i, hs := range e.order {
		fn(i, e.eval(hs, t))
	}
}

// AtUnknown is the answer for a MAC address that is not in the directory: the site's
// unknown-host mode if set, else its default mode. It never changes with time.
func (e *Engine) AtUnknown(t time.Time) Decision {
	return Decision{Mode: e.unknownMode, Level: LevelSiteDefault, Rule: e.unknownRule}
}

// eval finds the state at t and then walks forward segment by segment (each segment is
// constant by construction) until the mode differs. A bound on the walk guards against
// data the proof of termination does not cover; in practice it ends within a few steps.
func (e *Engine) eval(hs *hostSched, t time.Time) Decision {
	mode, level, text, kind, end, open := e.segment(hs, t)
	d := Decision{Mode: e.modes[mode], Level: level, Rule: text, ExceptionKind: kind}
	limit := 64 + 4*(len(hs.exc)+len(hs.pool.exc)+len(hs.powerSave))
	for step := 0; !open && step < limit; step++ {
		cur := end
		var m uint16
		m, _, _, _, end, open = e.segment(hs, cur)
		if m != mode {
			d.Next = cur.In(e.loc)
			d.NextMode = e.modes[m]
			break
		}
	}
	return d
}

// lastStarted is the index of the last span starting at or before t, or -1.
func lastStarted(sp []span, t time.Time) int {
	lo, hi := 0, len(sp) // answer in [lo-1, hi-1]
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if sp[m].start.After(t) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo - 1
}

// segment returns the state at t and the end of the interval from t in which nothing
// that decides the mode can change (open: it never ends). Wall-clock slots are found
// from the zone offset in effect at t, which is valid up to the zone's next transition;
// the segment therefore also ends there, and the caller re-evaluates in the new offset.
// That is what makes DST exact: skipped wall slots are never visited, repeated ones are
// visited twice.
func (e *Engine) segment(hs *hostSched, t time.Time) (mode uint16, level Level, text string, kind model.ExceptionKind, end time.Time, open bool) {
	mode, level, text, kind, end, open = e.ruleSegment(hs, t)
	if len(hs.powerSave) == 0 || !e.yields[mode] {
		return
	}
	// The rules give the PC back to its local disk: a power-save exception, where one
	// covers t, puts it in the cluster instead. Everything else (lectures, exams,
	// desktop hours, maintenance) wins over power saving by construction.
	ps := hs.powerSave
	i := lastStarted(ps, t)
	if i >= 0 && t.Before(ps[i].end) {
		if open || ps[i].end.Before(end) {
			end = ps[i].end
		}
		return ps[i].mode, LevelPowerSave, ps[i].text, ps[i].kind, end, false
	}
	if i+1 < len(ps) && (open || ps[i+1].start.Before(end)) {
		end, open = ps[i+1].start, false
	}
	return
}

// ruleSegment is segment without power-save exceptions: exceptions, weekly rules and
// the default.
func (e *Engine) ruleSegment(hs *hostSched, t time.Time) (mode uint16, level Level, text string, kind model.ExceptionKind, end time.Time, open bool) {
	var bound time.Time
	bounded := false
	limit := func(b time.Time) {
		if !bounded || b.Before(bound) {
			bound, bounded = b, true
		}
	}
	if i := lastStarted(hs.exc, t); i >= 0 && t.Before(hs.exc[i].end) {
		x := &hs.exc[i]
		return x.mode, LevelHostException, x.text, x.kind, x.end, false
	} else if i+1 < len(hs.exc) {
		limit(hs.exc[i+1].start)
	}
	pe := hs.pool.exc
	if i := lastStarted(pe, t); i >= 0 && t.Before(pe[i].end) {
		limit(pe[i].end)
		return pe[i].mode, LevelPoolException, pe[i].text, pe[i].kind, bound, false
	} else if i+1 < len(pe) {
		limit(pe[i+1].start)
	}

	lt := t.In(e.loc)
	_, off := lt.Zone()
	wall := t.Unix() + int64(off)
	slot := floorMod(wall+epochToMonday, weekSeconds) / slotSeconds
	tab := hs.table
	src := &tab.sources[tab.src[slot]]
	text = src.text
	if src.level == LevelHostWeekly {
		text = hs.ruleTexts[src.hostRule]
	}
	if n := tab.run[slot]; n != 0 {
		change := floorDiv(wall, slotSeconds)*slotSeconds + int64(n)*slotSeconds - int64(off)
		limit(time.Unix(change, 0))
		if _, zoneEnd := lt.ZoneBounds(); !zoneEnd.IsZero() {
			limit(zoneEnd)
		}
	}
	return src.mode, src.level, text, "", bound, !bounded
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
