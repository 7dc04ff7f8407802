package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"

	"github.com/overtime-hpc/overtime/node-agent/interference/controller"
	"github.com/overtime-hpc/overtime/test/bench/benchplot"
	"github.com/overtime-hpc/overtime/vocab/model"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// metric is one column of the tables.
type metric struct {
	Key, Head string
	get       func(Result) float64
	format    string
}

var metrics = []metric{
	{"cpuHours", "CPU-hours delivered", func(r Result) float64 { return r.CPUHours }, "%.0f"},
	{"share", "share of max", func(r Result) float64 { return 100 * r.Share }, "%.1f %%"},
	{"usefulCpuHours", "useful CPU-hours", func(r Result) float64 { return r.UsefulCPUHours }, "%.0f"},
	{"jobsCompleted", "jobs completed", func(r Result) float64 { return float64(r.JobsCompleted) }, "%.0f"},
	{"jobsRequeued", "jobs requeued", func(r Result) float64 { return float64(r.JobsRequeued) }, "%.0f"},
	{"wastedCpuHours", "wasted CPU-hours", func(r Result) float64 { return r.WastedCPUHours }, "%.0f"},
	{"ownerActiveUnthrottledHours", "owner-active h, guest unthrottled", func(r Result) float64 { return r.ActiveUnthrottledHours }, "%.1f"},
	{"ownerActiveThrottledHours", "owner-active h, guest throttled", func(r Result) float64 { return r.ActiveThrottledHours }, "%.1f"},
	{"meanThrottleCap", "mean cap while throttled", func(r Result) float64 {
		if r.ThrottledHours == 0 {
			return math.NaN() // never throttled
		}
		return 100 * r.MeanThrottleCap
	}, "%.0f %%"},
	{"slowdownMinutesAboveTarget", "desktop slowdown-min > 1 % (modelled)", func(r Result) float64 { return r.SlowdownMinutesAbove }, "%.0f"},
	{"slowdownMinutesAboveTargetThrottled", "of them throttled", func(r Result) float64 { return r.SlowdownMinutesAboveThrottled }, "%.0f"},
	{"meanSlowdownOwnerActive", "mean slowdown, owner active (modelled)", func(r Result) float64 { return 100 * r.MeanSlowdownActive }, "%.2f %%"},
}

