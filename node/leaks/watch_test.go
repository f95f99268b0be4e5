package leaks

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// TestWatcher: each pass exports the leaks by network and kind, says so
// once when they grow, and releases nothing unless ReleaseAfter is set;
// then only what two passes that far apart and the latest agree on.
func TestWatcher(t *testing.T) {
	for _, releaseAfter := range []time.Duration{0, 20 * time.Minute} {
		t.Run(releaseAfter.String(), func(t *testing.T) {
			n := newNode(t)
			n.reserve("10.0.0.5", "gone", "eth0", t0.Add(-2*time.Hour))
			n.chain("CNI-DN-abc", "gone")
			now := t0
			s := n.scanner()
			s.Now = func() time.Time { return now }
			x := &fakeExec{n: n}
			var ops []events.Op
			var grew []int
			reg := prometheus.NewRegistry()
			w := NewWatcher(reg, Watcher{Scanner: s, Releaser: n.releaser(x, &ops), Interval: time.Minute, ReleaseAfter: releaseAfter,
				OnGrow: func(total int, _ string) { grew = append(grew, total) }})

			w.Pass(context.Background())
			assert.Equal(t, 1.0, testutil.ToFloat64(w.gauge.WithLabelValues("net", KindHostLocal)))
			assert.Equal(t, 1.0, testutil.ToFloat64(w.gauge.WithLabelValues("net", KindPortmap)))
			now = now.Add(10 * time.Minute)
			w.Pass(context.Background())
			assert.Empty(t, x.calls, "nothing released before ReleaseAfter has passed between two scans")
			n.reserve("10.0.0.6", "gone2", "eth0", t0.Add(-2*time.Hour))
			now = now.Add(15 * time.Minute)
			w.Pass(context.Background())
			assert.Equal(t, []int{2, 3}, grew, "told when the leaks grow, not on every pass")
			if releaseAfter == 0 {
				assert.Empty(t, x.calls, "the default releases nothing")
				assert.Equal(t, 2.0, testutil.ToFloat64(w.gauge.WithLabelValues("net", KindHostLocal)))
				return
			}
			require.Len(t, x.calls, 2, "the leaks of gone, in scans 25 minutes apart: portmap then bridge; gone2's is too new")
			assert.Equal(t, "gone", x.calls[0].Args.ContainerID)
			assert.Equal(t, 2.0, testutil.ToFloat64(w.rel))
			assert.Len(t, ops, 2)
		})
	}
}
