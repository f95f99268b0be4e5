package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/kevents"
	"github.com/catena-cni/catena/node/metrics"
	"github.com/catena-cni/catena/node/nodeconf"
)

const (
	defaultEventsInterval      = 2 * time.Second
	defaultEventsHeldThreshold = 10
	// eventsAPITimeout bounds each event write, so that a slow API server
	// only delays (and, past the broadcaster's tries, drops) events.
	eventsAPITimeout = 10 * time.Second
)

type eventsFlags struct {
	enabled   bool
	node      string
	threshold int
	interval  time.Duration
	// emitter records events once setup ran in a cluster; nil otherwise.
	emitter kevents.Emitter
}

func (f *eventsFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.enabled, "events", true, "record Kubernetes Events on pods and the Node (in a cluster: the pod's ServiceAccount)")
	fl.StringVar(&f.node, "node-name", "", "the Node's name, for its events (the DaemonSet sets it from spec.nodeName)")
	fl.IntVar(&f.threshold, "events-held-threshold", defaultEventsHeldThreshold, "a Warning on the Node when this many teardowns are held (0: never)")
	fl.DurationVar(&f.interval, "events-interval", defaultEventsInterval, "read the event journal for new events this often")
}

// inCluster is the agent's in-cluster client config (its ServiceAccount),
// nil outside a cluster.
func inCluster(log *slog.Logger) *rest.Config {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Info("not in a cluster: no Kubernetes events, no secure /metrics", "error", err)
		return nil
	}
	return cfg
}

// nodeRuntimeVersion is the Node's status.nodeInfo.containerRuntimeVersion
// (e.g. "cri-o://1.34.11"), which kubelet sets from its runtime's CRI
// Version, read through cfg (the agent's ServiceAccount: get on nodes).
func nodeRuntimeVersion(ctx context.Context, cfg *rest.Config, node string) (string, error) {
	switch {
	case cfg == nil:
		return "", errors.New("not in a cluster")
	case node == "":
		return "", errors.New("--node-name is empty")
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = eventsAPITimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	v := n.Status.NodeInfo.ContainerRuntimeVersion
	if v == "" {
		return "", fmt.Errorf("node %s: no containerRuntimeVersion in its status yet", node)
	}
	return v, nil
}

// setup returns the events component, and wraps the installer's observer
// to report conflist facts on the Node; nothing when --events is false or
// the agent runs outside a cluster (logged, catena_events_enabled 0).
func (f *eventsFlags) setup(ctx context.Context, cfg *rest.Config, cacheDir string, m *metrics.Metrics, inst *nodeconf.Installer, log *slog.Logger) []agent.Named {
	reg := m.Registry
	enabled := prometheus.NewGauge(prometheus.GaugeOpts{Name: "catena_events_enabled",
		Help: "1 while the agent records Kubernetes events, 0 when it does not (disabled, or not in a cluster)."})
	reg.MustRegister(enabled)
	if !f.enabled || f.interval <= 0 {
		return nil
	}
	if cfg == nil { // not in a cluster: inCluster logged it
		return nil
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = eventsAPITimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Warn("events: no client for the API server, no Kubernetes events", "error", err)
		return nil
	}
	if f.node == "" {
		log.Warn("events: --node-name is empty: no events on the Node")
	}
	enabled.Set(1)
	sink := kevents.NewSink(ctx, cs, f.node, reg, 0)
	f.emitter = sink
	inst.Observer = &kevents.NodeObserver{Next: inst.Observer, Emitter: sink, Node: f.node}
	w := &kevents.Watcher{CacheDir: cacheDir, Node: f.node, HeldThreshold: f.threshold, Interval: f.interval,
		Emitter: sink, Log: log, Unreadable: m.JournalSkipped(metrics.ReaderEvents)}
	if err := w.Start(); err != nil {
		log.Warn("events: reading the event journal", "error", err)
	}
	return []agent.Named{{Name: "events", Runnable: agent.RunnableFunc(func(ctx context.Context) error {
		defer sink.Shutdown()
		return w.Run(ctx)
	})}}
}
