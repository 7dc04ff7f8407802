package sitefile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestParseHostsCSV(t *testing.T) {
	a01 := model.Host{Name: "pc-a01", MAC: "52:54:00:0a:00:01", IP: "10.20.0.11", Pool: "lab-a"}
	a02 := model.Host{Name: "pc-a02", MAC: "52:54:00:0a:00:02", Pool: "lab-a", BootServer: "bs1"}
	a02asWritten := a02
	a02asWritten.MAC = "52-54-00-0A-00-02" // kept as written: service.Update canonicalises
	for _, tc := range []struct {
		name string
		in   string
		want []model.Host
		err  string // substring of the error; "" = success
	}{
		{"fixed columns", "pc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a\npc-a02,52-54-00-0A-00-02,,lab-a,bs1\n", []model.Host{a01, a02asWritten}, ""},
		{"header in the fixed order", "name,mac,ip,pool\npc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a\n", []model.Host{a01}, ""},
		{"header in another order", "Pool,IP,MAC,Name\nlab-a,10.20.0.11,52:54:00:0a:00:01,pc-a01\n", []model.Host{a01}, ""},
		{"header without ip, spelled boot server", "name;boot server;mac;pool\npc-a02;bs1;52:54:00:0a:00:02;lab-a\n", []model.Host{a02}, ""},
		{"semicolons", "pc-a01;52:54:00:0a:00:01;10.20.0.11;lab-a\n", []model.Host{a01}, ""},
		{"tabs", "name\tmac\tip\tpool\npc-a01\t52:54:00:0a:00:01\t10.20.0.11\tlab-a\n", []model.Host{a01}, ""},
		{"BOM and CRLF", "\ufeffname,mac,ip,pool\r\npc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a\r\n", []model.Host{a01}, ""},
		{"quoted fields, spaces, comments", "# exported from the inventory\n\"pc-a01\", \"52:54:00:0a:00:01\",10.20.0.11 ,\"lab-a\"\n\n", []model.Host{a01}, ""},
		{"quoted separator decides nothing", "\"name;x\",mac\n", nil, "line 1"},
		{"trailing empty cells under a header", "name,mac,ip,pool,bootServer\npc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a,\n", []model.Host{a01}, ""},
		{"empty header cells from a spreadsheet", "name,mac,ip,pool,,\npc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a,,\n", []model.Host{a01}, ""},
		{"too many fields under a header", "name,mac,pool\npc-a01,52:54:00:0a:00:01,lab-a,x\n", nil, "line 2: 4 fields, but the header names 3"},
		{"header lacks mac", "name,ip,pool\npc-a01,10.20.0.11,lab-a\n", nil, "no mac column"},
		{"unknown column", "name,mac,ip,pool,room\n", nil, `unknown column "room"`},
		{"column twice", "name,mac,MAC,pool\n", nil, "given twice"},
		{"bad MAC names the line", "name,mac,ip,pool\npc-a01,52:54:00:0a:00:01,,lab-a\npc-a02,52:54:00:0a:00:zz,,lab-a\n", nil, "CSV line 3: invalid MAC"},
		{"bad MAC on a CRLF file", "pc-a01,52:54:00:0a:00:01,,lab-a\r\npc-a02,nope,,lab-a\r\n", nil, "CSV line 2"},
		{"too few fields", "pc-a01,52:54:00:0a:00:01,lab-a\n", nil, "got 3 fields"},
		{"duplicate host", "pc-a01,52:54:00:0a:00:01,,lab-a\npc-a01,52:54:00:0a:00:02,,lab-a\n", nil, "already given on line 1"},
		{"bad boot server", "pc-a01,52:54:00:0a:00:01,,lab-a,BS 1\n", nil, "invalid boot server name"},
		{"empty", "\ufeff# nothing\n", nil, "no hosts"},
		{"unbalanced quote", "\"pc-a01,52:54:00:0a:00:01,,lab-a\n", nil, "CSV"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHostsCSV(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q (hosts %v)", err, tc.err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDetectSeparator(t *testing.T) {
	for in, want := range map[string]rune{
		"a,b,c":                ',',
		"a;b;c":                ';',
		"a\tb\tc":              '\t',
		"# c;o;m;m;e;n;t\na,b": ',',
		"\"x,y,z\";b;c":        ';',
		"single":               ',',
		"":                     ',',
	} {
		if got := detectSeparator([]byte(in)); got != want {
			t.Errorf("detectSeparator(%q) = %q, want %q", in, got, want)
		}
	}
}

// An imported host replaces the one of the same name but keeps its schedule and bookings
// (the CSV does not carry them); other hosts are left alone; new ones are added.
func TestImportHosts(t *testing.T) {
	site := &model.Site{Hosts: []model.Host{
		{Name: "pc1", MAC: "52:54:00:00:00:01", Pool: "a", Weekly: []string{"mon 08:00-10:00 desktop"}, RuleOwners: model.RuleOwners{"mon 08:00-10:00 desktop": "carol"}},
		{Name: "pc2", MAC: "52:54:00:00:00:02", Pool: "a"},
	}}
	ImportHosts(site, []model.Host{
		{Name: "pc1", MAC: "52:54:00:00:00:11", Pool: "b"},
		{Name: "pc3", MAC: "52:54:00:00:00:03", Pool: "b"},
	})
	want := []model.Host{
		{Name: "pc1", MAC: "52:54:00:00:00:11", Pool: "b", Weekly: []string{"mon 08:00-10:00 desktop"}, RuleOwners: model.RuleOwners{"mon 08:00-10:00 desktop": "carol"}},
		{Name: "pc2", MAC: "52:54:00:00:00:02", Pool: "a"},
		{Name: "pc3", MAC: "52:54:00:00:00:03", Pool: "b"},
	}
	if !reflect.DeepEqual(site.Hosts, want) {
		t.Fatalf("got %+v\nwant %+v", site.Hosts, want)
	}
}
