package schedule

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
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
}

type poolSched struct {
	name  string
	exc   []span
	plain *hostSched // shared by the pool's hosts without own rules or exceptions
}

type hostSched struct {
	table     *weekTable
	ruleTexts []string
	pool      *poolSched
	exc       []span
}

// Engine answers schedule questions for one compiled site. It is immutable, so one
// Engine can serve any number of goroutines; a changed site is compiled anew and
// swapped in.
type Engine struct {
	loc         *time.Location
	modes       []string
	hosts       map[string]*hostSched
	unknownMode string
	unknownRule string
}

// Location is the site's time zone, in which weekly rules are read.
func (e *Engine) Location() *time.Location { return e.loc }

type parsedRule struct {
	Rule
	raw string // as written, for error messages the user can find in their config
}

// Compile checks the site's schedules and builds an Engine. It assumes site.Validate
// passed, but returns an error rather than panicking when it did not. Errors are
// *model.InvalidError; overlaps are conflicts.
func Compile(site *model.Site) (*Engine, error) {
	if site == nil {
		return nil, model.Invalid("no site")
	}
	if site.Timezone == "" || site.Timezone == "Local" {
		return nil, model.Invalid("invalid timezone %q: use an IANA name like Europe/Berlin", site.Timezone)
	}
	loc, err := time.LoadLocation(site.Timezone)
	if err != nil {
		return nil, model.Invalid("invalid timezone %q: use an IANA name like Europe/Berlin", site.Timezone)
	}
	e := &Engine{loc: loc, hosts: make(map[string]*hostSched, len(site.Hosts))}

	modeIdx := make(map[string]uint16, len(site.Modes))
	for _, m := range site.Modes {
		if _, dup := modeIdx[m.Name]; dup {
			return nil, model.Conflict("duplicate mode %q", m.Name)
		}
		if len(e.modes) >= 1<<16-1 {
			return nil, model.Invalid("too many modes (at most %d)", 1<<16-1)
		}
		modeIdx[m.Name] = uint16(len(e.modes))
		e.modes = append(e.modes, m.Name)
	}
	defMode, ok := modeIdx[site.DefaultMode]
	if !ok {
		return nil, model.Invalid("site default mode %q is not a defined mode", site.DefaultMode)
	}
	e.unknownMode, e.unknownRule = site.DefaultMode, "site default (unknown host)"
	if site.UnknownMode != "" {
		if _, ok := modeIdx[site.UnknownMode]; !ok {
			return nil, model.Invalid("site unknown-host mode %q is not a defined mode", site.UnknownMode)
		}
		e.unknownMode, e.unknownRule = site.UnknownMode, "site unknown-host mode"
	}
	defSource := source{mode: defMode, level: LevelSiteDefault, text: "site default"}

	type poolInfo struct {
		sched *poolSched
		rules []parsedRule
		cover [slotsPerWeek]int16
		texts []string
	}
	pools := make(map[string]*poolInfo, len(site.Pools))
	for i := range site.Pools {
		p := &site.Pools[i]
		if _, dup := pools[p.Name]; dup {
			return nil, model.Conflict("duplicate pool %q", p.Name)
		}
		owner := "pool " + p.Name
		rules, err := parseRules(owner, p.Weekly, modeIdx)
		if err != nil {
			return nil, err
		}
		pi := &poolInfo{sched: &poolSched{name: p.Name}, rules: rules}
		if err := cover(owner, rules, &pi.cover); err != nil {
			return nil, err
		}
		for _, r := range rules {
			pi.texts = append(pi.texts, fmt.Sprintf("%s weekly %q", owner, r.Text))
		}
		pools[p.Name] = pi
	}
	build := func(pi *poolInfo, hostRules []parsedRule, hostCover *[slotsPerWeek]int16) *weekTable {
		t := &weekTable{}
		idx := map[int32]uint16{} // >= 0: host rule, < 0: -1-pool rule, -1<<30: default
		for s := 0; s < slotsPerWeek; s++ {
			var key int32
			var src source
			switch {
			case hostCover != nil && hostCover[s] >= 0:
				key = int32(hostCover[s])
				src = source{mode: modeIdx[hostRules[key].Mode], level: LevelHostWeekly, hostRule: key}
			case pi.cover[s] >= 0:
				r := pi.cover[s]
				key = -1 - int32(r)
				src = source{mode: modeIdx[pi.rules[r].Mode], level: LevelPoolWeekly, text: pi.texts[r]}
			default:
				key = -1 << 30
				src = defSource
			}
			j, ok := idx[key]
			if !ok {
				j = uint16(len(t.sources)) // at most one source per slot plus none: fits
				idx[key] = j
				t.sources = append(t.sources, src)
			}
			t.src[s] = j
		}
		t.fillRuns()
		return t
	}
	for _, pi := range pools {
		pi.sched.plain = &hostSched{table: build(pi, nil, nil), pool: pi.sched}
	}

	tables := map[string]*weekTable{} // shared by hosts with equal pool and equal rule sets
	for i := range site.Hosts {
		h := &site.Hosts[i]
		if _, dup := e.hosts[h.Name]; dup {
			return nil, model.Conflict("duplicate host %q", h.Name)
		}
		pi := pools[h.Pool]
		if pi == nil {
			return nil, model.Invalid("host %s: unknown pool %q", h.Name, h.Pool)
		}
		if len(h.Weekly) == 0 {
			e.hosts[h.Name] = pi.sched.plain
			continue
		}
		owner := "host " + h.Name
		rules, err := parseRules(owner, h.Weekly, modeIdx)
		if err != nil {
			return nil, err
		}
		var hc [slotsPerWeek]int16
		if err := cover(owner, rules, &hc); err != nil {
			return nil, err
		}
		// Canonical order makes equal rule sets share one table and one index space.
		sort.Slice(rules, func(a, b int) bool { return rules[a].Text < rules[b].Text })
		hs := &hostSched{pool: pi.sched}
		var key strings.Builder
		key.WriteString(h.Pool)
		for _, r := range rules {
			key.WriteByte('\n')
			key.WriteString(r.Text)
			hs.ruleTexts = append(hs.ruleTexts, fmt.Sprintf("%s weekly %q", owner, r.Text))
		}
		if hs.table = tables[key.String()]; hs.table == nil {
			_ = cover(owner, rules, &hc) // re-index in canonical order; cannot fail now
			hs.table = build(pi, rules, &hc)
			tables[key.String()] = hs.table
		}
		e.hosts[h.Name] = hs
	}

	// Exceptions, per target. A host with exceptions of its own gets its own hostSched
	// (still sharing the week table).
	byTarget := map[model.Target][]int{} // target -> indexes into site.Exceptions
	var targets []model.Target           // in first-seen order, for deterministic errors
	spans := map[model.Target][]span{}
	for i := range site.Exceptions {
		x := &site.Exceptions[i]
		m, ok := modeIdx[x.Mode]
		if !ok {
			return nil, model.Invalid("exception %s: unknown mode %q", x.Name, x.Mode)
		}
		if !x.End.After(x.Start) {
			return nil, model.Invalid("exception %s: end %s is not after start %s", x.Name, x.End.In(loc).Format(time.RFC3339), x.Start.In(loc).Format(time.RFC3339))
		}
		if len(x.Targets) == 0 {
			return nil, model.Invalid("exception %s: no targets (give pools or hosts)", x.Name)
		}
		kind := ""
		if x.Kind != "" {
			kind = fmt.Sprintf(" (%s)", x.Kind)
		}
		seen := map[model.Target]bool{}
		for _, tg := range x.Targets {
			var text string
			switch {
			case tg.Pool != "" && tg.Host != "":
				return nil, model.Invalid("exception %s: a target is a pool or a host, not both", x.Name)
			case tg.Pool != "":
				if pools[tg.Pool] == nil {
					return nil, model.Invalid("exception %s: unknown pool %q", x.Name, tg.Pool)
				}
				text = fmt.Sprintf("pool %s exception %q%s", tg.Pool, x.Name, kind)
			case tg.Host != "":
				if e.hosts[tg.Host] == nil {
					return nil, model.Invalid("exception %s: unknown host %q", x.Name, tg.Host)
				}
				text = fmt.Sprintf("host %s exception %q%s", tg.Host, x.Name, kind)
			default:
				return nil, model.Invalid("exception %s: empty target", x.Name)
			}
			if seen[tg] {
				continue // listed twice: the same exception, not an overlap
			}
			seen[tg] = true
			if _, ok := byTarget[tg]; !ok {
				targets = append(targets, tg)
			}
			byTarget[tg] = append(byTarget[tg], i)
			spans[tg] = append(spans[tg], span{start: x.Start, end: x.End, mode: m, text: text})
		}
	}
	for _, tg := range targets {
		sp, ix := spans[tg], byTarget[tg]
		order := make([]int, len(sp))
		for k := range order {
			order[k] = k
		}
		sort.SliceStable(order, func(a, b int) bool { return sp[order[a]].start.Before(sp[order[b]].start) })
		sorted := make([]span, len(sp))
		for k, o := range order {
			sorted[k] = sp[o]
		}
		owner := "host " + tg.Host
		if tg.Pool != "" {
			owner = "pool " + tg.Pool
		}
		// Sorted by start, an overlap exists iff some span starts before the latest end so far.
		last := 0
		for k := 1; k < len(sorted); k++ {
			if sorted[k].start.Before(sorted[last].end) {
				a, b := &site.Exceptions[ix[order[last]]], &site.Exceptions[ix[order[k]]]
				to := sorted[k].end
				if sorted[last].end.Before(to) {
					to = sorted[last].end
				}
				const f = "2006-01-02 15:04 MST"
				return nil, model.Conflict("%s: exceptions %q and %q overlap from %s to %s", owner, a.Name, b.Name,
					sorted[k].start.In(loc).Format(f), to.In(loc).Format(f))
			}
			if sorted[last].end.Before(sorted[k].end) {
				last = k
			}
		}
		if tg.Pool != "" {
			pools[tg.Pool].sched.exc = sorted
			continue
		}
		hs := e.hosts[tg.Host]
		if hs == hs.pool.plain {
			hs = &hostSched{table: hs.table, pool: hs.pool}
			e.hosts[tg.Host] = hs
		}
		hs.exc = sorted
	}
	return e, nil
}

