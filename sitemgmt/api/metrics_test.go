package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// sample is one line of the text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var reSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var reLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape reads GET /metrics in the text format.
func scrape(t *testing.T, base string) []sample {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := reSample.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unparsable metrics line %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range reLabel.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// value sums the samples of name whose labels include want (nil: all); ok is false when
// there is none.
func value(ss []sample, name string, want map[string]string) (sum float64, ok bool) {
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		sum += s.value
		ok = true
	}
	return sum, ok
}

func TestMetrics(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	base := e.HTTP.URL
	site := e.Svc.Snapshot().Site
	admin := e.Admin()

	get := func(path string, want int) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	get("/healthz", 200)
	get("/boot/ipxe/52:54:00:0a:00:01", 200)
	get("/boot/ipxe/52-54-00-0A-00-01", 200)
	get("/pxelinux.cfg/01-52-54-00-0a-00-02", 200)
	get("/pxelinux.cfg/default", 200)
	get("/pxelinux.cfg/C0A80001", 404) // lpxelinux's IP-in-hex probe: no boot script
	get("/no/such/52:54:00:0a:00:01/pc-a01", 404)
	get("/ui/login", 200) // through the UI's own mux, which sets the pattern too

	var ma api.ModeAt
	if _, err := admin.Get("/api/v1/mode-at", url.Values{"host": {"pc-a01"}}, &ma); err != nil {
		t.Fatal(err)
	}
	// A refused write (unknown default mode) and a dry run.
	if err := admin.Send("PUT", "/api/v1/site/settings", nil, api.Settings{Name: site.Name, Timezone: site.Timezone, DefaultMode: "no-such-mode"}, nil); err == nil {
		t.Fatal("an invalid settings write was accepted")
	}
	if err := admin.Send("PUT", "/api/v1/site/settings", url.Values{"dryRun": {"true"}}, api.Settings{Name: site.Name, Timezone: site.Timezone, DefaultMode: site.DefaultMode, UnknownMode: site.UnknownMode}, nil); err != nil {
		t.Fatal(err)
	}

	// Two agents: one running a 4-CPU guest, one throttled to half of 8 CPUs: 8 CPUs harvested.
	a1 := hostClient(e, issue(t, admin, "pc-a01"))
	a2 := hostClient(e, issue(t, admin, "pc-a02"))
	if err := a1.Heartbeat(ctx, wire.Heartbeat{Host: "pc-a01", Mode: ma.Mode, OwnerState: model.StateNoUser, Action: model.ActionRun, GuestState: "running", CPUs: 4}); err != nil {
		t.Fatal(err)
	}
	if err := a2.Heartbeat(ctx, wire.Heartbeat{Host: "pc-a02", Mode: ma.Mode, OwnerState: model.StateOwnerActive, Action: model.ActionThrottle, GuestState: "running", CPUs: 8, Cap: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := a2.Heartbeat(ctx, wire.Heartbeat{Host: "pc-a02", Mode: ma.Mode, OwnerState: model.StateOwnerActive, Action: model.ActionThrottle, GuestState: "running", CPUs: 8, Cap: 0.5}); err != nil {
		t.Fatal(err)
	}

	ss := scrape(t, base)
	site = e.Svc.Snapshot().Site
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"overtime_http_requests_total", map[string]string{"route": "GET /boot/ipxe/{mac}", "code": "200"}, 2},
		{"overtime_http_requests_total", map[string]string{"route": "GET /pxelinux.cfg/{file}", "code": "200"}, 2},
		{"overtime_http_requests_total", map[string]string{"route": "GET /pxelinux.cfg/{file}", "code": "404"}, 1},
		{"overtime_http_requests_total", map[string]string{"route": "unmatched", "code": "404"}, 1},
		{"overtime_http_requests_total", map[string]string{"route": "GET /ui/login", "code": "200"}, 1},
		{"overtime_http_requests_total", map[string]string{"route": "GET /healthz", "code": "200"}, 1},
		{"overtime_http_requests_total", map[string]string{"route": "POST /api/v1/agent/heartbeat", "code": "200"}, 3},
		{"overtime_http_request_duration_seconds_count", map[string]string{"route": "GET /boot/ipxe/{mac}"}, 2},
		{"overtime_boot_scripts_total", map[string]string{"kind": "ipxe", "mode": ma.Mode}, 2},
		{"overtime_boot_scripts_total", map[string]string{"kind": "pxelinux"}, 2},
		{"overtime_agent_heartbeats_total", nil, 3},
		{"overtime_agents", map[string]string{"state": "fresh"}, 2},
		{"overtime_agents", map[string]string{"state": "stale"}, 0},
		{"overtime_agents", map[string]string{"state": "none"}, float64(len(site.Hosts) - 2)},
		{"overtime_agents_owner_active", nil, 1},
		{"overtime_harvest_cpus", nil, 8},
		{"overtime_hosts", nil, float64(len(site.Hosts))},
		{"overtime_site_writes_total", map[string]string{"result": "refused"}, 1},
		{"overtime_site_writes_total", map[string]string{"result": "dry_run"}, 1},
		{"overtime_site_writes_total", map[string]string{"result": "failed"}, 0},
		{"overtime_directory_reachable", map[string]string{"directory": "overtime"}, 1},
	}
	for _, c := range checks {
		got, ok := value(ss, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The example site applied: at least one write changed something.
	if n, _ := value(ss, "overtime_site_writes_total", map[string]string{"result": "changed"}); n < 1 {
		t.Errorf("site writes changed = %v, want >= 1", n)
	}
	// The host at the desk lowers nothing here: hosts per mode agree with mode-at.
	if n, _ := value(ss, "overtime_hosts", map[string]string{"mode": ma.Mode}); n < 1 {
		t.Errorf("overtime_hosts{mode=%q} = %v, want >= 1", ma.Mode, n)
	}
	if age, ok := value(ss, "overtime_snapshot_age_seconds", nil); !ok || age < 0 || age > 600 {
		t.Errorf("snapshot age %v (present %v)", age, ok)
	}

	// Bounded labels: no MAC, no host name, no raw path anywhere.
	reMAC := regexp.MustCompile(`(?i)[0-9a-f]{2}[:-][0-9a-f]{2}([:-][0-9a-f]{2}){4}`)
	for _, s := range ss {
		for k, v := range s.labels {
			if reMAC.MatchString(v) {
				t.Errorf("%s: label %s=%q holds a MAC", s.name, k, v)
			}
			for _, h := range site.Hosts {
				if strings.Contains(v, h.Name) {
					t.Errorf("%s: label %s=%q holds host name %s", s.name, k, v, h.Name)
				}
			}
			if strings.Contains(v, "/no/such") {
				t.Errorf("%s: label %s=%q holds a raw path", s.name, k, v)
			}
		}
	}

	// The registry and MetricNames agree, both ways (MetricNames feeds the dashboard check).
	gathered := gatheredNames(t, e.API.Gatherer())
	mfs, err := e.API.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, mf := range mfs {
		if n := mf.GetName(); strings.HasPrefix(n, "overtime_") {
			own = append(own, n)
		}
	}
	sort.Strings(own)
	want := append([]string(nil), api.MetricNames()...)
	sort.Strings(want)
	if strings.Join(own, ",") != strings.Join(want, ",") {
		t.Errorf("registered overtime_* series %v, MetricNames %v", own, want)
	}
	// And the site dashboard only names series this registry has (or the agents').
	known := gathered
	for n := range agentMetricNames(t) {
		known[n] = true
	}
	checkDashboard(t, filepath.Join(testenv.RepoRoot(t), "docs", "grafana", "overtime-site.json"), known)
}

// gatheredNames are the series names a registry gathers, histograms with their suffixes.
func gatheredNames(t *testing.T, g prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		out[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[mf.GetName()+s] = true
			}
		}
	}
	return out
}

