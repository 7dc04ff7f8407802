package hostlist

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		name  string
		exprs []string
		want  []string
	}{
		{"none", nil, nil},
		{"single", []string{"desk1"}, []string{"desk1"}},
		{"slurm example", []string{"pc[01-03,07],desk1,lab-b[1-2]"},
			[]string{"pc01", "pc02", "pc03", "pc07", "desk1", "lab-b1", "lab-b2"}},
		{"padding kept across width change", []string{"pc[08-10]"}, []string{"pc08", "pc09", "pc10"}},
		{"no padding", []string{"pc[8-10]"}, []string{"pc8", "pc9", "pc10"}},
		{"padding from lower bound only", []string{"n[1-03]"}, []string{"n1", "n2", "n3"}},
		{"single number", []string{"pc[5]"}, []string{"pc5"}},
		{"padded single number", []string{"pc[005]"}, []string{"pc005"}},
		{"mixed", []string{"n[1,3-4]"}, []string{"n1", "n3", "n4"}},
		{"zero", []string{"n[0-1]"}, []string{"n0", "n1"}},
		{"suffix", []string{"n[1-2]-ib"}, []string{"n1-ib", "n2-ib"}},
		{"bracket only", []string{"[1-2]"}, []string{"1", "2"}},
		{"two groups, last fastest", []string{"r[1-2]n[1-2]"},
			[]string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"three groups", []string{"a[1-2]b[3]c[4-5]"},
			[]string{"a1b3c4", "a1b3c5", "a2b3c4", "a2b3c5"}},
		{"adjacent groups", []string{"x[1-2][7,9]"}, []string{"x17", "x19", "x27", "x29"}},
		{"several arguments", []string{"a[1-2]", "b", "c[3]"}, []string{"a1", "a2", "b", "c3"}},
		{"duplicates removed, first kept", []string{"b,a[1-3],a2", "b,a1"},
			[]string{"b", "a1", "a2", "a3"}},
		{"overlapping ranges", []string{"n[1-3,2-4]"}, []string{"n1", "n2", "n3", "n4"}},
		{"spaces separate", []string{"a b\tc\nd"}, []string{"a", "b", "c", "d"}},
		{"space after comma", []string{"a, b ,c"}, []string{"a", "b", "c"}},
		{"surrounding space", []string{"  pc[1-2]  "}, []string{"pc1", "pc2"}},
		{"space and brackets", []string{"pc[1,3] lab[2]"}, []string{"pc1", "pc3", "lab2"}},
		{"exactly at MaxBound", []string{"n[10000000]"}, []string{"n10000000"}},
		{"unicode name", []string{"nœud[1-2]"}, []string{"nœud1", "nœud2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.exprs...)
			if err != nil {
				t.Fatalf("Expand(%q): %v", tt.exprs, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Expand(%q) = %q, want %q", tt.exprs, got, tt.want)
			}
		})
	}
}

