package nodebench

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"

	"github.com/catena-cni/catena/tools/benchplot"
)

// Round is what one round measured.
type Round struct {
	Variant Variant
	N       int
	Index   int // its place in the run, from 0
	Pods    []Pod
	Dists   map[string]Dist // by Measure.ID
	Load    float64         // the 1-minute load average at its end
	// CPU is the CPU seconds of each command over the round, from its
	// profile (ParsePerfComm); nil when the round was not profiled.
	CPU map[string]float64
}

// Names are what the report calls the variants ("flannel", "Catena over
// flannel").
type Names struct {
	Primary, Catena string
}

// of is v's name.
func (n Names) of(v Variant) string {
	if v == Catena {
		return n.Catena
	}
	return n.Primary
}

// Summary is one measure of one variant at one N over its rounds.
type Summary struct {
	Rounds        int // the rounds that measured it
	Count         int
	P50, P90, P99 time.Duration
	// MinP50 and MaxP50 are the spread: the least and the greatest of
	// the rounds' own p50
	MinP50, MaxP50 time.Duration
}

// ok says whether anything was measured.
func (s Summary) ok() bool { return s.Count > 0 }

// Summarize pools measure m of variant v's rounds at n.
func Summarize(rounds []Round, v Variant, n int, m Measure) (Summary, error) {
	var ds []Dist
	var s Summary
	for _, r := range rounds {
		if r.Variant != v || r.N != n {
			continue
		}
		d := r.Dists[m.ID]
		p50, ok := d.Quantile(0.5)
		if !ok {
			continue
		}
		if s.Rounds == 0 || p50 < s.MinP50 {
			s.MinP50 = p50
		}
		s.MaxP50 = max(s.MaxP50, p50)
		s.Rounds++
		ds = append(ds, d)
	}
	all, err := Merge(ds...)
	if err != nil {
		return Summary{}, fmt.Errorf("%s of %s at N=%d: %w", m.Label, v, n, err)
	}
	s.Count = all.Count()
	s.P50, _ = all.Quantile(0.5)
	s.P90, _ = all.Quantile(0.9)
	s.P99, _ = all.Quantile(0.99)
	return s, nil
}

// Ratio is a/b, 0 when b is 0.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// roundNs are the N of the rounds, in the order they first ran.
func roundNs(rounds []Round) []int {
	var out []int
	for _, r := range rounds {
		if !slices.Contains(out, r.N) {
			out = append(out, r.N)
		}
	}
	return out
}

// Prefix starts every line of the report, for make bench-node to grep.
const Prefix = "NODE-DENSITY "

