package schedule

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

type parsedRule struct {
	Rule
	raw string // as written, for error messages the user can find in their config
}

type poolInfo struct {
	sched *poolSched
	rules []parsedRule
	cover [slotsPerWeek]int16 // rule index per slot, -1: none
	texts []string            // Decision.Rule per rule
}

// compiler holds the state of one Compile call.
type compiler struct {
	site    *model.Site
	e       *Engine
	modeIdx map[string]uint16
	def     source
	pools   map[string]*poolInfo
	tables  map[string]*weekTable // by pool and canonical host rules: hosts with equal rules share
}

// Compile checks the site's schedules and builds an Engine. It assumes site.Validate
// passed, but returns an error rather than panicking when it did not. Errors are
// *model.InvalidError; overlaps are conflicts (HTTP 409).
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
	c := &compiler{
		site:   site,
		e:      &Engine{loc: loc, hosts: make(map[string]*hostSched, len(site.Hosts))},
		pools:  make(map[string]*poolInfo, len(site.Pools)),
		tables: map[string]*weekTable{},
	}
	for _, step := range []func() error{c.modes, c.compilePools, c.compileHosts, c.exceptions} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	// The site's hosts in their order, for AtEach (exceptions may have given a host its
	// own schedule, so this comes last).
	c.e.order = make([]*hostSched, len(site.Hosts))
	for i := range site.Hosts {
		c.e.order[i] = c.e.hosts[site.Hosts[i].Name]
	}
	return c.e, nil
}

func (c *compiler) modes() error {
	e, site := c.e, c.site
	c.modeIdx = make(map[string]uint16, len(site.Modes))
	for _, m := range site.Modes {
		if _, dup := c.modeIdx[m.Name]; dup {
			return model.Conflict("duplicate mode %q", m.Name)
		}
		if len(e.modes) >= 1<<16-1 {
			return model.Invalid("too many modes (at most %d)", 1<<16-1)
		}
		c.modeIdx[m.Name] = uint16(len(e.modes))
		e.modes = append(e.modes, m.Name)
		e.yields = append(e.yields, m.Kind == model.KindLocalDisk)
	}
	def, ok := c.modeIdx[site.DefaultMode]
	if !ok {
		return model.Invalid("site default mode %q is not a defined mode", site.DefaultMode)
	}
	c.def = source{mode: def, level: LevelSiteDefault, text: "site default"}
	e.unknownMode, e.unknownRule = site.DefaultMode, "site default (unknown host)"
	if site.UnknownMode != "" {
		if _, ok := c.modeIdx[site.UnknownMode]; !ok {
			return model.Invalid("site unknown-host mode %q is not a defined mode", site.UnknownMode)
		}
		e.unknownMode, e.unknownRule = site.UnknownMode, "site unknown-host mode"
	}
	return nil
}

func (c *compiler) compilePools() error {
	for i := range c.site.Pools {
		p := &c.site.Pools[i]
		if _, dup := c.pools[p.Name]; dup {
			return model.Conflict("duplicate pool %q", p.Name)
		}
		owner := "pool " + p.Name
		rules, err := c.parseRules(owner, p.Weekly)
		if err != nil {
			return err
		}
		pi := &poolInfo{sched: &poolSched{}, rules: rules}
		if err := cover(owner, rules, &pi.cover); err != nil {
			return err
		}
		for _, r := range rules {
			pi.texts = append(pi.texts, fmt.Sprintf("%s weekly %q", owner, r.Text))
		}
		pi.sched.plain = &hostSched{table: c.build(pi, nil, nil), pool: pi.sched}
		c.pools[p.Name] = pi
	}
	return nil
}

