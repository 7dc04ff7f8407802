package web

import (
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
)

func TestEncodeDecodeGrid(t *testing.T) {
	modes := []string{"cluster", "desktop", "local-disk"}
	g, _ := schedule.GridOf([]string{"mon-fri 08:00-18:00 desktop", "sat 22:00-02:00 local-disk"})
	s := EncodeGrid(g, modes)
	if strings.Count(s, "|") != 6 || strings.Count(s, ",") != 7*143 {
		t.Fatalf("encoding has the wrong shape")
	}
	g2, err := DecodeGrid(s, modes)
	if err != nil || g2 != g {
		t.Fatalf("decode(encode) = %v, differs", err)
	}
	for _, bad := range []string{"", "1,2|3", strings.Replace(s, "1", "7", 1), strings.Replace(s, "1", "x", 1), strings.Replace(s, "|", ",", 1)} {
		if _, err := DecodeGrid(bad, modes); err == nil {
			t.Errorf("DecodeGrid accepted a bad grid (%.30q...)", bad)
		}
	}
}
