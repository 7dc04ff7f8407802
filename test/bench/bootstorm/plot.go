package main

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"

	"github.com/overtime-hpc/overtime/test/bench/benchplot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writePlot draws bootstorm.png: on the left, clients served over time in the storms
// (the run with the median "all served" of each N); on the right, the distribution of
// the kernel+initrd time per client over HTTP and over TFTP in the largest comparison.
func (r *report) writePlot(path string) error {
	left := plot.New()
	left.Title.Text = "Boot storm: clients served (kernel+initrd over HTTP)"
	left.X.Label.Text = "seconds since the room was switched on"
	left.Y.Label.Text = "clients served"
	left.Legend.Top, left.Legend.Left = false, false
	left.Add(plotter.NewGrid())
	type series struct {
		kind, name string
		n          int
	}
	var ss []series
	for k := len(r.Options.StormN) - 1; k >= 0; k-- { // the largest first, so that the smaller stay visible on top
		ss = append(ss, series{"storm", fmt.Sprintf("N=%d", r.Options.StormN[k]), r.Options.StormN[k]})
	}
	for _, n := range r.Options.SpreadN {
		ss = append(ss, series{"spread", fmt.Sprintf("N=%d, power-on over %.0f s", n, r.Options.Spread), n},
			series{"spread-tftp-max", fmt.Sprintf("N=%d, power-on over %.0f s, tftp-max=%d", n, r.Options.Spread, 2*n), n})
	}
	maxX, maxY := 0.0, 0.0
	for i, s := range ss {
		run := medianRun(r.runs(s.kind, "http", s.n))
		if run == nil {
			continue
		}
		l, err := plotter.NewLine(stepXYs(run.PerClient.EndMs))
		if err != nil {
			return err
		}
		l.LineStyle.Width = vg.Points(1.5)
		l.LineStyle.Color = plotutil.Color(i)
		if s.kind != "storm" {
			l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		left.Add(l)
		if run.Failures > 0 {
			s.name += fmt.Sprintf(" (%d failed)", run.Failures)
		}
		left.Legend.Add(s.name, l)
		maxX, maxY = max(maxX, run.AllServedMs/1000), max(maxY, float64(s.n))
	}
	left.X.Tick.Marker = stepTicks(niceStep(maxX))
	left.Y.Tick.Marker = stepTicks(niceStep(maxY))

	right := plot.New()
	right.Y.Label.Text = "fraction of clients"
	right.X.Label.Text = "kernel+initrd time per client, s (log scale)"
	right.Add(plotter.NewGrid())
	if len(r.Options.CompareN) > 0 {
		n := r.Options.CompareN[len(r.Options.CompareN)-1]
		right.Title.Text = fmt.Sprintf("N=%d: kernel+initrd per client, HTTP (red) vs TFTP only (green)", n)
		for j, tr := range []string{"http", "tftp"} {
			var xs []float64
			for _, run := range r.runs("compare", tr, n) {
				for _, v := range run.PerClient.PayloadMs {
					xs = append(xs, v/1000)
				}
			}
			if len(xs) == 0 {
				continue
			}
			l, err := plotter.NewLine(cdfXYs(xs))
			if err != nil {
				return err
			}
			l.LineStyle.Width = vg.Points(1.5)
			l.LineStyle.Color = []color.Color{plotutil.Color(0), plotutil.Color(1)}[j]
			right.X.Scale = plot.LogScale{} // only with data: an empty log axis panics
			right.X.Tick.Marker = plot.LogTicks{Prec: -1}
			right.Add(l)
		}
	}

	const w, h = 30 * vg.Centimeter, 11 * vg.Centimeter
	return benchplot.Save(path, w, h, [][]*plot.Plot{{left, right}})
}

// medianRun is the run whose "all served" is the median (the lower one for an even count).
func medianRun(runs []*runResult) *runResult {
	if len(runs) == 0 {
		return nil
	}
	s := append([]*runResult(nil), runs...)
	sort.Slice(s, func(i, j int) bool { return s[i].AllServedMs < s[j].AllServedMs })
	return s[(len(s)-1)/2]
}

// stepXYs is the count of clients served by each instant, as a staircase.
func stepXYs(endMs []float64) plotter.XYs {
	e := append([]float64(nil), endMs...)
	sort.Float64s(e)
	pts := plotter.XYs{{X: 0, Y: 0}}
	for i, v := range e {
		pts = append(pts, plotter.XY{X: v / 1000, Y: float64(i)}, plotter.XY{X: v / 1000, Y: float64(i + 1)})
	}
	return pts
}

func cdfXYs(xs []float64) plotter.XYs {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var pts plotter.XYs
	for i, v := range s {
		v = max(v, 1e-3)
		pts = append(pts, plotter.XY{X: v, Y: float64(i) / float64(len(s))}, plotter.XY{X: v, Y: float64(i+1) / float64(len(s))})
	}
	return pts
}

// stepTicks labels multiples of a step with plain numbers.
type stepTicks float64

func (st stepTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	step := float64(st)
	for v := math.Ceil(lo/step) * step; v <= hi+step/1e6; v += step {
		t = append(t, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return t
}

// niceStep is a 1, 2 or 5 times a power of ten that cuts 0..max into about 5 parts.
func niceStep(max float64) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}
