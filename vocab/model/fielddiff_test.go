package model

import (
	"reflect"
	"strings"
	"testing"
)

func TestFieldDiff(t *testing.T) {
	cur := &Site{Name: "s", Timezone: "Europe/Berlin", DefaultMode: "desktop",
		Pools: []Pool{{Name: "lab", Room: "0.12", Weekly: []string{"mon 08:00-10:00 desktop"}}},
		Hosts: []Host{{Name: "pc1", MAC: "52:54:00:00:00:01", Pool: "lab"}}}
	next := cur.Clone()
	next.Pools[0].Room = "0.14 <east>"
	next.Pools[0].Weekly = []string{"mon 08:00-12:00 desktop"}
	next.Pools[0].RuleOwners = RuleOwners{"mon 08:00-12:00 desktop": "alice"}
	next.Hosts = append(next.Hosts, Host{Name: "pc2", MAC: "52:54:00:00:00:02", IP: "10.0.0.2", Pool: "lab"})
	next.Hosts = next.Hosts[1:] // pc1 deleted
	for _, tc := range []struct {
		c    Change
		want []string
	}{
		{Change{Op: OpModify, Kind: EntityPool, Name: "lab", Fields: []string{"room", "weekly"}}, []string{
			`room: "0.12" → "0.14 <east>"`,
			`weekly: − "mon 08:00-10:00 desktop"; + "mon 08:00-12:00 desktop" (booked by alice)`}},
		{Change{Op: OpAdd, Kind: EntityHost, Name: "pc2"}, []string{`ip: "10.0.0.2"`, `mac: "52:54:00:00:00:02"`, `pool: "lab"`}},
		{Change{Op: OpDelete, Kind: EntityHost, Name: "pc1"}, []string{`mac: "52:54:00:00:00:01"`, `pool: "lab"`}},
		{Change{Op: OpModify, Kind: EntityPool, Name: "nope", Fields: []string{"room"}}, []string{`room: — → —`}},
	} {
		if got := FieldDiff(cur, next, tc.c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.c, got, tc.want)
		}
	}
	// Long values are cut, at a character boundary.
	next.Pools[0].Description = "ü" + strings.Repeat("é", 200)
	got := FieldDiff(cur, next, Change{Op: OpModify, Kind: EntityPool, Name: "lab", Fields: []string{"description"}})
	if len(got) != 1 || len(got[0]) > len("description: — → ")+maxDiffValue+len("…") || got[0][len(got[0])-len("…"):] != "…" {
		t.Errorf("long value not cut: %q", got)
	}
}
