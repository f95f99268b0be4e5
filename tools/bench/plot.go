package main

import (
	"fmt"

	"gonum.org/v1/plot"

	"github.com/catena-cni/catena/tools/benchplot"
)

// cdfPlot is benchplot's panel, its y axis cnitool's operations.
func cdfPlot(title string, series ...any) (*plot.Plot, error) {
	return benchplot.Panel(title, "fraction of operations", series...)
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
			"catena ADD", benchplot.CDF(c.add), "plain ADD", benchplot.CDF(p.add), "catena DEL", benchplot.CDF(c.del), "plain DEL", benchplot.CDF(p.del))); err != nil {
			return nil, err
		}
	}
	if r.conc != nil {
		a, d := r.conc.add, r.conc.del
		if err := add(cdfPlot(fmt.Sprintf("(b) %d at once, cnitool", conc),
			"catena ADD", benchplot.CDF(all(a["catena"])), "plain ADD", benchplot.CDF(all(a["plain"])),
			"catena DEL", benchplot.CDF(all(d["catena"])), "plain DEL", benchplot.CDF(all(d["plain"])))); err != nil {
			return nil, err
		}
	}
	if len(r.scale) > 0 {
		var series []any
		for _, lv := range r.scale {
			series = append(series, fmt.Sprintf("ADD, %d records", lv.records), benchplot.CDF(lv.lat.add))
		}
		for _, lv := range r.scale {
			series = append(series, fmt.Sprintf("DEL, %d records", lv.records), benchplot.CDF(lv.lat.del))
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
	paths := []string{path}
	if copyTo != "" {
		paths = append(paths, copyTo)
	}
	return benchplot.WritePNG(ps, paths...)
}
