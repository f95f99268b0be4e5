package agent

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Check returns nil when its component is fine, else why not.
type Check func() error

// Health serves /healthz (liveness) and /readyz (readiness) from the checks
// registered by the components: 200 "ok" when every check passes, else 503
// with one line per failing check.
type Health struct {
	mu    sync.Mutex
	live  map[string]Check
	ready map[string]Check
}

// AddLiveness registers a liveness check: failing, kubelet restarts the pod.
func (h *Health) AddLiveness(name string, c Check) { h.add(&h.live, name, c) }

// AddReadiness registers a readiness check.
func (h *Health) AddReadiness(name string, c Check) { h.add(&h.ready, name, c) }

func (h *Health) add(m *map[string]Check, name string, c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if *m == nil {
		*m = map[string]Check{}
	}
	(*m)[name] = c
}

// Register puts /healthz and /readyz on mux.
func (h *Health) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { h.serve(w, h.live) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { h.serve(w, h.ready) })
}

func (h *Health) serve(w http.ResponseWriter, checks map[string]Check) {
	h.mu.Lock()
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	h.mu.Unlock()
	slices.Sort(names)
	var failed []string
	for _, n := range names {
		h.mu.Lock()
		c := checks[n]
		h.mu.Unlock()
		if err := c(); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", n, err))
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	// A body the prober does not read to the end changes nothing: the
	// status code is the answer.
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, strings.Join(failed, "\n"))
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}
