package main

import (
	"fmt"
	"io"
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

// cdf is the empirical distribution of ds: x in ms, y the fraction <= x.
func cdf(ds []time.Duration) plotter.XYs {
	s := slices.Clone(ds)
	slices.Sort(s)
	xys := make(plotter.XYs, len(s))
	for i, d := range s {
		xys[i].X = float64(d) / float64(time.Millisecond)
		xys[i].Y = float64(i+1) / float64(len(s))
	}
	return xys
}

// cdfPlot is one panel: a CDF line per named series, in order.
func cdfPlot(title string, series ...any) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "fraction of operations"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	if err := plotutil.AddLines(p, series...); err != nil {
		return nil, fmt.Errorf("plot %q: %w", title, err)
	}
	return p, nil
}

// plots builds one panel per phase that ran.
func (r *results) plots(conc int) ([]*plot.Plot, error) {
	var ps []*plot.Plot
	add := func(p *plot.Plot, err error) error {
		if err == nil {
			ps = append(ps, p)
		}
		return err
	}
	if r.seq != nil {
		c, p := r.seq.by["catena"], r.seq.by["plain"]
		if err := add(cdfPlot("(a) sequential, cnitool",
			"catena ADD", cdf(c.add), "plain ADD", cdf(p.add), "catena DEL", cdf(c.del), "plain DEL", cdf(p.del))); err != nil {
			return nil, err
		}
	}
	if r.conc != nil {
		a, d := r.conc.add, r.conc.del
		if err := add(cdfPlot(fmt.Sprintf("(b) %d at once, cnitool", conc),
			"catena ADD", cdf(all(a["catena"])), "plain ADD", cdf(all(a["plain"])),
			"catena DEL", cdf(all(d["catena"])), "plain DEL", cdf(all(d["plain"])))); err != nil {
			return nil, err
		}
	}
	if len(r.scale) > 0 {
		var series []any
		for _, lv := range r.scale {
			series = append(series, fmt.Sprintf("ADD, %d records", lv.records), cdf(lv.lat.add))
		}
		for _, lv := range r.scale {
			series = append(series, fmt.Sprintf("DEL, %d records", lv.records), cdf(lv.lat.del))
		}
		if err := add(cdfPlot("(c) catena with N records", series...)); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// writePlot draws the panels side by side as a PNG at path, and copies it
// to copyTo if set.
func (r *results) writePlot(path, copyTo string, conc int) error {
	ps, err := r.plots(conc)
	if err != nil {
		return err
	}
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
	for _, dst := range []string{path, copyTo} {
		if dst == "" {
			continue
		}
		if err := writePNG(img, dst); err != nil {
			return err
		}
	}
	return nil
}

func writePNG(img *vgimg.Canvas, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return createWith(path, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
		return err
	})
}
