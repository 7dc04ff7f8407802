package schedule

// The week grid (what the web UI's schedule editor shows and edits) and its conversion
// to and from weekly rules. Pure functions: no site, no engine (grid_test.go).
//
// A grid holds, per day (0 = Monday) and 10-minute slot (0 = 00:00), the mode that a
// pool's or host's own rules give, or "" where they give none (the slot inherits: a
// host's from its pool, a pool's from the site default).

import (
	"fmt"
	"sort"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// GridDays and GridSlots are a WeekGrid's size: Monday first, 10-minute slots from 00:00.
const (
	GridDays   = 7
	GridSlots  = slotsPerDay // per day: 144
	dayMinutes = 24 * 60
)

// DayLabels are the grid's day names, Monday first (as the rules' weeks).
var DayLabels = [GridDays]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// WeekGrid is one week of modes ("" = none: the slot inherits), by day and slot.
type WeekGrid [GridDays][GridSlots]string

func (g *WeekGrid) at(weekSlot int) *string {
	weekSlot = (weekSlot%slotsPerWeek + slotsPerWeek) % slotsPerWeek
	return &g[weekSlot/GridSlots][weekSlot%GridSlots]
}

// ruleSlots calls f with every week slot (0 = Monday 00:00) r covers; a rule whose end is
// at or before its start runs past midnight into the next day (Sunday's into Monday).
func ruleSlots(r Rule, f func(weekSlot int)) {
	n := (r.End - r.Start) / slotMinutes
	if r.End <= r.Start {
		n = (dayMinutes - r.Start + r.End) / slotMinutes
	}
	for d, on := range r.Days {
		if !on {
			continue
		}
		first := d*GridSlots + r.Start/slotMinutes
		for k := 0; k < n; k++ {
			f((first + k) % slotsPerWeek)
		}
	}
}

// GridOf is the grid that weekly rules give. Rules that overlap are refused as the
// schedule engine refuses them (a conflict).
func GridOf(rules []string) (WeekGrid, error) {
	var g WeekGrid
	var err error
	for _, s := range rules {
		r, perr := ParseRule(s)
		if perr != nil {
			return g, perr
		}
		ruleSlots(r, func(ws int) {
			c := g.at(ws)
			if *c != "" && err == nil {
				err = model.Conflict("weekly rule %q overlaps another rule on %s %s", s, DayLabels[ws/GridSlots], SlotClock(ws%GridSlots))
			}
			*c = r.Mode
		})
		if err != nil {
			return g, err
		}
	}
	return g, nil
}

// run is one stretch of one mode: on day Day from minute Start for Len slots (it may
// run past midnight when merged with the next day's first stretch).
type run struct {
	day, start, len int
	mode            string
}

// RulesOf is a short list of canonical weekly rules giving exactly g: per day,
// maximal runs of one mode; a run up to midnight joined with the next day's run from
// midnight of the same mode (a rule past midnight, "22:00-06:00"); runs with equal times
// and mode on several days combined into one rule with a day list ("mon-fri", "daily").
// The rules come in week order of their first day, then time.
func RulesOf(g WeekGrid) []string {
	var runs [GridDays][]run
	for d := 0; d < GridDays; d++ {
		for s := 0; s < GridSlots; {
			m := g[d][s]
			e := s + 1
			for e < GridSlots && g[d][e] == m {
				e++
			}
			if m != "" {
				runs[d] = append(runs[d], run{day: d, start: s, len: e - s, mode: m})
			}
			s = e
		}
	}
	// Join a run ending at midnight (not a whole day) with the next day's run starting at
	// midnight of the same mode, if together they are shorter than a day (a rule covers at
	// most one day). Neither can take part in another join: the first starts after
	// midnight, the second ends before it.
	for d := 0; d < GridDays; d++ {
		rs := runs[d]
		if len(rs) == 0 {
			continue
		}
		last := &rs[len(rs)-1]
		if last.start == 0 || last.start+last.len != GridSlots {
			continue
		}
		next := runs[(d+1)%GridDays]
		if len(next) == 0 || next[0].start != 0 || next[0].mode != last.mode || last.len+next[0].len >= GridSlots {
			continue
		}
		last.len += next[0].len
		runs[(d+1)%GridDays] = next[1:]
	}
	type key struct {
		start, len int
		mode       string
	}
	var order []key
	days := map[key]*[7]bool{}
	for d := 0; d < GridDays; d++ {
		for _, r := range runs[d] {
			k := key{r.start, r.len, r.mode}
			if days[k] == nil {
				days[k] = &[7]bool{}
				order = append(order, k)
			}
			days[k][d] = true
		}
	}
	type out struct {
		first, start int
		text         string
	}
	var list []out
	for _, k := range order {
		start := k.start * slotMinutes
		end := (start + k.len*slotMinutes) % dayMinutes
		if end == 0 {
			end = dayMinutes
		}
		r := Rule{Days: *days[k], Start: start, End: end, Mode: k.mode}
		first := 0
		for !r.Days[first] {
			first++
		}
		list = append(list, out{first, start, r.String()})
	}
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].first != list[j].first {
			return list[i].first < list[j].first
		}
		return list[i].start < list[j].start
	})
	rules := make([]string, len(list))
	for i, o := range list {
		rules[i] = o.text
	}
	return rules
}

// PlanRules is the rule list that replaces old when the editor saves g. A booking (a
// rule of old that booked says is one) stays as written as long as g still has its mode
// in each of its slots, so it keeps its owner; the rest of g becomes RulesOf's
// rules, which repeat unchanged site-file rules in their canonical spelling.
func PlanRules(g WeekGrid, old []string, booked func(rule string) bool) []string {
	var kept []string
	for _, s := range old {
		if booked == nil || !booked(s) {
			continue
		}
		r, err := ParseRule(s)
		if err != nil {
			continue
		}
		whole := true
		ruleSlots(r, func(ws int) {
			if *g.at(ws) != r.Mode {
				whole = false
			}
		})
		if !whole {
			continue
		}
		ruleSlots(r, func(ws int) { *g.at(ws) = "" }) // g is a copy
		kept = append(kept, s)
	}
	rules := RulesOf(g)
	// A rule the grid gives unchanged keeps the spelling it was written in, so that
	// saving a grid does not rewrite rules nobody touched.
	spelt := map[string]string{}
	for _, s := range old {
		if r, err := ParseRule(s); err == nil && r.Text != s {
			spelt[r.Text] = s
		}
	}
	for i, r := range rules {
		if s, ok := spelt[r]; ok {
			rules[i] = s
		}
	}
	return append(kept, rules...)
}

// SlotClock is the start of a day's slot, "08:10".
func SlotClock(slot int) string {
	m := slot * slotMinutes
	return fmt.Sprintf("%02d:%02d", m/60, m%60)
}
