package model

import "sort"

// validateOwners checks the ownership records of bookings (RuleOwners, Exception.Owner):
// every owned rule is one of the entity's rules, and owners are user ids. Who owns a
// booking is decided by the site manager where bookings are made (sitemgmt/service,
// bookings.go); the model only checks the records.
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
