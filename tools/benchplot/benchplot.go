// Package benchplot draws the benchmarks' latency CDFs as PNG files: one
// panel per measurement, side by side, a line per named series. The node
// bench (tools/nodebench) and make bench (tools/bench) share it.
//
// Files:
//
//	benchplot.go  CDF, Panel and WritePNG
package benchplot

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// CDF is the empirical distribution of ds: x in ms, y the fraction <= x.
func CDF(ds []time.Duration) plotter.XYs {
	s := slices.Clone(ds)
	slices.Sort(s)
	xys := make(plotter.XYs, len(s))
	for i, d := range s {
		xys[i].X = float64(d) / float64(time.Millisecond)
		xys[i].Y = float64(i+1) / float64(len(s))
	}
	return xys
}

// Panel is one panel: a CDF line per named series, given as name then
// points (plotutil.AddLines' arguments), in order; yLabel names what the
// fractions count.
func Panel(title, yLabel string, series ...any) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = yLabel
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	if err := plotutil.AddLines(p, series...); err != nil {
		return nil, fmt.Errorf("plot %q: %w", title, err)
	}
	return p, nil
}

// WritePNG draws the panels side by side, 380 by 340 points each, as a PNG
// at every path given (its directory made if need be). No panel, no file.
func WritePNG(ps []*plot.Plot, paths ...string) error {
	if len(ps) == 0 {
		return nil
	}
	img := vgimg.New(vg.Points(float64(380*len(ps))), vg.Points(340))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Millimeter * 4, PadY: vg.Millimeter,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{ps}, tiles, dc)
	for i, p := range ps {
		p.Draw(canvases[0][i])
	}
	for _, path := range paths {
		if err := writeFile(img, path); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(img *vgimg.Canvas, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("plot: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: close %s: %w", path, err)
	}
	return nil
}
