// Package benchplot writes the benchmarks' figures: a grid of gonum plots, aligned, as one
// PNG. Every benchmark that draws more than one panel uses it, so that the figures share
// their margins and the file handling is written once.
package benchplot

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Save draws rows of plots (rows[r][c]) aligned on a w × h canvas and writes it to path
// as PNG.
func Save(path string, w, h vg.Length, rows [][]*plot.Plot) error {
	img := vgimg.New(w, h)
	tiles := draw.Tiles{Rows: len(rows), Cols: len(rows[0]), PadX: vg.Centimeter, PadY: vg.Centimeter / 2,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 5}
	c := plot.Align(rows, tiles, draw.New(img))
	for r := range rows {
		for k, p := range rows[r] {
			p.Draw(c[r][k])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
