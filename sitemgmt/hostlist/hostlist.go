// Package hostlist expands Slurm hostlist expressions such as "pc[01-03,07],desk1,lab-b[1-2]"
// into individual host names. Slurm hands ResumeProgram and SuspendProgram the nodes to act
// on in this compressed form (usually one argument, sometimes several), and the site manager
// has to turn it back into the host names it knows before it can wake or shut down anything.
//
// The accepted syntax is the one-dimensional subset Slurm produces for node names:
//
//   - names are separated by commas at the top level (a comma inside brackets belongs to
//     the bracket group) or by whitespace;
//   - a name may contain any number of bracket groups, e.g. "r[1-2]n[1-2]", expanded as a
//     cartesian product with the last group varying fastest, as Slurm does;
//   - a bracket group is a comma-separated list of numbers ("7") and ranges ("08-10");
//     the lower bound's digit count sets the zero padding of every number the range
//     yields, so "pc[08-10]" gives pc08, pc09, pc10 and "pc[8-10]" gives pc8, pc9, pc10.
package hostlist

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

const (
	// MaxBound is the largest number allowed in a range. Real node numbers are far
	// smaller; the limit turns a typo such as "pc[1-1000000000]" into an error instead of
	// a long expansion, and keeps the arithmetic below free of overflow.
	MaxBound = 10_000_000

	// MaxNames caps how many names one call may generate (counted before duplicates are
	// removed, since that is the work done). No site has this many nodes, so a larger
	// expansion is a malformed or hostile argument, e.g. "pc[0-9999999]".
	MaxNames = 100_000

	// maxDigits limits how many digits (leading zeros included) a bound may have.
	maxDigits = 16
)

// Expand expands each hostlist expression and returns the host names in the order they
// appear, keeping only the first occurrence of a name. No arguments yields no names; an
// argument that is empty or holds an empty name (as in "a,,b") is an error, because Slurm
// never produces one and silently skipping it could hide a caller bug.
func Expand(exprs ...string) ([]string, error) {
	var names []string
	seen := make(map[string]bool)
	total := 0
	for _, expr := range exprs {
		for _, piece := range splitTop(expr, func(r rune) bool { return r == ',' }) {
			// Whitespace separates names too; splitting each comma-separated piece
			// rather than the whole argument lets "a, b" mean "a,b" while "a,,b" and
			// "a, ,b" still report the empty name between the commas.
			tokens := splitTop(piece, unicode.IsSpace)
			empty := true
			for _, tok := range tokens {
				if tok == "" {
					continue
				}
				empty = false
				expanded, err := expandName(tok, MaxNames-total)
				if err != nil {
					return nil, err
				}
				total += len(expanded)
				for _, name := range expanded {
					if !seen[name] {
						seen[name] = true
						names = append(names, name)
					}
				}
			}
			if empty {
				return nil, fmt.Errorf("hostlist: %q: empty host name", expr)
			}
		}
	}
	return names, nil
}

// splitTop splits s at runes for which isSep is true, ignoring those inside brackets.
// It only tracks depth loosely; expandName reports unbalanced or nested brackets with
// the offending name, which gives a more useful message than failing here.
func splitTop(s string, isSep func(rune) bool) []string {
	var parts []string
	depth, start := 0, 0
	for i, r := range s {
		switch {
		case r == '[':
			depth++
		case r == ']':
			if depth > 0 {
				depth--
			}
		case depth == 0 && isSep(r):
			parts = append(parts, s[start:i])
			start = i + len(string(r))
		}
	}
	// len(string(r)) is the separator's size in s: separators are valid runes, never
	// the RuneError that stands in for an invalid byte.
	return append(parts, s[start:])
}

// group is one bracket group: the numbers it yields, in order, already formatted.
type group []string

