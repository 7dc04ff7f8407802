// Command interferenceplot draws the figures of `overtime-agent bench interference` from
// its interference.json:
//
//   - interference-tradeoff.png: one panel per isolation policy, the desktop's slowdown
//     against the harvest of every cell under that policy (medians with their 95%
//     intervals as bars, labelled desktop×guest, backends other than process marked);
//
//   - interference-latency.png: one panel per policy, the wakeup desktop workload's
//     wake-up latency distribution (complementary CDF on log axes, the runs' percentiles
//     pooled over rounds) alone and next to the cpu guest, per backend.
//
//     go run ./test/bench/interferenceplot -in docs/benchmarks/interference/interference.json
package main

import (
	"flag"
	"fmt"
	"image/color"
	"log"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/overtime-hpc/overtime/node-agent/interference/matrix"
	"github.com/overtime-hpc/overtime/test/bench/benchplot"
)

func main() {
	in := flag.String("in", "docs/benchmarks/interference/interference.json", "the matrix's JSON")
	out := flag.String("out", "", "directory for the PNGs (default: the JSON's)")
	flag.Parse()
	if *out == "" {
		*out = filepath.Dir(*in)
	}
	rep, err := matrix.Load(*in)
	if err != nil {
		log.Fatal(err)
	}
	if err := tradeoff(rep, filepath.Join(*out, "interference-tradeoff.png")); err != nil {
		log.Fatal(err)
	}
	if err := latency(rep, filepath.Join(*out, "interference-latency.png")); err != nil {
		log.Fatal(err)
	}
}

// policies present in the report, in matrix.Policies order.
func policies(rep *matrix.Report) []string {
	have := map[string]bool{}
	for _, s := range rep.Cells {
		have[s.Policy] = true
	}
	var ps []string
	for _, p := range matrix.Policies {
		if have[p] {
			ps = append(ps, p)
		}
	}
	return ps
}

// grid lays panels out in rows of cols, filling the last row with empty plots.
func grid(panels []*plot.Plot, cols int) [][]*plot.Plot {
	var rows [][]*plot.Plot
	for i := 0; i < len(panels); i += cols {
		row := panels[i:min(i+cols, len(panels))]
		for len(row) < cols {
			e := plot.New()
			e.HideAxes()
			row = append(row, e)
		}
		rows = append(rows, row)
	}
	return rows
}

type errPoints struct {
	plotter.XYs
	plotter.XErrors
	plotter.YErrors
}

func tradeoff(rep *matrix.Report, path string) error {
	ps := policies(rep)
	if len(ps) == 0 {
		return fmt.Errorf("no cells")
	}
	var panels []*plot.Plot
	for _, pol := range ps {
		p := plot.New()
		p.Title.Text = pol
		p.X.Label.Text = "harvest (share of the idle CPU)"
		p.Y.Label.Text = "desktop slowdown %"
		p.Add(plotter.NewGrid())
		backends := map[string]*errPoints{}
		var labels plotter.XYLabels
		var order []string
		for _, s := range rep.Cells {
			if s.Policy != pol || s.Slowdown == nil || s.Harvest == nil {
				continue
			}
			e := backends[s.Backend]
			if e == nil {
				e = &errPoints{}
				backends[s.Backend] = e
				order = append(order, s.Backend)
			}
			x, y := s.Harvest.Median, 100*s.Slowdown.Median
			e.XYs = append(e.XYs, plotter.XY{X: x, Y: y})
			e.XErrors = append(e.XErrors, struct{ Low, High float64 }{x - s.Harvest.Low, s.Harvest.High - x})
			e.YErrors = append(e.YErrors, struct{ Low, High float64 }{y - 100*s.Slowdown.Low, 100*s.Slowdown.High - y})
			labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: y})
			labels.Labels = append(labels.Labels, s.Desktop+"×"+s.Guest)
		}
		sort.Strings(order)
		for i, be := range order {
			e := backends[be]
			sc, err := plotter.NewScatter(e)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Color = plotutil.Color(i)
			sc.GlyphStyle.Shape = plotutil.Shape(i)
			sc.GlyphStyle.Radius = vg.Points(3)
			xe, err := plotter.NewXErrorBars(e)
			if err != nil {
				return err
			}
			ye, err := plotter.NewYErrorBars(e)
			if err != nil {
				return err
			}
			xe.LineStyle.Color, ye.LineStyle.Color = plotutil.Color(i), plotutil.Color(i)
			p.Add(xe, ye, sc)
			p.Legend.Add(be, sc)
		}
		if len(labels.XYs) > 0 {
			l, err := plotter.NewLabels(labels)
			if err != nil {
				return err
			}
			for i := range l.TextStyle {
				l.TextStyle[i].Font.Size = vg.Points(7)
				l.TextStyle[i].XAlign = draw.XLeft
			}
			l.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(2)}
			p.Add(l)
		}
		// The target: slowdown <= 1% at harvest >= 95%.
		tgt, _ := plotter.NewLine(plotter.XYs{{X: 0.95, Y: 1}, {X: math.Max(1.2, p.X.Max), Y: 1}})
		if tgt != nil {
			tgt.LineStyle.Color = color.Gray{Y: 100}
			tgt.LineStyle.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(tgt)
		}
		p.X.Min = math.Min(0, p.X.Min)
		p.Legend.Top = true
		panels = append(panels, p)
	}
	rows := grid(panels, 4)
	return benchplot.Save(path, 40*vg.Centimeter, vg.Length(len(rows))*11*vg.Centimeter, rows)
}

