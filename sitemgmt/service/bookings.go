package service

// The bookings: weekly rules of a pool or host and dated exceptions, and who booked
// them. Ownership is the server's record (docs/site-file.md): whatever a request body
// says, a rule a write adds belongs to the user who wrote it, a rule the write keeps
// keeps its owner (or stays the site file's), and an exception belongs to whoever
// created it; changing it does not take it over. These operations are the only place
// that records it: the JSON API (collections.go, the site file's PUT) and the web UI
// (the Course VMs page, the schedule editor) call them and decide nothing themselves.
//
// Each operation is one write through update as the principal: authz (p.Check) judges
// the resulting change (a lecturer may only add, change or cancel their own course-vm
// bookings of their pool), the schedule compiler refuses overlapping rules, and the one
// write path audits it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Bookings books, changes and cancels weekly rules and exceptions, recording who owns
// each booking.
type Bookings struct{ s *Service }

// ---- weekly rules ----

// BookRule adds rule (e.g. "wed 10:00-12:00 course-bio101") to the weekly rules of the
// pool or host t names, booked by p. It answers the rule as stored (canonical). A rule
// the list has already is refused (a conflict).
func (b *Bookings) BookRule(ctx context.Context, p authz.Principal, t model.Target, rule string) (string, []model.Change, error) {
	r, err := schedule.ParseRule(rule)
	if err != nil {
		return "", nil, err
	}
	changes, err := b.s.Update(ctx, p.Check, false, func(site *model.Site) error {
		w, o, what, err := targetRules(site, t)
		if err != nil {
			return err
		}
		rules := append(slices.Clone(*w), r.Text)
		owners, err := bookRules(what, *w, *o, rules, p.UID)
		if err != nil {
			return err
		}
		*w, *o = rules, owners
		return nil
	})
	return r.Text, changes, err
}

// ChangeRule replaces the weekly rule old of the pool or host t names by rule, in its
// place. The changed rule is a new booking by p (as a PUT of the rule list that moves a
// rule: authz judges the old rule's removal and the new one's addition). It answers the
// rule as stored.
func (b *Bookings) ChangeRule(ctx context.Context, p authz.Principal, t model.Target, old, rule string) (string, []model.Change, error) {
	r, err := schedule.ParseRule(rule)
	if err != nil {
		return "", nil, err
	}
	changes, err := b.s.Update(ctx, p.Check, false, func(site *model.Site) error {
		w, o, what, err := targetRules(site, t)
		if err != nil {
			return err
		}
		i := slices.Index(*w, old)
		if i < 0 {
			return model.NotFound("weekly rule of "+what, old)
		}
		rules := slices.Clone(*w)
		rules[i] = r.Text
		owners, err := bookRules(what, *w, *o, rules, p.UID)
		if err != nil {
			return err
		}
		*w, *o = rules, owners
		return nil
	})
	return r.Text, changes, err
}

// CancelRule removes p's own booking rule from the weekly rules of the pool or host t
// names. A rule that is not p's booking (the site file's, someone else's, or none) is
// refused as not theirs: what anyone else may remove is removed by writing the rule list
// (PutPool, PutHost, ApplyGrid), which authz judges.
func (b *Bookings) CancelRule(ctx context.Context, p authz.Principal, t model.Target, rule string) ([]model.Change, error) {
	return b.s.Update(ctx, p.Check, false, func(site *model.Site) error {
		w, o, _, err := targetRules(site, t)
		if err != nil || (*o)[rule] != p.UID || !slices.Contains(*w, rule) {
			return &authz.Forbidden{Msg: fmt.Sprintf("you have no booking %q there (only your own bookings can be cancelled here)", rule)}
		}
		rules := slices.DeleteFunc(slices.Clone(*w), func(r string) bool { return r == rule })
		*w, *o = rules, stampRuleOwners(*w, *o, rules, p.UID)
		return nil
	})
}

