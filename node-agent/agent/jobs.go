package agent

// Per-job interference accounting. The SPANK plugin in the guest (scheduler-plugin/spank)
// calls the agent at each job's start and end over HTTP on the host side of the guest
// network (POST /v1/jobs/{id}/start|end on --listen). The agent keeps the counters — it
// is the one that throttled and froze the guest — and turns the difference between the
// two snapshots into a wire.JobReport, which it posts to the site manager with its host
// credential. The guest therefore needs no credential, and a job cannot write its own
// report: the most a process in the guest can do is ask for a report of a job id.

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/node-agent/interference/estimate"
	"github.com/overtime-hpc/overtime/node-agent/interference/signals"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Counters are the agent's running totals since it started.
type Counters struct {
	Time               time.Time                 `json:"time"`
	Host               string                    `json:"host"`
	Mode               string                    `json:"mode"`
	OwnerState         model.OwnerState          `json:"ownerState"`
	Action             model.GuestAction         `json:"action"`
	ThrottledSeconds   float64                   `json:"throttledSeconds"`
	FrozenSeconds      float64                   `json:"frozenSeconds"`
	OwnerActiveSeconds float64                   `json:"ownerActiveSeconds"`
	GuestCPUSeconds    float64                   `json:"guestCPUSeconds"`     // guest's cgroup, all its processes
	StealSeconds       float64                   `json:"stealSeconds"`        // run-queue wait of the guest's threads
	DesktopStall       float64                   `json:"desktopStallSeconds"` // desktop CPU PSI "some" total (information)
	Actions            map[model.GuestAction]int `json:"actions"`             // transitions into each action
	// Signals are the desktop signals' totals (node-agent/interference/signals): a
	// report's slowdown estimate is made of the window between two snapshots.
	Signals signals.Totals `json:"signals"`
}

// counters is the mutable state behind Counters (and the throttled/frozen metrics): the
// loop folds elapsed time into the totals at every decision, readers fold up to now.
type counters struct {
	mu                          sync.Mutex
	at                          time.Time // last fold
	in                          inForce   // since at
	throttledS, frozenS, activS float64
	actions                     map[model.GuestAction]int
}

// inForce is what the loop has in force, as the counters need it.
type inForce struct {
	throttled, frozen, active bool
	host, mode                string
	state                     model.OwnerState
	action                    model.GuestAction
}

// fold adds the time since the last fold under what was in force, then takes in as the
// new state; transition counts an entry into in.action.
func (c *counters) fold(now time.Time, in inForce, transition bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.foldLocked(now)
	c.in = in
	if transition {
		if c.actions == nil {
			c.actions = map[model.GuestAction]int{}
		}
		c.actions[in.action]++
	}
}

// seconds folds up to now and returns the totals.
func (c *counters) seconds(now time.Time) (throttled, frozen, active float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.foldLocked(now)
	return c.throttledS, c.frozenS, c.activS
}

func (c *counters) foldLocked(now time.Time) {
	if !c.at.IsZero() && now.After(c.at) {
		dt := now.Sub(c.at).Seconds()
		if c.in.throttled {
			c.throttledS += dt
		}
		if c.in.frozen {
			c.frozenS += dt
		}
		if c.in.active {
			c.activS += dt
		}
	}
	c.at = now
}

// jobStarts bounds the job start snapshots kept (jobs whose end never came).
const jobStarts = 4096

// jobAccounting keeps the counters and the jobs' start snapshots, and serves the SPANK
// plugin's calls (Handler). The loop folds what is in force into the counters at every
// decision (Fold); the HTTP handlers read them from their own goroutines.
type jobAccounting struct {
	site     SiteManager
	log      *slog.Logger
	now      func() time.Time
	snapshot func() signals.Totals // the desktop signals' totals now
	psi      string                // Options.DesktopCPUPressure

	cnt      counters
	mu       sync.Mutex          // guards jobStart
	jobStart map[string]Counters // job id -> counters at its start
}

// Fold accounts the time since the last fold under what was in force, and takes in
// (transition: the decision entered a new action).
func (j *jobAccounting) Fold(in inForce, transition bool) {
	j.cnt.fold(j.now(), in, transition)
}

// Seconds folds up to now and returns the throttled and frozen totals (the metrics').
func (j *jobAccounting) Seconds() (throttled, frozen float64) {
	t, f, _ := j.cnt.seconds(j.now())
	return t, f
}

// Running is the number of jobs started and not ended (safe from any goroutine).
func (j *jobAccounting) Running() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.jobStart)
}

// Counters returns the totals now (safe from any goroutine).
func (j *jobAccounting) Counters() Counters {
	now := j.now()
	c := &j.cnt
	c.mu.Lock()
	c.foldLocked(now)
	out := Counters{Time: now, Host: c.in.host, Mode: c.in.mode, OwnerState: c.in.state, Action: c.in.action,
		ThrottledSeconds: c.throttledS, FrozenSeconds: c.frozenS, OwnerActiveSeconds: c.activS,
		Actions: map[model.GuestAction]int{}}
	for k, v := range c.actions {
		out.Actions[k] = v
	}
	c.mu.Unlock()
	out.Signals = j.snapshot()
	// The guest's CPU and steal as the signals count them: by differences while the
	// monitor watched, so a restarted guest or an exited thread takes nothing back.
	out.GuestCPUSeconds, out.StealSeconds = out.Signals.GuestCPU.Seconds(), out.Signals.GuestSteal.Seconds()
	out.DesktopStall = readPSITotal(j.psi)
	return out
}