// pooled is the percentile arrays of runs concatenated (each run weighs the same).
func pooled(runs []matrix.Run) []float64 {
	var all []float64
	for _, r := range runs {
		for _, v := range r.DesktopPct {
			all = append(all, math.Max(v, 1))
		}
	}
	sort.Float64s(all)
	return all
}

// ccdf is the share of xs (sorted) at or above each value: the tail, where p99 lives,
// stays visible on a log axis.
func ccdf(xs []float64) plotter.XYs {
	pts := make(plotter.XYs, len(xs))
	for i, x := range xs {
		pts[i] = plotter.XY{X: x, Y: float64(len(xs)-i) / float64(len(xs))}
	}
	return pts
}

func latency(rep *matrix.Report, path string) error {
	var alone []matrix.Run
	both := map[string]map[string][]matrix.Run{} // policy → backend → runs
	for _, r := range rep.Runs {
		if r.Desktop != "wakeup" || r.Error != "" || len(r.DesktopPct) == 0 {
			continue
		}
		switch {
		case r.Phase == matrix.PhaseDesktop:
			alone = append(alone, r)
		case r.Phase == matrix.PhaseBoth && r.Guest == "cpu":
			if both[r.Policy] == nil {
				both[r.Policy] = map[string][]matrix.Run{}
			}
			both[r.Policy][r.Backend] = append(both[r.Policy][r.Backend], r)
		}
	}
	var panels []*plot.Plot
	for _, pol := range matrix.Policies {
		if both[pol] == nil {
			continue
		}
		p := plot.New()
		p.Title.Text = "wakeup × cpu: " + pol
		p.X.Label.Text = "wake-up latency µs (log scale)"
		p.Y.Label.Text = "share ≥ x (log)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		if a := pooled(alone); len(a) > 0 {
			l, err := plotter.NewLine(ccdf(a))
			if err != nil {
				return err
			}
			l.LineStyle.Width = vg.Points(1.5)
			l.LineStyle.Color = color.Black
			p.Add(l)
			p.Legend.Add("desktop alone", l)
		}
		var bes []string
		for be := range both[pol] {
			bes = append(bes, be)
		}
		sort.Strings(bes)
		for i, be := range bes {
			l, err := plotter.NewLine(ccdf(pooled(both[pol][be])))
			if err != nil {
				return err
			}
			l.LineStyle.Width = vg.Points(1.5)
			l.LineStyle.Color = plotutil.Color(i)
			p.Add(l)
			p.Legend.Add("with guest ("+be+")", l)
		}
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top, p.Legend.Left = false, true
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		log.Printf("no wakeup × cpu cells: %s not drawn", path)
		return nil
	}
	rows := grid(panels, 4)
	return benchplot.Save(path, 40*vg.Centimeter, vg.Length(len(rows))*10*vg.Centimeter, rows)
}