// ApplyGrid replaces the weekly rules of the pool or host t names with those of g (the
// schedule editor's whole-week save; dryRun: its preview). rev, if not "", is the
// RulesRev of the rule list the editor was loaded with: a save made from a page showing
// other rules than those in force is refused (a conflict) instead of undoing someone's
// change. Ownership is recorded as for a PUT of the rule list (see planGrid).
func (b *Bookings) ApplyGrid(ctx context.Context, p authz.Principal, dryRun bool, t model.Target, g schedule.WeekGrid, rev string) ([]model.Change, error) {
	return b.s.update(ctx, p.Check, dryRun, func(cur *Snapshot, next *model.Site) error {
		w, _, what, err := targetRules(next, t)
		if err != nil {
			return err
		}
		if rev != "" && rev != RulesRev(*w) {
			return model.Conflict("the weekly rules of %s were changed since this page was loaded; reload it and make your change again", what)
		}
		return planGrid(cur.Site, next, p, t, g)
	})
}

// PreviewGrid is the current site with the weekly rules of the pool or host t names
// replaced by those of g as ApplyGrid would save them for p, for a preview of what the
// hosts would boot. Nothing is validated, authorised or written (ApplyGrid's dry run
// does that).
func (b *Bookings) PreviewGrid(p authz.Principal, t model.Target, g schedule.WeekGrid) (*model.Site, error) {
	cur := b.s.Snapshot().Site
	cand := cur.Clone()
	if err := planGrid(cur, cand, p, t, g); err != nil {
		return nil, err
	}
	return cand, nil
}

// planGrid replaces in site the weekly rules of the pool or host t names with those of
// g, recording ownership as an API write by p does. Unless p may change every rule
// there (authz.MayChangeAll, judged on cur), every rule the grid still holds is kept as
// written rather than re-planned, so that a save that adds or removes only p's own
// bookings changes nothing else (authz refuses anything more, naming the rule).
func planGrid(cur, site *model.Site, p authz.Principal, t model.Target, g schedule.WeekGrid) error {
	w, o, what, err := targetRules(site, t)
	if err != nil {
		return err
	}
	kind, name := targetKind(t)
	all := p.MayChangeAll(cur, kind, name, "weekly")
	owners := *o
	rules := schedule.PlanRules(g, *w, func(r string) bool { _, ok := owners[r]; return ok || !all })
	newOwners, err := bookRules(what, *w, owners, rules, p.UID)
	if err != nil {
		return err
	}
	*w, *o = rules, newOwners
	return nil
}

// RulesRev identifies a rule list, so that a save made from a page showing other rules
// than those in force is refused (ApplyGrid's rev).
func RulesRev(rules []string) string {
	h := sha256.Sum256([]byte(strings.Join(rules, "\n")))
	return hex.EncodeToString(h[:8])
}

// ---- exceptions ----

// AddException adds ex, booked by p (Owner is p's uid, whatever ex says). An exception
// of the same name is refused (a conflict).
func (b *Bookings) AddException(ctx context.Context, p authz.Principal, ex model.Exception) ([]model.Change, error) {
	ex.Owner = p.UID
	return b.s.Update(ctx, p.Check, false, func(site *model.Site) error {
		if site.Exception(ex.Name) != nil {
			return model.Conflict("a booking or exception named %q exists already; choose another name", ex.Name)
		}
		site.Exceptions = append(site.Exceptions, ex)
		return nil
	})
}

// CancelException removes p's own booking name (an exception p created). Anyone else's
// exception is refused as not theirs; RemoveException removes any exception authz
// allows.
func (b *Bookings) CancelException(ctx context.Context, p authz.Principal, name string) ([]model.Change, error) {
	return b.s.Update(ctx, p.Check, false, func(site *model.Site) error {
		if e := site.Exception(name); e == nil || e.Owner != p.UID {
			return &authz.Forbidden{Msg: fmt.Sprintf("you have no booking %s (only your own bookings can be cancelled here)", name)}
		}
		site.Exceptions = slices.DeleteFunc(site.Exceptions, func(e model.Exception) bool { return e.Name == name })
		return nil
	})
}

// RemoveException deletes the exception name, as far as authz lets p (a lecturer: only
// their own bookings).
func (b *Bookings) RemoveException(ctx context.Context, p authz.Principal, dryRun bool, name string) ([]model.Change, error) {
	return b.s.Update(ctx, p.Check, dryRun, func(site *model.Site) error {
		if site.Exception(name) == nil {
			return model.NotFound("exception", name)
		}
		site.Exceptions = slices.DeleteFunc(site.Exceptions, func(e model.Exception) bool { return e.Name == name })
		return nil
	})
}

