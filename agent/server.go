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

// Server serves a mux on a listener until ctx is done.
type Server struct {
	Listener net.Listener
	Handler  http.Handler
	Log      *slog.Logger
}

var _ Runnable = (*Server)(nil)

// Run serves until ctx is done, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	srv := &http.Server{Handler: s.Handler, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(s.Listener) }()
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