// readPSITotal is the "some" total of a PSI file, in seconds (0 when unreadable).
func readPSITotal(file string) float64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	ps, err := cgroup.ParsePressure(string(b))
	if err != nil {
		return 0
	}
	return ps.Some.Total.Seconds()
}

// Report turns two snapshots into a job report.
func Report(job string, start, end Counters) wire.JobReport {
	r := wire.JobReport{Job: job, Host: end.Host, Mode: end.Mode, Start: start.Time.UTC(), End: end.Time.UTC(),
		Seconds: end.Time.Sub(start.Time).Seconds(), Actions: map[model.GuestAction]int{}}
	pos := func(v float64) float64 { return max(v, 0) }
	r.ThrottledSeconds = pos(end.ThrottledSeconds - start.ThrottledSeconds)
	r.FrozenSeconds = pos(end.FrozenSeconds - start.FrozenSeconds)
	r.GuestCPUSeconds = pos(end.GuestCPUSeconds - start.GuestCPUSeconds)
	r.StealSeconds = pos(end.StealSeconds - start.StealSeconds)
	if r.Seconds > 0 {
		r.OwnerActiveFraction = min(pos(end.OwnerActiveSeconds-start.OwnerActiveSeconds)/r.Seconds, 1)
	}
	// The desktop's slowdown over the job, by the estimator over the signals' window
	// (none when the signals did not sample during the job).
	if w := signals.WindowOf(start.Signals, end.Signals); w.Seconds > 0 {
		est := estimate.Reported(estimate.Desktop(w)) // with the calibrated interval
		r.DesktopSlowdown, r.SlowdownLow, r.SlowdownHigh = min(est.Slowdown, 1), min(est.Low, 1), min(est.High, 1)
		r.SlowdownMethod = est.Method
		r.GuestSlowdown = estimate.Guest(w)
	}
	for k, v := range end.Actions {
		if d := v - start.Actions[k]; d > 0 {
			r.Actions[k] = d
		}
	}
	r.Summary = wire.ReportSummary(r)
	return r
}

// Handler serves the SPANK plugin's calls (Agent.JobHandler mounts it next to /metrics):
//
//	POST /v1/jobs/{id}/start   snapshot the counters
//	POST /v1/jobs/{id}/progress  report since the start, the job still running (the
//	                           plugin writes it into the job's AdminComment)
//	POST /v1/jobs/{id}/end     report since the start; posted to the site manager
//	GET  /v1/counters          the totals now
func (j *jobAccounting) Handler(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/counters", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, j.Counters())
	})
	mux.HandleFunc("POST /v1/jobs/{id}/start", jobCall(func(w http.ResponseWriter, id string) {
		c := j.Counters()
		j.mu.Lock()
		if j.jobStart == nil {
			j.jobStart = map[string]Counters{}
		}
		if len(j.jobStart) >= jobStarts {
			// Forget the oldest start: its job's end never came (node rebooted, lost call).
			var oldest string
			for k, v := range j.jobStart {
				if oldest == "" || v.Time.Before(j.jobStart[oldest].Time) {
					oldest = k
				}
			}
			delete(j.jobStart, oldest)
		}
		j.jobStart[id] = c
		j.mu.Unlock()
		j.log.Info("job started", "job", id, "mode", c.Mode, "owner", c.OwnerState, "action", c.Action)
		writeJSON(w, http.StatusOK, map[string]string{"job": id, "host": c.Host, "mode": c.Mode})
	}))
	mux.HandleFunc("POST /v1/jobs/{id}/progress", jobCall(func(w http.ResponseWriter, id string) {
		if rep, ok := j.report(w, id, false); ok {
			writeJSON(w, http.StatusOK, rep)
		}
	}))
	mux.HandleFunc("POST /v1/jobs/{id}/end", jobCall(func(w http.ResponseWriter, id string) {
		rep, ok := j.report(w, id, true)
		if !ok {
			return
		}
		j.log.Info("job ended", "job", id, "summary", rep.Summary)
		// Delivered in the background: the plugin's epilog must not wait for the site
		// manager (it has a 2 s budget); the report also goes back to it for slurmd's log.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := j.site.PostJobReport(ctx, rep); err != nil {
				j.log.Warn("job report not delivered to the site manager", "job", id, "err", err)
			}
		}()
		writeJSON(w, http.StatusOK, rep)
	}))
}

// jobCall checks the job id of a /v1/jobs/{id}/... call before h runs.
func jobCall(h func(w http.ResponseWriter, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := wire.ValidJobID(id); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		h(w, id)
	}
}

// report is the report of job id from its start until now; end forgets the start.
// Without a start it answers 409 itself and returns false.
func (j *jobAccounting) report(w http.ResponseWriter, id string, end bool) (wire.JobReport, bool) {
	now := j.Counters()
	j.mu.Lock()
	start, ok := j.jobStart[id]
	if end {
		delete(j.jobStart, id)
	}
	j.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusConflict, map[string]string{"error": "no start recorded for job " + id + " on this agent (agent restarted, or the start call failed)"})
		return wire.JobReport{}, false
	}
	return Report(id, start, now), true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