func TestExpandErrors(t *testing.T) {
	tests := []struct {
		name  string
		exprs []string
		want  string // substring of the error message
	}{
		{"empty argument", []string{""}, `"": empty host name`},
		{"blank argument", []string{"  "}, "empty host name"},
		{"double comma", []string{"a,,b"}, `"a,,b": empty host name`},
		{"blank between commas", []string{"a, ,b"}, "empty host name"},
		{"leading comma", []string{",a"}, "empty host name"},
		{"trailing comma", []string{"a,"}, "empty host name"},
		{"unclosed", []string{"pc[1-3"}, `"pc[1-3": unbalanced '['`},
		{"unclosed after comma", []string{"pc[1,3"}, `"pc[1,3": unbalanced '['`},
		{"stray close", []string{"pc1-3]"}, `"pc1-3]": unbalanced ']'`},
		{"close before open", []string{"pc]1["}, "unbalanced ']'"},
		{"trailing close", []string{"pc[1]]"}, "unbalanced ']'"},
		{"nested", []string{"pc[1[2]]"}, `"pc[1[2]]": nested '['`},
		{"empty brackets", []string{"pc[]"}, `"pc[]": empty brackets`},
		{"empty element", []string{"pc[1,,2]"}, "missing number"},
		{"trailing comma in group", []string{"pc[1,]"}, "missing number"},
		{"missing lower bound", []string{"pc[-3]"}, "missing number"},
		{"missing upper bound", []string{"pc[3-]"}, "missing number"},
		{"reversed range", []string{"pc[5-3]"}, `"pc[5-3]": bad range "5-3": upper bound below lower bound`},
		{"letters", []string{"pc[a-c]"}, `"a" is not a number`},
		{"letter upper bound", []string{"pc[1-x]"}, `"x" is not a number`},
		{"negative", []string{"pc[1--3]"}, "not a number"},
		{"double range", []string{"pc[1-2-3]"}, `"2-3" is not a number`},
		{"sign", []string{"pc[+1]"}, "not a number"},
		{"space in brackets", []string{"pc[1, 2]"}, "not a number"},
		{"bound too large", []string{"pc[1-10000001]"}, "exceeds 10000000"},
		{"huge bound", []string{"pc[99999999999999999999]"}, "more than 16 digits"},
		{"too many digits", []string{"pc[00000000000000001]"}, "more than 16 digits"},
		{"expansion too large", []string{"pc[0-99999999]"}, "exceeds 10000000"},
		{"single range over limit", []string{"pc[0-100000]"}, "expansion exceeds 100000 names"},
		{"product over limit", []string{"r[1-1000]n[1-1000]"}, `"r[1-1000]n[1-1000]": expansion exceeds 100000 names`},
		{"elements over limit", []string{"pc[0-60000,0-60000]"}, "expansion exceeds 100000 names"},
		{"total over limit", []string{"a[1-60000]", "b[1-60000]"}, `"b[1-60000]": expansion exceeds 100000 names`},
		{"plain name past limit", []string{"a[1-100000]", "b"}, `"b": expansion exceeds`},
		{"error in later argument", []string{"ok[1-2]", "bad[2-1]"}, `"bad[2-1]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.exprs...)
			if err == nil {
				t.Fatalf("Expand(%q) = %q, want error containing %q", tt.exprs, got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Expand(%q) error = %q, want it to contain %q", tt.exprs, err, tt.want)
			}
			if got != nil {
				t.Errorf("Expand(%q) returned names %q along with an error", tt.exprs, got)
			}
		})
	}
}

// TestExpandAtLimit checks that exactly MaxNames names is allowed, so the guard is an
// upper bound rather than an off-by-one.
func TestExpandAtLimit(t *testing.T) {
	got, err := Expand("n[1-100000]")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxNames || got[0] != "n1" || got[MaxNames-1] != "n100000" {
		t.Errorf("got %d names, first %q last %q", len(got), got[0], got[len(got)-1])
	}
}

func FuzzExpand(f *testing.F) {
	for _, seed := range []string{
		"pc[01-03,07],desk1,lab-b[1-2]",
		"r[1-2]n[1-2]",
		"a b,c",
		"pc[0-99999999]",
		"pc[1[2]]",
		"x[1-2][3-4]y",
		"a,,b",
		"]",
		"n[1-3,2-4] m",
		"\xc2\x85a[1]\xc2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := Expand(expr)
		if err != nil {
			if names != nil {
				t.Fatalf("Expand(%q) returned names and error %v", expr, err)
			}
			return
		}
		if len(names) > MaxNames {
			t.Fatalf("Expand(%q) returned %d names", expr, len(names))
		}
		seen := make(map[string]bool, len(names))
		for _, name := range names {
			if name == "" {
				t.Fatalf("Expand(%q) returned an empty name", expr)
			}
			if strings.ContainsAny(name, "[],") || strings.ContainsFunc(name, unicode.IsSpace) {
				t.Fatalf("Expand(%q) returned bad name %q", expr, name)
			}
			if seen[name] {
				t.Fatalf("Expand(%q) returned %q twice", expr, name)
			}
			seen[name] = true
		}
	})
}
