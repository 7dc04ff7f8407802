package sitefile

import (
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// FuzzParseHostsCSV: whatever the body of an import, parsing answers with hosts or an
// error and never panics (the API parses untrusted bodies), and every host it accepts
// passes the same field checks the site manager applies.
func FuzzParseHostsCSV(f *testing.F) {
	for _, seed := range []string{
		"pc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a\n",
		"name,mac,ip,pool\npc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a\n",
		"Pool,IP,MAC,Name\nlab-a,10.20.0.11,52:54:00:0a:00:01,pc-a01\n",
		"name;boot server;mac;pool\npc-a02;bs1;52:54:00:0a:00:02;lab-a\n",
		"name\tmac\tip\tpool\npc-a01\t52:54:00:0a:00:01\t10.20.0.11\tlab-a\n",
		"\ufeffname,mac,ip,pool\r\npc-a01,52:54:00:0a:00:01,10.20.0.11,lab-a\r\n",
		"\"pc-a01\", \"52:54:00:0a:00:01\",10.20.0.11 ,\"lab-a\"\n\n",
		"\"pc-a01,52:54:00:0a:00:01,,lab-a\n", // unbalanced quote
		"pc-a01,5\"2:54:00:0a:00:01,,lab-a\n", // bare quote
		"\"pc-a01\"x,52:54:00:0a:00:01,,lab-a\n",
		"\"\n",
		"\"",
		"pc-a01,52:54:00:0a:00:01,lab-a\n", // too few fields
		"name,mac,pool\npc-a01,52:54:00:0a:00:01,lab-a,x,y\n",
		"name,mac,pool\npc-a01\n",
		"name,mac,ip,pool,,\n,,,,,\n",
		"\n\n\n",
		"\ufeff",
		"\r",
		"\r\r\n\r",
		"pc-a01,52:54:00:0a:00:01,,lab-a\rpc-a02,52:54:00:0a:00:02,,lab-a\r",
		"name,mac,ip,pool\n",
		"#",
		"# only a comment\n",
		",,,,\n",
		";\t,\n",
		"pc-a01,00:00:00:00:00:00,,lab-a\n",
		"pc-a01,ff:ff:ff:ff:ff:ff,,lab-a\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hosts, err := ParseHostsCSV(strings.NewReader(string(data)))
		if err != nil {
			if hosts != nil {
				t.Fatalf("hosts %v with error %v", hosts, err)
			}
			return
		}
		if len(hosts) == 0 {
			t.Fatal("no hosts and no error")
		}
		seen := map[string]bool{}
		for _, h := range hosts {
			if err := model.ValidHostname(h.Name); err != nil {
				t.Errorf("accepted host with %v", err)
			}
			if _, err := model.NormalizeMAC(h.MAC); err != nil {
				t.Errorf("accepted host with %v", err)
			}
			if h.IP != "" {
				if err := model.ValidIP(h.IP); err != nil {
					t.Errorf("accepted host with %v", err)
				}
			}
			if err := model.ValidName("pool", h.Pool); err != nil {
				t.Errorf("accepted host with %v", err)
			}
			if h.BootServer != "" {
				if err := model.ValidName("boot server", h.BootServer); err != nil {
					t.Errorf("accepted host with %v", err)
				}
			}
			if seen[h.Name] {
				t.Errorf("host %s accepted twice", h.Name)
			}
			seen[h.Name] = true
		}
	})
}
