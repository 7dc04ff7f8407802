package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// fakeSite is a site manager for the entity commands: it answers GETs from a fixed set
// of documents and records every request (method, path with query, body).
type fakeSite struct {
	mu   sync.Mutex
	reqs []string
}

var fakeDocs = map[string]string{
	"/api/v1/site/settings":   `{"name":"uni","timezone":"Europe/Berlin","defaultMode":"local"}`,
	"/api/v1/hosts":           `[{"name":"pc-a01","mac":"52:54:00:0a:00:01","ip":"10.0.0.11","pool":"lab-a","weekly":["mon 08:00-10:00 desktop"]},{"name":"pc-b01","mac":"52:54:00:0b:00:01","pool":"lab-b","bootServer":"bs1"}]`,
	"/api/v1/hosts/pc-a01":    `{"name":"pc-a01","mac":"52:54:00:0a:00:01","ip":"10.0.0.11","pool":"lab-a","weekly":["mon 08:00-10:00 desktop"]}`,
	"/api/v1/pools":           `[{"name":"lab-a","room":"A1","bootServer":"bs1","weekly":["mon-fri 08:00-18:00 desktop","sat 00:00-24:00 cluster"],"description":"first floor"}]`,
	"/api/v1/modes":           `[{"name":"desktop","kind":"desktop","image":"desk","imageVersion":"2","kernelArgs":"quiet"},{"name":"local","kind":"local-disk"}]`,
	"/api/v1/images":          `[{"name":"desk","kind":"desktop","versions":[{"version":"1","sha256":"` + strings.Repeat("a", 64) + `","path":"desk/1","created":"2026-01-01T00:00:00Z"},{"version":"2","sha256":"` + strings.Repeat("b", 64) + `","path":"desk/2","created":"2026-02-01T00:00:00Z"}]},{"name":"vm","kind":"course-vm","pool":"lab-a","current":"1","versions":[{"version":"1","sha256":"` + strings.Repeat("c", 64) + `","path":"vm/1"}]},{"name":"empty","kind":"compute"}]`,
	"/api/v1/bootservers":     `[{"name":"bs1","ip":"10.0.0.1","httpURL":"http://10.0.0.1:8080","dhcp":"proxy","subnet":"10.0.0.0/24"}]`,
	"/api/v1/bootservers/bs1": `{"name":"bs1","ip":"10.0.0.1","httpURL":"http://10.0.0.1:8080","dhcp":"full","subnet":"10.0.0.0/24","dnsServers":["10.0.0.53"]}`,
	"/api/v1/exceptions":      `[{"name":"exam","kind":"exam","start":"2026-03-02T08:00:00Z","end":"2026-03-02T10:00:00Z","mode":"local","targets":[{"pool":"lab-a"},{"host":"pc-b01"}]},{"name":"bio","kind":"lecture","start":"2026-03-03T08:00:00Z","end":"2026-03-03T10:00:00Z","mode":"desktop","targets":[{"host":"pc-a01"}],"owner":"alice"},{"name":"night","kind":"power-save","start":"2026-03-03T20:00:00Z","end":"2026-03-04T06:00:00Z","mode":"local","targets":[{"pool":"lab-a"}]}]`,
	"/api/v1/roles":           `[{"name":"admins","role":"site-admin","members":["admin","root2"]},{"name":"bs1-sync","role":"boot-server","bootServer":"bs1","members":["bootsrv"]},{"name":"lab-a-admins","role":"pool-admin","pool":"lab-a"}]`,
}

func (f *fakeSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodGet {
		w.Write([]byte(`{"changes":["~ changed"]}`))
		return
	}
	doc, ok := fakeDocs[r.URL.Path]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"not found"}`))
		return
	}
	w.Write([]byte(doc))
}

func (f *fakeSite) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

// captureStdout runs fn and returns what it wrote to os.Stdout (the tables go there).
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() { os.Stdout = saved }()
	fn()
	w.Close()
	return <-done
}

// TestEntityLists: each entity's list prints its table row by row, with the columns of
// its row in entityCmds' table (times in the site's zone).
func TestEntityLists(t *testing.T) {
	isolate(t)
	t.Setenv("TZ", "UTC")
	srv := httptest.NewServer(&fakeSite{})
	defer srv.Close()
	for _, tc := range []struct {
		entity string
		want   string
	}{
		{"host", `
NAME    MAC                IP         POOL   BOOT SERVER  RULES
pc-a01  52:54:00:0a:00:01  10.0.0.11  lab-a               1
pc-b01  52:54:00:0b:00:01             lab-b  bs1          0`},
		{"pool", `
NAME   ROOM  BOOT SERVER  RULES  DESCRIPTION
lab-a  A1    bs1          2      first floor`},
		{"mode", `
NAME     KIND        IMAGE  VERSION  KERNEL ARGS
desktop  desktop     desk   2        quiet
local    local-disk`},
		{"image", `
NAME   KIND       POOL   VERSIONS  CURRENT
desk   desktop           2         2 (newest)
vm     course-vm  lab-a  1         1
empty  compute           0`},
		{"bootserver", `