var (
	reAgentNS     = regexp.MustCompile(`ns := "([a-z_]+)"`)
	reAgentMetric = regexp.MustCompile(`prometheus\.New(\w+?)(?:Vec|Func)?\(prometheus\.(\w+)Opts\{Namespace: ns, Name: "([a-z0-9_]+)"`)
)

// agentMetricNames reads the node agent's series from node-agent/agent/metrics.go (its
// registry is internal to the agent), with the Go runtime's and the process's, which it
// registers too.
func agentMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "node-agent", "agent", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	ns := reAgentNS.FindSubmatch(src)
	if ns == nil {
		t.Fatal("node-agent/agent/metrics.go: no namespace found")
	}
	out := map[string]bool{}
	for _, m := range reAgentMetric.FindAllSubmatch(src, -1) {
		name := string(ns[1]) + "_" + string(m[3])
		out[name] = true
		if string(m[2]) == "Histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = true
			}
		}
	}
	if len(out) < 10 || !out["overtime_agent_owner_state"] || !out["overtime_agent_reaction_seconds_bucket"] {
		t.Fatalf("node-agent/agent/metrics.go: found only %v; has the way metrics are declared changed?", out)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for n := range gatheredNames(t, reg) {
		out[n] = true
	}
	return out
}

// TestDashboards checks docs/grafana: valid dashboards whose every PromQL expression names
// only series the site manager (MetricNames) or the node agent defines, so that a renamed
// metric breaks this test rather than a panel.
func TestDashboards(t *testing.T) {
	known := agentMetricNames(t)
	for _, n := range api.MetricNames() {
		known[n] = true
	}
	known["overtime_http_request_duration_seconds_bucket"] = true
	known["overtime_http_request_duration_seconds_sum"] = true
	known["overtime_http_request_duration_seconds_count"] = true
	dir := filepath.Join(testenv.RepoRoot(t), "docs", "grafana")
	site := checkDashboard(t, filepath.Join(dir, "overtime-site.json"), known)
	agents := checkDashboard(t, filepath.Join(dir, "overtime-agents.json"), known)
	// Each dashboard is about its side.
	for n := range site {
		if strings.HasPrefix(n, "overtime_agent_") && n != "overtime_agent_heartbeats_total" {
			t.Errorf("overtime-site.json uses the agent's series %s", n)
		}
	}
	for n := range agents {
		if strings.HasPrefix(n, "overtime_") && !strings.HasPrefix(n, "overtime_agent_") {
			t.Errorf("overtime-agents.json uses the site manager's series %s", n)
		}
	}
	// Every agent series has a panel (the site's request series are many and summarised).
	for n := range agentMetricNames(t) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(n, "overtime_agent_") && !agents[n] && !agents[base+"_bucket"] && !agents[base] {
			t.Errorf("overtime-agents.json has no panel for %s", n)
		}
	}
	for _, n := range api.MetricNames() {
		if !site[n] && !site[n+"_bucket"] {
			t.Errorf("overtime-site.json has no panel for %s", n)
		}
	}
}

