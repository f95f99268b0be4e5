package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunAll: a failing component stops the others and is named; a
// cancelled context ends all with nil.
func TestRunAll(t *testing.T) {
	block := Named{Name: "block", Runnable: RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil })}
	fail := Named{Name: "fail", Runnable: RunnableFunc(func(context.Context) error { return errors.New("boom") })}
	err := RunAll(context.Background(), block, fail)
	require.EqualError(t, err, "fail: boom")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, RunAll(ctx, block, block))
}

// TestHealthServer: /healthz and /readyz answer 200 "ok" or 503 with the
// failing checks, over a real listener, and the server stops on cancel.
func TestHealthServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	var h Health
	h.Register(mux)
	var mu sync.Mutex
	notReady := errors.New("generated file missing")
	ready := notReady
	h.AddReadiness("install", func() error {
		mu.Lock()
		defer mu.Unlock()
		return ready
	})
	h.AddLiveness("install", func() error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{Listener: ln, Handler: mux, Log: slog.New(slog.DiscardHandler)}).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		path     string
		ready    error
		wantCode int
		wantBody string
	}{
		{"/healthz", nil, 200, "ok\n"},
		{"/readyz", notReady, 503, "install: generated file missing\n"},
		{"/readyz", nil, 200, "ok\n"},
		{"/nothing", nil, 404, "404 page not found\n"},
	} {
		mu.Lock()
		ready = tc.ready
		mu.Unlock()
		code, body := get(tc.path)
		assert.Equal(t, tc.wantCode, code, tc.path)
		assert.Equal(t, tc.wantBody, body, tc.path)
	}
	cancel()
	require.NoError(t, <-done)
	done <- nil
	_, err = http.Get("http://" + ln.Addr().String() + "/healthz")
	assert.Error(t, err, "stopped")
}
