package metrics

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/nodeconf"
	"github.com/catena-cni/catena/node/reconcile"
)

// Metrics holds every Catena metric of one agent, on its own registry.
type Metrics struct {
	Registry *prometheus.Registry

	ops           *prometheus.CounterVec
	opDuration    *prometheus.HistogramVec
	times         *opTimes
	skippedLines  *prometheus.CounterVec
	netnsReplaced prometheus.Counter
	noRecordDels  *prometheus.CounterVec

	records    *prometheus.GaugeVec
	held       prometheus.Gauge
	oldestHeld prometheus.Gauge

	passes        prometheus.Counter
	passErrors    prometheus.Counter
	candidates    prometheus.Counter
	marked        prometheus.Counter
	reclaimed     prometheus.Counter
	kept          *prometheus.CounterVec
	runtimeErrors prometheus.Counter
	retries       *prometheus.CounterVec
	abandoned     prometheus.Counter
	lastPass      prometheus.Gauge
	lastDuration  prometheus.Gauge

	adoptions *prometheus.CounterVec

	conflistWrites  prometheus.Counter
	conflistUndone  *prometheus.CounterVec
	conflistBackoff prometheus.Gauge
}

var (
	_ reconcile.Observer        = (*Metrics)(nil)
	_ nodeconf.ConflistObserver = (*Metrics)(nil)
)

// opBuckets span a fast DEL (ms) to a delegate timing out (minutes).
var opBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// New registers every metric on a new registry, with the Go and process
// collectors.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.Registry.MustRegister(c)
		return c
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		m.Registry.MustRegister(g)
		return g
	}
	m.ops = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_operations_total",
		Help: "Catena operations read from the event journal, by verb and outcome (ok or error)."}, []string{"verb", "outcome"})
	m.opDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "catena_operation_duration_seconds",
		Help: "Duration of Catena operations read from the event journal, by verb and outcome (ok or error).", Buckets: opBuckets}, []string{"verb", "outcome"})
	m.skippedLines = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_event_journal_skipped_lines_total",
		Help: "Lines of the event journal that were not an operation (junk, torn or too long) and were skipped, by reader: metrics (the operation metrics), events (the Kubernetes events, of which no event was made) or traces (the trace export, which sent no span of it)."}, []string{"reader"})
	m.netnsReplaced = counter("catena_teardown_netns_replaced_total",
		"Teardowns run without CNI_NETNS because another namespace than the ADD's stood at the attachment's netns path (a reused path): the delegates freed IPs and rules and left that namespace alone.")
	m.noRecordDels = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_norecord_dels_total",
		Help: "DELs that found no record and were handed a result, or found a tombstone, by outcome: tombstone (already torn down: nothing invoked), kept (something else may hold what the result names: nothing invoked), released, partial or failed (the delegates' DELs)."}, []string{"outcome"})
	for _, o := range events.ReleaseOutcomes {
		m.noRecordDels.WithLabelValues(o)
	}
	m.records = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "catena_records",
		Help: "Attachment records at the last reconcile pass, by network and phase (unreadable: the record cannot be trusted)."}, []string{"network", "phase"})
	m.held = gauge("catena_held_attachments", "Attachments whose teardown failed and is still held (phase needs-teardown) after the last pass and its retries.")
	m.oldestHeld = gauge("catena_oldest_held_attachment_age_seconds", "How long the oldest attachment still held after the last pass has been failing its DEL (0: none).")
	m.passes = counter("catena_reconcile_passes_total", "Reconcile passes run.")
	m.passErrors = counter("catena_reconcile_pass_errors_total", "Reconcile passes that met an error (see the agent's log).")
	m.candidates = counter("catena_reconcile_candidates_total", "Records found without a sandbox, with a free lock and unchanged within the grace period, summed over passes.")
	m.marked = counter("catena_reconcile_marked_total", "Candidates marked (phase one).")
	m.reclaimed = counter("catena_reconcile_reclaimed_total", "Attachments reclaimed (phase two): torn down because the runtime no longer knows their sandbox.")
	m.kept = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_reconcile_kept_total",
		Help: "Records kept because of an error or a doubt, summed over passes, by cause: runtime (ListPodSandbox failed or was slow), record (a record could not be read) or empty-list (the runtime listed no sandboxes and nothing proved them gone)."}, []string{"cause"})
	m.runtimeErrors = counter("catena_reconcile_runtime_errors_total", "Passes in which ListPodSandbox failed or timed out.")
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_teardown_retries_total",
		Help: "Retries of teardowns that were needed, by outcome (ok or error)."}, []string{"outcome"})
	m.abandoned = counter("catena_abandoned_delegates_total", "Delegates abandoned by abandonAfter: their DEL failed for that long; what they hold may leak.")
	m.lastPass = gauge("catena_reconcile_last_pass_timestamp_seconds", "When the last reconcile pass started, in Unix seconds.")
	m.lastDuration = gauge("catena_reconcile_last_pass_duration_seconds", "How long the last reconcile pass took.")
	m.adoptions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_adoptions_total",
		Help: "Attachments of the primary found by the install in the runtime's libcni cache, by result: adopted, present (had a record) or skipped."}, []string{"result"})
	m.conflistWrites = counter("catena_conflist_writes_total", "Writes of the generated conflist by the install loop (the first, and each rewrite).")
	m.conflistUndone = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "catena_conflist_undone_total",
		Help: "Times the generated conflist a pass left in place was renamed, removed or changed by someone else, by whom: cilium (its cni.exclusive renamed it to .cilium_bak) or other."}, []string{"by"})
	m.conflistBackoff = gauge("catena_conflist_backoff_seconds", "How long the install loop waits after its last write before rewriting the generated conflist that someone keeps taking away (0: no backoff).")
	for _, by := range []string{nodeconf.TakenByCilium, nodeconf.TakenByOther} {
		m.conflistUndone.WithLabelValues(by)
	}
	m.Registry.MustRegister(m.ops, m.opDuration, m.skippedLines, m.noRecordDels, m.records, m.kept, m.retries, m.adoptions, m.conflistUndone,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.times = newOpTimes(m.Registry)
	return m
}

