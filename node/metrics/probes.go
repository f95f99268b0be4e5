package metrics

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/catena-cni/catena/libchain/events"
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
// at each scrape by writing to the cache dir and its events dir: 0 when
// the plugin could not write records or journal lines there (permissions,
// a read-only mount, a full filesystem). A dir not made yet is judged by
// its nearest existing parent, where the plugin would make it.
func (m *Metrics) WritableGauges(cacheDir string) error {
	dirs := map[string]string{"cache": cacheDir, "journal": filepath.Dir(events.Path(cacheDir))}
	var errs []error
	for label, path := range dirs {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "catena_dir_writable",
			Help:        "1 while a block can be written in the directory the plugin writes (cache: records; journal: the event journal), else 0 (permissions, read-only, full).",
			ConstLabels: prometheus.Labels{"dir": label}},
			func() float64 { return writable(path) })
		if err := m.Registry.Register(g); err != nil {
			errs = append(errs, fmt.Errorf("metrics: catena_dir_writable %s: %w", label, err))
		}
	}
	return errors.Join(errs...)
}

// probeSize is what the write probe writes: one block, as a record's
// write needs at least one.
const probeSize = 4096

// writable is 1 when path (or, while it is not made yet, its nearest
// existing parent) passes access(2) W_OK and a block can be written in
// it: into an unnamed file (O_TMPFILE), which no walk of the dir ever
// sees and which is freed at close. A filesystem without O_TMPFILE is
// judged by access(2) alone.
func writable(path string) float64 {
	for {
		err := unix.Access(path, unix.W_OK)
		switch {
		case err == nil:
			return writeProbe(path)
		case errors.Is(err, unix.ENOENT) && filepath.Dir(path) != path:
			path = filepath.Dir(path)
		default:
			return 0
		}
	}
}

func writeProbe(dir string) float64 {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) {
		return 1 // no O_TMPFILE here: access(2) said writable
	}
	if err != nil {
		return 0
	}
	defer func() { _ = unix.Close(fd) }()
	if n, err := unix.Write(fd, make([]byte, probeSize)); err != nil || n != probeSize {
		return 0
	}
	return 1
}
