package agent

// Per-job interference accounting. The SPANK plugin in the guest (scheduler-plugin/spank)
// calls the agent at each job's start and end over HTTP on the host side of the guest
// network (POST /v1/jobs/{id}/start|end on --listen). The agent keeps the counters — it
// is the one that throttled and froze the guest — and turns the difference between the
// two snapshots into a model.JobReport, which it posts to the site manager with its host
// credential. The guest therefore needs no credential, and a job cannot write its own
// report: the most a process in the guest can do is ask for a report of a job id.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/cgroup"
	"github.com/overtime-hpc/overtime/sitemgmt/model"
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
	DesktopStall       float64                   `json:"desktopStallSeconds"` // desktop CPU PSI "some" total
	Actions            map[model.GuestAction]int `json:"actions"`             // transitions into each action
}

// counters is the mutable state behind Counters: the loop folds elapsed time into the
// totals at every decision (account), HTTP handlers read a snapshot.
type counters struct {
	mu                          sync.Mutex
	at                          time.Time // last fold
	throttled, frozen, active   bool      // in force since at
	throttledS, frozenS, activS float64
	actions                     map[model.GuestAction]int
	host, mode                  string
	state                       model.OwnerState
	action                      model.GuestAction
}

// fold adds the time since the last fold under the flags in force, then sets new flags.
func (c *counters) fold(now time.Time, throttled, frozen, active bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.foldLocked(now)
	c.throttled, c.frozen, c.active = throttled, frozen, active
}

func (c *counters) foldLocked(now time.Time) {
	if !c.at.IsZero() && now.After(c.at) {
		dt := now.Sub(c.at).Seconds()
		if c.throttled {
			c.throttledS += dt
		}
		if c.frozen {
			c.frozenS += dt
		}
		if c.active {
			c.activS += dt
		}
	}
	c.at = now
}

// jobStarts bounds the job start snapshots kept (jobs whose end never came).
const jobStarts = 4096

// Counters returns the totals now (safe from any goroutine).
func (a *Agent) Counters() Counters {
	now := a.o.Now()
	c := &a.cnt
	c.mu.Lock()
	c.foldLocked(now)
	out := Counters{Time: now, Host: c.host, Mode: c.mode, OwnerState: c.state, Action: c.action,
		ThrottledSeconds: c.throttledS, FrozenSeconds: c.frozenS, OwnerActiveSeconds: c.activS,
		Actions: map[model.GuestAction]int{}}
	for k, v := range c.actions {
		out.Actions[k] = v
	}
	c.mu.Unlock()
	out.GuestCPUSeconds, out.StealSeconds = a.guestCPUAndSteal()
	out.DesktopStall = readPSITotal(a.o.DesktopCPUPressure)
	return out
}

// guestCPUAndSteal reads the guest's cgroup: CPU used by all its processes, and the time
// its threads waited on a run queue while runnable (schedstat run delay) — the steal
// time the guest's kernel would see. Threads that exited take their wait with them, so
// steal is a lower bound.
func (a *Agent) guestCPUAndSteal() (cpu, steal float64) {
	pid := int(a.guestPID.Load())
	if pid <= 0 {
		return 0, 0
	}
	h, err := cgroup.Detect()
	if err != nil {
		return a.GuestCPU().Seconds(), 0
	}
	g, err := h.FindByPID(pid)
	if err != nil {
		return a.GuestCPU().Seconds(), 0
	}
	cpu = a.GuestCPU().Seconds()
	if h.Version() == cgroup.V2 {
		if v, ok := readKey(filepath.Join(g.Dir("cpu"), "cpu.stat"), "usage_usec"); ok {
			cpu = v / 1e6
		}
	} else if b, err := os.ReadFile(filepath.Join(g.Dir("cpuacct"), "cpuacct.usage")); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil {
			cpu = v / 1e9
		}
	}
	pids, err := g.AllProcs()
	if err != nil {
		return cpu, 0
	}
	for _, p := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", p))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) >= 2 {
				if ns, err := strconv.ParseFloat(f[1], 64); err == nil {
					steal += ns / 1e9
				}
			}
		}
	}
	return cpu, steal
}