// The agent's readers of the event journal: the reader label of
// catena_event_journal_skipped_lines_total, and of their log lines.
const (
	ReaderMetrics = "metrics" // NewJournalTail
	ReaderEvents  = "events"  // the Kubernetes events' watcher
	ReaderTraces  = "traces"  // the trace export (node/traces)
)

// JournalSkipped counts the journal lines that reader skipped because
// they are not an operation: catena_event_journal_skipped_lines_total,
// whose series for reader it creates.
func (m *Metrics) JournalSkipped(reader string) prometheus.Counter {
	return m.skippedLines.WithLabelValues(reader)
}

// ObserveOp counts one operation of the event journal, and times its
// delegate calls, its lock wait and its record writes.
func (m *Metrics) ObserveOp(op events.Op) {
	verb, outcome := label(op.Verb), label(op.Outcome)
	m.ops.WithLabelValues(verb, outcome).Inc()
	m.opDuration.WithLabelValues(verb, outcome).Observe(op.Duration.Seconds())
	m.times.observe(op)
	m.netnsReplaced.Add(float64(len(op.NetNSReplaced)))
	if r := op.NoRecordRelease; r != nil {
		o := r.Outcome
		if !slices.Contains(events.ReleaseOutcomes, o) {
			o = "other"
		}
		m.noRecordDels.WithLabelValues(o).Inc()
	}
}

// opLabels are the verbs and outcomes of the journal's operations.
var opLabels = []string{"ADD", "DEL", "CHECK", "STATUS", "GC", "REPAIR", "RETRY", "RECLAIM", "ABANDON", "RELEASE", "OK", "ERROR"}

// label bounds a verb or outcome taken from the journal: a line that
// parses but carries a hostile verb must not blow up the series count.
func label(s string) string { return oneOf(s, opLabels) }

// oneOf is s in lower case if it is one of allowed (upper case, compared
// in upper case), else "other".
func oneOf(s string, allowed []string) string {
	if s = strings.ToUpper(s); slices.Contains(allowed, s) {
		return strings.ToLower(s)
	}
	return "other"
}

// ObservePass implements reconcile.Observer.
func (m *Metrics) ObservePass(rep *reconcile.Report) {
	m.passes.Inc()
	if len(rep.Errors) > 0 {
		m.passErrors.Inc()
	}
	m.candidates.Add(float64(rep.Candidates))
	m.marked.Add(float64(rep.Marked))
	m.reclaimed.Add(float64(rep.Reclaimed))
	if rep.Kept > 0 {
		cause := "record"
		switch {
		case rep.RuntimeError != "":
			cause = "runtime"
		case rep.EmptyList:
			cause = "empty-list"
		}
		m.kept.WithLabelValues(cause).Add(float64(rep.Kept))
	}
	if rep.RuntimeError != "" {
		m.runtimeErrors.Inc()
	}
	m.retries.WithLabelValues("ok").Add(float64(rep.Retried))
	m.retries.WithLabelValues("error").Add(float64(rep.RetryFailed))
	m.abandoned.Add(float64(rep.Abandoned))
	m.records.Reset()
	for _, c := range rep.Counts {
		m.records.WithLabelValues(c.Network, c.Phase).Set(float64(c.Count))
	}
	m.held.Set(float64(rep.Held))
	m.oldestHeld.Set(rep.OldestHeld.Seconds())
	m.lastPass.Set(float64(rep.Start.UnixNano()) / 1e9)
	m.lastDuration.Set(rep.Duration.Seconds())
}

// ObserveAdoption counts one adoption by the install.
func (m *Metrics) ObserveAdoption(adopted, present, skipped int) {
	m.adoptions.WithLabelValues("adopted").Add(float64(adopted))
	m.adoptions.WithLabelValues("present").Add(float64(present))
	m.adoptions.WithLabelValues("skipped").Add(float64(skipped))
}

// ConflistWritten implements nodeconf.ConflistObserver.
func (m *Metrics) ConflistWritten() { m.conflistWrites.Inc() }

// ConflistTaken implements nodeconf.ConflistObserver.
func (m *Metrics) ConflistTaken(by string) {
	if by != nodeconf.TakenByCilium {
		by = nodeconf.TakenByOther
	}
	m.conflistUndone.WithLabelValues(by).Inc()
}

// ConflistBackoff implements nodeconf.ConflistObserver.
func (m *Metrics) ConflistBackoff(d time.Duration) { m.conflistBackoff.Set(d.Seconds()) }
