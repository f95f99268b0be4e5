package traces

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/catena-cni/catena/libchain/events"
)

// fakeCollector records the operation span IDs of what it is sent, or
// fails while down.
type fakeCollector struct {
	mu      sync.Mutex
	down    bool
	calls   int
	batches [][]string // each batch's operation spans, "CNI ..." only
	closed  bool
}

var _ SpanExporter = (*fakeCollector)(nil)

func (f *fakeCollector) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return errors.New("connection refused")
	}
	var ops []string
	for _, s := range spans {
		if s.Parent().IsRemote() || !s.Parent().IsValid() {
			ops = append(ops, s.SpanContext().SpanID().String())
		}
	}
	f.batches = append(f.batches, ops)
	return nil
}

func (f *fakeCollector) Shutdown(context.Context) error { f.closed = true; return nil }

func (f *fakeCollector) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []string
	for _, b := range f.batches {
		all = append(all, b...)
	}
	return all
}

// journal appends n sampled operations to cacheDir's journal, from first.
func journal(t *testing.T, cacheDir string, first, n int) []string {
	t.Helper()
	w := &events.Writer{CacheDir: cacheDir}
	var spans []string
	for i := first; i < first+n; i++ {
		op := failedAdd()
		op.SpanID = fmt.Sprintf("%016x", 0x1000+i)
		op.Start = t0.Add(time.Duration(i) * time.Second)
		op.Calls = nil
		require.NoError(t, w.Append(op))
		spans = append(spans, op.SpanID)
	}
	return spans
}

func newExporter(t *testing.T, dir string, c SpanExporter, reg *prometheus.Registry) *Exporter {
	t.Helper()
	e := &Exporter{CacheDir: dir, Fs: afero.NewOsFs(), Builder: builder(t, DefaultSampler), Client: c, BatchSize: 4, MaxQueue: 10,
		Metrics: NewMetrics(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "skipped"}))}
	require.NoError(t, e.start())
	return e
}

// TestExporterBatchesAndRestarts: operations go out in batches; after a
// restart none is sent twice, and those appended meanwhile are sent.
func TestExporterBatchesAndRestarts(t *testing.T) {
	dir := t.TempDir()
	want := journal(t, dir, 0, 6)
	c := &fakeCollector{}
	reg := prometheus.NewRegistry()
	e := newExporter(t, dir, c, reg)
	e.Step(context.Background(), time.Now())
	assert.Equal(t, [][]string{want[:4], want[4:]}, c.batches, "batches of 4")
	assert.Equal(t, float64(12), testutil.ToFloat64(e.Metrics.spans), "each operation and its lock wait")
	fi, err := os.Stat(checkpointPath(dir))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	want = append(want, journal(t, dir, 6, 3)...)
	c2 := &fakeCollector{}
	e2 := newExporter(t, dir, c2, prometheus.NewRegistry())
	e2.Step(context.Background(), time.Now())
	assert.Equal(t, want[6:], c2.sent(), "after a restart, only what was not sent")

	// The checkpoint's operation rotated away: those that ended after it.
	require.NoError(t, os.Remove(events.Path(dir)))
	late := journal(t, dir, 20, 2)
	c3 := &fakeCollector{}
	e3 := newExporter(t, dir, c3, prometheus.NewRegistry())
	e3.Step(context.Background(), time.Now())
	assert.Equal(t, late, c3.sent())
}

// TestExporterBadCheckpoint: a checkpoint that cannot be read sends none
// of what the journal holds now, only what comes after.
func TestExporterBadCheckpoint(t *testing.T) {
	dir := t.TempDir()
	journal(t, dir, 0, 3)
	require.NoError(t, os.WriteFile(checkpointPath(dir), []byte("junk"), 0o600))
	c := &fakeCollector{}
	e := newExporter(t, dir, c, prometheus.NewRegistry())
	e.Step(context.Background(), time.Now())
	assert.Empty(t, c.sent())
	later := journal(t, dir, 3, 2)
	e.Step(context.Background(), time.Now())
	assert.Equal(t, later, c.sent())
}

// TestExporterCollectorDown: a collector that is down gets the failed
// batch again after a backoff that grows, the journal is not read
// meanwhile (the queue never passes its bound), and everything is sent
// once it is back.
func TestExporterCollectorDown(t *testing.T) {
	dir := t.TempDir()
	want := journal(t, dir, 0, 6)
	c := &fakeCollector{down: true}
	e := newExporter(t, dir, c, prometheus.NewRegistry())
	now := time.Now()
	e.Step(context.Background(), now)
	assert.Equal(t, 1, c.calls)
	assert.Equal(t, minBackoff, e.backoff)
	e.Step(context.Background(), now.Add(minBackoff/2))
	assert.Equal(t, 1, c.calls, "not before the backoff")
	want = append(want, journal(t, dir, 6, 20)...)
	e.Step(context.Background(), now.Add(minBackoff))
	assert.Equal(t, 2, c.calls)
	assert.Equal(t, 2*minBackoff, e.backoff, "doubled")
	assert.Len(t, e.queue, 2, "the journal is not read while the collector is down")
	assert.Equal(t, float64(2), testutil.ToFloat64(e.Metrics.failures))

	c.mu.Lock()
	c.down = false
	c.mu.Unlock()
	for i := 0; i < 10; i++ {
		e.Step(context.Background(), now.Add(time.Minute))
	}
	sent := c.sent()
	assert.Equal(t, want[:6], sent[:6], "the failed batch, then the rest")
	assert.LessOrEqual(t, len(e.queue), e.MaxQueue)
	assert.Equal(t, float64(len(want)-len(sent)), testutil.ToFloat64(e.Metrics.drops), "what the full queue dropped is counted")
	assert.Len(t, sent, 6+10, "the queue's bound: 10 read after the failed batch, 10 dropped")
	assert.Zero(t, e.backoff)
}

// TestExporterRunStops: Run returns at ctx's end and shuts the client down.
func TestExporterRunStops(t *testing.T) {
	dir := t.TempDir()
	journal(t, dir, 0, 2)
	c := &fakeCollector{}
	e := &Exporter{CacheDir: dir, Builder: builder(t, DefaultSampler), Client: c, Interval: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	require.Eventually(t, func() bool { return len(c.sent()) == 2 }, 5*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	assert.True(t, c.closed)
}
