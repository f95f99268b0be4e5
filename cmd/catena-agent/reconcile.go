package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/node/adopt"
	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/metrics"
	"github.com/catena-cni/catena/node/reconcile"
)

const (
	// autoEndpoint: the runtime kubelet uses, among the runtimes' default
	// sockets (reconcile.ChooseEndpoint).
	autoEndpoint             = "auto"
	defaultReconcileInterval = 30 * time.Second
)

// reconcileFlags are run's flags of the node reconciler.
type reconcileFlags struct {
	endpoint string
	interval time.Duration
	opts     reconcile.Options
}

func (r *reconcileFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&r.endpoint, "runtime-endpoint", autoEndpoint, "the CRI runtime's socket, listed by the reconciler; auto: at start, the one of "+
		reconcile.ContainerdEndpoint+" (containerd) and "+reconcile.CRIOEndpoint+" (CRI-O) that kubelet uses (its --container-runtime-endpoint or config file's "+
		"containerRuntimeEndpoint, else the Node's containerRuntimeVersion), else the only one that answers CRI; "+
		"more than one that could be it is an error, never a guess (neither: containerd's)")
	fl.DurationVar(&r.interval, "reconcile-interval", defaultReconcileInterval, "run a reconcile pass this often (0: no reconciler)")
	fl.DurationVar(&r.opts.Grace, "grace", reconcile.DefaultGrace, "a record changed within this is never reclaimed, and a mark must be this old before its reclaim")
	fl.DurationVar(&r.opts.AbandonAfter, "abandon-after", 0, "abandon a delegate whose DEL has failed for this long, as catenactl repair --abandon does (0: never; the safe default)")
	fl.DurationVar(&r.opts.RuntimeTimeout, "runtime-timeout", reconcile.DefaultRuntimeTimeout, "bound on each ListPodSandbox")
}

// observability is what run adds for the reconciler and the metrics: the
// registry (served on /metrics) and the components to run.
type observability struct {
	// lister lists the runtime's sandboxes, for the reconciler and the
	// leak scan; nil without a reconciler.
	lister  reconcile.SandboxLister
	metrics *metrics.Metrics
	handler http.Handler // /metrics
	loop    *reconcile.Loop
	closer  io.Closer
}

// setup registers /metrics on mux and, unless the interval is 0, builds
// the reconcile loop over cacheDir, finding the delegates in cniPath (a
// CNI_PATH: install's --cni-path, else its --cni-bin-dir), listing the
// runtime at the endpoint (auto: the one of sockets kubelet uses, as src
// tells).
func (r *reconcileFlags) setup(ctx context.Context, mux *http.ServeMux, cacheDir, cniPath string, sockets []string, src reconcile.AutoSources,
	log *slog.Logger, stderr io.Writer) (*observability, error) {
	if r.interval < 0 || r.opts.Grace <= 0 || r.opts.AbandonAfter < 0 {
		return nil, cli.Usagef("--reconcile-interval %s, --grace %s, --abandon-after %s: grace must be positive, the others not negative",
			r.interval, r.opts.Grace, r.opts.AbandonAfter)
	}
	m := metrics.New()
	if err := m.WritableGauges(cacheDir); err != nil {
		return nil, err
	}
	tail := metrics.NewJournalTail(cacheDir, m)
	tail.Log = log.With("reader", metrics.ReaderMetrics)
	h := m.Handler(tail, log)
	mux.Handle("GET /metrics", h)
	o := &observability{metrics: m, handler: h}
	if r.interval == 0 {
		return o, nil
	}
	r.opts.CNIPath = cniPath
	endpoint, err := r.runtimeEndpoint(ctx, sockets, src, log)
	if err != nil {
		return nil, err
	}
	rec, lister, err := reconcile.NewNode(reconcile.NodeConfig{CacheDir: cacheDir, RuntimeEndpoint: endpoint, Options: r.opts,
		Log: log, Observer: m, DelegateStderr: stderr})
	if err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	o.closer, o.lister = lister, lister
	o.loop = &reconcile.Loop{R: rec, Interval: r.interval, BeforePass: func() {
		if err := tail.Poll(); err != nil {
			log.Warn("metrics: reading the event journal", "error", err)
		}
	}}
	return o, nil
}

// runtimeEndpoint is --runtime-endpoint, or under auto the one of
// sockets kubelet uses (reconcile.ResolveAuto), and logs which and why. A
// refusal to guess is a usage error: --runtime-endpoint must be set.
func (r *reconcileFlags) runtimeEndpoint(ctx context.Context, sockets []string, src reconcile.AutoSources, log *slog.Logger) (string, error) {
	if r.endpoint != autoEndpoint {
		log.Info("runtime endpoint", "endpoint", r.endpoint, "from", "--runtime-endpoint")
		return r.endpoint, nil
	}
	c, unknown, err := reconcile.ResolveAuto(ctx, sockets, src)
	if err != nil {
		return "", &cli.UsageError{Err: err}
	}
	if !c.Found {
		log.Warn("runtime endpoint: no runtime socket found; listing the first until restarted (set --runtime-endpoint)",
			"endpoint", c.Endpoint, "passed", strings.Join(c.Passed, "; "))
		return c.Endpoint, nil
	}
	args := []any{"endpoint", c.Endpoint, "from", c.From}
	if len(c.Passed) > 0 {
		args = append(args, "passed", strings.Join(c.Passed, "; "))
	}
	if len(unknown) > 0 {
		args = append(args, "unknown", strings.Join(unknown, "; "))
	}
	log.Info("runtime endpoint", args...)
	return c.Endpoint, nil
}

// components are the runnables to add to run's.
func (o *observability) components() []agent.Named {
	if o.loop == nil {
		return nil
	}
	return []agent.Named{{Name: "reconcile", Runnable: o.loop}}
}

// onAdopt counts an install's adoption; a refused entry counts as skipped.
func (o *observability) onAdopt(rep adopt.Report) {
	o.metrics.ObserveAdoption(rep.Adopted, rep.AlreadyPresent, len(rep.Skipped)+len(rep.Refused))
}
