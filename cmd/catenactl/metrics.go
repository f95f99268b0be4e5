package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// recordCount is how many records of a network are in one phase.
type recordCount struct {
	Network string `json:"network"`
	Phase   string `json:"phase"`
	Count   int    `json:"count"`
}

// metricsData is what `metrics` exposes; with --json it prints it as is.
type metricsData struct {
	*stats
	Records []recordCount `json:"records"`
}

func (a *app) metricsCmd() *cobra.Command {
	var window time.Duration
	var output string
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Print the stats and record counts as Prometheus text for node_exporter's textfile collector",
		Long: `Print what stats shows, over --window, plus the number of records per network
and phase right now, in the Prometheus text exposition format, for
node_exporter's textfile collector. The event journal is bounded, so the
operation metrics are gauges (and summaries) over the window, not counters
since boot.

With --output FILE the exposition is written to a temporary file in FILE's
directory and renamed over FILE (mode 0644), so that the collector never
reads a partial file; for example, from cron every minute:
  catenactl metrics --output /var/lib/node_exporter/textfile/catena.prom`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.loadStats(window)
			if err != nil {
				return err
			}
			_, entries, err := a.cacheEntries()
			if err != nil {
				return err
			}
			m := metricsData{stats: s, Records: countRecords(entries)}
			var buf bytes.Buffer
			if a.json {
				err = writeJSON(&buf, m)
			} else {
				err = writeExposition(&buf, m)
			}
			if err != nil {
				return err
			}
			if output != "" {
				return replaceFile(output, buf.Bytes())
			}
			_, err = a.stdout.Write(buf.Bytes())
			return err
		},
	}
	windowFlag(cmd, &window)
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file, atomically, instead of stdout")
	return cmd
}

func countRecords(entries []entry) []recordCount {
	counts := map[[2]string]int{}
	for _, e := range entries {
		phase := phaseUnreadable
		if e.Err == nil {
			phase = string(e.Rec.Phase)
		}
		counts[[2]string{e.Key.Network, phase}]++
	}
	out := []recordCount{}
	for k, n := range counts {
		out = append(out, recordCount{Network: k[0], Phase: k[1], Count: n})
	}
	slices.SortFunc(out, func(a, b recordCount) int {
		return cmp.Or(cmp.Compare(a.Network, b.Network), cmp.Compare(a.Phase, b.Phase))
	})
	return out
}

// family is one metric family of the exposition.
type family struct {
	name, typ, help string
	samples         []sample
}

type sample struct {
	suffix string   // "", "_sum" or "_count"
	labels []string // name, value, name, value...
	value  float64
}

func (f *family) add(suffix string, value float64, labels ...string) {
	f.samples = append(f.samples, sample{suffix: suffix, labels: labels, value: value})
}

// addSummary adds the p50/p95 quantiles, sum and count of a summary.
func (f *family) addSummary(p50, p95, total time.Duration, count int, labels ...string) {
	f.add("", p50.Seconds(), append(slices.Clone(labels), "quantile", "0.5")...)
	f.add("", p95.Seconds(), append(slices.Clone(labels), "quantile", "0.95")...)
	f.add("_sum", total.Seconds(), labels...)
	f.add("_count", float64(count), labels...)
}

func writeExposition(w io.Writer, m metricsData) error {
	window := &family{name: "catena_events_window_seconds", typ: "gauge",
		help: "Length of the window, ending now, that the catena operation and delegate metrics cover."}
	window.add("", m.WindowSeconds)
	unreadable := &family{name: "catena_events_unreadable_lines", typ: "gauge",
		help: "Lines of the event journal that could not be read as an operation (too long, not JSON, torn) and were skipped."}
	unreadable.add("", float64(m.Skipped))
	ops := &family{name: "catena_operations", typ: "gauge",
		help: "Catena operations that started within the window, by verb and outcome (ok or error)."}
	rollbacks := &family{name: "catena_operation_rollbacks", typ: "gauge",
		help: "Catena operations within the window whose failed ADD was rolled back, by verb."}
	opDur := &family{name: "catena_operation_duration_seconds", typ: "summary",
		help: "Duration of catena operations that started within the window, by verb (nearest-rank quantiles)."}
	lockWait := &family{name: "catena_lock_wait_seconds", typ: "summary",
		help: "Time catena operations within the window waited for their attachment's lock, by verb (nearest-rank quantiles)."}
	lockMax := &family{name: "catena_lock_wait_max_seconds", typ: "gauge",
		help: "Longest wait for an attachment's lock within the window, by verb."}
	for _, o := range m.Operations {
		ops.add("", float64(o.Count-o.Failures), "verb", o.Verb, "outcome", "ok")
		ops.add("", float64(o.Failures), "verb", o.Verb, "outcome", "error")
		rollbacks.add("", float64(o.Rollbacks), "verb", o.Verb)
		opDur.addSummary(o.DurationP50, o.DurationP95, o.DurationSum, o.Count, "verb", o.Verb)
		lockWait.addSummary(o.LockWaitP50, o.LockWaitP95, o.LockWaitSum, o.Count, "verb", o.Verb)
		lockMax.add("", o.LockWaitMax.Seconds(), "verb", o.Verb)
	}
	calls := &family{name: "catena_delegate_calls", typ: "gauge",
		help: "Delegate invocations within the window, by delegate index and type and verb."}
	failures := &family{name: "catena_delegate_failures", typ: "gauge",
		help: "Delegate invocations within the window that failed, by delegate index and type and verb."}
	callDur := &family{name: "catena_delegate_duration_seconds", typ: "summary",
		help: "Latency of delegate invocations within the window, by delegate index and type and verb (nearest-rank quantiles)."}
	for _, c := range m.Delegates {
		l := []string{"index", strconv.Itoa(c.Index), "type", c.Type, "verb", c.Verb}
		calls.add("", float64(c.Calls), l...)
		failures.add("", float64(c.Failures), l...)
		callDur.addSummary(c.P50, c.P95, c.DurationSum, c.Calls, l...)
	}
	records := &family{name: "catena_records", typ: "gauge",
		help: "Attachment records in the cache dir now, by network and phase (unreadable: the record cannot be trusted)."}
	for _, r := range m.Records {
		records.add("", float64(r.Count), "network", r.Network, "phase", r.Phase)
	}
	var b strings.Builder
	for _, f := range []*family{window, unreadable, ops, rollbacks, opDur, lockWait, lockMax, calls, failures, callDur, records} {
		f.write(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (f *family) write(b *strings.Builder) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.typ)
	for _, s := range f.samples {
		b.WriteString(f.name + s.suffix)
		if len(s.labels) > 0 {
			b.WriteByte('{')
			for i := 0; i+1 < len(s.labels); i += 2 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(b, "%s=\"%s\"", s.labels[i], escapeLabel(s.labels[i+1]))
			}
			b.WriteByte('}')
		}
		b.WriteString(" " + strconv.FormatFloat(s.value, 'g', -1, 64) + "\n")
	}
}

// escapeHelp escapes a HELP text: backslash and newline.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// escapeLabel escapes a label value: backslash, double quote and newline,
// after printableLines has made what a terminal could act on (or what is
// not UTF-8, which the format forbids) text.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(printableLines(s))
}

// replaceFile writes data to a temporary file beside path and renames it
// over path, so that a reader sees the old file or the new one, whole.
func replaceFile(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
