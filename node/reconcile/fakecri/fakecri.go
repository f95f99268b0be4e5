package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Server is the fake runtime.
type Server struct {
	cri.UnimplementedRuntimeServiceServer
	srv *grpc.Server

	mu      sync.Mutex
	ids     []string
	delay   time.Duration
	calls   int
	runtime [2]string // name, version: Version's answer
}

// Start serves on a new unix socket at path.
func Start(path string) (*Server, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("fake CRI: %w", err)
	}
	s := &Server{srv: grpc.NewServer(), runtime: [2]string{"fakecri", "0.0.1"}}
	cri.RegisterRuntimeServiceServer(s.srv, s)
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Stop stops serving and removes the socket.
func (s *Server) Stop() { s.srv.Stop() }

// Set replaces the listed sandbox IDs.
func (s *Server) Set(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append([]string(nil), ids...)
}

// SetRuntime sets what Version answers: RuntimeName and RuntimeVersion
// ("fakecri", "0.0.1" by default; an empty name refuses Version, as a
// socket that serves no CRI does).
func (s *Server) SetRuntime(name, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runtime = [2]string{name, version}
}

// Version answers with the runtime set.
func (s *Server) Version(context.Context, *cri.VersionRequest) (*cri.VersionResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runtime[0] == "" {
		return nil, errors.New("fake CRI: no runtime service here")
	}
	return &cri.VersionResponse{Version: "0.1.0", RuntimeName: s.runtime[0], RuntimeVersion: s.runtime[1], RuntimeApiVersion: "v1"}, nil
}

// SetDelay makes every answer wait d (a slow runtime).
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Calls is how many ListPodSandbox calls were answered or timed out.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// ListPodSandbox answers with the set, half READY and half NOTREADY.
func (s *Server) ListPodSandbox(ctx context.Context, _ *cri.ListPodSandboxRequest) (*cri.ListPodSandboxResponse, error) {
	s.mu.Lock()
	s.calls++
	ids, delay := s.ids, s.delay
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, errors.New("fake CRI: too slow")
		}
	}
	resp := &cri.ListPodSandboxResponse{}
	for i, id := range ids {
		state := cri.PodSandboxState_SANDBOX_READY
		if i%2 == 1 {
			state = cri.PodSandboxState_SANDBOX_NOTREADY
		}
		resp.Items = append(resp.Items, &cri.PodSandbox{Id: id, State: state,
			Metadata: &cri.PodSandboxMetadata{Name: "p-" + id, Namespace: "default", Uid: id}})
	}
	return resp, nil
}
