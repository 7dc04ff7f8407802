package web

// Harvest and interference (docs/interference.md): what the compute guests got out of
// the pools and what it cost the desktops, from what agents report — job reports
// (wire.JobReport: the guest's CPU seconds, the desktop slowdown estimate with its
// interval) and heartbeats (the guest's CPU seconds so far, the adaptive controller's
// slowdown estimate and cap, the host's calibration profile). Per pool a table; per host
// the reports and a server-rendered SVG chart of CPU-hours and slowdown by day.

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func (u *UI) harvestRoutes() {
	u.mux.HandleFunc("GET "+Prefix+"harvest", u.page(u.harvest))
	u.mux.HandleFunc("GET "+Prefix+"harvest/hosts/{host}", u.page(u.harvestHost))
}

// HarvestStats sums job reports and heartbeats of a set of hosts.
type HarvestStats struct {
	Name           string
	Hosts          int
	Reports        int
	CPUHours       float64 // guest CPU from job reports
	MedianSlowdown float64 // of the reports' desktop slowdown estimates
	MeanSlowdown   float64
	Calibrated     int     // hosts with an interference profile
	Reporting      int     // hosts with a live heartbeat
	LiveCPUHours   float64 // guest CPU the live agents count since they started
	LiveSlowdown   float64 // mean of the controllers' current estimates
	LastReport     time.Time
}

func (s *HarvestStats) add(reports []wire.JobReport, st *wire.AgentStatus, slows *[]float64, live *[]float64) {
	s.Hosts++
	s.Reports += len(reports)
	for _, r := range reports {
		s.CPUHours += r.GuestCPUSeconds / 3600
		*slows = append(*slows, r.DesktopSlowdown)
		if r.End.After(s.LastReport) {
			s.LastReport = r.End
		}
	}
	if st != nil {
		if st.Interference != nil {
			s.Calibrated++
		}
		if !st.Stale {
			s.Reporting++
			s.LiveCPUHours += st.GuestCPUSeconds / 3600
			*live = append(*live, st.Slowdown)
		}
	}
}

