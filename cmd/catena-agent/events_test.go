package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/nodeconf"
	"github.com/catena-cni/catena/node/reconcile"
)

// TestJournalReadersCountOnOneSeries: the events watcher and the metrics
// tail count the journal lines they skip on one series,
// catena_event_journal_skipped_lines_total, told apart by reader.
func TestJournalReadersCountOnOneSeries(t *testing.T) {
	cacheDir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	rf := reconcileFlags{opts: reconcile.Options{Grace: time.Minute}}
	obs, err := rf.setup(context.Background(), http.NewServeMux(), cacheDir, "", nil, reconcile.AutoSources{}, log, io.Discard)
	require.NoError(t, err)

	ef := eventsFlags{enabled: true, node: "node1", interval: 10 * time.Millisecond}
	// Never reached: no line makes an event.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	ctx, cancel := context.WithCancel(context.Background())
	named := ef.setup(ctx, cfg, cacheDir, obs.metrics, &nodeconf.Installer{}, log)
	require.Len(t, named, 1)
	done := make(chan error, 1)
	go func() { done <- named[0].Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	path := events.Path(cacheDir)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("junk\n"), 0o600))
	obs.handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))

	want := `
# HELP catena_event_journal_skipped_lines_total Lines of the event journal that were not an operation (junk, torn or too long) and were skipped, by reader: metrics (the operation metrics), events (the Kubernetes events, of which no event was made) or traces (the trace export, which sent no span of it).
# TYPE catena_event_journal_skipped_lines_total counter
catena_event_journal_skipped_lines_total{reader="events"} 1
catena_event_journal_skipped_lines_total{reader="metrics"} 1
`
	names := []string{"catena_event_journal_skipped_lines_total", "catena_events_skipped_journal_lines_total"}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, testutil.GatherAndCompare(obs.metrics.Registry, strings.NewReader(want), names...))
	}, 5*time.Second, 10*time.Millisecond, "the events watcher polls every 10ms")
}