var (
	reQuoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	reSeries = regexp.MustCompile(`\b(?:overtime|go|process)_[a-zA-Z0-9_:]+`)
)

// checkDashboard validates one dashboard and returns the series its expressions use.
func checkDashboard(t *testing.T, path string, known map[string]bool) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID           string            `json:"uid"`
		Title         string            `json:"title"`
		SchemaVersion int               `json:"schemaVersion"`
		Panels        []json.RawMessage `json:"panels"`
		Templating    struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	name := filepath.Base(path)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 || len(d.Panels) == 0 {
		t.Errorf("%s: uid %q, title %q, schemaVersion %d, %d panels", name, d.UID, d.Title, d.SchemaVersion, len(d.Panels))
	}
	hasDS := false
	var exprs []string
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			hasDS = true
		}
		if v.Type == "query" {
			switch q := v.Query.(type) {
			case string:
				exprs = append(exprs, q)
			case map[string]any:
				if s, ok := q["query"].(string); ok {
					exprs = append(exprs, s)
				}
			}
		}
	}
	if !hasDS {
		t.Errorf("%s: no Prometheus datasource template variable", name)
	}
	ids := map[float64]bool{}
	for _, p := range d.Panels {
		var panel struct {
			ID         float64 `json:"id"`
			Type       string  `json:"type"`
			Title      string  `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		}
		if err := json.Unmarshal(p, &panel); err != nil {
			t.Fatalf("%s: panel: %v", name, err)
		}
		if ids[panel.ID] {
			t.Errorf("%s: panel id %v twice", name, panel.ID)
		}
		ids[panel.ID] = true
		if panel.Type == "row" {
			continue
		}
		if len(panel.Targets) == 0 || panel.Datasource.UID != "${datasource}" {
			t.Errorf("%s: panel %q: %d targets, datasource %q", name, panel.Title, len(panel.Targets), panel.Datasource.UID)
		}
		for _, tg := range panel.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("%s: panel %q: a target without expr or refId", name, panel.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	used := map[string]bool{}
	for _, x := range exprs {
		bare := reQuoted.ReplaceAllString(x, `""`)
		if strings.Count(bare, "(") != strings.Count(bare, ")") || strings.Count(bare, "{") != strings.Count(bare, "}") {
			t.Errorf("%s: unbalanced expression %q", name, x)
		}
		series := reSeries.FindAllString(bare, -1)
		if len(series) == 0 {
			t.Errorf("%s: expression %q names no series", name, x)
		}
		for _, s := range series {
			used[s] = true
			if !known[s] {
				t.Errorf("%s: expression %q uses %s, which no code registers", name, x, s)
			}
		}
	}
	return used
}
