package metrics

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/catena-cni/catena/libchain/events"
)

// Handler serves the registry; before each scrape it reads what the event
// journal gained since the last one (tail may be nil). A journal that
// cannot be read is logged and the scrape still answers.
func (m *Metrics) Handler(tail *events.Tail, log *slog.Logger) http.Handler {
	h := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tail != nil {
			if err := tail.Poll(); err != nil {
				log.Warn("metrics: reading the event journal", "error", err)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// NewJournalTail tails the journal of cacheDir into m from its beginning
// (the rotated file first), counting what it cannot read in
// catena_event_journal_skipped_lines_total{reader="metrics"}.
func NewJournalTail(cacheDir string, m *Metrics) *events.Tail {
	return &events.Tail{CacheDir: cacheDir, Handle: m.ObserveOp, Unreadable: m.JournalSkipped(ReaderMetrics)}
}
