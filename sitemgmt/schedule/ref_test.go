package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// This file holds a deliberately naive reference evaluator: it knows nothing of week
// tables, zone offsets or segments. It reads the wall clock with t.In(loc), checks every
// rule and exception directly, and finds the next change by stepping minute by minute in
// real time. All zones used in the tests have whole-minute offsets in the years tested,
// so every change happens on a real minute boundary.

type refSite struct {
	site  *model.Site
	loc   *time.Location
	pools map[string][]Rule
	hosts map[string][]Rule
	pool  map[string]string // host -> pool
}

func newRef(t testing.TB, site *model.Site) *refSite {
	t.Helper()
	loc, err := time.LoadLocation(site.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	r := &refSite{site: site, loc: loc, pools: map[string][]Rule{}, hosts: map[string][]Rule{}, pool: map[string]string{}}
	for _, p := range site.Pools {
		for _, s := range p.Weekly {
			rule, err := ParseRule(s)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			r.pools[p.Name] = append(r.pools[p.Name], rule)
		}
	}
	for _, h := range site.Hosts {
		r.pool[h.Name] = h.Pool
		for _, s := range h.Weekly {
			rule, err := ParseRule(s)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			r.hosts[h.Name] = append(r.hosts[h.Name], rule)
		}
	}
	return r
}

// refCovers reports whether rule r applies at weekday dow (0 = Monday) and minute of day.
func refCovers(r Rule, dow, minute int) bool {
	if r.End > r.Start {
		return r.Days[dow] && minute >= r.Start && minute < r.End
	}
	return (r.Days[dow] && minute >= r.Start) || (r.Days[(dow+6)%7] && minute < r.End)
}

func (r *refSite) mode(host string, t time.Time) (string, Level) {
	for _, x := range r.site.Exceptions {
		for _, tg := range x.Targets {
			if tg.Host == host && !t.Before(x.Start) && t.Before(x.End) {
				return x.Mode, LevelHostException
			}
		}
	}
	pool := r.pool[host]
	for _, x := range r.site.Exceptions {
		for _, tg := range x.Targets {
			if tg.Pool == pool && !t.Before(x.Start) && t.Before(x.End) {
				return x.Mode, LevelPoolException
			}
		}
	}
	lt := t.In(r.loc)
	dow := (int(lt.Weekday()) + 6) % 7
	minute := lt.Hour()*60 + lt.Minute()
	for _, rule := range r.hosts[host] {
		if refCovers(rule, dow, minute) {
			return rule.Mode, LevelHostWeekly
		}
	}
	for _, rule := range r.pools[pool] {
		if refCovers(rule, dow, minute) {
			return rule.Mode, LevelPoolWeekly
		}
	}
	return r.site.DefaultMode, LevelSiteDefault
}

// next walks minute by minute up to horizon after t and returns the first instant with
// a different mode, or the zero time.
func (r *refSite) next(host string, t time.Time, horizon time.Duration) (time.Time, string) {
	m0, _ := r.mode(host, t)
	end := t.Add(horizon)
	for u := t.Truncate(time.Minute).Add(time.Minute); !u.After(end); u = u.Add(time.Minute) {
		if m, _ := r.mode(host, u); m != m0 {
			return u, m
		}
	}
	return time.Time{}, ""
}

// overlap is the naive overlap check Compile must agree with.
func (r *refSite) overlap() bool {
	owners := [][]Rule{}
	for _, rs := range r.pools {
		owners = append(owners, rs)
	}
	for _, rs := range r.hosts {
		owners = append(owners, rs)
	}
	for _, rs := range owners {
		for dow := 0; dow < 7; dow++ {
			for minute := 0; minute < 1440; minute += 10 {
				n := 0
				for _, rule := range rs {
					if refCovers(rule, dow, minute) {
						n++
					}
				}
				if n > 1 {
					return true
				}
			}
		}
	}
	type tgt struct{ pool, host string }
	byT := map[tgt][]model.Exception{}
	for _, x := range r.site.Exceptions {
		seen := map[tgt]bool{}
		for _, tg := range x.Targets {
			k := tgt{tg.Pool, tg.Host}
			if !seen[k] {
				seen[k] = true
				byT[k] = append(byT[k], x)
			}
		}
	}
	for _, xs := range byT {
		for i := range xs {
			for j := i + 1; j < len(xs); j++ {
				if xs[i].Start.Before(xs[j].End) && xs[j].Start.Before(xs[i].End) {
					return true
				}
			}
		}
	}
	return false
}

const refHorizon = 14 * 24 * time.Hour

// checkAgainstRef compares the engine with the reference for one host and instant and
// returns a description of the first disagreement, or "".
func checkAgainstRef(e *Engine, r *refSite, h *model.Host, t time.Time) string {
	d := e.AtHost(h, t)
	wantMode, wantLevel := r.mode(h.Name, t)
	if d.Mode != wantMode || d.Level != wantLevel {
		return fmt.Sprintf("host %s at %s: engine %s (%s, %s), reference %s (%s)", h.Name, t.In(r.loc).Format(time.RFC3339Nano), d.Mode, d.Level, d.Rule, wantMode, wantLevel)
	}
	refNext, refMode := r.next(h.Name, t, refHorizon)
	switch {
	case !refNext.IsZero():
		if !d.Next.Equal(refNext) || d.NextMode != refMode {
			return fmt.Sprintf("host %s at %s (mode %s): engine next %s -> %q, reference %s -> %q", h.Name, t.In(r.loc).Format(time.RFC3339Nano), d.Mode,
				fmtT(d.Next, r.loc), d.NextMode, fmtT(refNext, r.loc), refMode)
		}
	case d.Next.IsZero():
		if d.NextMode != "" {
			return fmt.Sprintf("host %s at %s: zero Next with NextMode %q", h.Name, t, d.NextMode)
		}
	default:
		// The engine found a change beyond the horizon: it must be a real change.
		if !d.Next.After(t.Add(refHorizon)) {
			return fmt.Sprintf("host %s at %s: engine next %s inside horizon, reference found none", h.Name, t, fmtT(d.Next, r.loc))
		}
		before, _ := r.mode(h.Name, d.Next.Add(-time.Nanosecond))
		after, _ := r.mode(h.Name, d.Next)
		if before != d.Mode || after != d.NextMode || after == before {
			return fmt.Sprintf("host %s at %s: engine next %s -> %q is not a change (%s -> %s)", h.Name, t, fmtT(d.Next, r.loc), d.NextMode, before, after)
		}
	}
	if !d.Next.IsZero() && d.Next.Location() != e.Location() {
		return fmt.Sprintf("Next %s not in the site's zone", d.Next)
	}
	return ""
}

func fmtT(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "never"
	}
	return t.In(loc).Format(time.RFC3339)
}
