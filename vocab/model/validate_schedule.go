package model

import "time"

// The validators of the schedule's exceptions (see Site.Validate for their order).

// validateExceptions checks every exception: its fields, mode, time slots and targets.
func (s *Site) validateExceptions(ix *siteIndex) error {
	exc := map[string]bool{}
	for i := range s.Exceptions {
		e := &s.Exceptions[i]
		if err := ValidName("exception", e.Name); err != nil {
			return err
		}
		if exc[e.Name] {
			return conflict("duplicate exception %q", e.Name)
		}
		exc[e.Name] = true
		if err := validateException(e, ix); err != nil {
			return err
		}
		if err := validateExceptionTargets(e, ix); err != nil {
			return err
		}
	}
	return nil
}

// validateException checks an exception's kind, description and mode, and that it spans
// a positive time on the 10-minute grid of the site's time zone.
func validateException(e *Exception, ix *siteIndex) error {
	if !oneOf(e.Kind, ExceptionKinds) {
		return invalid("exception %s: unknown kind %q (use one of %v)", e.Name, e.Kind, ExceptionKinds)
	}
	if err := validText("exception description", e.Description); err != nil {
		return err
	}
	if ix.modes[e.Mode] == nil {
		return invalid("exception %s: unknown mode %q", e.Name, e.Mode)
	}
	if err := ValidateSlotTime("exception "+e.Name+" start", e.Start, ix.loc); err != nil {
		return err
	}
	if err := ValidateSlotTime("exception "+e.Name+" end", e.End, ix.loc); err != nil {
		return err
	}
	if !e.End.After(e.Start) {
		return invalid("exception %s: end %s is not after start %s", e.Name, e.End.Format(time.RFC3339), e.Start.Format(time.RFC3339))
	}
	return nil
}

// validateExceptionTargets checks that an exception has targets, each one pool or one
// host of the site.
func validateExceptionTargets(e *Exception, ix *siteIndex) error {
	if len(e.Targets) == 0 {
		return invalid("exception %s: no targets (give pools or hosts)", e.Name)
	}
	for _, t := range e.Targets {
		switch {
		case t.Pool != "" && t.Host != "":
			return invalid("exception %s: a target is a pool or a host, not both", e.Name)
		case t.Pool != "":
			if !ix.pools[t.Pool] {
				return invalid("exception %s: unknown pool %q", e.Name, t.Pool)
			}
		case t.Host != "":
			if !ix.hosts[t.Host] {
				return invalid("exception %s: unknown host %q", e.Name, t.Host)
			}
		default:
			return invalid("exception %s: empty target", e.Name)
		}
	}
	return nil
}
