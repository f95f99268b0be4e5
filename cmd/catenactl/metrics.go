package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/spf13/afero"
	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/fileutil"
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

// exposition collects constant metrics for one textfile: the event
// journal is bounded, so the operation metrics are gauges and summaries
// over the window, built afresh each run. It is an unchecked collector: it
// describes nothing up front, and the registry checks what it collects.
type exposition struct {
	metrics []prometheus.Metric
}

var _ prometheus.Collector = (*exposition)(nil)

func (x *exposition) Describe(chan<- *prometheus.Desc) {}

func (x *exposition) Collect(ch chan<- prometheus.Metric) {
	for _, m := range x.metrics {
		ch <- m
	}
}

// family declares one metric family with its label names.
func family(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// gauge adds one gauge sample; label values are made printable UTF-8
// first, as the format requires and terminals deserve.
func (x *exposition) gauge(d *prometheus.Desc, v float64, labels ...string) {
	x.metrics = append(x.metrics, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, printableAll(labels)...))
}

// summary adds the p50/p95 quantiles, sum and count of a summary.
func (x *exposition) summary(d *prometheus.Desc, p50, p95, total time.Duration, count int, labels ...string) {
	x.metrics = append(x.metrics, prometheus.MustNewConstSummary(d, uint64(count), total.Seconds(),
		map[float64]float64{0.5: p50.Seconds(), 0.95: p95.Seconds()}, printableAll(labels)...))
}

func printableAll(labels []string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = cli.PrintableLines(l)
	}
	return out
}

func writeExposition(w io.Writer, m metricsData) error {
	x := &exposition{}
	x.gauge(family("catena_events_window_seconds", "Length of the window, ending now, that the catena operation and delegate metrics cover."), m.WindowSeconds)
	x.gauge(family("catena_events_unreadable_lines", "Lines of the event journal that could not be read as an operation (too long, not JSON, torn) and were skipped."), float64(m.Skipped))
	ops := family("catena_operations", "Catena operations that started within the window, by verb and outcome (ok or error).", "verb", "outcome")
	rollbacks := family("catena_operation_rollbacks", "Catena operations within the window whose failed ADD was rolled back, by verb.", "verb")
	opDur := family("catena_operation_duration_seconds", "Duration of catena operations that started within the window, by verb (nearest-rank quantiles).", "verb")
	lockWait := family("catena_lock_wait_seconds", "Time catena operations within the window waited for their attachment's lock, by verb (nearest-rank quantiles).", "verb")
	lockMax := family("catena_lock_wait_max_seconds", "Longest wait for an attachment's lock within the window, by verb.", "verb")
	for _, o := range m.Operations {
		x.gauge(ops, float64(o.Count-o.Failures), o.Verb, "ok")
		x.gauge(ops, float64(o.Failures), o.Verb, "error")
		x.gauge(rollbacks, float64(o.Rollbacks), o.Verb)
		x.summary(opDur, o.DurationP50, o.DurationP95, o.DurationSum, o.Count, o.Verb)
		x.summary(lockWait, o.LockWaitP50, o.LockWaitP95, o.LockWaitSum, o.Count, o.Verb)
		x.gauge(lockMax, o.LockWaitMax.Seconds(), o.Verb)
	}
	calls := family("catena_delegate_calls", "Delegate invocations within the window, by delegate index and type and verb.", "index", "type", "verb")
	failures := family("catena_delegate_failures", "Delegate invocations within the window that failed, by delegate index and type and verb.", "index", "type", "verb")
	callDur := family("catena_delegate_duration_seconds", "Latency of delegate invocations within the window, by delegate index and type and verb (nearest-rank quantiles).", "index", "type", "verb")
	for _, c := range m.Delegates {
		l := []string{strconv.Itoa(c.Index), c.Type, c.Verb}
		x.gauge(calls, float64(c.Calls), l...)
		x.gauge(failures, float64(c.Failures), l...)
		x.summary(callDur, c.P50, c.P95, c.DurationSum, c.Calls, l...)
	}
	records := family("catena_records", "Attachment records in the cache dir now, by network and phase (unreadable: the record cannot be trusted).", "network", "phase")
	for _, r := range m.Records {
		x.gauge(records, float64(r.Count), r.Network, r.Phase)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(x); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	fams, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("metrics: writing %s: %w", f.GetName(), err)
		}
	}
	return nil
}

// replaceFile writes data to path atomically and durably (fileutil's
// atomic write: a temp file beside path, fsynced, renamed over it, the
// directory fsynced), mode 0644, so that a reader (node_exporter's
// textfile collector) sees the old file or the new one, whole.
func replaceFile(path string, data []byte) error {
	if err := fileutil.WriteFileAtomic(afero.NewOsFs(), path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