// readKey reads "key value" lines (cpu.stat).
func readKey(file, key string) (float64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// readPSITotal reads the "some" line's total (microseconds) of a PSI file, in seconds.
func readPSITotal(file string) float64 {
	if file == "" {
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				us, _ := strconv.ParseFloat(v, 64)
				return us / 1e6
			}
		}
	}
	return 0
}

// Report turns two snapshots into a job report.
func Report(job string, start, end Counters) model.JobReport {
	r := model.JobReport{Job: job, Host: end.Host, Mode: end.Mode, Start: start.Time.UTC(), End: end.Time.UTC(),
		Seconds: end.Time.Sub(start.Time).Seconds(), Actions: map[model.GuestAction]int{}}
	pos := func(v float64) float64 { return max(v, 0) }
	r.ThrottledSeconds = pos(end.ThrottledSeconds - start.ThrottledSeconds)
	r.FrozenSeconds = pos(end.FrozenSeconds - start.FrozenSeconds)
	r.GuestCPUSeconds = pos(end.GuestCPUSeconds - start.GuestCPUSeconds)
	r.StealSeconds = pos(end.StealSeconds - start.StealSeconds)
	if r.Seconds > 0 {
		r.OwnerActiveFraction = min(pos(end.OwnerActiveSeconds-start.OwnerActiveSeconds)/r.Seconds, 1)
		r.DesktopSlowdown = min(pos(end.DesktopStall-start.DesktopStall)/r.Seconds, 1)
	}
	for k, v := range end.Actions {
		if d := v - start.Actions[k]; d > 0 {
			r.Actions[k] = d
		}
	}
	r.Summary = model.ReportSummary(r)
	return r
}

// JobHandler serves the SPANK plugin's calls (mounted next to /metrics):
//
//	POST /v1/jobs/{id}/start   snapshot the counters
//	POST /v1/jobs/{id}/progress  report since the start, the job still running (the
//	                           plugin writes it into the job's AdminComment)
//	POST /v1/jobs/{id}/end     report since the start; posted to the site manager
//	GET  /v1/counters          the totals now
func (a *Agent) JobHandler(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/counters", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Counters())
	})
	mux.HandleFunc("POST /v1/jobs/{id}/start", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := model.ValidJobID(id); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		c := a.Counters()
		a.jobsMu.Lock()
		if a.jobStart == nil {
			a.jobStart = map[string]Counters{}
		}
		if len(a.jobStart) >= jobStarts {
			// Forget the oldest start: its job's end never came (node rebooted, lost call).
			var oldest string
			for k, v := range a.jobStart {
				if oldest == "" || v.Time.Before(a.jobStart[oldest].Time) {
					oldest = k
				}
			}
			delete(a.jobStart, oldest)
		}
		a.jobStart[id] = c
		a.jobsMu.Unlock()
		a.log.Info("job started", "job", id, "mode", c.Mode, "owner", c.OwnerState, "action", c.Action)
		writeJSON(w, http.StatusOK, map[string]string{"job": id, "host": c.Host, "mode": c.Mode})
	})
	mux.HandleFunc("POST /v1/jobs/{id}/progress", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := model.ValidJobID(id); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		now := a.Counters()
		a.jobsMu.Lock()
		start, ok := a.jobStart[id]
		a.jobsMu.Unlock()
		if !ok {
			writeJSON(w, http.StatusConflict, map[string]string{"error": "no start recorded for job " + id + " on this agent"})
			return
		}
		writeJSON(w, http.StatusOK, Report(id, start, now))
	})
	mux.HandleFunc("POST /v1/jobs/{id}/end", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := model.ValidJobID(id); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		end := a.Counters()
		a.jobsMu.Lock()
		start, ok := a.jobStart[id]
		delete(a.jobStart, id)
		a.jobsMu.Unlock()
		if !ok {
			writeJSON(w, http.StatusConflict, map[string]string{"error": "no start recorded for job " + id + " on this agent (agent restarted, or the start call failed)"})
			return
		}
		rep := Report(id, start, end)
		a.log.Info("job ended", "job", id, "summary", rep.Summary)
		// Delivered in the background: the plugin's epilog must not wait for the site
		// manager (it has a 2 s budget); the report also goes back to it for slurmd's log.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := a.o.Site.PostJobReport(ctx, rep); err != nil {
				a.log.Warn("job report not delivered to the site manager", "job", id, "err", err)
			}
		}()
		writeJSON(w, http.StatusOK, rep)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
