package schedule

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func days(ds ...int) (d [7]bool) {
	for _, i := range ds {
		d[i] = true
	}
	return d
}

func TestParseRuleValid(t *testing.T) {
	all := days(0, 1, 2, 3, 4, 5, 6)
	tests := []struct {
		in   string
		want Rule
	}{
		{"mon-fri 08:00-18:00 desktop", Rule{Text: "mon-fri 08:00-18:00 desktop", Days: days(0, 1, 2, 3, 4), Start: 480, End: 1080, Mode: "desktop"}},
		{"sat,sun 00:00-24:00 cluster", Rule{Text: "sat,sun 00:00-24:00 cluster", Days: days(5, 6), Start: 0, End: 1440, Mode: "cluster"}},
		{"mon-fri 18:00-08:00 cluster", Rule{Text: "mon-fri 18:00-08:00 cluster", Days: days(0, 1, 2, 3, 4), Start: 1080, End: 480, Mode: "cluster"}},
		{"daily 22:00-06:00 cluster", Rule{Text: "daily 22:00-06:00 cluster", Days: all, Start: 1320, End: 360, Mode: "cluster"}},
		{"wed 10:00-12:00 course-bio101", Rule{Text: "wed 10:00-12:00 course-bio101", Days: days(2), Start: 600, End: 720, Mode: "course-bio101"}},
		{"fri-mon 06:00-07:00 m", Rule{Text: "fri-mon 06:00-07:00 m", Days: days(4, 5, 6, 0), Start: 360, End: 420, Mode: "m"}},
		{"  MON,Wed,FRI \t 07:30-07:40   x.y_z ", Rule{Text: "mon,wed,fri 07:30-07:40 x.y_z", Days: days(0, 2, 4), Start: 450, End: 460, Mode: "x.y_z"}},
		{"mon-sun 00:00-24:00 a", Rule{Text: "daily 00:00-24:00 a", Days: all, Start: 0, End: 1440, Mode: "a"}},
		{"sun-sat 01:00-02:00 a", Rule{Text: "daily 01:00-02:00 a", Days: all, Start: 60, End: 120, Mode: "a"}},
		{"mon,tue,wed 8:00-9:00 a", Rule{Text: "mon-wed 08:00-09:00 a", Days: days(0, 1, 2), Start: 480, End: 540, Mode: "a"}},
		{"sun,mon 23:50-00:10 a", Rule{Text: "sun,mon 23:50-00:10 a", Days: days(6, 0), Start: 1430, End: 10, Mode: "a"}},
		{"sun,mon,wed 10:00-00:00 a", Rule{Text: "sun,mon,wed 10:00-24:00 a", Days: days(6, 0, 2), Start: 600, End: 1440, Mode: "a"}},
		{"sat-mon,wed 00:00-00:10 a", Rule{Text: "sat-mon,wed 00:00-00:10 a", Days: days(5, 6, 0, 2), Start: 0, End: 10, Mode: "a"}},
		{"tue,tue,mon-tue 23:50-24:00 a", Rule{Text: "mon,tue 23:50-24:00 a", Days: days(0, 1), Start: 1430, End: 1440, Mode: "a"}},
		{"mon 00:10-00:00 a", Rule{Text: "mon 00:10-24:00 a", Days: days(0), Start: 10, End: 1440, Mode: "a"}},
	}
	for _, tc := range tests {
		got, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseRule(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if s := got.String(); s != tc.want.Text {
			t.Errorf("ParseRule(%q).String() = %q, want %q", tc.in, s, tc.want.Text)
		}
		again, err := ParseRule(got.String())
		if err != nil || again != got {
			t.Errorf("round trip of %q: got %+v, %v", got.String(), again, err)
		}
	}
}

func TestRuleStringAllDaySets(t *testing.T) {
	// Every non-empty day set must round-trip through the canonical form.
	for mask := 1; mask < 1<<7; mask++ {
		var r Rule
		for d := 0; d < 7; d++ {
			r.Days[d] = mask&(1<<d) != 0
		}
		r.Start, r.End, r.Mode = 600, 60, "m"
		r.Text = r.String()
		got, err := ParseRule(r.Text)
		if err != nil || got != r {
			t.Fatalf("mask %07b: %q parsed to %+v, %v", mask, r.Text, got, err)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	tests := []struct {
		in, want string // want: substring of the error
	}{
		{"mon 08:05-10:00 desktop", "not a multiple of 10 minutes"},
		{"mon 08:00-10:15 desktop", "not a multiple of 10 minutes"},
		{"mon 25:00-26:00 desktop", "invalid time \"25:00\""},
		{"mon 08:00-24:10 desktop", "invalid time \"24:10\""},
		{"mon 08:60-09:00 desktop", "invalid time \"08:60\""},
		{"mon 24:00-06:00 desktop", "24:00 is allowed only as an end time"},
		{"mon 08:00-08:00 desktop", "start and end are both"},
		{"mon 00:00-00:00 desktop", "start and end are both"},
		{"mon 00:00-24:00x desktop", "expected HH:MM"},
		{"mon 0800-1000 desktop", "invalid time \"0800\": expected HH:MM"},
		{"mon 08:00-09:00-10:00 desktop", "expected a time range"},
		{"mon 8-9 desktop", "expected HH:MM"},
		{"mon 008:00-09:00 desktop", "expected HH:MM"},
		{"mon -1:00-09:00 desktop", "expected a time range"},
		{"mon +1:00-09:00 desktop", "expected HH:MM"},
		{"mon 08:0-09:00 desktop", "expected HH:MM"},
		{"funday 08:00-09:00 desktop", "unknown day \"funday\""},
		{"monday 08:00-09:00 desktop", "unknown day"},
		{"mon-xyz 08:00-09:00 desktop", "unknown day \"xyz\""},
		{"mon,,tue 08:00-09:00 desktop", "unknown day \"\""},
		{"mon, 08:00-09:00 desktop", "unknown day \"\""},
		{"mon-mon 08:00-09:00 desktop", "ambiguous"},
		{"daily,mon 08:00-09:00 desktop", "cannot be combined"},
		{"mon-tue-wed 08:00-09:00 desktop", "unknown day"},
		{"mon 08:00-09:00 Desktop", "invalid mode name"},
		{`mon 08:00-09:00 "desktop"`, "invalid mode name"},
		{"mon 08:00-09:00 desk'top", "invalid mode name"},
		{"mon 08:00-09:00 desk\ntop", "control character"},
		{"mon 08:00-09:00 desktop\n", "control character"},
		{"mon 08:00-09:00 -desktop", "invalid mode name"},
		{"mon 08:00-09:00 a..b", "invalid mode name"},
		{"mon 08:00-09:00 " + strings.Repeat("a", 64), "invalid mode name"},
		{"mon 08:00-09:00 dösk", "invalid mode name"},
		{"", "expected three fields"},
		{"   ", "expected three fields"},
		{"mon", "expected three fields"},
		{"mon 08:00-09:00", "expected three fields"},
		{"mon 08:00-09:00 desktop extra", "expected three fields"},
		{"mon 08:00-09:00 desktop # comment", "expected three fields"},
		{"mon 08:00 - 09:00 desktop", "expected three fields"},
		{strings.Repeat("mon,", 100) + "mon 08:00-09:00 desktop", "longer than"},
	}
	for _, tc := range tests {
		_, err := ParseRule(tc.in)
		if err == nil {
			t.Errorf("ParseRule(%q): no error, want %q", tc.in, tc.want)
			continue
		}
		var ie *model.InvalidError
		if !errors.As(err, &ie) || ie.Conflict {
			t.Errorf("ParseRule(%q): error %T %v, want a non-conflict *model.InvalidError", tc.in, err, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("ParseRule(%q) = %q, want it to contain %q", tc.in, msg, tc.want)
		}
		if strings.ContainsAny(msg, "\n\r") {
			t.Errorf("ParseRule(%q): error is not one line: %q", tc.in, msg)
		}
		if len(tc.in) <= maxRuleLen && !strings.Contains(msg, strings.Trim(strconv.Quote(tc.in), `"`)) {
			t.Errorf("ParseRule(%q) = %q, does not quote the rule", tc.in, msg)
		}
	}
}
