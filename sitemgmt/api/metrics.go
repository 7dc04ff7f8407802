package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/web"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The site manager's Prometheus series (GET /metrics, unauthenticated like /healthz;
// docs/operations.md lists them). They live in the server's own registry, not the
// global one, so that two servers in one process (tests, benchmarks) do not share
// counters. Every label value is bounded by the site's configuration or the code: HTTP
// requests are labelled by the route pattern the mux matched ("GET /boot/ipxe/{mac}"),
// never by the raw path, so neither MACs nor host names reach a label.
//
// What is cheap to count is counted as it happens (requests, boot scripts, heartbeats,
// site writes); what describes the state of the site (hosts per mode, agents, harvest,
// snapshot age, the directory) is computed at scrape time from the snapshot and the
// heartbeats (siteCollector): about a millisecond for 10,000 hosts.

const metricsNS = "overtime"

// Route label values for requests the mux matched no pattern for.
const routeUnmatched = "unmatched"

// Results of a site write (overtime_site_writes_total).
const (
	writeChanged   = "changed"   // written, at least one change
	writeUnchanged = "unchanged" // valid, nothing to change
	writeDryRun    = "dry_run"   // validated and authorised, not written
	writeRefused   = "refused"   // invalid, conflicting or not allowed (4xx)
	writeFailed    = "failed"    // the directory write failed (part may have landed)
)

var writeResults = []string{writeChanged, writeUnchanged, writeDryRun, writeRefused, writeFailed}

type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	boots      *prometheus.CounterVec
	heartbeats prometheus.Counter
	writes     *prometheus.CounterVec
}

// MetricNames lists the names of the series the site manager's own code defines (without
// a histogram's _bucket/_sum/_count suffixes, and without the Go runtime's and the
// process's go_* and process_* series, which the registry also carries). The dashboard
// test checks docs/grafana against it.
func MetricNames() []string {
	return []string{
		"overtime_http_requests_total",
		"overtime_http_request_duration_seconds",
		"overtime_boot_scripts_total",
		"overtime_agent_heartbeats_total",
		"overtime_site_writes_total",
		"overtime_hosts",
		"overtime_agents",
		"overtime_agents_owner_active",
		"overtime_harvest_cpus",
		"overtime_snapshot_age_seconds",
		"overtime_directory_reachable",
		"overtime_state_writes_total",
		"overtime_state_pending",
	}
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: "http_requests_total",
		Help: "HTTP requests answered, by route pattern (unmatched: no route) and status code."}, []string{"route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNS, Name: "http_request_duration_seconds",
		Help:    "Time from the request's arrival to its handler's return, by route pattern.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"route"})
	m.boots = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: "boot_scripts_total",
		Help: "Boot scripts served (status 200), by kind (ipxe, pxelinux) and the mode they boot (none: no mode)."}, []string{"kind", "mode"})
	m.heartbeats = prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNS, Name: "agent_heartbeats_total",
		Help: "Node agent heartbeats accepted."})
	m.writes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: "site_writes_total",
		Help: "Site writes through the API and the web UI, by result (changed, unchanged, dry_run, refused, failed)."}, []string{"result"})
	for _, r := range writeResults {
		m.writes.WithLabelValues(r)
	}
	m.reg.MustRegister(m.requests, m.duration, m.boots, m.heartbeats, m.writes, &siteCollector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in the Prometheus text (or OpenMetrics) format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Gatherer is the server's metrics registry (what GET /metrics serves).
func (s *Server) Gatherer() prometheus.Gatherer { return s.metrics.reg }

// statusWriter records the status code a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes on to the connection (long polls and streamed answers flush).
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe wraps w for one request; done, deferred by ServeHTTP, records it once the
// handler returned: r.Pattern is then the pattern the innermost mux matched (the UI's
// own mux sets it on the same request: "GET /ui/pools/{name}").
func (s *Server) observe(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	if s.metrics == nil { // a Server not made by New (unit tests)
		return w, func() {}
	}
	sw := &statusWriter{ResponseWriter: w}
	start := time.Now()
	return sw, func() {
		m := s.metrics
		route := r.Pattern
		if route == "" {
			route = routeUnmatched
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK // a handler that wrote nothing: net/http answers 200
		}
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}
}

// bootScript counts a boot script served, by the mode it boots (nil: none), as the boot
// handler resolved it.
func (m *metrics) bootScript(kind string, mode *model.Mode) {
	if m == nil {
		return
	}
	name := "none"
	if mode != nil {
		name = mode.Name
	}
	m.boots.WithLabelValues(kind, name).Inc()
}

// heartbeat counts a heartbeat kept.
func (m *metrics) heartbeat() {
	if m != nil {
		m.heartbeats.Inc()
	}
}

// siteWrite counts the outcome of a site write through the API (Server.update) or the
// web UI (web.Options.OnWrite).
func (m *metrics) siteWrite(dry bool, changes []model.Change, err error) {
	if m == nil {
		return
	}
	result := writeChanged
	switch {
	case err != nil && !errstatus.Internal(err):
		result = writeRefused
	case err != nil:
		result = writeFailed
	case dry:
		result = writeDryRun
	case len(changes) == 0:
		result = writeUnchanged
	}
	m.writes.WithLabelValues(result).Inc()
}

// siteCollector computes the state of the site at scrape time.
type siteCollector struct{ s *Server }

var (
	descHosts = prometheus.NewDesc("overtime_hosts",
		"Hosts by the mode the schedule gives them now.", []string{"mode"}, nil)
	descAgents = prometheus.NewDesc("overtime_agents",
		"The site's hosts by their agent's last heartbeat: fresh, stale (older than the stale limit) or none (none since the site manager started).", []string{"state"}, nil)
	descOwner = prometheus.NewDesc("overtime_agents_owner_active",
		"Hosts whose fresh heartbeat says someone is at the desk.", nil, nil)
	descHarvest = prometheus.NewDesc("overtime_harvest_cpus",
		"CPUs the guests may use now: the sum over fresh heartbeats of CPUs, times the cap when throttled (frozen, evicted and stopped guests count 0).", nil, nil)
	descSnapAge = prometheus.NewDesc("overtime_snapshot_age_seconds",
		"Seconds since the site snapshot in use was read or written.", nil, nil)
	descStateWrites = prometheus.NewDesc("overtime_state_writes_total",
		"Runtime state documents written into the directory (puts and deletes) by kind (heartbeats, reports, power, audit, bootimages, booted, slurm) and result (ok, failed).", []string{"kind", "result"}, nil)
	descStatePending = prometheus.NewDesc("overtime_state_pending",
		"Runtime state writes queued for the directory and not yet written.", nil, nil)
	descDir = prometheus.NewDesc("overtime_directory_reachable",
		"1 when the directory answered at the last contact, else 0 (directory: overtime, external when configured).", []string{"directory"}, nil)
)

func (c *siteCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHosts, descAgents, descOwner, descHarvest, descSnapAge, descDir, descStateWrites, descStatePending} {
		ch <- d
	}
}