// ---- whole entities (the API's PUT) ----

// PutException creates (created: true) or replaces the exception ex.Name. It belongs to
// whoever created it: p when created, its owner so far when replaced.
func (b *Bookings) PutException(ctx context.Context, p authz.Principal, dryRun bool, ex model.Exception) (created bool, changes []model.Change, err error) {
	return put(b.s, ctx, p, dryRun, func(s *model.Site) *[]model.Exception { return &s.Exceptions }, ex.Name,
		func(e *model.Exception) string { return e.Name }, func(old *model.Exception) error {
			ex.Owner = p.UID
			if old != nil {
				ex.Owner = old.Owner
			}
			return nil
		}, &ex)
}

// PutPool creates or replaces the pool pl.Name, recording the owners of its weekly rules
// (bookRules): the rules the write adds are booked by p, the others keep their owners.
func (b *Bookings) PutPool(ctx context.Context, p authz.Principal, dryRun bool, pl model.Pool) (created bool, changes []model.Change, err error) {
	return put(b.s, ctx, p, dryRun, func(s *model.Site) *[]model.Pool { return &s.Pools }, pl.Name,
		func(v *model.Pool) string { return v.Name }, func(old *model.Pool) (err error) {
			var cur model.Pool // a created pool has no rules yet
			if old != nil {
				cur = *old
			}
			pl.RuleOwners, err = bookRules("pool "+pl.Name, cur.Weekly, cur.RuleOwners, pl.Weekly, p.UID)
			return err
		}, &pl)
}

// PutHost creates or replaces the host h.Name, recording the owners of its weekly rules
// as PutPool does.
func (b *Bookings) PutHost(ctx context.Context, p authz.Principal, dryRun bool, h model.Host) (created bool, changes []model.Change, err error) {
	return put(b.s, ctx, p, dryRun, func(s *model.Site) *[]model.Host { return &s.Hosts }, h.Name,
		func(v *model.Host) string { return v.Name }, func(old *model.Host) (err error) {
			var cur model.Host // a created host has no rules yet
			if old != nil {
				cur = *old
			}
			h.RuleOwners, err = bookRules("host "+h.Name, cur.Weekly, cur.RuleOwners, h.Weekly, p.UID)
			return err
		}, &h)
}

// put creates or replaces the entity named name in the list of site, after own has
// recorded the owners of v's bookings (old: the entity it replaces, nil when created).
func put[T any](s *Service, ctx context.Context, p authz.Principal, dryRun bool, list func(*model.Site) *[]T, name string,
	nameOf func(*T) string, own func(old *T) error, v *T) (created bool, changes []model.Change, err error) {
	changes, err = s.Update(ctx, p.Check, dryRun, func(site *model.Site) error {
		l := list(site)
		i := slices.IndexFunc(*l, func(e T) bool { return nameOf(&e) == name })
		var old *T
		if i >= 0 {
			old = &(*l)[i]
		}
		if err := own(old); err != nil {
			return err
		}
		created = old == nil
		if created {
			*l = append(*l, *v)
		} else {
			(*l)[i] = *v
		}
		return nil
	})
	return created, changes, err
}

// ApplySiteFile replaces what the site file manages with next (declarative apply):
// everything except bookings, the exceptions and weekly rules users booked, which stay
// unless the file names them (mergeBookings). Only the difference is written.
func (b *Bookings) ApplySiteFile(ctx context.Context, p authz.Principal, dryRun bool, next *model.Site) ([]model.Change, error) {
	return b.s.Update(ctx, p.Check, dryRun, func(site *model.Site) error {
		n := next.Clone()
		mergeBookings(site, n)
		*site = *n
		return nil
	})
}

// ---- the ownership rules ----

// targetKind is the entity kind (model.EntityPool, model.EntityHost) and name of the
// pool or host t names.
func targetKind(t model.Target) (kind, name string) {
	if t.Host != "" {
		return model.EntityHost, t.Host
	}
	return model.EntityPool, t.Pool
}

