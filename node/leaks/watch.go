package leaks

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/catena-cni/catena/node/agent"
)

// maxNetworks bounds the network label of catena_leaks: past it, a new
// network counts as "other".
const maxNetworks = 64

// Watcher scans the node every Interval (catena-agent run): it exports
// each network's leaks by kind, says so when they grow, and, only with
// ReleaseAfter set, releases what two of its scans at least ReleaseAfter
// apart and the latest agree on, as repair --from-report does.
type Watcher struct {
	Scanner  *Scanner
	Releaser *Releaser
	Interval time.Duration
	// ReleaseAfter: 0 releases nothing (the default).
	ReleaseAfter time.Duration
	// OnGrow is told when the node's leaks grow past the most seen.
	OnGrow func(total int, summary string)
	Log    *slog.Logger

	gauge            *prometheus.GaugeVec
	scans, errs, rel prometheus.Counter
	networks         map[string]bool
	most             int
	// history are the scans ReleaseAfter may pair with the latest.
	history []*Report
}

var _ agent.Runnable = (*Watcher)(nil)

// NewWatcher registers the watcher's metrics on reg.
func NewWatcher(reg prometheus.Registerer, w Watcher) *Watcher {
	w.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "catena_leaks",
		Help: "What the node's networks held at the last leak scan that no live sandbox owns and Catena did not make (catenactl leaks), by network and kind (host-local, portmap); past 64 networks a new one is other."},
		[]string{"network", "kind"})
	w.scans = prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_leak_scans_total", Help: "Leak scans run."})
	w.errs = prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_leak_scan_errors_total",
		Help: "Leak scans that could not read something (the runtime, a dir, the nat table): what they could not see was kept."})
	w.rel = prometheus.NewCounter(prometheus.CounterOpts{Name: "catena_leaks_released_total",
		Help: "Leaks released by the agent (--release-leaks-after), each through the DEL of the delegate that made it."})
	reg.MustRegister(w.gauge, w.scans, w.errs, w.rel)
	w.networks = map[string]bool{}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	return &w
}

// Run scans every Interval until ctx is done.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		w.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass is one scan, its metrics, its event, and its releases.
func (w *Watcher) Pass(ctx context.Context) {
	r, err := w.Scanner.Scan(ctx)
	w.scans.Inc()
	if err != nil {
		w.errs.Inc()
		w.Log.Warn("leak scan", "error", err)
		return
	}
	for _, in := range r.Inputs {
		if in.Error != "" {
			w.errs.Inc()
			w.Log.Warn("leak scan: an input could not be read; what it holds is kept", "input", in.What, "where", in.Where, "error", in.Error)
			break
		}
	}
	counts := map[[2]string]int{}
	total := 0
	for _, f := range r.Leaks() {
		counts[[2]string{w.network(f.Owner.Network), f.Kind}]++
		total++
	}
	w.gauge.Reset()
	for k, n := range counts {
		w.gauge.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
	if total > w.most {
		w.most = total
		if w.OnGrow != nil {
			w.OnGrow(total, summary(counts))
		}
	}
	if w.ReleaseAfter > 0 && w.Releaser != nil {
		w.release(ctx, r)
	}
}

// release pairs r with the newest earlier scan at least ReleaseAfter
// older, and releases what both and r (the fresh look) agree on.
func (w *Watcher) release(ctx context.Context, r *Report) {
	var old *Report
	keep := w.history[:0]
	for _, h := range w.history {
		if r.Time.Sub(h.Time) >= w.ReleaseAfter {
			old = h
		}
		if r.Time.Sub(h.Time) < 2*w.ReleaseAfter {
			keep = append(keep, h)
		}
	}
	w.history = append(keep, r)
	if old == nil {
		return
	}
	release, _, err := Confirm([]*Report{old, r}, r, w.ReleaseAfter)
	if err != nil || len(release) == 0 {
		return
	}
	for _, done := range w.Releaser.Release(ctx, release) {
		if done.Error != "" {
			w.Log.Warn("leak release failed; the finding is still held", "network", done.Owner.Network, "container", done.Owner.ContainerID,
				"delegate", done.Delegate.Type, "error", done.Error)
			continue
		}
		w.rel.Add(float64(len(done.Items)))
		w.Log.Info("leak released", "network", done.Owner.Network, "container", done.Owner.ContainerID, "delegate", done.Delegate.Type, "items", done.Items)
	}
}

// network bounds the network label.
func (w *Watcher) network(n string) string {
	if w.networks[n] {
		return n
	}
	if len(w.networks) >= maxNetworks || len(n) > 64 {
		return "other"
	}
	w.networks[n] = true
	return n
}

func summary(counts map[[2]string]int) string {
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s %s %d", k[0], k[1], n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
