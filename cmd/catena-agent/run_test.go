package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestRunServesReadiness: run is not ready without a primary, becomes ready
// once one appears and is wrapped, is live throughout, and on cancellation
// (SIGTERM) exits 0 leaving the generated file and the binaries in place.
func TestRunServesReadiness(t *testing.T) {
	n := newNode(t, nil)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		args := append([]string{"run", "--listen-addr", addr}, n.installArgs()...)
		done <- runContext(ctx, args, env{stdout: io.Discard, stderr: &stderr, fs: afero.NewOsFs()})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	get := func(path string) (int, string) { return httpGet(addr, path) }
	// Before the first pass /readyz says "no pass yet"; wait for the
	// pass's own verdict.
	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = get("/readyz")
		return code == 503 && !strings.Contains(body, "no pass yet")
	}, 5*time.Second, 20*time.Millisecond)
	assert.Contains(t, body, "no primary network config")
	code, _ := get("/healthz")
	assert.Equal(t, 200, code)

	require.NoError(t, os.WriteFile(filepath.Join(n.conf, "10-bridge.conflist"), []byte(primaryCL), 0o644))
	require.Eventually(t, func() bool { code, _ := get("/readyz"); return code == 200 }, 3*time.Second, 20*time.Millisecond)
	assert.FileExists(t, filepath.Join(n.conf, "00-catena.conflist"))

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("run did not exit on cancel")
	}
	done <- 0
	assert.FileExists(t, filepath.Join(n.conf, "00-catena.conflist"), "left in place")
	assert.FileExists(t, filepath.Join(n.bin, "catena"), "left in place")
}
