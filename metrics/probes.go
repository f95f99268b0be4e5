package metrics

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/libchain"
)

// ReadinessGauge exports the agent's readiness (what /readyz answers) as
// catena_agent_ready, evaluated at each scrape: 1 when ready returns nil,
// else 0. The alerts need it as a series; /readyz only gates the pod.
func (m *Metrics) ReadinessGauge(ready func() error) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "catena_agent_ready",
		Help: "1 while the agent is ready (/readyz: the last install pass succeeded and the generated conflist wrapping the primary is in place), else 0."},
		func() float64 {
			if ready() != nil {
				return 0
			}
			return 1
		})
	if err := m.Registry.Register(g); err != nil {
		return fmt.Errorf("metrics: catena_agent_ready: %w", err)
	}
	return nil
}

// WritableGauges exports catena_dir_writable{dir="cache"|"journal"}, read
// at each scrape with access(2) W_OK on the cache dir and its events dir:
// 0 when the plugin could not write records or journal lines there
// (permissions, a read-only mount). A dir not made yet is judged by its
// nearest existing parent, where the plugin would make it. A full
// filesystem (ENOSPC) is not seen by this probe.
func (m *Metrics) WritableGauges(cacheDir string) error {
	dirs := map[string]string{"cache": cacheDir, "journal": filepath.Dir(libchain.EventsPath(cacheDir))}
	var errs []error
	for label, path := range dirs {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "catena_dir_writable",
			Help:        "1 while the directory the plugin writes is writable by access(2) W_OK (cache: records; journal: the event journal), else 0.",
			ConstLabels: prometheus.Labels{"dir": label}},
			func() float64 { return writable(path) })
		if err := m.Registry.Register(g); err != nil {
			errs = append(errs, fmt.Errorf("metrics: catena_dir_writable %s: %w", label, err))
		}
	}
	return errors.Join(errs...)
}

func writable(path string) float64 {
	for {
		err := unix.Access(path, unix.W_OK)
		switch {
		case err == nil:
			return 1
		case errors.Is(err, unix.ENOENT) && filepath.Dir(path) != path:
			path = filepath.Dir(path)
		default:
			return 0
		}
	}
}
