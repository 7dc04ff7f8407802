package schedule

import (
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
)

const (
	slotMinutes  = 10
	slotsPerDay  = 24 * 60 / slotMinutes
	slotsPerWeek = 7 * slotsPerDay // 1008
	maxRuleLen   = 256             // keeps error messages (which quote the rule) one short line
)

var dayNames = [7]string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}

// Rule is one parsed weekly rule, e.g. "mon-fri 08:00-18:00 desktop".
type Rule struct {
	Text  string  // canonical form, from String()
	Days  [7]bool // index 0 = Monday ... 6 = Sunday
	Start int     // minutes since midnight, multiple of 10, 0..1430
	End   int     // minutes, 10..1440; End <= Start means it wraps past midnight
	Mode  string
}

// ParseRule parses "DAYS HH:MM-HH:MM MODE". Day names are case-insensitive; days are a
// comma list of names and (possibly wrapping) ranges, or "daily". An end at or before
// the start runs past midnight and belongs to the start day. An end of 00:00 is stored
// as 24:00 (1440): both mean "until midnight", and one representation keeps equal
// rules equal.
func ParseRule(s string) (Rule, error) {
	if len(s) > maxRuleLen {
		return Rule{}, model.Invalid("invalid weekly rule %q...: longer than %d bytes", s[:40], maxRuleLen)
	}
	bad := func(format string, a ...any) error {
		return model.Invalid("invalid weekly rule %q: "+format, append([]any{s}, a...)...)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return Rule{}, bad("control character in rule")
		}
	}
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(f) != 3 {
		return Rule{}, bad("expected three fields DAYS HH:MM-HH:MM MODE, e.g. \"mon-fri 08:00-18:00 desktop\", got %d", len(f))
	}
	var r Rule
	var err error
	if r.Days, err = parseDays(strings.ToLower(f[0])); err != nil {
		return Rule{}, bad("%v", err)
	}
	from, to, ok := strings.Cut(f[1], "-")
	if !ok || strings.Contains(to, "-") {
		return Rule{}, bad("expected a time range HH:MM-HH:MM, got %q", f[1])
	}
	if r.Start, err = parseClock(from); err != nil {
		return Rule{}, bad("%v", err)
	}
	if r.End, err = parseClock(to); err != nil {
		return Rule{}, bad("%v", err)
	}
	if r.Start == 24*60 {
		return Rule{}, bad("24:00 is allowed only as an end time")
	}
	if r.Start == r.End {
		return Rule{}, bad("start and end are both %s; a slot must not be empty (00:00-24:00 is the whole day)", from)
	}
	if r.End == 0 {
		r.End = 24 * 60
	}
	if err := model.ValidName("mode", f[2]); err != nil {
		return Rule{}, bad("%v", err)
	}
	r.Mode = f[2]
	r.Text = r.String()
	return r, nil
}

func dayIndex(s string) (int, bool) {
	for i, n := range dayNames {
		if s == n {
			return i, true
		}
	}
	return 0, false
}

func parseDays(s string) (days [7]bool, err error) {
	if s == "daily" {
		for i := range days {
			days[i] = true
		}
		return days, nil
	}
	for _, item := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(item, "-")
		i, ok := dayIndex(a)
		if !ok {
			if item == "daily" {
				return days, model.Invalid("\"daily\" cannot be combined with other days")
			}
			return days, model.Invalid("unknown day %q (use mon tue wed thu fri sat sun, ranges like mon-fri, or daily)", item)
		}
		if !isRange {
			days[i] = true
			continue
		}
		j, ok := dayIndex(b)
		if !ok {
			return days, model.Invalid("unknown day %q in range %q (use mon tue wed thu fri sat sun)", b, item)
		}
		if i == j {
			return days, model.Invalid("day range %q is ambiguous; write %q for one day or \"daily\"", item, a)
		}
		for d := i; ; d = (d + 1) % 7 {
			days[d] = true
			if d == j {
				break
			}
		}
	}
	return days, nil
}

// parseClock parses H:MM or HH:MM (00:00..24:00) into minutes since midnight.
func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return 0, model.Invalid("invalid time %q: expected HH:MM", s)
	}
	hh := atoi(h)
	mm := atoi(m)
	if hh > 24 || mm > 59 || (hh == 24 && mm != 0) {
		return 0, model.Invalid("invalid time %q: expected 00:00 to 24:00", s)
	}
	if mm%slotMinutes != 0 {
		return 0, model.Invalid("time %q is not a multiple of 10 minutes (use :00, :10, ... :50)", s)
	}
	return hh*60 + mm, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// String gives the canonical form: lower case, days as compact ranges ("mon-fri",
// "mon,wed,fri", "fri-mon", "daily"), times as HH:MM. ParseRule(r.String()) == r, so
// the canonical text can be stored and compared instead of the user's spelling.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(daysString(r.Days))
	b.WriteByte(' ')
	b.WriteString(clock(r.Start))
	b.WriteByte('-')
	b.WriteString(clock(r.End))
	b.WriteByte(' ')
	b.WriteString(r.Mode)
	return b.String()
}

func clock(min int) string {
	h, m := min/60, min%60
	return string([]byte{byte('0' + h/10%10), byte('0' + h%10), ':', byte('0' + m/10%10), byte('0' + m%10)})
}

// daysString writes runs of three or more days as ranges and shorter runs as lists. A
// run over the week end (e.g. fri-mon) stays one range and comes first.
func daysString(days [7]bool) string {
	n := 0
	for _, d := range days {
		if d {
			n++
		}
	}
	if n == 7 {
		return "daily"
	}
	var parts []string
	emit := func(start int) {
		l := 0
		for days[(start+l)%7] {
			l++
		}
		end := (start + l - 1) % 7
		switch l {
		case 1:
			parts = append(parts, dayNames[start])
		case 2:
			parts = append(parts, dayNames[start], dayNames[end])
		default:
			parts = append(parts, dayNames[start]+"-"+dayNames[end])
		}
	}
	wrapStart := -1
	if days[6] && days[0] {
		wrapStart = 6
		for wrapStart > 1 && days[wrapStart-1] {
			wrapStart--
		}
		emit(wrapStart)
	}
	for d := 0; d < 7; d++ {
		if days[d] && !days[(d+6)%7] && d != wrapStart {
			emit(d)
		}
	}
	return strings.Join(parts, ",")
}

// length is the number of 10-minute slots the rule covers on each of its days.
func (r Rule) length() int {
	if r.End > r.Start {
		return (r.End - r.Start) / slotMinutes
	}
	return (24*60 - r.Start + r.End) / slotMinutes
}

// eachSlot calls f with every week slot (0 = Monday 00:00) the rule covers, day by day
// in week order and in time order within a day, so that the first overlap found is the
// earliest one a reader would look for.
func (r Rule) eachSlot(f func(slot int) bool) {
	n := r.length()
	if r.Start < 0 || r.Start >= 24*60 || n <= 0 || n > slotsPerDay {
		return // not produced by ParseRule
	}
	for d, on := range r.Days {
		if !on {
			continue
		}
		first := d*slotsPerDay + r.Start/slotMinutes
		for k := 0; k < n; k++ {
			if !f((first + k) % slotsPerWeek) {
				return
			}
		}
	}
}

func slotString(slot int) string {
	return dayNames[slot/slotsPerDay] + " " + clock(slot%slotsPerDay*slotMinutes)
}
