package traces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/afero"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/catena-cni/catena/fileutil"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/agent"
)

// The exporter's bounds, unless an Exporter sets its own.
const (
	// DefaultInterval is how often the journal is read.
	DefaultInterval = time.Second
	// DefaultBatchSize is the most operations one export call sends.
	DefaultBatchSize = 256
	// DefaultMaxQueue is the most operations read and not yet sent: a
	// journal line is at most 64 KiB, about 1 KiB for a chain of three,
	// so the queue holds about 4 MiB at most in practice, 256 MiB in the
	// worst case of lines all at the bound.
	DefaultMaxQueue = 4096
	// The backoff after a failed export: doubled from minBackoff up to
	// maxBackoff, reset by a success.
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// SpanExporter sends spans; an otlptrace.Exporter is one.
type SpanExporter interface {
	ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error
	Shutdown(ctx context.Context) error
}

// Exporter reads the journal of CacheDir and sends each sampled
// operation's spans to Client, in batches.
type Exporter struct {
	CacheDir string
	Fs       afero.Fs
	Builder  *Builder
	Client   SpanExporter
	Metrics  *Metrics
	Log      *slog.Logger
	// Timeout bounds each export call.
	Timeout time.Duration
	// Interval, BatchSize and MaxQueue: 0 for the defaults.
	Interval  time.Duration
	BatchSize int
	MaxQueue  int

	tail    *events.Tail
	resume  *resume
	queue   []events.Op
	backoff time.Duration
	// retryAt is when the batch that failed is sent again.
	retryAt time.Time
	// pending is the batch whose export failed: sent again, as it is.
	pending []sdktrace.ReadOnlySpan
}

var _ agent.Runnable = (*Exporter)(nil)

// Run exports until ctx is done; it returns nil then, or an error when it
// cannot start (the checkpoint or the journal cannot be read). Spans not
// sent by then are not sent: their operations, past the checkpoint, are
// read again from the journal at the next start.
func (e *Exporter) Run(ctx context.Context) error {
	if err := e.start(); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := e.Client.Shutdown(sctx); err != nil {
			e.Log.Debug("trace export: shutdown", "error", err)
		}
	}()
	t := time.NewTicker(e.interval())
	defer t.Stop()
	for {
		e.Step(ctx, time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (e *Exporter) interval() time.Duration { return orDefault(e.Interval, DefaultInterval) }
func (e *Exporter) batchSize() int          { return orDefault(e.BatchSize, DefaultBatchSize) }
func (e *Exporter) maxQueue() int           { return orDefault(e.MaxQueue, DefaultMaxQueue) }
func (e *Exporter) timeout() time.Duration  { return orDefault(e.Timeout, 10*time.Second) }

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// start reads the checkpoint and sets the journal's tail up.
func (e *Exporter) start() error {
	if e.Fs == nil {
		e.Fs = afero.NewOsFs()
	}
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
	if err := fileutil.RemoveTemp(e.Fs, checkpointPath(e.CacheDir)); err != nil {
		return fmt.Errorf("trace checkpoint: %w", err)
	}
	r, err := newResume(e.Fs, e.CacheDir)
	if err != nil && r == nil {
		return err
	}
	if err != nil {
		e.Log.Warn("trace export: the checkpoint cannot be read; the operations in the journal now are not exported", "error", err, "skipped", r.skipAll)
	}
	e.resume = r
	e.tail = &events.Tail{CacheDir: e.CacheDir, Handle: e.enqueue, Log: e.Log.With("reader", "traces")}
	if e.Metrics != nil {
		e.tail.Unreadable = e.Metrics.skipped
	}
	return nil
}

// enqueue queues op unless it was sent before a restart, or the queue is
// full (then it is dropped, and counted).
func (e *Exporter) enqueue(op events.Op) {
	if e.resume.sent(op) {
		return
	}
	if len(e.queue) >= e.maxQueue() {
		e.Metrics.dropped(1)
		return
	}
	e.queue = append(e.queue, op)
}

// Step reads the journal if the queue has room, then sends what is due:
// a batch that failed once its backoff has passed, else the queue, one
// batch at a time, until it is empty or an export fails.
func (e *Exporter) Step(ctx context.Context, now time.Time) {
	if len(e.queue) < e.maxQueue() && e.pending == nil {
		if err := e.tail.Poll(); err != nil {
			e.Log.Warn("trace export: reading the journal", "error", err)
		}
		e.resume.polled()
	}
	e.Metrics.queued(len(e.queue))
	if e.pending != nil {
		if now.Before(e.retryAt) {
			return
		}
		if !e.send(ctx, now, e.pending) {
			return
		}
	}
	for len(e.queue) > 0 && ctx.Err() == nil {
		n := min(len(e.queue), e.batchSize())
		batch := e.queue[:n]
		e.queue = e.queue[n:]
		if len(e.queue) == 0 {
			e.queue = nil // let the backing array go
		}
		for _, op := range batch {
			if !e.Builder.Add(op) {
				e.Metrics.unsampled()
			}
		}
		spans := e.Builder.Take()
		if len(spans) == 0 {
			continue
		}
		// Before the send: after a restart, this batch is not sent again.
		if err := saveCheckpoint(e.Fs, e.CacheDir, batch[n-1]); err != nil {
			e.Log.Warn("trace export: the checkpoint; this batch may be sent again after a restart", "error", err)
		}
		if !e.send(ctx, now, spans) {
			return
		}
		e.Metrics.queued(len(e.queue))
	}
}

// send exports spans; on failure it keeps them as the pending batch and
// backs off.
func (e *Exporter) send(ctx context.Context, now time.Time, spans []sdktrace.ReadOnlySpan) bool {
	cctx, cancel := context.WithTimeout(ctx, e.timeout())
	err := e.Client.ExportSpans(cctx, spans)
	cancel()
	if err == nil {
		if e.pending != nil {
			e.Log.Info("trace export: the collector takes spans again", "spans", len(spans))
		}
		e.pending, e.backoff = nil, 0
		e.Metrics.exported(len(spans))
		return true
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return false // shutting down
	}
	e.Metrics.failed()
	e.backoff = min(max(2*e.backoff, minBackoff), maxBackoff)
	if e.pending == nil {
		e.Log.Warn("trace export: the collector does not take spans; retrying with backoff", "error", err, "spans", len(spans), "retryIn", e.backoff)
	}
	e.pending, e.retryAt = spans, now.Add(e.backoff)
	return false
}

// Metrics are the exporter's Prometheus metrics. A nil *Metrics counts
// nothing.
type Metrics struct {
	spans, failures, drops, unsampledOps prometheus.Counter
	queue                                prometheus.Gauge
	skipped                              prometheus.Counter
}

// NewMetrics registers the exporter's metrics on reg; skipped counts the
// journal lines its tail skips.
func NewMetrics(reg prometheus.Registerer, skipped prometheus.Counter) *Metrics {
	m := &Metrics{
		spans: prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_trace_spans_exported_total",
			Help: "Spans the trace export sent to the OTLP collector."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_trace_export_failures_total",
			Help: "Export calls to the OTLP collector that failed or timed out; the batch is sent again after a backoff."}),
		drops: prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_trace_operations_dropped_total",
			Help: "Journal operations the trace export dropped because its queue was full (the collector down or slow for long)."}),
		unsampledOps: prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_trace_operations_unsampled_total",
			Help: "Journal operations the trace export did not send because the sampler did not sample them."}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "catena_trace_queue_operations",
			Help: "Journal operations read by the trace export and not yet sent."}),
		skipped: skipped,
	}
	reg.MustRegister(m.spans, m.failures, m.drops, m.unsampledOps, m.queue)
	return m
}

func (m *Metrics) exported(n int) {
	if m != nil {
		m.spans.Add(float64(n))
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) dropped(n int) {
	if m != nil {
		m.drops.Add(float64(n))
	}
}

func (m *Metrics) unsampled() {
	if m != nil {
		m.unsampledOps.Inc()
	}
}

func (m *Metrics) queued(n int) {
	if m != nil {
		m.queue.Set(float64(n))
	}
}
