package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// shutdownTimeout bounds how long in-flight requests may finish.
const shutdownTimeout = 5 * time.Second

// The server's bounds. Its clients are kubelet's probes (a fresh
// connection each, 1 s timeout) and a Prometheus scrape; anything holding a
// connection longer is dropped, so that no client, slow or idle or never
// reading, holds a goroutine and an fd for ever (before: 1,000 keep-alive
// clients held 1,000 connections indefinitely, and a client that never read
// its responses kept its handler blocked in Write for ever).
const (
	// readHeaderTimeout drops a client dribbling its headers (slow loris).
	readHeaderTimeout = 2 * time.Second
	// readTimeout bounds reading a whole request (they have no body).
	readTimeout = 5 * time.Second
	// writeTimeout bounds a response, from the end of the request's
	// headers: a scrape of a few hundred KB takes milliseconds.
	writeTimeout = 10 * time.Second
	// idleTimeout closes a keep-alive connection with no next request.
	idleTimeout = 10 * time.Second
	// maxHeaderBytes: the requests are GETs of three paths.
	maxHeaderBytes = 8 << 10
	// maxIdle: beyond this many idle keep-alive connections the oldest is
	// closed, so that idle clients never crowd out a probe.
	maxIdle = 64
	// maxConns bounds the connections held at once (each costs a
	// goroutine, buffers and an fd, under the container's memory limit);
	// beyond it new ones wait in the kernel's backlog.
	maxConns = 1024
)

// Server serves a mux on a listener until ctx is done, within the bounds
// above.
type Server struct {
	Listener net.Listener
	Handler  http.Handler
	Log      *slog.Logger
}

var _ Runnable = (*Server)(nil)

// Run serves until ctx is done, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	idle := newIdleShedder(maxIdle)
	srv := &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         idle.track,
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(newLimitListener(s.Listener, maxConns)) }()
	s.Log.Info("serving", "addr", s.Listener.Addr().String())
	select {
	case err := <-done:
		return fmt.Errorf("serving on %s: %w", s.Listener.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down %s: %w", s.Listener.Addr(), err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving on %s: %w", s.Listener.Addr(), err)
	}
	return nil
}
