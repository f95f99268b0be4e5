package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/node/reconcile/fakecri"
)

// okPlugin logs "<verb> <container>" beside itself and succeeds.
const okPlugin = "#!/bin/sh\ncat >/dev/null\necho \"$CNI_COMMAND $CNI_CONTAINERID\" >>\"$(dirname \"$0\")/calls.log\"\n"

// TestRunReconcilesAndServesMetrics: run's reconciler reclaims a CRI
// attachment whose sandbox the runtime does not list, after the grace
// period, leaves the listed one, and /metrics says so; with the runtime
// gone, nothing is reclaimed and /metrics counts runtime errors.
func TestRunReconcilesAndServesMetrics(t *testing.T) {
	n := newNode(t, map[string]string{"10-bridge.conflist": primaryCL})
	require.NoError(t, os.WriteFile(filepath.Join(n.bin, "okplug"), []byte(okPlugin), 0o755))
	sock := filepath.Join(t.TempDir(), "cri.sock")
	srv, err := fakecri.Start(sock)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	srv.Set("live")
	store := cache.NewDiskStore(afero.NewOsFs(), n.cache, cache.NewFlockLocker(filepath.Join(n.cache, cache.LocksDir)))
	for _, cid := range []string{"live", "gone"} {
		conf, _ := json.Marshal(map[string]string{"cniVersion": "1.0.0", "name": "podnet", "type": "okplug"})
		require.NoError(t, store.Save(&cache.Record{Key: cache.Key{Network: "podnet", ContainerID: cid, IfName: "eth0"},
			Phase: cache.PhaseComplete, CNIVersion: "1.0.0", Args: "K8S_POD_INFRA_CONTAINER_ID=" + cid, Created: time.Now(),
			Steps: []cache.Step{{Index: 0, Type: "okplug", CNIVersion: "1.0.0", Config: conf, State: cache.StepAdded}}}))
	}

	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		args := append([]string{"run", "--listen-addr", addr, "--runtime-endpoint", sock, "--reconcile-interval", "50ms", "--grace", "300ms"}, n.installArgs()...)
		done <- runContext(ctx, args, env{stdout: io.Discard, stderr: &stderr, fs: afero.NewOsFs()})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	scrape := func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	gone := func() bool {
		_, err := store.Load(cache.Key{Network: "podnet", ContainerID: "gone", IfName: "eth0"})
		return errors.Is(err, cache.ErrNotFound)
	}
	start := time.Now()
	require.Eventually(t, gone, 5*time.Second, 20*time.Millisecond)
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 300*time.Millisecond, "not before grace after the mark")
	calls, err := os.ReadFile(filepath.Join(n.bin, "calls.log"))
	require.NoError(t, err)
	assert.Equal(t, "DEL gone\n", string(calls))
	_, err = store.Load(cache.Key{Network: "podnet", ContainerID: "live", IfName: "eth0"})
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		m := scrape()
		return strings.Contains(m, "catena_reconcile_reclaimed_total 1\n") &&
			strings.Contains(m, `catena_operations_total{outcome="ok",verb="reclaim"} 1`) &&
			strings.Contains(m, `catena_records{network="podnet",phase="complete"} 1`)
	}, 3*time.Second, 50*time.Millisecond, "%s", scrape())

	srv.Stop()
	require.Eventually(t, func() bool {
		return !strings.Contains(scrape(), "catena_reconcile_runtime_errors_total 0\n")
	}, 3*time.Second, 50*time.Millisecond)
	m := scrape()
	assert.Contains(t, m, `catena_reconcile_kept_total{cause="runtime"}`)
	assert.Contains(t, stderr.String(), "nothing reclaimed in this pass")
	_, err = store.Load(cache.Key{Network: "podnet", ContainerID: "live", IfName: "eth0"})
	require.NoError(t, err, "kept while the runtime is gone")
	t.Logf("reclaimed after %s; metrics lines: %d", took.Round(time.Millisecond), strings.Count(m, "\n"))
}