func (s *HarvestStats) finish(slows, live []float64) {
	s.MedianSlowdown, s.MeanSlowdown = median(slows), mean(slows)
	s.LiveSlowdown = mean(live)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

type harvestPage struct {
	Page
	Pools []HarvestStats
	Total HarvestStats
	Pool  string         // the pool whose hosts are listed ("" : none chosen)
	Hosts []HarvestStats // per host of Pool
}

// reportsByHost groups the kept job reports by host.
func (u *UI) reportsByHost() map[string][]wire.JobReport {
	out := map[string][]wire.JobReport{}
	for _, r := range u.svc.Agents.JobReports("") {
		out[r.Host] = append(out[r.Host], r)
	}
	return out
}

func (u *UI) harvest(q *Req) {
	site := q.Snap.Site
	pg := harvestPage{Page: u.Base(q, "Harvest and interference", "harvest"), Pool: q.URL.Query().Get("pool")}
	if pg.Pool != "" && (site.Pool(pg.Pool) == nil || !MaySeePool(q.P, pg.Pool)) {
		u.Fail(q, http.StatusNotFound, "no pool "+pg.Pool)
		return
	}
	reports, statuses := u.reportsByHost(), u.statusMap(q)
	stats := map[string]*HarvestStats{}
	slows, live := map[string]*[]float64{}, map[string]*[]float64{}
	var allSlows, allLive []float64
	for _, name := range VisiblePools(q) {
		stats[name], slows[name], live[name] = &HarvestStats{Name: name}, new([]float64), new([]float64)
	}
	pg.Total.Name = "all shown pools"
	for i := range site.Hosts {
		h := &site.Hosts[i]
		ps := stats[h.Pool]
		if ps == nil {
			continue
		}
		rs, st := reports[h.Name], statuses[h.Name]
		ps.add(rs, st, slows[h.Pool], live[h.Pool])
		pg.Total.add(rs, st, &allSlows, &allLive)
		if h.Pool == pg.Pool {
			hs := HarvestStats{Name: h.Name}
			var s, l []float64
			hs.add(rs, st, &s, &l)
			hs.finish(s, l)
			pg.Hosts = append(pg.Hosts, hs)
		}
	}
	for _, name := range VisiblePools(q) {
		stats[name].finish(*slows[name], *live[name])
		pg.Pools = append(pg.Pools, *stats[name])
	}
	pg.Total.finish(allSlows, allLive)
	u.Render(q, http.StatusOK, "harvest", pg)
}

// Bar is one day of the chart.
type Bar struct {
	X, Y, W, H   int // CPU-hours bar
	SY, SH       int // slowdown bar
	Label        string
	CPUHours     float64
	Slowdown     float64
	Reports      int
	LabelX, Base int
}

// Chart is a server-rendered SVG bar chart: guest CPU-hours per day (left bars) and the
// mean desktop slowdown of that day's reports (right bars).
type Chart struct {
	Width, Height, Base int
	Bars                []Bar
	MaxCPUHours         float64
	MaxSlowdown         float64
	Days                int
}

const chartDays = 14

// dayChart buckets reports by the site-local day they ended, for the chartDays days up
// to now.
func dayChart(reports []wire.JobReport, now time.Time, loc *time.Location) Chart {
	c := Chart{Width: 40 + chartDays*40, Height: 170, Base: 140, Days: chartDays}
	today := time.Date(now.In(loc).Year(), now.In(loc).Month(), now.In(loc).Day(), 0, 0, 0, 0, loc)
	first := today.AddDate(0, 0, -(chartDays - 1))
	cpu := make([]float64, chartDays)
	slow := make([][]float64, chartDays)
	for _, r := range reports {
		t := r.End.In(loc)
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		i := int(d.Sub(first).Hours()/24 + 0.5)
		if d.Before(first) || i < 0 || i >= chartDays {
			continue
		}
		cpu[i] += r.GuestCPUSeconds / 3600
		slow[i] = append(slow[i], r.DesktopSlowdown)
	}
	for i := range cpu {
		c.MaxCPUHours = max(c.MaxCPUHours, cpu[i])
		c.MaxSlowdown = max(c.MaxSlowdown, mean(slow[i]))
	}
	const plot = 120
	for i := range cpu {
		b := Bar{X: 30 + i*40, W: 16, Label: first.AddDate(0, 0, i).Format("01-02"), CPUHours: cpu[i],
			Slowdown: mean(slow[i]), Reports: len(slow[i]), Base: c.Base}
		b.LabelX = b.X + 16
		if c.MaxCPUHours > 0 {
			b.H = int(cpu[i] / c.MaxCPUHours * plot)
		}
		if c.MaxSlowdown > 0 {
			b.SH = int(b.Slowdown / c.MaxSlowdown * plot)
		}
		b.Y, b.SY = c.Base-b.H, c.Base-b.SH
		c.Bars = append(c.Bars, b)
	}
	return c
}

type harvestHostPage struct {
	Page
	Host    *model.Host
	Stats   HarvestStats
	Status  *wire.AgentStatus
	Agent   AgentView
	Reports []wire.JobReport // newest first
	Chart   Chart
}

func (u *UI) harvestHost(q *Req) {
	h := q.Snap.Site.Host(q.PathValue("host"))
	if h == nil || !MaySeePool(q.P, h.Pool) {
		u.Fail(q, http.StatusNotFound, "no host "+q.PathValue("host"))
		return
	}
	reports := u.svc.Agents.JobReports(h.Name)
	st := u.statusMap(q)[h.Name]
	pg := harvestHostPage{Page: u.Base(q, "Harvest on "+h.Name, "harvest"), Host: h, Status: st, Agent: ViewAgent(st),
		Chart: dayChart(reports, q.Now, q.Snap.Engine.Location())}
	pg.Stats.Name = h.Name
	var s, l []float64
	pg.Stats.add(reports, st, &s, &l)
	pg.Stats.finish(s, l)
	pg.Reports = append(pg.Reports, reports...)
	sort.SliceStable(pg.Reports, func(i, j int) bool { return pg.Reports[i].End.After(pg.Reports[j].End) })
	u.Render(q, http.StatusOK, "harvest_host", pg)
}

// slowdownRange renders a report's desktop slowdown with its interval.
func slowdownRange(r wire.JobReport) string {
	s := fmt.Sprintf("%.1f%%", 100*r.DesktopSlowdown)
	if r.SlowdownHigh > 0 {
		s += fmt.Sprintf(" (%.1f–%.1f%%)", 100*r.SlowdownLow, 100*r.SlowdownHigh)
	}
	return s
}
