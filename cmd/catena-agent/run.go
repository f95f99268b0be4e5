package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/nodeconf"
)

func runCmd(e env) *cobra.Command {
	var f installFlags
	var rf reconcileFlags
	var ef eventsFlags
	var sf secureFlags
	var lf leakWatchFlags
	var uf selfWatchFlags
	var mf memLimitFlags
	var addr string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "The DaemonSet's process: install, keep installed, reconcile, serve /healthz, /readyz and /metrics",
		Long: `run does what install does and keeps doing it (fsnotify on the conf dir
and every --resync), and serves /healthz, /readyz and /metrics on
--listen-addr. Every --reconcile-interval it runs a pass of the node
reconciler, as catenactl reconcile does. In a cluster (--events) it records
Kubernetes Events on pods and the Node, and serves /metrics over HTTPS on
--node-ip:--secure-metrics-port to clients the API server allows.

It holds the conf dir's interlock (.catena-agent.lock) while it runs. A
generated conflist someone else removes or changes is rewritten, with a
warning and backoff. A conf dir whose host dir was deleted makes it exit 1.
On SIGTERM it exits leaving every file in place, unless
--uninstall-on-delete names its DaemonSet and that was deleted: then it
removes the generated conflist first (catena stays in the bin dir).

With OTEL_EXPORTER_OTLP_ENDPOINT set, it sends each operation of the event
journal as OpenTelemetry spans over OTLP (OTEL_EXPORTER_OTLP_PROTOCOL grpc
or http/protobuf, OTEL_TRACES_SAMPLER, by default parentbased_always_off:
only operations whose runtime sampled its span; OTEL_SERVICE_NAME,
OTEL_RESOURCE_ATTRIBUTES), bounded and never in a CNI call's way.

What each endpoint, metric, span and Event means: docs/kubernetes.md,
docs/observability.md and docs/reconciler.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := uf.validate(); err != nil {
				return err
			}
			mux := http.NewServeMux()
			log, err := f.logger(e.stderr)
			if err != nil {
				return err
			}
			mf.apply(e.getenv, log)
			kcfg := inCluster(log)
			obs, err := rf.setup(cmd.Context(), mux, f.cfg.Catena.CacheDir, strings.Join(pluginDirs(f.cniPath, f.cfg.BinDir), string(filepath.ListSeparator)),
				e.sockets(), e.autoSources(kcfg, ef.node), log, e.stderr)
			if err != nil {
				return err
			}
			if obs.closer != nil {
				defer func() { _ = obs.closer.Close() }()
			}
			f.onAdopt = obs.onAdopt
			inst, err := f.installer(e, "run")
			if err != nil {
				return err
			}
			inst.Observer = obs.metrics
			events := ef.setup(cmd.Context(), kcfg, f.cfg.Catena.CacheDir, obs.metrics, inst, log)
			secure, err := sf.setup(kcfg, obs.handler, log)
			if err != nil {
				return err
			}
			events = append(events, secure...)
			events = append(events, traceExport(cmd.Context(), e.getenv, f.cfg.Catena.CacheDir, ef.node, obs.metrics, log)...)
			events = append(events, lf.setup(obs, &f, &ef, pluginDirs(f.cniPath, f.cfg.BinDir), log)...)
			events = append(events, uf.setup(kcfg, inst, log)...)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--listen-addr: %w", err)
			}
			var health agent.Health
			health.Register(mux)
			health.AddReadiness("install", installReady(inst))
			health.AddLiveness("install", installAlive(inst, f.resync))
			if err := obs.metrics.ReadinessGauge(installReady(inst)); err != nil {
				return err
			}
			return agent.RunAll(cmd.Context(), append(append(obs.components(), events...),
				agent.Named{Name: "install", Runnable: agent.RunnableFunc(func(ctx context.Context) error { return inst.Watch(ctx, f.resync) })},
				agent.Named{Name: "http", Runnable: &agent.Server{Listener: ln, Handler: mux, Log: inst.Log}},
			)...)
		},
	}
	f.register(cmd, e)
	rf.register(cmd)
	ef.register(cmd)
	sf.register(cmd)
	lf.register(cmd)
	uf.register(cmd)
	mf.register(cmd)
	cmd.Flags().StringVar(&addr, "listen-addr", defaultListenAddr, "address of /healthz, /readyz and /metrics")
	return cmd
}

// installReady is ready while the last pass succeeded and the generated
// file is in place now, as the agent would write it (Installer.Current).
func installReady(inst *nodeconf.Installer) agent.Check {
	return inst.Current
}

// installAlive fails when no pass has ended for 3 resync periods after the
// first: the loop is stuck.
func installAlive(inst *nodeconf.Installer, resync time.Duration) agent.Check {
	start := time.Now()
	return func() error {
		last := inst.Status().At
		if last.IsZero() {
			last = start
		}
		if age := time.Since(last); age > 3*resync {
			return fmt.Errorf("no install pass for %s", age.Round(time.Second))
		}
		return nil
	}
}
