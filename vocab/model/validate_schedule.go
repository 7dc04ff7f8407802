package model

import (
	"time"

	"github.com/overtime-hpc/overtime/vocab/names"
)

// MaxExamAllow bounds an exam's allow list: the exam's servers, not a copy of the
// internet (each entry is a rule on every PC of the exam, and a name a DNS lookup when
// the exam starts).
const MaxExamAllow = 32

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
	return validateExamAllow(e)
}

// validateExamAllow checks an exam's allow list: each entry an endpoint that parses
// (names.ParseEndpoint), none twice, at most MaxExamAllow; other kinds have none (the
// network is limited only during exams, so an allow list elsewhere would mean nothing).
func validateExamAllow(e *Exception) error {
	if len(e.Allow) == 0 {
		return nil
	}
	if e.Kind != ExceptionExam {
		return invalid("exception %s: allow: only exceptions of kind exam limit the network (this one is %s)", e.Name, e.Kind)
	}
	if len(e.Allow) > MaxExamAllow {
		return invalid("exception %s: allow: %d entries, at most %d (give networks rather than single addresses)", e.Name, len(e.Allow), MaxExamAllow)
	}
	seen := map[names.Endpoint]int{}
	for i, a := range e.Allow {
		ep, err := names.ParseEndpoint(a)
		if err != nil {
			return invalid("exception %s: allow[%d]: %v", e.Name, i, err)
		}
		if j, dup := seen[ep]; dup {
			return invalid("exception %s: allow[%d]: %q is allow[%d] again", e.Name, i, a, j)
		}
		seen[ep] = i
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
