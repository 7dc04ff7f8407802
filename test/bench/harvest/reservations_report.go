package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"

	"github.com/overtime-hpc/overtime/test/bench/benchplot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// resMetric is one column of the reservations tables.
type resMetric struct {
	Key, Head string
	get       func(SlurmResult) float64
	format    string
}

var resMetrics = []resMetric{
	{"deliveredCpuHours", "CPU-hours delivered", func(r SlurmResult) float64 { return r.DeliveredCPUHours }, "%.0f"},
	{"usefulCpuHours", "useful CPU-hours", func(r SlurmResult) float64 { return r.UsefulCPUHours }, "%.0f"},
	{"requeuedKnown", "requeued: known changes", func(r SlurmResult) float64 { return float64(r.RequeuedKnown) }, "%.0f"},
	{"requeuedShortNotice", "requeued: short notice", func(r SlurmResult) float64 { return float64(r.RequeuedShort) }, "%.0f"},
	{"wastedCpuHours", "wasted CPU-hours", func(r SlurmResult) float64 { return r.WastedCPUHours }, "%.0f"},
	{"wastedKnownCpuHours", "wasted: known", func(r SlurmResult) float64 { return r.WastedKnown }, "%.0f"},
	{"wastedShortNoticeCpuHours", "wasted: short notice", func(r SlurmResult) float64 { return r.WastedShort }, "%.0f"},
	{"wastedTimeoutCpuHours", "wasted: time limit", func(r SlurmResult) float64 { return r.WastedTimeout }, "%.0f"},
	{"idleCpuHours", "idle CPU-hours (nothing fits)", func(r SlurmResult) float64 { return r.IdleCPUHours }, "%.0f"},
	{"signalled", "signalled", func(r SlurmResult) float64 { return float64(r.Signalled) }, "%.0f"},
	{"resumedFromCheckpoint", "resumed from checkpoint", func(r SlurmResult) float64 { return float64(r.Resumed) }, "%.0f"},
	{"timedOut", "timed out", func(r SlurmResult) float64 { return float64(r.TimedOut) }, "%.0f"},
	{"jobsCompleted", "jobs completed", func(r SlurmResult) float64 { return float64(r.JobsCompleted) }, "%.0f"},
}

// ResSeed is one week's results: the variants at the default backfill depth, and the
// last variant (reservations + signals) at each depth of the sensitivity table.
type ResSeed struct {
	Seed        uint64        `json:"seed"`
	CourseStops int           `json:"courseVmStops"`
	ShortStops  int           `json:"shortNoticeStops"`
	Results     []SlurmResult `json:"results"`
	ByDepth     []DepthResult `json:"byBackfillDepth"`
}

// DepthResult is the reservations + signals variant at one bf_max_job_test.
type DepthResult struct {
	Depth  int         `json:"backfillDepth"`
	Result SlurmResult `json:"result"`
}

// MixResult is today and reservations + signals under another job mix (class weights)
// and backfill depth, per seed.
type MixResult struct {
	Weights []float64     `json:"weights"` // by class, in Options.Classes order
	Depth   int           `json:"backfillDepth"`
	Today   []SlurmResult `json:"today"`   // per seed
	Signals []SlurmResult `json:"signals"` // per seed: reservations + signals
}

// mixes are the job mixes of the sensitivity table: the default, and fewer short jobs.
var mixes = [][]float64{{0.45, 0.40, 0.15}, {0.25, 0.50, 0.25}, {0.10, 0.50, 0.40}}

// ResBench is what the reservations benchmark publishes.
type ResBench struct {
	Params  Params       `json:"params"`
	Policy  string       `json:"policy"`
	Options SlurmOptions `json:"options"`
	Seeds   []ResSeed    `json:"seeds"`
	// Summary: per variant and metric, median and range over the seeds; then per depth.
	Summary      []resSumm `json:"summary"`
	DepthSummary []resSumm `json:"depthSummary"`
	// DeliveredChange is the median over seeds of each variant's delivered CPU-hours
	// relative to today's (percent), with its range.
	DeliveredChange []Spread `json:"deliveredChangePercent"`
	// Mixes: the job-mix sensitivity (all seeds).
	Mixes []MixResult `json:"jobMixes"`
}