func (c *compiler) compileHosts() error {
	for i := range c.site.Hosts {
		h := &c.site.Hosts[i]
		if _, dup := c.e.hosts[h.Name]; dup {
			return model.Conflict("duplicate host %q", h.Name)
		}
		pi := c.pools[h.Pool]
		if pi == nil {
			return model.Invalid("host %s: unknown pool %q", h.Name, h.Pool)
		}
		if len(h.Weekly) == 0 {
			c.e.hosts[h.Name] = pi.sched.plain
			continue
		}
		owner := "host " + h.Name
		rules, err := c.parseRules(owner, h.Weekly)
		if err != nil {
			return err
		}
		var hc [slotsPerWeek]int16
		if err := cover(owner, rules, &hc); err != nil { // in the user's order, for the message
			return err
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
		if hs.table = c.tables[key.String()]; hs.table == nil {
			_ = cover(owner, rules, &hc) // re-index in canonical order; cannot fail now
			hs.table = c.build(pi, rules, &hc)
			c.tables[key.String()] = hs.table
		}
		c.e.hosts[h.Name] = hs
	}
	return nil
}

func (c *compiler) parseRules(owner string, texts []string) ([]parsedRule, error) {
	rules := make([]parsedRule, 0, len(texts))
	for _, s := range texts {
		r, err := ParseRule(s)
		if err != nil {
			return nil, model.Invalid("%s: %v", owner, err)
		}
		if _, ok := c.modeIdx[r.Mode]; !ok {
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

// build merges a pool's rules, a host's rules (nil for none) and the default into a
// week table.
func (c *compiler) build(pi *poolInfo, hostRules []parsedRule, hostCover *[slotsPerWeek]int16) *weekTable {
	t := &weekTable{}
	const defKey = -1 << 30
	idx := map[int32]uint16{} // key: host rule i >= 0, pool rule i as -1-i, default defKey
	// A source (and its mode's index, a map look-up by name) is made once per key, and
	// runs of slots with one key skip the index: this loop runs for every table of a
	// 100,000-host site (issue 18).
	lastKey, lastJ := int32(defKey-1), uint16(0)
	for s := 0; s < slotsPerWeek; s++ {
		var key int32
		switch {
		case hostCover != nil && hostCover[s] >= 0:
			key = int32(hostCover[s])
		case pi.cover[s] >= 0:
			key = -1 - int32(pi.cover[s])
		default:
			key = defKey
		}
		if key == lastKey {
			t.src[s] = lastJ
			continue
		}
		j, ok := idx[key]
		if !ok {
			var src source
			switch {
			case key == defKey:
				src = c.def
			case key >= 0:
				src = source{mode: c.modeIdx[hostRules[key].Mode], level: LevelHostWeekly, hostRule: key}
			default:
				r := -1 - key
				src = source{mode: c.modeIdx[pi.rules[r].Mode], level: LevelPoolWeekly, text: pi.texts[r]}
			}
			j = uint16(len(t.sources)) // at most one new source per slot: fits
			idx[key] = j
			t.sources = append(t.sources, src)
		}
		t.src[s] = j
		lastKey, lastJ = key, j
	}
	t.fillRuns()
	return t
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
	// Walking backwards from a slot whose successor differs makes every value exact.
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

// exceptions checks the exceptions and attaches them, sorted, to their targets. A host
// with exceptions of its own gets its own hostSched (still sharing the week table).
func (c *compiler) exceptions() error {
	site, loc := c.site, c.e.loc
	type entry struct {
		x *model.Exception
		s span
	}
	// Power-save exceptions are a layer of their own (see Engine.segment): they are
	// keyed apart, so they neither overlap nor are overlapped by ordinary exceptions.
	type key struct {
		tg        model.Target
		powerSave bool
	}
	byTarget := map[key][]entry{}
	var targets []key // first-seen order, so that errors are deterministic
	for i := range site.Exceptions {
		x := &site.Exceptions[i]
		m, ok := c.modeIdx[x.Mode]
		if !ok {
			return model.Invalid("exception %s: unknown mode %q", x.Name, x.Mode)
		}
		ps := x.Kind == model.ExceptionPowerSave
		if ps {
			if k := site.Mode(x.Mode).Kind; k != model.KindCluster {
				return model.Invalid("exception %s: a power-save exception wakes hosts for the cluster, so its mode must be of kind cluster, not %s", x.Name, k)
			}
		}
		if !x.End.After(x.Start) {
			return model.Invalid("exception %s: end %s is not after start %s", x.Name, x.End.In(loc).Format(time.RFC3339), x.Start.In(loc).Format(time.RFC3339))
		}
		if len(x.Targets) == 0 {
			return model.Invalid("exception %s: no targets (give pools or hosts)", x.Name)
		}
		kind := ""
		if x.Kind != "" {
			kind = fmt.Sprintf(" (%s)", x.Kind)
		}
		for _, tg := range x.Targets {
			var text string
			switch {
			case tg.Pool != "" && tg.Host != "":
				return model.Invalid("exception %s: a target is a pool or a host, not both", x.Name)
			case tg.Pool != "" && ps:
				return model.Invalid("exception %s: a power-save exception targets hosts, not pool %s", x.Name, tg.Pool)
			case tg.Pool != "":
				if c.pools[tg.Pool] == nil {
					return model.Invalid("exception %s: unknown pool %q", x.Name, tg.Pool)
				}
				text = fmt.Sprintf("pool %s exception %q%s", tg.Pool, x.Name, kind)
			case tg.Host != "":
				if c.e.hosts[tg.Host] == nil {
					return model.Invalid("exception %s: unknown host %q", x.Name, tg.Host)
				}
				text = fmt.Sprintf("host %s exception %q%s", tg.Host, x.Name, kind)
			default:
				return model.Invalid("exception %s: empty target", x.Name)
			}
			k := key{tg, ps}
			list, seen := byTarget[k]
			if !seen {
				targets = append(targets, k)
			}
			if len(list) > 0 && list[len(list)-1].x == x {
				continue // target listed twice: the same exception, not an overlap
			}
			byTarget[k] = append(list, entry{x, span{start: x.Start, end: x.End, mode: m, text: text, kind: x.Kind}})
		}
	}
	for _, k := range targets {
		tg, list := k.tg, byTarget[k]
		sort.SliceStable(list, func(a, b int) bool { return list[a].s.start.Before(list[b].s.start) })
		owner := "host " + tg.Host
		if tg.Pool != "" {
			owner = "pool " + tg.Pool
		}
		// Sorted by start, and free of overlaps up to k-1, spans overlap iff one starts
		// before its predecessor ends.
		spans := make([]span, len(list))
		for k := range list {
			spans[k] = list[k].s
			if k > 0 && list[k].s.start.Before(list[k-1].s.end) {
				to := list[k].s.end
				if list[k-1].s.end.Before(to) {
					to = list[k-1].s.end
				}
				const f = "2006-01-02 15:04 MST"
				return model.Conflict("%s: exceptions %q and %q overlap from %s to %s", owner, list[k-1].x.Name, list[k].x.Name,
					list[k].s.start.In(loc).Format(f), to.In(loc).Format(f))
			}
		}
		if tg.Pool != "" {
			c.pools[tg.Pool].sched.exc = spans
			continue
		}
		hs := c.e.hosts[tg.Host]
		if hs == hs.pool.plain {
			hs = &hostSched{table: hs.table, pool: hs.pool}
			c.e.hosts[tg.Host] = hs
		}
		if k.powerSave {
			hs.powerSave = spans
			continue
		}
		hs.exc = spans
	}
	return nil
}
