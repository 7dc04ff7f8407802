package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// metrics are the agent's Prometheus series (GET /metrics).
type metrics struct {
	reg *prometheus.Registry

	ownerState  *prometheus.GaugeVec
	action      *prometheus.GaugeVec
	guestState  *prometheus.GaugeVec
	guestCPU    prometheus.Gauge
	throttled   prometheus.CounterFunc
	frozen      prometheus.CounterFunc
	pressure    prometheus.Gauge
	load        prometheus.Gauge
	reaction    *prometheus.HistogramVec
	restarts    prometheus.Counter
	configFrom  *prometheus.GaugeVec
	rejected    prometheus.Counter
	actionError *prometheus.CounterVec
	signals     *prometheus.CounterVec
	slowdown    prometheus.Gauge
	guestCap    prometheus.Gauge
}

// newMetrics builds the registry; guestSeconds reads the throttled and frozen totals (the
// agent's job counters, so /metrics and job reports count the same seconds).
func newMetrics(guestSeconds func() (throttled, frozen float64)) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	ns := "overtime_agent"
	m.ownerState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "owner_state",
		Help: "1 for the owner state in force (no-user, owner-idle, owner-active, after-hours, maintenance)."}, []string{"state"})
	m.action = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "guest_action",
		Help: "1 for the action in force on the guest (run, throttle, freeze, evict)."}, []string{"action"})
	m.guestState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "guest_state",
		Help: "1 for the guest's state as the backend reports it."}, []string{"state"})
	m.guestCPU = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "guest_cpu_seconds",
		Help: "CPU seconds used by the current guest since it started."})
	m.throttled = prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "guest_throttled_seconds_total",
		Help: "Seconds the guest spent throttled."}, func() float64 { t, _ := guestSeconds(); return t })
	m.frozen = prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "guest_frozen_seconds_total",
		Help: "Seconds the guest spent frozen."}, func() float64 { _, f := guestSeconds(); return f })
	m.pressure = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "desktop_pressure_percent",
		Help: "Desktop pressure (PSI some avg10, max of cpu, memory, io)."})
	m.load = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "desktop_load_cores",
		Help: "CPU used by processes outside the guest, in cores."})
	m.reaction = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "reaction_seconds",
		Help:    "From the signal (input event timestamp) to the guest action applied.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}}, []string{"action"})
	m.restarts = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "guest_restarts_total",
		Help: "Guests started again after they crashed or stopped by themselves."})
	m.configFrom = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "config_source",
		Help: "1 for where the configuration in force came from (api, cache, none)."}, []string{"source"})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "config_rejected_total",
		Help: "Configurations from the site manager refused as invalid."})
	m.actionError = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "action_errors_total",
		Help: "Backend operations that failed."}, []string{"op"})
	m.signals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "signals_total",
		Help: "Sensor signals received, by kind."}, []string{"kind"})
	m.slowdown = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "desktop_slowdown",
		Help: "Estimated slowdown of the desktop caused by the guest over the last signals tick (fraction)."})
	m.guestCap = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "guest_cpu_cap",
		Help: "CPU cap applied to the guest, as a fraction of the host's CPUs (1 = uncapped)."})
	m.reg.MustRegister(m.ownerState, m.action, m.guestState, m.guestCPU, m.throttled, m.frozen, m.pressure, m.load,
		m.reaction, m.restarts, m.configFrom, m.rejected, m.actionError, m.signals, m.slowdown, m.guestCap,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, s := range model.OwnerStates {
		m.ownerState.WithLabelValues(string(s))
	}
	for _, a := range model.GuestActions {
		m.action.WithLabelValues(string(a))
	}
	return m
}

func setOne(v *prometheus.GaugeVec, values []string, on string) {
	for _, x := range values {
		g := 0.0
		if x == on {
			g = 1
		}
		v.WithLabelValues(x).Set(g)
	}
}