type resSumm struct {
	Name    string            `json:"name"`
	Metrics map[string]Spread `json:"metrics"`
}

// runResBench simulates the seeds (ReservationParams week, overtime-default) at the
// default options and the given backfill depths.
func runResBench(seeds int, depths []int) (*ResBench, error) {
	p, opt, spec := ReservationParams(), DefaultSlurmOptions(), OvertimeDefault()
	b := &ResBench{Params: p, Policy: spec.Name, Options: opt}
	for s := 1; s <= seeds; s++ {
		tr, err := Generate(p, uint64(s))
		if err != nil {
			return nil, err
		}
		rs := ResSeed{Seed: uint64(s)}
		for _, r := range tr.Rooms {
			for _, st := range r.Stops {
				if st.Kind == StopCourseVM {
					rs.CourseStops++
				} else {
					rs.ShortStops++
				}
			}
		}
		rates := poolRates(tr, spec, DefaultSimOptions())
		rs.Results = SimulateSlurm(tr, spec, Variants(), opt, rates)
		vs := Variants()
		k := 0
		for _, w := range mixes {
			for _, d := range []int{opt.BackfillDepth, 2000} {
				if s == 1 {
					b.Mixes = append(b.Mixes, MixResult{Weights: w, Depth: d})
				}
				o := opt
				o.BackfillDepth = d
				o.Classes = slices.Clone(opt.Classes)
				for i := range o.Classes {
					o.Classes[i].Weight = w[i]
				}
				r := SimulateSlurm(tr, spec, []Variant{vs[0], vs[len(vs)-1]}, o, rates)
				b.Mixes[k].Today = append(b.Mixes[k].Today, r[0])
				b.Mixes[k].Signals = append(b.Mixes[k].Signals, r[1])
				k++
			}
		}
		for _, d := range depths {
			o := opt
			o.BackfillDepth = d
			r := SimulateSlurm(tr, spec, vs[len(vs)-1:], o, rates)[0]
			rs.ByDepth = append(rs.ByDepth, DepthResult{Depth: d, Result: r})
		}
		b.Seeds = append(b.Seeds, rs)
	}
	summ := func(get func(ResSeed) SlurmResult) map[string]Spread {
		m := map[string]Spread{}
		for _, mt := range resMetrics {
			var v []float64
			for _, s := range b.Seeds {
				v = append(v, mt.get(get(s)))
			}
			m[mt.Key] = spread(v)
		}
		return m
	}
	for i, v := range Variants() {
		b.Summary = append(b.Summary, resSumm{Name: v.Name, Metrics: summ(func(s ResSeed) SlurmResult { return s.Results[i] })})
		var ch []float64
		for _, s := range b.Seeds {
			ch = append(ch, 100*(s.Results[i].DeliveredCPUHours/s.Results[0].DeliveredCPUHours-1))
		}
		b.DeliveredChange = append(b.DeliveredChange, spread(ch))
	}
	for k, d := range depths {
		b.DepthSummary = append(b.DepthSummary, resSumm{Name: fmt.Sprint(d), Metrics: summ(func(s ResSeed) SlurmResult { return s.ByDepth[k].Result })})
	}
	return b, nil
}

