package web

// The schedule editor's week grid and its conversion to and from weekly rules. Pure
// functions: no site, no engine, no request (schedgrid_test.go).
//
// A grid holds, per day (0 = Monday) and 10-minute slot (0 = 00:00), the mode that a
// pool's or host's own rules give, or "" where they give none (the slot inherits: a
// host's from its pool, a pool's from the site default).

import (
	"sort"
	"strings"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
)

const (
	gridDays     = 7
	gridSlots    = 24 * 60 / slotMinutes // per day: 144
	slotMinutes  = 10
	gridWeek     = gridDays * gridSlots // 1008
	dayMinutes   = 24 * 60
	inheritToken = "-" // a slot without a mode of its own in the grid form field
)

// dayLabels are the grid's row labels (Monday first, as the rules' weeks).
var dayLabels = [gridDays]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// Grid is one week of own modes ("" = inherited), by day and slot.
type Grid [gridDays][gridSlots]string

func (g *Grid) at(weekSlot int) *string {
	weekSlot = (weekSlot%gridWeek + gridWeek) % gridWeek
	return &g[weekSlot/gridSlots][weekSlot%gridSlots]
}

// ruleSlots calls f with every week slot (0 = Monday 00:00) r covers; a rule whose end is
// at or before its start runs past midnight into the next day (Sunday's into Monday).
func ruleSlots(r schedule.Rule, f func(weekSlot int)) {
	n := (r.End - r.Start) / slotMinutes
	if r.End <= r.Start {
		n = (dayMinutes - r.Start + r.End) / slotMinutes
	}
	for d, on := range r.Days {
		if !on {
			continue
		}
		first := d*gridSlots + r.Start/slotMinutes
		for k := 0; k < n; k++ {
			f((first + k) % gridWeek)
		}
	}
}

// GridFromRules is the grid that weekly rules give. Rules that overlap are refused as the
// schedule engine refuses them (a conflict).
func GridFromRules(rules []string) (Grid, error) {
	var g Grid
	var err error
	for _, s := range rules {
		r, perr := schedule.ParseRule(s)
		if perr != nil {
			return g, perr
		}
		ruleSlots(r, func(ws int) {
			c := g.at(ws)
			if *c != "" && err == nil {
				err = model.Conflict("weekly rule %q overlaps another rule on %s %s", s, dayLabels[ws/gridSlots], slotClock(ws%gridSlots))
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

// RulesFromGrid is a short list of canonical weekly rules giving exactly g: per day,
// maximal runs of one mode; a run up to midnight joined with the next day's run from
// midnight of the same mode (a rule past midnight, "22:00-06:00"); runs with equal times
// and mode on several days combined into one rule with a day list ("mon-fri", "daily").
// The rules come in week order of their first day, then time.
func RulesFromGrid(g Grid) []string {
	var runs [gridDays][]run
	for d := 0; d < gridDays; d++ {
		for s := 0; s < gridSlots; {
			m := g[d][s]
			e := s + 1
			for e < gridSlots && g[d][e] == m {
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
	for d := 0; d < gridDays; d++ {
		rs := runs[d]
		if len(rs) == 0 {
			continue
		}
		last := &rs[len(rs)-1]
		if last.start == 0 || last.start+last.len != gridSlots {
			continue
		}
		next := runs[(d+1)%gridDays]
		if len(next) == 0 || next[0].start != 0 || next[0].mode != last.mode || last.len+next[0].len >= gridSlots {
			continue
		}
		last.len += next[0].len
		runs[(d+1)%gridDays] = next[1:]
	}
	type key struct {
		start, len int
		mode       string
	}
	var order []key
	days := map[key]*[7]bool{}
	for d := 0; d < gridDays; d++ {
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
		r := schedule.Rule{Days: *days[k], Start: start, End: end, Mode: k.mode}
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
// in each of its slots, so it keeps its owner; the rest of g becomes RulesFromGrid's
// rules, which repeat unchanged site-file rules in their canonical spelling.
func PlanRules(g Grid, old []string, booked func(rule string) bool) []string {
	var kept []string
	for _, s := range old {
		if booked == nil || !booked(s) {
			continue
		}
		r, err := schedule.ParseRule(s)
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
	rules := RulesFromGrid(g)
	// A rule the grid gives unchanged keeps the spelling it was written in, so that
	// saving a grid does not rewrite rules nobody touched.
	spelt := map[string]string{}
	for _, s := range old {
		if r, err := schedule.ParseRule(s); err == nil && r.Text != s {
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

// EncodeGrid writes g for the form field: seven days separated by "|", each 144 slots
// separated by ",", a slot the index of its mode in modes or "-" for none.
func EncodeGrid(g Grid, modes []string) string {
	idx := make(map[string]int, len(modes))
	for i, m := range modes {
		idx[m] = i
	}
	var b strings.Builder
	for d := 0; d < gridDays; d++ {
		if d > 0 {
			b.WriteByte('|')
		}
		for s := 0; s < gridSlots; s++ {
			if s > 0 {
				b.WriteByte(',')
			}
			if i, ok := idx[g[d][s]]; ok && g[d][s] != "" {
				b.WriteString(itoa(i))
			} else {
				b.WriteString(inheritToken)
			}
		}
	}
	return b.String()
}

// DecodeGrid reads EncodeGrid's form, with modes the mode list the page was built with.
func DecodeGrid(s string, modes []string) (Grid, error) {
	var g Grid
	days := strings.Split(strings.TrimSpace(s), "|")
	if len(days) != gridDays {
		return g, model.Invalid("the schedule grid has %d days, want %d (reload the page)", len(days), gridDays)
	}
	for d, day := range days {
		slots := strings.Split(day, ",")
		if len(slots) != gridSlots {
			return g, model.Invalid("the schedule grid's %s has %d slots, want %d (reload the page)", dayLabels[d], len(slots), gridSlots)
		}
		for i, tok := range slots {
			tok = strings.TrimSpace(tok)
			if tok == inheritToken || tok == "" {
				continue
			}
			n, ok := atoiSmall(tok)
			if !ok || n >= len(modes) {
				return g, model.Invalid("the schedule grid's %s %s names no mode (%q; reload the page)", dayLabels[d], slotClock(i), tok)
			}
			g[d][i] = modes[n]
		}
	}
	return g, nil
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

func atoiSmall(s string) (int, bool) {
	if s == "" || len(s) > 6 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// slotClock is the start of a day's slot, "08:10".
func slotClock(slot int) string {
	m := slot * slotMinutes
	return twoDigits(m/60) + ":" + twoDigits(m%60)
}

func twoDigits(n int) string { return string([]byte{byte('0' + n/10%10), byte('0' + n%10)}) }