// expandName expands one name (no top-level separators) with at most limit results.
func expandName(name string, limit int) ([]string, error) {
	// Split the name into literal text and bracket groups: lits has one more element
	// than groups, the expansion being lits[0] g[0] lits[1] g[1] ... lits[n].
	var lits []string
	var groups []group
	count := 1
	rest := name
	for {
		open := strings.IndexAny(rest, "[]")
		if open < 0 {
			lits = append(lits, rest)
			break
		}
		if rest[open] == ']' {
			return nil, fmt.Errorf("hostlist: %q: unbalanced ']'", name)
		}
		end := strings.IndexAny(rest[open+1:], "[]")
		if end < 0 {
			return nil, fmt.Errorf("hostlist: %q: unbalanced '['", name)
		}
		end += open + 1
		if rest[end] == '[' {
			return nil, fmt.Errorf("hostlist: %q: nested '['", name)
		}
		g, n, err := parseGroup(rest[open+1 : end])
		if err != nil {
			return nil, fmt.Errorf("hostlist: %q: %w", name, err)
		}
		// Check the size before building anything. count <= MaxNames and
		// n <= MaxBound+1, so the product cannot overflow.
		count *= n
		if count > limit {
			return nil, fmt.Errorf("hostlist: %q: expansion exceeds %d names", name, MaxNames)
		}
		lits = append(lits, rest[:open])
		groups = append(groups, g)
		rest = rest[end+1:]
	}
	if count > limit {
		// Only reachable with a bracket-free name when the budget is already spent.
		return nil, fmt.Errorf("hostlist: %q: expansion exceeds %d names", name, MaxNames)
	}

	// Odometer over the groups, last group fastest, which is Slurm's order:
	// r[1-2]n[1-2] -> r1n1 r1n2 r2n1 r2n2.
	out := make([]string, 0, count)
	idx := make([]int, len(groups))
	var b strings.Builder
	for {
		b.Reset()
		for i, g := range groups {
			b.WriteString(lits[i])
			b.WriteString(g[idx[i]])
		}
		b.WriteString(lits[len(groups)])
		out = append(out, b.String())

		i := len(groups) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(groups[i]) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out, nil
		}
	}
}

// parseGroup parses the inside of a bracket group, e.g. "01-03,07". It returns the
// formatted numbers and their count; the count is checked against MaxNames as the
// elements are read so that "[0-9999999,0-9999999,...]" cannot allocate much.
func parseGroup(s string) (group, int, error) {
	if s == "" {
		return nil, 0, fmt.Errorf("empty brackets")
	}
	type rng struct{ lo, hi, width int }
	var rs []rng
	n := 0
	for _, elem := range strings.Split(s, ",") {
		loStr, hiStr, isRange := strings.Cut(elem, "-")
		lo, err := parseBound(loStr)
		if err != nil {
			return nil, 0, fmt.Errorf("bad range %q: %w", elem, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseBound(hiStr); err != nil {
				return nil, 0, fmt.Errorf("bad range %q: %w", elem, err)
			}
			if hi < lo {
				return nil, 0, fmt.Errorf("bad range %q: upper bound below lower bound", elem)
			}
		}
		n += hi - lo + 1
		if n > MaxNames {
			return nil, 0, fmt.Errorf("expansion exceeds %d names", MaxNames)
		}
		rs = append(rs, rng{lo, hi, len(loStr)})
	}
	g := make(group, 0, n)
	for _, r := range rs {
		for v := r.lo; v <= r.hi; v++ {
			g = append(g, fmt.Sprintf("%0*d", r.width, v))
		}
	}
	return g, n, nil
}

// parseBound parses one bound: ASCII digits only (no sign, no spaces), at most MaxBound
// and at most maxDigits long.
func parseBound(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing number")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	// The digit count is the zero-padding width of every generated name, so an absurd
	// width would multiply into a lot of memory across MaxNames names.
	if len(s) > maxDigits {
		return 0, fmt.Errorf("%q has more than %d digits", s, maxDigits)
	}
	v, err := strconv.Atoi(s)
	if err != nil || v > MaxBound {
		return 0, fmt.Errorf("%s exceeds %d", s, MaxBound)
	}
	return v, nil
}