// targetRules are pointers to the weekly rules and their owners of the pool or host t
// names in site, and how messages name it ("pool lab-a").
func targetRules(site *model.Site, t model.Target) (*[]string, *model.RuleOwners, string, error) {
	switch {
	case t.Pool != "" && t.Host == "":
		if p := site.Pool(t.Pool); p != nil {
			return &p.Weekly, &p.RuleOwners, "pool " + p.Name, nil
		}
		return nil, nil, "", model.NotFound("pool", t.Pool)
	case t.Host != "" && t.Pool == "":
		if h := site.Host(t.Host); h != nil {
			return &h.Weekly, &h.RuleOwners, "host " + h.Name, nil
		}
		return nil, nil, "", model.NotFound("host", t.Host)
	}
	return nil, nil, "", model.Invalid("weekly rules belong to one pool or one host, not %+v", t)
}

// mergeBookings carries over into next (a site read from a site file) every booking of
// cur that the file does not mention: exceptions that have an owner, and owned weekly
// rules of pools and hosts that next still has. Power-save exceptions count as bookings
// too: Slurm's power saving makes and removes them (`overtime slurm resume|suspend`).
// What the file declares wins: an exception or rule of the same name or text is taken
// as the file gives it, owner included. So `site apply` deletes only what the site file
// manages.
func mergeBookings(cur, next *model.Site) {
	for _, e := range cur.Exceptions {
		if (e.Owner != "" || e.Kind == model.ExceptionPowerSave) && next.Exception(e.Name) == nil {
			e.Targets = append([]model.Target(nil), e.Targets...)
			next.Exceptions = append(next.Exceptions, e)
		}
	}
	keep := func(curRules []string, curOwners model.RuleOwners, rules *[]string, owners *model.RuleOwners) {
		for _, r := range curRules {
			o, booked := curOwners[r]
			if !booked || slices.Contains(*rules, r) {
				continue
			}
			*rules = append(*rules, r)
			if *owners == nil {
				*owners = model.RuleOwners{}
			}
			(*owners)[r] = o
		}
	}
	for _, p := range cur.Pools {
		if np := next.Pool(p.Name); np != nil {
			keep(p.Weekly, p.RuleOwners, &np.Weekly, &np.RuleOwners)
		}
	}
	for _, h := range cur.Hosts {
		if nh := next.Host(h.Name); nh != nil {
			keep(h.Weekly, h.RuleOwners, &nh.Weekly, &nh.RuleOwners)
		}
	}
}

// stampRuleOwners records who booked the rules a write adds to a pool's or host's list:
// rules already in old keep their owner (or stay managed by the site file), new ones
// belong to uid. Owners a client sends are ignored: ownership is the server's record.
func stampRuleOwners(oldRules []string, oldOwners model.RuleOwners, rules []string, uid string) model.RuleOwners {
	var out model.RuleOwners
	for _, r := range rules {
		o, had := oldOwners[r]
		if !had && !slices.Contains(oldRules, r) {
			o = uid
		}
		if o == "" {
			continue
		}
		if out == nil {
			out = model.RuleOwners{}
		}
		out[r] = o
	}
	return out
}

// duplicateRule reports a rule given twice in one list, as the refusal a user should
// see: "already exists" when old had it (the rule was added again), otherwise "twice".
func duplicateRule(what string, oldRules, rules []string) error {
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r] {
			if slices.Contains(oldRules, r) {
				return model.Conflict("rule %q already exists on %s", r, what)
			}
			return model.Conflict("rule %q is given twice for %s", r, what)
		}
		seen[r] = true
	}
	return nil
}

// bookRules is what a write of a pool's or host's weekly rules (what: "pool lab-b")
// means for their owners: a rule given twice is refused (duplicateRule), the rules the
// write adds are booked by uid, the others keep their owners (stampRuleOwners).
func bookRules(what string, oldRules []string, oldOwners model.RuleOwners, rules []string, uid string) (model.RuleOwners, error) {
	if err := duplicateRule(what, oldRules, rules); err != nil {
		return nil, err
	}
	return stampRuleOwners(oldRules, oldOwners, rules, uid), nil
}
