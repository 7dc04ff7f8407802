package model

import "sort"

// validateOwners checks the ownership records of bookings (RuleOwners, Exception.Owner):
// every owned rule is one of the entity's rules, and owners are user ids.
func (s *Site) validateOwners() error {
	check := func(what string, rules []string, owners RuleOwners) error {
		keys := make([]string, 0, len(owners))
		for r := range owners {
			keys = append(keys, r)
		}
		sort.Strings(keys)
		for _, r := range keys {
			if !oneOf(r, rules) {
				return invalid("%s: ruleOwners names rule %q, which is not one of its weekly rules", what, r)
			}
			if err := ValidUID(owners[r]); err != nil {
				return invalid("%s: owner of rule %q: %v", what, r, err)
			}
		}
		return nil
	}
	for _, p := range s.Pools {
		if err := check("pool "+p.Name, p.Weekly, p.RuleOwners); err != nil {
			return err
		}
	}
	for _, h := range s.Hosts {
		if err := check("host "+h.Name, h.Weekly, h.RuleOwners); err != nil {
			return err
		}
	}
	for _, e := range s.Exceptions {
		if e.Owner != "" {
			if err := ValidUID(e.Owner); err != nil {
				return invalid("exception %s: owner: %v", e.Name, err)
			}
		}
	}
	return nil
}

// MergeBookings carries over into next (a site read from a site file) every booking of
// cur that the file does not mention: exceptions that have an owner, and owned weekly
// rules of pools and hosts that next still has. Power-save exceptions count as bookings
// too: Slurm's power saving makes and removes them (`overtime slurm resume|suspend`).
// What the file declares wins: an exception or rule of the same name or text is taken
// as the file gives it, owner included. So `site apply` deletes only what the site file
// manages.
func MergeBookings(cur, next *Site) {
	for _, e := range cur.Exceptions {
		if (e.Owner != "" || e.Kind == ExceptionPowerSave) && next.Exception(e.Name) == nil {
			e.Targets = append([]Target(nil), e.Targets...)
			next.Exceptions = append(next.Exceptions, e)
		}
	}
	keep := func(curRules []string, curOwners RuleOwners, rules *[]string, owners *RuleOwners) {
		for _, r := range curRules {
			o, booked := curOwners[r]
			if !booked || oneOf(r, *rules) {
				continue
			}
			*rules = append(*rules, r)
			if *owners == nil {
				*owners = RuleOwners{}
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

// StampRuleOwners records who booked the rules an API write adds to a pool's or host's
// list: rules already in old keep their owner (or stay managed by the site file), new
// ones belong to uid. Owners a client sends are ignored: ownership is the server's record.
func StampRuleOwners(oldRules []string, oldOwners RuleOwners, rules []string, uid string) RuleOwners {
	var out RuleOwners
	for _, r := range rules {
		o, had := oldOwners[r]
		if !had && !oneOf(r, oldRules) {
			o = uid
		}
		if o == "" {
			continue
		}
		if out == nil {
			out = RuleOwners{}
		}
		out[r] = o
	}
	return out
}

// DuplicateRule reports a rule given twice in one list, as the refusal a user should
// see: "already exists" when old had it (the rule was added again), otherwise "twice".
func DuplicateRule(what string, oldRules, rules []string) error {
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r] {
			if oneOf(r, oldRules) {
				return conflict("rule %q already exists on %s", r, what)
			}
			return conflict("rule %q is given twice for %s", r, what)
		}
		seen[r] = true
	}
	return nil
}

// BookRules is what an API write of a pool's or host's weekly rules (what: "pool lab-b")
// means for their owners: a rule given twice is refused (DuplicateRule), the rules the
// write adds are booked by uid, the others keep their owners (StampRuleOwners).
func BookRules(what string, oldRules []string, oldOwners RuleOwners, rules []string, uid string) (RuleOwners, error) {
	if err := DuplicateRule(what, oldRules, rules); err != nil {
		return nil, err
	}
	return StampRuleOwners(oldRules, oldOwners, rules, uid), nil
}