func (c *siteCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	snap := s.svc.Snapshot()
	now := s.opt.Now() // the clock heartbeats are stamped and modes evaluated with
	statuses := s.svc.Agents.StatusesByHost(now)
	modes := map[string]int{}
	for _, m := range snap.Site.Modes {
		modes[m.Name] = 0
	}
	var fresh, stale, none, owner int
	var harvest float64
	for i := range snap.Site.Hosts {
		h := &snap.Site.Hosts[i]
		modes[snap.Engine.AtHost(h, now).Mode]++
		st := statuses[h.Name]
		switch {
		case st == nil:
			none++
		case st.Stale:
			stale++
		default:
			fresh++
			_, cpus, active := web.AgentClass(st)
			harvest += cpus
			if active {
				owner++
			}
		}
	}
	for mode, n := range modes {
		if mode == "" {
			mode = "none"
		}
		ch <- prometheus.MustNewConstMetric(descHosts, prometheus.GaugeValue, float64(n), mode)
	}
	ch <- prometheus.MustNewConstMetric(descAgents, prometheus.GaugeValue, float64(fresh), "fresh")
	ch <- prometheus.MustNewConstMetric(descAgents, prometheus.GaugeValue, float64(stale), "stale")
	ch <- prometheus.MustNewConstMetric(descAgents, prometheus.GaugeValue, float64(none), "none")
	ch <- prometheus.MustNewConstMetric(descOwner, prometheus.GaugeValue, float64(owner))
	ch <- prometheus.MustNewConstMetric(descHarvest, prometheus.GaugeValue, harvest)
	ch <- prometheus.MustNewConstMetric(descSnapAge, prometheus.GaugeValue, time.Since(snap.Loaded).Seconds())
	up := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	for _, w := range s.svc.StateWriteCounts() {
		ch <- prometheus.MustNewConstMetric(descStateWrites, prometheus.CounterValue, float64(w.OK), w.Kind, "ok")
		ch <- prometheus.MustNewConstMetric(descStateWrites, prometheus.CounterValue, float64(w.Failed), w.Kind, "failed")
	}
	ch <- prometheus.MustNewConstMetric(descStatePending, prometheus.GaugeValue, float64(s.svc.StatePending()))
	ch <- prometheus.MustNewConstMetric(descDir, prometheus.GaugeValue, up(s.svc.Accounts.Directory().Reachable), "overtime")
	if ext, ok := s.svc.Accounts.External(); ok {
		ch <- prometheus.MustNewConstMetric(descDir, prometheus.GaugeValue, up(ext.Reachable), "external")
	}
}