func parseRules(owner string, texts []string, modeIdx map[string]uint16) ([]parsedRule, error) {
	rules := make([]parsedRule, 0, len(texts))
	for _, s := range texts {
		r, err := ParseRule(s)
		if err != nil {
			return nil, model.Invalid("%s: %v", owner, err)
		}
		if _, ok := modeIdx[r.Mode]; !ok {
			return nil, model.Invalid("%s: weekly rule %q: unknown mode %q", owner, s, r.Mode)
		}
		rules = append(rules, parsedRule{Rule: r, raw: s})
	}
	return rules, nil
}

// cover marks each slot with the index of the rule covering it (-1: none) and rejects
// two rules of one owner in the same slot: within a level there is no precedence to
// settle it, and silently picking one would hide a mistake.
func cover(owner string, rules []parsedRule, c *[slotsPerWeek]int16) error {
	for i := range c {
		c[i] = -1
	}
	if len(rules) > 1<<15-1 {
		return model.Invalid("%s: too many weekly rules", owner)
	}
	var err error
	for j, r := range rules {
		r.eachSlot(func(s int) bool {
			if i := c[s]; i >= 0 {
				err = model.Conflict("%s: weekly rules %q and %q overlap on %s", owner, rules[i].raw, r.raw, slotString(s))
				return false
			}
			c[s] = int16(j)
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// fillRuns computes, per slot, the slots until the mode changes (cyclically).
func (t *weekTable) fillRuns() {
	mode := func(s int) uint16 { return t.sources[t.src[s]].mode }
	p := -1
	for s := 0; s < slotsPerWeek; s++ {
		if mode(s) != mode((s+1)%slotsPerWeek) {
			p = s
			break
		}
	}
	if p < 0 {
		return // constant all week: run stays 0
	}
	t.run[p] = 1
	for k := 1; k < slotsPerWeek; k++ {
		i := (p - k + slotsPerWeek) % slotsPerWeek
		j := (i + 1) % slotsPerWeek
		if mode(i) != mode(j) {
			t.run[i] = 1
		} else {
			t.run[i] = t.run[j] + 1
		}
	}
}