NAME  IP        HTTP URL              DHCP   SUBNET
bs1   10.0.0.1  http://10.0.0.1:8080  proxy  10.0.0.0/24`},
		{"exception", `
NAME   KIND        START                    END                      MODE     TARGETS                 OWNER
exam   exam        2026-03-02 09:00:00 CET  2026-03-02 11:00:00 CET  local    pool:lab-a,host:pc-b01  (site file)
bio    lecture     2026-03-03 09:00:00 CET  2026-03-03 11:00:00 CET  desktop  host:pc-a01             alice
night  power-save  2026-03-03 21:00:00 CET  2026-03-04 07:00:00 CET  local    pool:lab-a              (power saving)`},
		{"role", `
NAME          ROLE         POOL   BOOT SERVER  MEMBERS
admins        site-admin                       admin,root2
bs1-sync      boot-server         bs1          bootsrv
lab-a-admins  pool-admin   lab-a`},
	} {
		var code int
		var errs string
		out := captureStdout(t, func() { code, _, errs = runCLI(t, newRoot(), "--server", srv.URL, tc.entity, "list") })
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			lines = append(lines, strings.TrimRight(l, " "))
		}
		if got, want := strings.Join(lines, "\n"), strings.TrimPrefix(tc.want, "\n"); code != 0 || got != want {
			t.Errorf("%s list: exit %d (%s)\n%s\nwant\n%s", tc.entity, code, errs, got, want)
		}
	}
}

// TestEntityWrites: add starts from an empty value and set from the current one; only
// the flags given change it; the name comes from the argument; list filters become query
// parameters.
func TestEntityWrites(t *testing.T) {
	isolate(t)
	fake := &fakeSite{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, tc := range []struct {
		args []string
		want []string // the requests, in order
	}{
		{[]string{"host", "list", "--pool", "lab-a"}, []string{"GET /api/v1/hosts?pool=lab-a"}},
		{[]string{"host", "add", "pc-c01", "--mac", "52:54:00:0c:00:01", "--pool", "lab-c", "--rule", "mon 08:00-10:00 desktop", "--rule", "tue 08:00-10:00 desktop"}, []string{
			"GET /api/v1/hosts/pc-c01",
			`PUT /api/v1/hosts/pc-c01 {"name":"pc-c01","mac":"52:54:00:0c:00:01","pool":"lab-c","weekly":["mon 08:00-10:00 desktop","tue 08:00-10:00 desktop"]}`,
		}},
		{[]string{"host", "set", "pc-a01", "--ip", "10.0.0.99", "--dry-run"}, []string{
			"GET /api/v1/hosts/pc-a01",
			`PUT /api/v1/hosts/pc-a01?dryRun=true {"name":"pc-a01","mac":"52:54:00:0a:00:01","ip":"10.0.0.99","pool":"lab-a","weekly":["mon 08:00-10:00 desktop"]}`,
		}},
		{[]string{"bootserver", "set", "bs1", "--dns-server", "", "--dhcp", "proxy"}, []string{
			"GET /api/v1/bootservers/bs1",
			`PUT /api/v1/bootservers/bs1 {"name":"bs1","ip":"10.0.0.1","httpURL":"http://10.0.0.1:8080","dhcp":"proxy","subnet":"10.0.0.0/24"}`,
		}},
		{[]string{"exception", "add", "ex2", "--kind", "exam", "--mode", "local", "--start", "2026-03-02 09:00", "--end", "2026-03-02T10:00:00Z", "--host", "pc-a01", "--pool", "lab-a"}, []string{
			"GET /api/v1/exceptions/ex2",
			"GET /api/v1/site/settings",
			`PUT /api/v1/exceptions/ex2 {"name":"ex2","kind":"exam","start":"2026-03-02T09:00:00+01:00","end":"2026-03-02T10:00:00Z","mode":"local","targets":[{"pool":"lab-a"},{"host":"pc-a01"}]}`,
		}},
		{[]string{"role", "add", "lab-a-lect", "--role", "lecturer", "--pool", "lab-a", "--member", "alice"}, []string{
			"GET /api/v1/roles/lab-a-lect",
			`PUT /api/v1/roles/lab-a-lect {"name":"lab-a-lect","role":"lecturer","pool":"lab-a","members":["alice"]}`,
		}},
		{[]string{"mode", "delete", "desktop", "--dry-run"}, []string{"DELETE /api/v1/modes/desktop?dryRun=true"}},
	} {
		var code int
		var errs string
		captureStdout(t, func() { code, _, errs = runCLI(t, newRoot(), append([]string{"--server", srv.URL}, tc.args...)...) })
		got := fake.requests()
		for i := range got {
			got[i] = canonicalJSONTail(got[i])
		}
		for i := range tc.want {
			tc.want[i] = canonicalJSONTail(tc.want[i])
		}
		if code != 0 || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%v: exit %d (%s), requests\n%s\nwant\n%s", tc.args, code, errs, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// canonicalJSONTail re-encodes the JSON body at the end of a request line with sorted
// keys, so that the comparison does not depend on the encoder's field order.
func canonicalJSONTail(req string) string {
	i := strings.Index(req, " {")
	if i < 0 {
		return req
	}
	var v any
	if err := json.Unmarshal([]byte(req[i+1:]), &v); err != nil {
		return req
	}
	b, _ := json.Marshal(v)
	return req[:i+1] + string(b)
}