func tableHead() string {
	var b strings.Builder
	b.WriteString("| policy |")
	for _, m := range metrics {
		b.WriteString(" " + m.Head + " |")
	}
	b.WriteString("\n|---|")
	for range metrics {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	return b.String()
}

// cell formats v, "–" for NaN (a metric that does not apply).
func (m metric) cell(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(m.format, v)
}

// resultTable is one trace's results as a Markdown table.
func resultTable(rep *Report) string {
	var b strings.Builder
	b.WriteString(tableHead())
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s |", r.Policy)
		for _, m := range metrics {
			fmt.Fprintf(&b, " %s |", m.cell(m.get(r)))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Spread is a metric's median and range over seeds.
type Spread struct {
	Median, Min, Max float64
}

func spread(v []float64) Spread {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1]}
}

// summary is, per policy (in the reports' order), each metric's spread over the reports.
func summary(reps []*Report) []map[string]Spread {
	out := make([]map[string]Spread, len(reps[0].Results))
	for i := range out {
		out[i] = map[string]Spread{}
		for _, m := range metrics {
			var v []float64
			for _, rep := range reps {
				if x := m.get(rep.Results[i]); !math.IsNaN(x) {
					v = append(v, x)
				}
			}
			if len(v) == 0 {
				continue // not applicable: no entry (JSON has no NaN)
			}
			out[i][m.Key] = spread(v)
		}
	}
	return out
}

func summaryTable(reps []*Report) string {
	var b strings.Builder
	b.WriteString(tableHead())
	for i, s := range summary(reps) {
		fmt.Fprintf(&b, "| %s |", reps[0].Results[i].Policy)
		for _, m := range metrics {
			sp, ok := s[m.Key]
			if !ok {
				sp = Spread{math.NaN(), math.NaN(), math.NaN()}
			}
			if math.IsNaN(sp.Median) {
				b.WriteString(" – |")
				continue
			}
			fmt.Fprintf(&b, " %s (%s–%s) |", m.cell(sp.Median), m.cell(sp.Min), m.cell(sp.Max))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Bench is what the benchmark publishes.
type Bench struct {
	Params       Params       `json:"params"`
	Options      SimOptions   `json:"options"`
	Coefficients Coefficients `json:"slowdownCoefficients"`
	// Sensitivity: the adaptive policy on the first seed with the slowdown curves scaled
	// (empty without the adaptive policy).
	Sensitivity []SensitivityRow `json:"sensitivity,omitempty"`
	Reports     []*Report        `json:"reports"` // one per seed; hourly series only for the first
	Summary     []policySumm     `json:"summary"` // per policy: median, min and max over the seeds
}

type policySumm struct {
	Policy  string            `json:"policy"`
	About   string            `json:"about"`
	Metrics map[string]Spread `json:"metrics"`
}

func newBench(p Params, opt SimOptions, specs []PolicySpec, reps []*Report) *Bench {
	b := &Bench{Params: p, Options: opt, Coefficients: reps[0].Coefficients, Reports: reps}
	for i, s := range summary(reps) {
		b.Summary = append(b.Summary, policySumm{Policy: specs[i].Name, About: specs[i].About, Metrics: s})
	}
	return b
}

// SensitivityRow is one policy on one week with every slowdown coefficient scaled.
type SensitivityRow struct {
	Scale        float64 `json:"scale"`
	NoiseFree    bool    `json:"noiseFree,omitempty"` // the estimate without noise
	Policy       string  `json:"policy"`
	Share        float64 `json:"share"`
	JobsRequeued int     `json:"jobsRequeued"`
	MeanCap      float64 `json:"meanThrottleCap"`
	MinutesAbove float64 `json:"slowdownMinutesAboveTarget"`
	// MinutesAboveThrottled: of them with the guest throttled.
	MinutesAboveThrottled float64 `json:"slowdownMinutesAboveTargetThrottled"`
	MeanSlowdown          float64 `json:"meanSlowdownOwnerActive"`
}

// sensitivityScales: the coefficients from a tenth to twice; a last row at ×1 without
// estimation noise.
var sensitivityScales = []float64{0.1, 0.25, 0.5, 1, 2}

// sensitivity replays tr through spec with the model's curves scaled by each factor, and
// once more unscaled with a noise-free estimate.
func sensitivity(tr *Trace, spec PolicySpec, opt SimOptions, scales []float64) []SensitivityRow {
	base := opt.Model.Coefficients()
	var out []SensitivityRow
	for i := 0; i <= len(scales); i++ {
		f, o := 1.0, opt
		if i < len(scales) {
			f = scales[i]
		} else {
			o.EstimateSigma, o.EstimateRelSigma = 0, 0
		}
		c := Coefficients{Source: fmt.Sprintf("%s ×%g", base.Source, f)}
		for _, p := range base.Interactive {
			c.Interactive = append(c.Interactive, CapPoint{p.Cap, p.Slowdown * f})
		}
		for _, p := range base.Load {
			c.Load = append(c.Load, CapPoint{p.Cap, p.Slowdown * f})
		}
		m, err := NewSlowdownModel(c)
		if err != nil {
			panic(err) // scaling a valid model by a positive factor keeps it valid
		}
		o.Model = m
		r := Simulate(tr, []PolicySpec{spec}, o).Results[0]
		out = append(out, SensitivityRow{Scale: f, NoiseFree: i == len(scales), Policy: r.Policy, Share: r.Share, JobsRequeued: r.JobsRequeued,
			MeanCap: r.MeanThrottleCap, MinutesAbove: r.SlowdownMinutesAbove, MinutesAboveThrottled: r.SlowdownMinutesAboveThrottled,
			MeanSlowdown: r.MeanSlowdownActive})
	}
	return out
}

// Issue 16's target for the adaptive policy: at least this share of the week's maximum,
// and no job requeued by the policy.
const adaptiveShareTarget = 0.97

// verdict reads the adaptive policy's row against the target, over every seed.
func (b *Bench) verdict() string {
	idx := -1
	for i, r := range b.Reports[0].Results {
		if r.Policy == "overtime-adaptive" {
			idx = i
		}
	}
	if idx < 0 {
		return "**overtime-adaptive is not in this run**: the agent's controller (node-agent/interference/controller) is not\n" +
			"built into the simulator yet, and the simulator publishes no stand-in for it. The target (at least 97 % of the\n" +
			"week's maximum CPU-hours, no job requeued by the policy) is therefore neither met nor missed here.\n\n"
	}
	var shares, req, above, aboveT, mean, caps []float64
	byName := map[string][]float64{}
	for _, rep := range b.Reports {
		r := rep.Results[idx]
		shares, req = append(shares, r.Share), append(req, float64(r.JobsRequeued))
		above, mean, caps = append(above, r.SlowdownMinutesAbove), append(mean, r.MeanSlowdownActive), append(caps, r.MeanThrottleCap)
		aboveT = append(aboveT, r.SlowdownMinutesAboveThrottled)
		for _, o := range rep.Results {
			byName[o.Policy] = append(byName[o.Policy], o.Share)
		}
	}
	sh, rq := spread(shares), spread(req)
	met := sh.Min >= adaptiveShareTarget && rq.Max == 0
	word := "**Missed**"
	if met {
		word = "**Met**"
	}
	var md strings.Builder
	fmt.Fprintf(&md, "%s: overtime-adaptive delivers %.1f %% of the week's maximum CPU-hours (median over the seeds; %.1f-%.1f %%)\n"+
		"against the target of at least %.0f %%; jobs requeued by the policy: %.0f in the median week, %.0f at most (target 0).\n"+
		"For comparison nice19 %.1f %%, overtime-default %.1f %%.\n",
		word, 100*sh.Median, 100*sh.Min, 100*sh.Max, 100*adaptiveShareTarget, rq.Median, rq.Max,
		100*spread(byName["nice19"]).Median, 100*spread(byName["overtime-default"]).Median)
	fmt.Fprintf(&md, "Its mean cap while throttled is %.0f %% of the cores; the modelled desktop slowdown while the owner is active\n"+
		"averages %.2f %%, with %.0f owner-active minutes above the %.0f %% target, %.0f of them while throttled (the rest are\n"+
		"cluster-mode nights and weekends, where every overtime policy runs the guest at full speed whoever sits there;\n"+
		"medians over the seeds).\n\n",
		100*spread(caps).Median, 100*spread(mean).Median, spread(above).Median, 100*b.Options.SlowdownTarget, spread(aboveT).Median)
	d := controller.Defaults
	fmt.Fprintf(&md, "These slowdowns are **modelled**, not measured: they follow from the coefficient table above, and so does\n"+
		"the cap the controller settles at, hence the CPU-hours. The policy engine and the controller are the agent's\n"+
		"real code; the week, the job stream and the desktop's reaction to the cap are the model's. The controller\n"+
		"raises the cap only while the slowdown stays below target × %.1f and aims its moves at target × %.1f (its\n"+
		"defaults), so for interactive use it settles where the interactive curve crosses %.2f-%.2f %%.\n\n",
		d.Margin, d.Aim, 100*b.Options.SlowdownTarget*d.Margin, 100*b.Options.SlowdownTarget*d.Aim)
	if line := b.sensitivityReading(); line != "" {
		md.WriteString(line + "\n\n")
	}
	return md.String()
}

// sensitivityReading says up to which scale of the coefficients the share target holds.
func (b *Bench) sensitivityReading() string {
	var met, missed []SensitivityRow
	for _, r := range b.Sensitivity {
		if r.NoiseFree {
			continue
		}
		if r.Share >= adaptiveShareTarget && r.JobsRequeued == 0 {
			met = append(met, r)
		} else {
			missed = append(missed, r)
		}
	}
	c := b.Coefficients
	at := func(r SensitivityRow) string {
		return fmt.Sprintf("×%g (interactive %.2f %%, load %.2f %% at full speed)", r.Scale,
			100*r.Scale*c.Interactive[len(c.Interactive)-1].Slowdown, 100*r.Scale*c.Load[len(c.Load)-1].Slowdown)
	}
	switch {
	case len(b.Sensitivity) == 0:
		return ""
	case len(met) == 0:
		return "In the sensitivity table below (seed 1) the share target is missed at every scale of the coefficients."
	case len(missed) == 0:
		return "In the sensitivity table below (seed 1) the share target is met at every scale of the coefficients."
	}
	return fmt.Sprintf("In the sensitivity table below (seed %d) the share target is met with the coefficients scaled\n"+
		"down to %s, and missed from %s: whether the adaptive controller reaches 97 %% depends on the\n"+
		"interference matrix measuring an interactive desktop at least that little disturbed by the idle-class guest.",
		b.Reports[0].Seed, at(met[len(met)-1]), at(missed[0]))
}

func seedList(reps []*Report) string {
	var s []string
	for _, r := range reps {
		s = append(s, fmt.Sprint(r.Seed))
	}
	return strings.Join(s, ", ")
}

// write puts harvest.json, harvest.md and harvest.png into dir.
func (b *Bench) write(dir string, specs []PolicySpec) error {
	// Hourly series only for the first seed: the plot's, and enough to check by hand.
	js := *b
	js.Reports = nil
	for i, r := range b.Reports {
		c := *r
		if i > 0 {
			c.Trace.HourlyOwnerActive = nil
			c.Results = slices.Clone(r.Results)
			for j := range c.Results {
				c.Results[j].HourlyCores = nil
			}
		}
		js.Reports = append(js.Reports, &c)
	}
	j, err := json.MarshalIndent(map[string]any{
		"what": "harvest simulation: a synthetic pool week replayed through the sharing policies (test/bench/harvest)",
		"unit": "CPU-hours are core-hours; owner-active hours and slowdown-minutes are summed over hosts; slowdowns and caps are fractions (modelled, see slowdownCoefficients)",
		"data": js,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "harvest.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "harvest.md"), []byte(b.markdown(specs)), 0o644); err != nil {
		return err
	}
	return b.plot(filepath.Join(dir, "harvest.png"))
}

func (b *Bench) markdown(specs []PolicySpec) string {
	first := b.Reports[0]
	st := first.Trace
	p := b.Params
	var md strings.Builder
	md.WriteString("# Harvest: CPU from the pool, and what the desks feel\n\n")
	fmt.Fprintf(&md, "A simulation, not a measurement: a synthetic week of use of a pool of %d PCs (%d cores each, rooms of %d)\n"+
		"replayed through %d policies for the compute guest. Generated by `test/bench/harvest`; the model and its\n"+
		"parameters are documented in `test/bench/harvest/poolweek.go`, the simulator in `sim.go`, the desktop-slowdown\n"+
		"model in `slowdown.go`.\n\n",
		p.Hosts, p.Cores, p.RoomSize, len(specs))
	md.WriteString("**The week.** Per room, Monday to Friday, five lecture slots (08:15, 10:15, 12:15, 14:15, 16:15; 1 h 45 min\n" +
		"each) are booked with probability 0.6; in a booked slot each PC is used by a student with probability 0.85 for\n" +
		"most of the slot, with input bursts (mean 4 min) and short pauses (mean 1 min). Outside lectures students walk\n" +
		"in (a Poisson process per room: 6/h 10:00-16:00, 3/h 08:00-10:00 and 16:00-19:00, 1/h 19:00-23:00, 0.5/h\n" +
		"07:00-08:00, 0.05/h 23:00-07:00; weekends x0.3) for lognormal sessions (median 45 min) of input bursts (mean\n" +
		"3 min) and idle gaps (mean 2 min; one in ten a long one of 10+ min). Rare ssh logins (0.2 per PC and day).\n" +
		"A fifth (lectures) to a third (walk-ins, ssh) of the sessions run a desktop load episode (median 5 min,\n" +
		"1-2 cores). The schedule: cluster mode 22:00-07:00 on weekdays and all weekend, desktop mode otherwise\n" +
		"(lecture slots always desktop).\n\n")
	md.WriteString("**The guest.** It runs in the idle class, so the desktop comes first: at full speed it gets the cores the\n" +
		"desktop does not use, throttled at most the policy's share of the cores, frozen or stopped nothing. Each PC's\n" +
		"guest runs jobs back to back (lognormal, median 2 h on the whole PC, at most 24 h; the same job sequence under\n" +
		"every policy). Freezing delays a job; stopping the guest requeues it and its work so far is wasted.\n" +
		"*Owner-active*, the same for all policies: someone logged in (locally or by ssh) gave input in the last 5\n" +
		"minutes or runs a load episode.\n\n")
	b.slowdownSection(&md)
	md.WriteString("**The policies.**\n\n")
	for _, s := range specs {
		fmt.Fprintf(&md, "- **%s**: %s.\n", s.Name, s.About)
	}
	md.WriteString("\n## Against issue 16's target\n\n")
	md.WriteString(strings.TrimRight(b.verdict(), "\n") + "\n")
	fmt.Fprintf(&md, "\n## Seed %d\n\n", first.Seed)
	fmt.Fprintf(&md, "The week of seed %d: %d lecture slots booked, %d lecture, %d walk-in and %d ssh sessions; %.0f owner-active\n"+
		"host-hours, %.0f core-hours of desktop load. The theoretical maximum (every core, all week) is %.0f CPU-hours.\n\n",
		first.Seed, st.Lectures, st.Sessions[string(SessionLecture)], st.Sessions[string(SessionWalkIn)], st.Sessions[string(SessionSSH)],
		st.OwnerActiveHours, st.DesktopCPUHours, first.Results[0].MaxCPUHours)
	md.WriteString(resultTable(first))
	fmt.Fprintf(&md, "\n## Seeds %s: median (min–max)\n\n", seedList(b.Reports))
	md.WriteString("Each seed is a different week from the same model; the range is the spread between weeks, not a\n" +
		"measurement error.\n\n")
	md.WriteString(summaryTable(b.Reports))
	md.WriteString("\n![Delivered cores per hour under each policy, and hosts with an active owner (seed " + fmt.Sprint(first.Seed) + ")](harvest.png)\n\n")
	md.WriteString("Columns: *CPU-hours delivered* are core-hours the guests got (including work later wasted); *share of max*\n" +
		"divides by every core all week; *useful* subtracts the wasted work of requeued jobs; *jobs requeued* counts jobs\n" +
		"stopped by the policy (eviction, preemption, end of the cluster window); the owner-active columns are host-hours\n" +
		"during which an active owner shared the PC with a guest at full speed, or with a throttled guest; *mean cap while\n" +
		"throttled* is the guest's CPU cap averaged over its throttled time (– : never throttled); the two slowdown\n" +
		"columns are **modelled** (above): owner-active minutes, summed over the PCs, in which the desktop's slowdown\n" +
		fmt.Sprintf("exceeds the %.0f %% target, and the slowdown averaged over all owner-active time (0 while the guest is frozen or\n", 100*b.Options.SlowdownTarget) +
		"absent).\n\n")
	b.sensitivitySection(&md)
	md.WriteString("Reading it: nice19 is the upper bound of harvest and of disturbance (the guest never yields except through\n" +
		"the CPU scheduler). after-hours-only leaves the day unused and loses the job running at each window's end.\n" +
		"HTCondor gives the desk back completely, up to its 5 s poll, but waits 15 idle minutes to start and preempts a\n" +
		"job suspended for 10 minutes: every lecture session reaches that (its pauses are shorter than 5 minutes), and\n" +
		"so does any walk-in with 10 minutes of work without a 5-minute pause. overtime-default\n" +
		"throttles at the input event itself and keeps the job, trading a throttled guest while the owner works for\n" +
		"harvest and no lost jobs; overtime-adaptive makes the same decisions and lets the controller choose the cap\n" +
		"from the (modelled) slowdown. All overtime policies and after-hours-only run the guest at full speed in cluster\n" +
		"mode whoever sits at the PC: that is their unthrottled owner-active time (nights and weekends; the overtime\n" +
		"policies' is slightly lower because a throttle still holds for 30 s when cluster mode begins).\n\n" +
		"Simplifications: guest start and stop are instantaneous; a job finishing starts the next at once (HTCondor's\n" +
		"START is not re-checked at claim reuse); the desktop's CPU use outside load episodes is zero; pressure arises\n" +
		"only when the desktop alone wants more than the host's cores, which this model never produces (episodes use at\n" +
		"most 2 of 4 cores), so overtime-default never freezes here.\n\n")
	md.WriteString("Here every PC's guest has an endless queue of its own and nothing but the policy stops it. One Slurm queue\n" +
		"over the pool, with course-VM slots and short-notice changes that stop the guest, and what reservations and\n" +
		"warning signals save: [reservations.md](reservations.md).\n\n")
	md.WriteString("Reproduce (a few seconds; the simulation is event-driven):\n\n" +
		"    go test -run '^$' -bench Harvest -benchtime 1x ./test/bench/harvest -args -out docs/benchmarks\n\n" +
		"Regenerate the published trace of a seed (JSON, one host per line) and replay it from the file:\n\n" +
		fmt.Sprintf("    go run ./test/bench/harvest -gen -hosts %d -seed %d -out poolweek-seed%d.json\n", p.Hosts, first.Seed, first.Seed) +
		fmt.Sprintf("    go run ./test/bench/harvest -in poolweek-seed%d.json\n", first.Seed))
	return md.String()
}

// dayTicks labels the x axis (hours since Monday 00:00) with weekdays.
type dayTicks struct{}

func (dayTicks) Ticks(lo, hi float64) []plot.Tick {
	days := []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	var t []plot.Tick
	for h := 0.0; h <= hi; h += 6 {
		if h < lo {
			continue
		}
		d := int(h / 24)
		if int(h)%24 == 0 {
			t = append(t, plot.Tick{Value: h, Label: days[d%7] + " 00:00"})
		} else {
			t = append(t, plot.Tick{Value: h})
		}
	}
	return t
}

func stepLine(v []float64) plotter.XYs {
	pts := make(plotter.XYs, 0, 2*len(v))
	for h, y := range v {
		pts = append(pts, plotter.XY{X: float64(h), Y: y}, plotter.XY{X: float64(h + 1), Y: y})
	}
	return pts
}

// plot draws harvest.png for the first seed: above, the cores the guests got in each
// hour under each policy; below, the hosts with an active owner.
func (b *Bench) plot(path string) error {
	rep := b.Reports[0]
	top := plot.New()
	top.Title.Text = fmt.Sprintf("Cores delivered to the guests, hourly mean (%d PCs x %d cores, seed %d)", rep.Trace.Hosts, rep.Trace.Cores, rep.Seed)
	top.Y.Label.Text = "cores"
	top.X.Tick.Marker = dayTicks{}
	top.Add(plotter.NewGrid())
	// Bottom right: the weekend, where every curve is near the top.
	top.Legend.Top = false
	top.Legend.Left = false
	for i, r := range rep.Results {
		l, err := plotter.NewLine(stepLine(r.HourlyCores))
		if err != nil {
			return err
		}
		l.LineStyle.Width = vg.Points(1.2)
		l.LineStyle.Color = plotutil.Color(i)
		top.Add(l)
		top.Legend.Add(r.Policy, l)
	}
	top.Y.Min = 0
	bottom := plot.New()
	bottom.Title.Text = "Hosts with an active owner, hourly mean"
	bottom.Y.Label.Text = "hosts"
	bottom.X.Label.Text = "hour of the week (UTC)"
	bottom.X.Tick.Marker = dayTicks{}
	bottom.Add(plotter.NewGrid())
	l, err := plotter.NewLine(stepLine(rep.Trace.HourlyOwnerActive))
	if err != nil {
		return err
	}
	l.LineStyle.Width = vg.Points(1.2)
	bottom.Add(l)
	bottom.Y.Min = 0

	const w, h = 30 * vg.Centimeter, 18 * vg.Centimeter
	return benchplot.Save(path, w, h, [][]*plot.Plot{{top}, {bottom}})
}

// slowdownSection explains the desktop-slowdown model and prints its coefficients.
func (b *Bench) slowdownSection(md *strings.Builder) {
	c, o := b.Coefficients, b.Options
	md.WriteString("**The desktop slowdown (modelled).** Each owner-active second the desktop is slowed down by a function of\n" +
		"the guest's CPU cap (fraction of the cores: 1 at full speed in the idle class, 25 % under the fixed throttle,\n" +
		"the controller's output under the adaptive one, 0 when frozen or stopped) and of what the desktop does: a\n" +
		"*load* episode (1-2 cores busy) or *interactive* use only. The curves, interpolated linearly (0 at cap 0):\n\n")
	md.WriteString("| desktop | slowdown at cap … |\n|---|---|\n")
	for _, k := range []Activity{ActivityInteractive, ActivityLoad} {
		var pts []string
		for _, p := range c.curve(k) {
			pts = append(pts, fmt.Sprintf("%.0f %%: %.2f %%", 100*p.Cap, 100*p.Slowdown))
		}
		fmt.Fprintf(md, "| %s | %s |\n", k, strings.Join(pts, "; "))
	}
	fmt.Fprintf(md, "\nSource: %s.", c.Source)
	if strings.HasPrefix(c.Source, "default") {
		md.WriteString(" **These are placeholders, not measurements**: a plausible shape (the slowdown grows\n" +
			"with the guest's CPU use through shared caches, memory bandwidth and the turbo budget) with levels taken from\n" +
			"the literature (Linger-Longer's 0.5 % for interactive owners next to a lowest-priority guest; ~18 % for a\n" +
			"CPU-bound domain sharing caches under Xen), to be replaced by the interference matrix's measurements\n" +
			"(`-interference docs/benchmarks/interference/interference.json`, its `simCoefficients`). Every slowdown number\n" +
			"below is only as good as these curves; the sensitivity table shows how the verdict moves with them.")
	}
	fmt.Fprintf(md, "\n\n**The adaptive controller** is the agent's own code (node-agent/interference/controller, its default\n"+
		"gains), not a model of it, driven as the agent drives it (node-agent/agent/control.go): told the owner state\n"+
		"when the throttle begins (at the input event) and ends, its cap applied only when it moves by 2 %% of the cores\n"+
		"or more, and stepped at the end of every %d ms tick (the agent's signals tick) with that tick's modelled\n"+
		"slowdown plus Gaussian estimation noise, σ = %.2f × slowdown + %.2f percentage points (a seeded stream per PC;\n"+
		"this reads the estimator's placeholder interval, ±(0.5 × slowdown + 0.5 pp), as a 95 %% interval), with that\n"+
		"interval as Low..High. It targets %.0f %% and starts at controller.StartCapFor of the profile a calibration would\n"+
		"measure on the modelled desktop (the cap under which a load episode stays within the target: %.0f %% here).\n\n",
		o.ControlTick.Milliseconds(), o.EstimateRelSigma, 100*o.EstimateSigma, 100*o.SlowdownTarget,
		100*adaptiveParams(Env{Model: mustModel(c), Target: o.SlowdownTarget}, model.DefaultPolicy()).StartCap)
}

// sensitivitySection prints the adaptive policy with the curves scaled.
func (b *Bench) sensitivitySection(md *strings.Builder) {
	if len(b.Sensitivity) == 0 {
		return
	}
	fmt.Fprintf(md, "**Sensitivity to the slowdown coefficients** (seed %d, %s, every coefficient times the scale; the\n"+
		"fixed and reference policies' CPU-hours do not depend on them):\n\n", b.Reports[0].Seed, b.Sensitivity[0].Policy)
	md.WriteString("| scale | share of max | jobs requeued | mean cap while throttled | slowdown-min > target | of them throttled | mean slowdown, owner active |\n" +
		"|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range b.Sensitivity {
		scale := fmt.Sprintf("×%g", r.Scale)
		if r.NoiseFree {
			scale += ", no estimation noise"
		}
		fmt.Fprintf(md, "| %s | %.1f %% | %d | %.0f %% | %.0f | %.0f | %.2f %% |\n", scale, 100*r.Share, r.JobsRequeued, 100*r.MeanCap,
			r.MinutesAbove, r.MinutesAboveThrottled, 100*r.MeanSlowdown)
	}
	md.WriteString("\n")
}

// mustModel is the model of coefficients already validated.
func mustModel(c Coefficients) *SlowdownModel {
	m, err := NewSlowdownModel(c)
	if err != nil {
		panic(err)
	}
	return m
}
