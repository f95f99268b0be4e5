// Command traceplot draws one trace, as Jaeger's query API returns it
// (GET /api/traces/{id}: {"data":[{"spans":[...],"processes":{...}}]}), as
// a waterfall PNG: a row per span, under its parent (marked ">" by depth) in start
// order, its bar from its start to its end on a time axis from the trace's
// first start, red when its status is an error. The docs' picture of a
// trace (docs/trace.png) is drawn by it from the trace the integration
// tests read back from Jaeger (bin/trace-failed-add.json):
//
//	go run ./tools/traceplot -in bin/trace-failed-add.json -out docs/trace.png
//
// Files:
//
//	main.go  main, the trace's rows (Rows) and the plot (Plot)
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// maxInput bounds the trace file read.
const maxInput = 16 << 20

// trace is the query API's answer: its traces, their spans and processes.
type trace struct {
	Data []struct {
		Spans []struct {
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			StartTime int64 `json:"startTime"` // µs since the epoch
			Duration  int64 `json:"duration"`  // µs
			Tags      []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
			ProcessID string `json:"processID"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

// Row is one span of the waterfall.
type Row struct {
	Label      string // marked by depth: "> CNI ADD [catena]" under a root
	Start, End time.Duration
	Error      bool
}

// Rows lays the trace's spans out: each under its parent, children in start
// order, times from the earliest start.
func Rows(raw []byte) ([]Row, error) {
	var tr trace
	if err := json.Unmarshal(raw, &tr); err != nil {
		return nil, fmt.Errorf("traceplot: not a Jaeger trace: %w", err)
	}
	if len(tr.Data) != 1 || len(tr.Data[0].Spans) == 0 {
		return nil, fmt.Errorf("traceplot: want one trace with spans, have %d traces", len(tr.Data))
	}
	d := tr.Data[0]
	type span struct {
		id, parent, name, service string
		start, dur                int64
		err                       bool
	}
	ids := map[string]bool{}
	var spans []span
	t0 := d.Spans[0].StartTime
	for _, s := range d.Spans {
		sp := span{id: s.SpanID, name: s.OperationName, service: d.Processes[s.ProcessID].ServiceName, start: s.StartTime, dur: s.Duration}
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				sp.parent = r.SpanID
			}
		}
		for _, tag := range s.Tags {
			if (tag.Key == "otel.status_code" && tag.Value == "ERROR") || (tag.Key == "error" && tag.Value == true) {
				sp.err = true
			}
		}
		ids[sp.id] = true
		t0 = min(t0, s.StartTime)
		spans = append(spans, sp)
	}
	slices.SortStableFunc(spans, func(a, b span) int { return int(a.start - b.start) })
	var rows []Row
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range spans {
			if s.parent != parent && (parent != "" || ids[s.parent]) {
				continue
			}
			rows = append(rows, Row{Label: strings.Repeat("> ", depth) + s.name + " [" + s.service + "]",
				Start: time.Duration(s.start-t0) * time.Microsecond, End: time.Duration(s.start-t0+s.dur) * time.Microsecond, Error: s.err})
			walk(s.id, depth+1)
		}
	}
	walk("", 0)
	return rows, nil
}

// bars plots rows as horizontal bars, the first row on top.
type bars []Row

func (b bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, r := range b {
		y := float64(len(b) - 1 - i)
		fill := color.RGBA{R: 70, G: 130, B: 180, A: 255}
		if r.Error {
			fill = color.RGBA{R: 200, G: 40, B: 40, A: 255}
		}
		x0, x1 := trX(ms(r.Start)), trX(ms(r.End))
		x1 = max(x1, x0+vg.Points(1))
		c.FillPolygon(fill, []vg.Point{{X: x0, Y: trY(y - 0.35)}, {X: x1, Y: trY(y - 0.35)}, {X: x1, Y: trY(y + 0.35)}, {X: x0, Y: trY(y + 0.35)}})
		sty := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, Handler: plot.DefaultTextHandler}
		sty.Font.Size = vg.Points(8)
		sty.YAlign = draw.YCenter
		c.FillText(sty, vg.Point{X: x1 + vg.Points(3), Y: trY(y)}, fmt.Sprintf("%.1f ms", ms(r.End-r.Start)))
	}
}

func (b bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	for _, r := range b {
		xmax = max(xmax, ms(r.End))
	}
	return 0, xmax * 1.12, -0.5, float64(len(b)) - 0.5
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Plot is the waterfall of rows, titled.
func Plot(title string, rows []Row) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "ms from the trace's start"
	labels := make([]string, len(rows))
	for i, r := range rows {
		labels[len(rows)-1-i] = r.Label
	}
	p.Add(plotter.NewGrid(), bars(rows))
	p.NominalY(labels...)
	p.Y.Tick.Label.Font.Size = vg.Points(8)
	return p
}

func main() {
	in := flag.String("in", "", "the trace, as Jaeger's GET /api/traces/{id} returns it")
	out := flag.String("out", "", "the PNG to write")
	title := flag.String("title", "a failed ADD through catena, as Jaeger holds it", "the plot's title")
	flag.Parse()
	if err := run(*in, *out, *title); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in, out, title string) error {
	if in == "" || out == "" {
		return errors.New("traceplot: -in and -out are required")
	}
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("traceplot: %w", err)
	}
	defer func() { _ = f.Close() }()
	raw, err := io.ReadAll(io.LimitReader(f, maxInput+1))
	if err != nil {
		return fmt.Errorf("traceplot: %s: %w", in, err)
	}
	if len(raw) > maxInput {
		return fmt.Errorf("traceplot: %s is over %d bytes", in, maxInput)
	}
	rows, err := Rows(raw)
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Points(720), vg.Points(float64(60+18*len(rows))))
	Plot(title, rows).Draw(draw.New(img))
	w, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("traceplot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		_ = w.Close()
		return fmt.Errorf("traceplot: write %s: %w", out, err)
	}
	return w.Close()
}