// Report writes a table per N: p50 / p90 / p99 of each measure for each
// variant, with its sample count and spread, and the ratios Catena /
// primary; each line starts with Prefix.
func Report(w io.Writer, rounds []Round, names Names) error {
	var b bytes.Buffer
	for _, n := range roundNs(rounds) {
		per := map[Variant]int{}
		lo, hi := -1.0, 0.0
		for _, r := range rounds {
			if r.N == n {
				per[r.Variant]++
				if lo < 0 || r.Load < lo {
					lo = r.Load
				}
				hi = max(hi, r.Load)
			}
		}
		fmt.Fprintf(&b, "N=%d, rounds: %d of %s, %d of %s, alternated; ms: p50 / p90 / p99, n samples (hist: observations), spread: min-max of the rounds' p50, ratio: %s / %s; load average %.1f-%.1f\n",
			n, per[Primary], names.Primary, per[Catena], names.Catena, names.Catena, names.Primary, lo, hi)
		// tw buffers until Flush, whose error is checked
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		_, _ = fmt.Fprintf(tw, "| measure\t| n\t| %s\t| spread\t| n\t| %s\t| spread\t| ratio\t| p50 ratio, 95%% interval\t|\n", names.Primary, names.Catena)
		_, _ = fmt.Fprintf(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|\n")
		for _, m := range measures {
			var s [2]Summary
			for _, v := range Variants {
				var err error
				if s[v], err = Summarize(rounds, v, n, m); err != nil {
					return err
				}
			}
			if !s[Primary].ok() && !s[Catena].ok() {
				continue
			}
			ratio := "-"
			if s[Primary].ok() && s[Catena].ok() {
				ratio = ratioCell(s[Catena].P50, s[Primary].P50, 2) + " / " + ratioCell(s[Catena].P90, s[Primary].P90, 2) +
					" / " + ratioCell(s[Catena].P99, s[Primary].P99, 2)
			}
			interval := "-"
			if lo, hi, ok, err := ratioInterval(rounds, n, m); err != nil {
				return err
			} else if ok {
				interval = fmt.Sprintf("%.2f-%.2f", lo, hi)
			}
			_, _ = fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %s\t| %s\t| %s\t| %s\t| %s\t| %s\t|\n", m.Label,
				count(s[Primary]), triple(s[Primary]), spread(s[Primary]),
				count(s[Catena]), triple(s[Catena]), spread(s[Catena]), ratio, interval)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return writePrefixed(w, &b, "report")
}

// writePrefixed writes each line of b to w with Prefix before it and no
// trailing spaces; what names the report in an error.
func writePrefixed(w io.Writer, b *bytes.Buffer, what string) error {
	sc := bufio.NewScanner(b)
	for sc.Scan() {
		if _, err := fmt.Fprintln(w, strings.TrimRight(Prefix+sc.Text(), " ")); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// ratioCell is a/b with prec decimals, "-" when b is 0 (a step the
// primary's rounds measured as 0 ms has no ratio).
func ratioCell(a, b time.Duration, prec int) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(Ratio(a, b), 'f', prec, 64)
}

func msf(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

func count(s Summary) string {
	if !s.ok() {
		return "-"
	}
	return strconv.Itoa(s.Count)
}

func triple(s Summary) string {
	if !s.ok() {
		return "-"
	}
	return msf(s.P50) + " / " + msf(s.P90) + " / " + msf(s.P99)
}

func spread(s Summary) string {
	if !s.ok() {
		return "-"
	}
	return msf(s.MinP50) + "-" + msf(s.MaxP50)
}

// writeCSV writes the summaries: a row per N, variant and measure
// measured, the ratios on Catena's rows.
func writeCSV(w io.Writer, rounds []Round) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"n", "variant", "measure", "rounds", "count", "p50_ms", "p90_ms", "p99_ms",
		"round_p50_min_ms", "round_p50_max_ms", "ratio_p50", "ratio_p90", "ratio_p99", "ratio_p50_lo95", "ratio_p50_hi95"})
	for _, n := range roundNs(rounds) {
		for _, m := range measures {
			var s [2]Summary
			for _, v := range Variants {
				var err error
				if s[v], err = Summarize(rounds, v, n, m); err != nil {
					return err
				}
			}
			for _, v := range Variants {
				if !s[v].ok() {
					continue
				}
				row := []string{strconv.Itoa(n), v.String(), m.ID, strconv.Itoa(s[v].Rounds), strconv.Itoa(s[v].Count),
					msf(s[v].P50), msf(s[v].P90), msf(s[v].P99), msf(s[v].MinP50), msf(s[v].MaxP50), "", "", "", "", ""}
				if v == Catena && s[Primary].ok() {
					for i, q := range [][2]time.Duration{{s[v].P50, s[Primary].P50}, {s[v].P90, s[Primary].P90}, {s[v].P99, s[Primary].P99}} {
						if row[10+i] = ratioCell(q[0], q[1], 3); row[10+i] == "-" {
							row[10+i] = ""
						}
					}
					lo, hi, ok, err := ratioInterval(rounds, n, m)
					if err != nil {
						return err
					}
					if ok {
						row[13], row[14] = strconv.FormatFloat(lo, 'f', 3, 64), strconv.FormatFloat(hi, 'f', 3, 64)
					}
				}
				_ = cw.Write(row)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// writePodsCSV writes every pod's timeline measures: a row per pod of each
// round, a cell left empty for a step not seen.
func writePodsCSV(w io.Writer, rounds []Round) error {
	cw := csv.NewWriter(w)
	head := []string{"n", "variant", "round", "pod"}
	for _, m := range podMeasures {
		head = append(head, m.ID+"_ms")
	}
	_ = cw.Write(head)
	for _, r := range rounds {
		for _, p := range r.Pods {
			row := []string{strconv.Itoa(r.N), r.Variant.String(), strconv.Itoa(r.Index), p.Name}
			for _, m := range podMeasures {
				cell := ""
				if v, ok := p.span(m); ok {
					cell = strconv.FormatFloat(float64(v)/float64(time.Millisecond), 'f', 3, 64)
				}
				row = append(row, cell)
			}
			_ = cw.Write(row)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// writePlot draws a panel per N: the CDF of created -> Ready of both
// variants, over their rounds, as a PNG at each path.
func writePlot(rounds []Round, names Names, paths ...string) error {
	var ps []*plot.Plot
	for _, n := range roundNs(rounds) {
		var series []any
		for _, v := range Variants {
			var all []time.Duration
			for _, r := range rounds {
				if r.Variant == v && r.N == n {
					all = append(all, r.Dists[CreatedReady.ID].samples...)
				}
			}
			series = append(series, names.of(v), benchplot.CDF(all))
		}
		p, err := benchplot.Panel(fmt.Sprintf("created -> Ready, N = %d", n), "fraction of pods", series...)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	return benchplot.WritePNG(ps, paths...)
}

// The files' base names: WriteFiles writes BASE.csv, BASE-pods.csv and
// BASE.png.
const (
	BaseName     = "node-density"      // on the containerd node
	CRIOBaseName = "node-density-crio" // on the CRI-O node
)

// WriteFiles writes the summaries' CSV, the pods' CSV and the plot into
// dir, named after base, and the plot into docs too unless docs is "",
// and returns the paths written.
func WriteFiles(dir, docs, base string, rounds []Round, names Names) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node bench: %w", err)
	}
	var written []string
	for _, f := range []struct {
		name  string
		write func(io.Writer, []Round) error
	}{{base + ".csv", writeCSV}, {base + "-pods.csv", writePodsCSV}} {
		path := filepath.Join(dir, f.name)
		var b bytes.Buffer
		if err := f.write(&b, rounds); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("node bench: %w", err)
		}
		written = append(written, path)
	}
	plots := []string{filepath.Join(dir, base+".png")}
	if docs != "" {
		plots = append(plots, filepath.Join(docs, base+".png"))
	}
	if err := writePlot(rounds, names, plots...); err != nil {
		return nil, err
	}
	return append(written, plots...), nil
}