func resTable(names []string, rows []map[string]Spread, first string) string {
	var b strings.Builder
	b.WriteString("| " + first + " |")
	for _, m := range resMetrics {
		b.WriteString(" " + m.Head + " |")
	}
	b.WriteString("\n|---|")
	for range resMetrics {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for i, row := range rows {
		fmt.Fprintf(&b, "| %s |", names[i])
		for _, m := range resMetrics {
			sp := row[m.Key]
			if sp.Min == sp.Max {
				fmt.Fprintf(&b, " "+m.format+" |", sp.Median)
			} else {
				fmt.Fprintf(&b, " "+m.format+" ("+m.format+"–"+m.format+") |", sp.Median, sp.Min, sp.Max)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func one(r SlurmResult) map[string]Spread {
	m := map[string]Spread{}
	for _, mt := range resMetrics {
		v := mt.get(r)
		m[mt.Key] = Spread{v, v, v}
	}
	return m
}

func pct(s Spread) string {
	if s.Min == s.Max {
		return fmt.Sprintf("%+.1f %%", s.Median)
	}
	return fmt.Sprintf("%+.1f %% (%+.1f to %+.1f)", s.Median, s.Min, s.Max)
}

// write puts reservations.json, .md and .png into dir.
func (b *ResBench) write(dir string) error {
	j, err := json.MarshalIndent(map[string]any{
		"what": "harvest simulation with Slurm reservations and warning signals (issue 15): one Slurm queue over a synthetic 200-PC week with course-VM slots and short-notice exceptions, overtime-default (test/bench/harvest, reservations.go)",
		"unit": "CPU-hours are core-hours",
		"data": b,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "reservations.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "reservations.md"), []byte(b.markdown()), 0o644); err != nil {
		return err
	}
	return b.plot(filepath.Join(dir, "reservations.png"))
}

func (b *ResBench) markdown() string {
	var md strings.Builder
	p, o := b.Params, b.Options
	first := b.Seeds[0]
	var names []string
	for _, v := range Variants() {
		names = append(names, v.Name)
	}
	md.WriteString("# Reservations and signals: what telling Slurm in advance saves\n\n")
	fmt.Fprintf(&md, "A simulation, not a measurement (issue 15): the harvest week of [harvest.md](harvest.md) — %d PCs, %d cores each,\n"+
		"rooms of %d, the same students, lectures, walk-ins and ssh sessions, the guest under **%s** (the node agent's real\n"+
		"policy engine) — with changes that stop the guest, and **one Slurm queue** over the pool instead of an endless queue\n"+
		"per PC. Generated by `test/bench/harvest` (`reservations.go`; the week's model in `poolweek.go`). Every variant\n"+
		"replays the same week and the same job stream.\n\n", p.Hosts, p.Cores, p.RoomSize, b.Policy)
	fmt.Fprintf(&md, "**Changes that stop the guest.** Known: each booked lecture slot is a course-VM slot with probability %.2f — the\n"+
		"room's PCs reboot into the lecturer's VM and the compute guest is stopped for the slot (1 h 45 min); they are in\n"+
		"the term's timetable weeks ahead. Short notice: per weekday a Poisson number (mean %.0f for the pool) of exceptions\n"+
		"(an exam, a make-up lecture) in a free slot of a random room, added to the schedule %s before they start.\n"+
		"Seed %d has %d course-VM slots and %d short-notice exceptions.\n\n",
		p.CourseVMProb, p.ShortNoticePerDay, dur(p.ShortNoticeLead), first.Seed, first.CourseStops, first.ShortStops)
	md.WriteString("**The job stream** (a backlog that never runs dry, in submission order; whole-PC jobs that need runtime × 4\n" +
		"core-seconds, so a throttled guest runs them longer):\n\n" +
		"| class | share | runtime at full speed (lognormal) | checkpoints on a signal |\n|---|---:|---|---:|\n")
	for _, c := range o.Classes {
		fmt.Fprintf(&md, "| %s | %.0f %% | median %s, sigma %.1f, at most %s | %.0f %% |\n", c.Name, 100*c.Weight,
			dur(c.Median), c.Sigma, dur(c.Max), 100*c.CheckpointProb)
	}
	var lim []string
	for _, l := range o.Limits {
		lim = append(lim, dur(l))
	}
	fmt.Fprintf(&md, "\nUsers over-request: a job's runtime uses a fraction of its time limit drawn uniformly in [%.1f, %.1f] (mean\n"+
		"%.1f), and the request is rounded up to a usual value (%s; 24 h is the partition's maximum). Slurm kills a job at\n"+
		"its limit (TIMEOUT: its work is lost, not requeued).\n\n", o.Use[0], o.Use[1], (o.Use[0]+o.Use[1])/2, strings.Join(lim, ", "))
	fmt.Fprintf(&md, "**Slurm.** A PC whose guest runs and has no job starts one at once; backfill scans the first %d pending jobs\n"+
		"(`bf_max_job_test`, Slurm's default) in priority order. A job ends at completion, at its limit, or when the guest\n"+
		"stops under it (requeued with its priority; the work since its last checkpoint is lost).\n\n"+
		"- **no reservations (today)**: Slurm learns of a stop only when the guest stops: the first pending job starts\n"+
		"  whatever its limit, and is requeued when a course-VM slot begins under it.\n"+
		"- **reservations**: the sync daemon keeps a maintenance reservation per node over every stop window on a rolling\n"+
		"  %s horizon (a short-notice one from its announcement); a job starts on a node only if its limit ends before\n"+
		"  the node's next reservation — the first pending job that fits, else the node stays idle and tries again every\n"+
		"  %s and whenever a job is requeued.\n"+
		"- **reservations + signals**: in addition, a running job that a short-notice change will hit (its limit crosses\n"+
		"  the stop) gets a warning signal %s before the stop (at the announcement if that is later). A job that checkpoints\n"+
		"  saves its state as of the signal if %s remain before the stop, and resumes from it after the requeue (its\n"+
		"  limit unchanged); the work after the signal is lost. A job that does not checkpoint loses everything.\n\n",
		o.BackfillDepth, dur(o.Horizon), dur(o.BackfillInterval), dur(o.SignalLead), dur(o.CheckpointTime))
	md.WriteString("## Target\n\n")
	res, today := b.Summary[1].Metrics, b.Summary[0].Metrics
	sig := b.Summary[2].Metrics
	ch := b.DeliveredChange
	fmt.Fprintf(&md, "| target | measured (seeds %d–%d: median, range) | met |\n|---|---|---|\n", b.Seeds[0].Seed, b.Seeds[len(b.Seeds)-1].Seed)
	fmt.Fprintf(&md, "| jobs requeued by known schedule changes = 0 | %.0f with reservations (today: %.0f, %.0f–%.0f) | %s |\n",
		res["requeuedKnown"].Median, today["requeuedKnown"].Median, today["requeuedKnown"].Min, today["requeuedKnown"].Max, yes(res["requeuedKnown"].Max == 0))
	fmt.Fprintf(&md, "| at no more than 1 %% fewer delivered CPU-hours (bf_max_job_test=%d) | reservations %s, reservations + signals %s | %s |\n",
		o.BackfillDepth, pct(ch[1]), pct(ch[2]), yes(ch[1].Median >= -1 && ch[2].Median >= -1))
	for k, d := range b.DepthSummary {
		if d.Name == fmt.Sprint(o.BackfillDepth) {
			continue
		}
		var v []float64
		for _, s := range b.Seeds {
			v = append(v, 100*(s.ByDepth[k].Result.DeliveredCPUHours/s.Results[0].DeliveredCPUHours-1))
		}
		sp := spread(v)
		fmt.Fprintf(&md, "| the same with bf_max_job_test=%s | reservations + signals %s | %s |\n", d.Name, pct(sp), yes(sp.Median >= -1))
	}
	fmt.Fprintf(&md, "\nUseful CPU-hours (delivered minus the work lost): today %.0f, reservations %.0f, reservations + signals %.0f (medians).\n\n",
		today["usefulCpuHours"].Median, res["usefulCpuHours"].Median, sig["usefulCpuHours"].Median)
	fmt.Fprintf(&md, "## Seed %d\n\n", first.Seed)
	var rows []map[string]Spread
	for _, r := range first.Results {
		rows = append(rows, one(r))
	}
	md.WriteString(resTable(names, rows, "variant"))
	fmt.Fprintf(&md, "\n## Seeds %d–%d: median (min–max)\n\nEach seed is a different week (students, timetable, course-VM slots, short-notice changes, jobs) from the\nsame model; the range is the spread between weeks.\n\n", b.Seeds[0].Seed, b.Seeds[len(b.Seeds)-1].Seed)
	rows = nil
	for _, s := range b.Summary {
		rows = append(rows, s.Metrics)
	}
	md.WriteString(resTable(names, rows, "variant"))
	md.WriteString("\n## Backfill depth (reservations + signals)\n\nThe same weeks with `bf_max_job_test` varied; today's variant does not depend on it (the first pending job\nalways starts).\n\n")
	var dn []string
	rows = nil
	for _, s := range b.DepthSummary {
		dn = append(dn, "bf_max_job_test="+s.Name)
		rows = append(rows, s.Metrics)
	}
	md.WriteString(resTable(dn, rows, "depth"))
	md.WriteString("\n## Job mix (reservations + signals)\n\nThe idle time before reservations is filled by short jobs, so the result depends on how many there are.\n" +
		"The same weeks with fewer short and more long jobs (shares short / medium / long; each mix its own job stream,\n" +
		"today's included), at Slurm's default backfill depth and at 2000:\n\n" +
		"| job mix | bf_max_job_test | delivered vs today | useful CPU-hours, today | useful CPU-hours, reservations + signals | idle CPU-hours | requeued by known changes, today → reservations |\n" +
		"|---|---:|---|---:|---:|---:|---|\n")
	for _, m := range b.Mixes {
		var ch, ut, us, idle, rq, rr []float64
		for i := range m.Today {
			ch = append(ch, 100*(m.Signals[i].DeliveredCPUHours/m.Today[i].DeliveredCPUHours-1))
			ut, us = append(ut, m.Today[i].UsefulCPUHours), append(us, m.Signals[i].UsefulCPUHours)
			idle = append(idle, m.Signals[i].IdleCPUHours)
			rq, rr = append(rq, float64(m.Today[i].RequeuedKnown)), append(rr, float64(m.Signals[i].RequeuedKnown))
		}
		var w []string
		for _, x := range m.Weights {
			w = append(w, fmt.Sprintf("%.0f", 100*x))
		}
		fmt.Fprintf(&md, "| %s %% | %d | %s | %.0f | %.0f | %.0f | %.0f → %.0f |\n", strings.Join(w, " / "), m.Depth, pct(spread(ch)),
			spread(ut).Median, spread(us).Median, spread(idle).Median, spread(rq).Median, spread(rr).Max)
	}
	md.WriteString("\n![Where the CPU goes per variant (seed medians), and delivered/useful CPU-hours against the backfill depth](reservations.png)\n\n")
	md.WriteString("Columns: *delivered* are core-hours the jobs got (work later lost included), *useful* subtracts the work lost;\n" +
		"*requeued* counts jobs the guest stopped under, by the kind of change; *wasted* is work lost by requeues (since the\n" +
		"last checkpoint) and by jobs killed at their time limit (all of it); *idle* are core-hours a running guest could\n" +
		"have given but no pending job within the backfill window fitted before the node's next reservation; *signalled*\n" +
		"and *resumed* count warning signals and requeued jobs that restarted from the checkpoint taken at the signal.\n\n")
	md.WriteString(b.reading())
	md.WriteString("Simplifications: whole-PC jobs only; no job arrivals (a backlog) and no fair-share or age priority (submission\n" +
		"order); guest stop and start, and the reboot into and out of the course VM, take no time; the checkpoint is\n" +
		"taken at the signal instant; a requeued job is eligible again at once. The short jobs' class is what keeps a\n" +
		"node busy until just before its reservation, so the idle figure depends on that share and on the backfill depth.\n\n")
	fmt.Fprintf(&md, "Reproduce (about a minute):\n\n    go test -run '^$' -bench Reservations -benchtime 1x ./test/bench/harvest -args -out docs/benchmarks\n")
	return md.String()
}

// dur writes a duration as the tables do: "10 min", "1.5 h", "7 days".
func dur(d model.Duration) string {
	t := time.Duration(d)
	switch {
	case t >= 48*time.Hour && t%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", t/(24*time.Hour))
	case t >= time.Hour:
		return strconv.FormatFloat(t.Hours(), 'f', -1, 64) + " h"
	case t >= time.Minute:
		return strconv.FormatFloat(t.Minutes(), 'f', -1, 64) + " min"
	}
	return strconv.FormatFloat(t.Seconds(), 'f', -1, 64) + " s"
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// reading is the short interpretation, written from the figures.
func (b *ResBench) reading() string {
	t, r, s := b.Summary[0].Metrics, b.Summary[1].Metrics, b.Summary[2].Metrics
	ch := b.DeliveredChange
	var w strings.Builder
	w.WriteString("**Reading it.**\n\n")
	fmt.Fprintf(&w, "- *Today* every course-VM slot catches running jobs: %.0f requeued a week (median), %.0f CPU-hours of\n"+
		"  work lost to known changes — work the cluster delivered and threw away. Delivered CPU-hours look high because\n"+
		"  they count that work.\n", t["requeuedKnown"].Median, t["wastedKnownCpuHours"].Median)
	fmt.Fprintf(&w, "- *Reservations* bring requeues by known changes to %.0f in every week: backfill never starts a job whose limit\n"+
		"  crosses a course slot. The price is idle time before reservations (%.0f CPU-hours) and delivered CPU-hours\n"+
		"  %s against today; useful CPU-hours go from %.0f to %.0f.\n", r["requeuedKnown"].Max, r["idleCpuHours"].Median,
		pct(ch[1]), t["usefulCpuHours"].Median, r["usefulCpuHours"].Median)
	var best *resSumm
	for k := range b.DepthSummary {
		if best == nil || b.DepthSummary[k].Metrics["idleCpuHours"].Median < best.Metrics["idleCpuHours"].Median {
			best = &b.DepthSummary[k]
		}
	}
	if best != nil {
		var v []float64
		for _, sd := range b.Seeds {
			for _, d := range sd.ByDepth {
				if fmt.Sprint(d.Depth) == best.Name {
					v = append(v, 100*(d.Result.DeliveredCPUHours/sd.Results[0].DeliveredCPUHours-1))
				}
			}
		}
		fmt.Fprintf(&w, "- *Why idle*: with users over-requesting, the long classes' jobs (limits 8–24 h) fit before the next course\n"+
			"  slot only on nodes with a long free stretch (nights before a free morning, weekends); until then they stay at\n"+
			"  the head of the queue, and with a backlog they fill the backfill window of %d jobs, so a node an hour or two\n"+
			"  before its slot finds nothing short enough in the window although the queue holds short jobs further back.\n"+
			"  With bf_max_job_test=%s idle falls to %.0f CPU-hours and delivered CPU-hours are %s against today, useful\n"+
			"  %.0f (see the depth table). That is a setting of the site's slurm.conf (SchedulerParameters), or the same\n"+
			"  effect from a partition of its own for long jobs.\n",
			b.Options.BackfillDepth, best.Name, best.Metrics["idleCpuHours"].Median, pct(spread(v)), best.Metrics["usefulCpuHours"].Median)
	}
	var mixTxt []string
	for _, m := range b.Mixes {
		if m.Depth != 2000 || slices.Equal(m.Weights, mixes[0]) {
			continue
		}
		var ch, gain []float64
		for i := range m.Today {
			ch = append(ch, 100*(m.Signals[i].DeliveredCPUHours/m.Today[i].DeliveredCPUHours-1))
			gain = append(gain, 100*(m.Signals[i].UsefulCPUHours/m.Today[i].UsefulCPUHours-1))
		}
		mixTxt = append(mixTxt, fmt.Sprintf("%.0f %% short jobs: delivered %+.1f %%, useful %+.0f %%", 100*m.Weights[0], spread(ch).Median, spread(gain).Median))
	}
	if len(mixTxt) > 0 {
		fmt.Fprintf(&w, "- *Job mix*: the 1 %% bound holds only with a good share of short jobs to fill the last hours before a\n"+
			"  reservation. At bf_max_job_test=2000 with %s (medians, job-mix table). Whatever the mix, reservations deliver\n"+
			"  more *useful* CPU-hours than today once the backfill window is deep enough.\n", strings.Join(mixTxt, "; "))
	}
	fmt.Fprintf(&w, "- *Short-notice changes* still requeue the jobs running when they are announced (%.0f a week): 30 minutes is\n"+
		"  too short to drain a node. The signal lets checkpointing jobs keep their work: %.0f CPU-hours lost to them\n"+
		"  with signals against %.0f without (%.0f jobs resumed from a checkpoint).\n",
		s["requeuedShortNotice"].Median, s["wastedShortNoticeCpuHours"].Median, r["wastedShortNoticeCpuHours"].Median, s["resumedFromCheckpoint"].Median)
	deep := b.DepthSummary[len(b.DepthSummary)-1]
	fmt.Fprintf(&w, "- *Time limits*: jobs killed at their limit (%.0f today, %.0f with reservations + signals, %.0f with\n"+
		"  bf_max_job_test=%s) are the cost of cycle stealing: a guest throttled by the person at the desk runs a job slower\n"+
		"  than its user planned for. A deeper backfill fills the last hour before a daytime course slot with short jobs,\n"+
		"  whose limits leave the least slack, so more of them time out there.\n\n",
		t["timedOut"].Median, s["timedOut"].Median, deep.Metrics["timedOut"].Median, deep.Name)
	return w.String()
}

// plot draws reservations.png: left, per variant, delivered CPU-hours split into useful
// and wasted by cause, and idle (seed medians); right, delivered and useful CPU-hours of
// reservations + signals against the backfill depth, with today's as lines.
func (b *ResBench) plot(path string) error {
	left := plot.New()
	left.Title.Text = "Where the guests' CPU goes (median of the seeds)"
	left.Y.Label.Text = "CPU-hours"
	var names []string
	for _, v := range b.Summary {
		names = append(names, v.Name)
	}
	parts := []struct {
		key, label string
	}{{"usefulCpuHours", "useful"}, {"wastedKnownCpuHours", "lost: known change"}, {"wastedShortNoticeCpuHours", "lost: short notice"},
		{"wastedTimeoutCpuHours", "lost: time limit"}, {"idleCpuHours", "idle (nothing fits)"}}
	w := vg.Points(40)
	var below *plotter.BarChart
	for i, pt := range parts {
		var v plotter.Values
		for _, s := range b.Summary {
			v = append(v, s.Metrics[pt.key].Median)
		}
		bc, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		bc.Color = plotutil.Color(i)
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		left.Add(bc)
		left.Legend.Add(pt.label, bc)
	}
	left.NominalX(names...)
	left.Legend.Top, left.Legend.Left = true, false
	left.Y.Min = 0
	top := 0.0
	for _, s := range b.Summary {
		m := s.Metrics
		top = max(top, m["deliveredCpuHours"].Median+m["idleCpuHours"].Median)
	}
	left.Y.Max = 1.4 * top // room for the legend above the bars

	right := plot.New()
	right.Title.Text = "reservations + signals against bf_max_job_test"
	right.X.Label.Text = "bf_max_job_test (log scale)"
	right.Y.Label.Text = "CPU-hours"
	right.X.Scale = plot.LogScale{}
	right.X.Tick.Marker = plot.LogTicks{Prec: -1}
	right.Add(plotter.NewGrid())
	var del, use plotter.XYs
	for _, d := range b.DepthSummary {
		var x float64
		if _, err := fmt.Sscan(d.Name, &x); err != nil {
			return err
		}
		del = append(del, plotter.XY{X: x, Y: d.Metrics["deliveredCpuHours"].Median})
		use = append(use, plotter.XY{X: x, Y: d.Metrics["usefulCpuHours"].Median})
	}
	for i, s := range []struct {
		name string
		xy   plotter.XYs
		key  string
	}{{"delivered", del, "deliveredCpuHours"}, {"useful", use, "usefulCpuHours"}} {
		l, pts, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		right.Add(l, pts)
		right.Legend.Add(s.name, l)
		if len(s.xy) > 0 {
			y := b.Summary[0].Metrics[s.key].Median
			ref, err := plotter.NewLine(plotter.XYs{{X: s.xy[0].X, Y: y}, {X: s.xy[len(s.xy)-1].X, Y: y}})
			if err != nil {
				return err
			}
			ref.Color = plotutil.Color(i)
			ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			right.Add(ref)
			right.Legend.Add(s.name+", today", ref)
		}
	}
	right.Legend.Top, right.Legend.Left = false, false

	const wd, ht = 30 * vg.Centimeter, 12 * vg.Centimeter
	return benchplot.Save(path, wd, ht, [][]*plot.Plot{{left, right}})
}
