package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/ciliumsim"
	"github.com/catena-cni/catena/internal/clitest"
)

// TestRunCiliumExclusive: with Cilium's exclusive mode over the conf dir
// (ciliumsim), run's /readyz fails naming Cilium and the fix within
// milliseconds of the rename, /metrics counts the write, the undo and the
// backoff, and the log has one warning saying so.
func TestRunCiliumExclusive(t *testing.T) {
	n := newNode(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var renamedAt time.Time
	cil := &ciliumsim.Exclusive{Dir: n.conf, BinDir: n.plugins, OnRename: func(name string) {
		mu.Lock()
		defer mu.Unlock()
		if name == defaultConfName && renamedAt.IsZero() {
			renamedAt = time.Now()
		}
	}}
	simDone := make(chan error, 1)
	go func() { simDone <- cil.Run(ctx) }()
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(n.conf, ciliumsim.ConfName)); return err == nil }, 2*time.Second, 5*time.Millisecond)

	addr := freeAddr(t)
	done := make(chan int, 1)
	var stderr clitest.SyncBuffer
	go func() {
		args := append([]string{"run", "--listen-addr", addr, "--reconcile-interval", "0"}, n.installArgs()...)
		done <- runContext(ctx, args, env{stdout: io.Discard, stderr: &stderr, fs: afero.NewOsFs()})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		require.NoError(t, <-simDone)
	})
	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = httpGet(addr, "/readyz")
		return code == 503 && strings.Contains(body, "exclusive")
	}, 5*time.Second, time.Millisecond)
	seen := time.Now()
	// the simulator reports a rename after making it: the agent may see it first
	var latency time.Duration
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		latency = seen.Sub(renamedAt)
		return !renamedAt.IsZero()
	}, time.Second, time.Millisecond, "the rename reported")
	t.Logf("/readyz named Cilium %s after it renamed the generated conflist", latency.Round(100*time.Microsecond))
	assert.Less(t, latency, time.Second)
	assert.Contains(t, body, "00-catena.conflist was renamed to 00-catena.conflist.cilium_bak by Cilium's exclusive mode")
	assert.Contains(t, body, "set cni.exclusive: false")

	require.Eventually(t, func() bool {
		_, m := httpGet(addr, "/metrics")
		return strings.Contains(m, `catena_conflist_undone_total{by="cilium"} 1`)
	}, 2*time.Second, 10*time.Millisecond)
	_, m := httpGet(addr, "/metrics")
	assert.Contains(t, m, "catena_conflist_writes_total 1\n")
	assert.Contains(t, m, "catena_conflist_backoff_seconds 60\n")
	assert.Contains(t, m, `catena_conflist_undone_total{by="other"} 0`)
	assert.Equal(t, 1, strings.Count(stderr.String(), "level=WARN"), stderr.String())
	assert.Contains(t, stderr.String(), `msg="the generated conflist was taken away after catena-agent wrote it; backing off before rewriting it"`)
	assert.Contains(t, stderr.String(), "by=cilium")
}
