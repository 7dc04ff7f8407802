package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestImportPreview(t *testing.T) {
	cur := []model.Host{
		{Name: "pc-a01", MAC: "52:54:00:0a:00:01", IP: "10.20.0.11", Pool: "lab-a"},
		{Name: "pc-a02", MAC: "52:54:00:0a:00:02", IP: "10.20.0.12", Pool: "lab-a"},
	}
	for _, tc := range []struct {
		name  string
		hosts []model.Host
		want  []string
	}{
		{"nothing new", cur[:1], []string{"f.csv: 0 to add, 0 to change, 1 unchanged"}},
		{"add", []model.Host{{Name: "pc-c01", MAC: "52:54:00:0c:00:01", Pool: "lab-b", BootServer: "bs1"}},
			[]string{"f.csv: 1 to add, 0 to change, 0 unchanged", "  + host pc-c01 (mac 52:54:00:0c:00:01, ip (none), pool lab-b, boot server bs1)"}},
		{"change two fields, keep one", []model.Host{cur[0], {Name: "pc-a02", MAC: "52:54:00:0a:00:02", IP: "10.20.0.99", Pool: "lab-b"}},
			[]string{"f.csv: 0 to add, 1 to change, 1 unchanged", "  ~ host pc-a02: ip 10.20.0.12 -> 10.20.0.99, pool lab-a -> lab-b"}},
	} {
		var out bytes.Buffer
		printImportPreview(&out, "f.csv", cur, tc.hosts)
		if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, out.String(), strings.Join(tc.want, "\n"))
		}
	}
}
