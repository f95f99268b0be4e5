package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// traces points the agent at a private Jaeger on the host's loopback (the
// agent's pod is on the host network) through the catena-options
// ConfigMap, with the sampler asking for a root trace per operation: the
// containerd node passes catena no trace context, so a pod's ADD is the
// root of its own trace, with the pod's attributes, and one child per
// delegate call. The keys are removed and the agent restarted after.
func (r *k8sRun) traces(t *testing.T) {
	j := startJaeger(t)
	const service = "catena-k8s"
	keys := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + j.OTLPGRPC, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_TRACES_SAMPLER": "parentbased_always_on", "OTEL_SERVICE_NAME": service}
	r.patchOptions(t, keys)
	restarted := r.restartAgent(t, 1)

	start := time.Now()
	r.c.apply(t, []any{webDeployment("traced", 1)})
	r.waitRunning(t, "traced", 1)
	running := time.Since(start)
	var add events.Op
	for _, op := range r.n.opsSince(t, start) {
		if op.Verb == "ADD" && op.Outcome == "ok" && op.Pod != nil && strings.HasPrefix(op.Pod.Name, "traced-") {
			add = op
		}
	}
	require.NotEmpty(t, add.SpanID, "the pod's ADD in the journal")
	id, continued := add.TraceOf()
	assert.False(t, continued, "containerd passes no trace context: a root trace")
	spans := j.WaitTrace(t, id, 1+len(add.Calls))
	t.Logf("the trace of a pod's ADD on the Kubernetes node, from Jaeger's query API:\n%s", spanTree(spans))
	root := spanNamed(t, spans, "CNI ADD")
	assert.Empty(t, root.ParentSpanID, "the root of its trace")
	assert.Equal(t, service, root.Service)
	for k, v := range map[string]string{"k8s.pod.name": add.Pod.Name, "k8s.namespace.name": "default", "k8s.pod.uid": add.Pod.UID,
		"catena.network": r.n.net, "catena.ifname": "eth0", "catena.outcome": "ok"} {
		assert.Equal(t, v, root.Attributes[k], "CNI ADD's %s", k)
	}
	assert.NotEmpty(t, root.Attributes["container.id"])
	var calls []string
	for _, c := range add.Calls {
		calls = append(calls, c.Verb+" "+c.Type)
	}
	var kids []string
	for _, k := range children(spans, root.SpanID) {
		if k.Name != "lock wait" {
			kids = append(kids, k.Name)
		}
	}
	assert.Equal(t, calls, kids, "one child per delegate call, in order")

	r.c.kubectl(t, nil, "delete", "deployment", "traced", "-n", "default")
	r.waitGone(t, "traced")
	r.removeOptions(t, keys)
	r.restartAgent(t, 0)
	summary("traces", "agent restarted with OTEL_EXPORTER_OTLP_ENDPOINT in %s; pod Running in %s; its ADD a root trace of %d spans in Jaeger (%v), k8s.pod.name %s",
		restarted.Round(time.Millisecond), running.Round(time.Millisecond), len(spans), kids, root.Attributes["k8s.pod.name"])
}

// metricFamilies are a scrape of the agent's metrics.
type metricFamilies = map[string]*dto.MetricFamily

// restartAgent restarts the agent's DaemonSet and waits until a new
// process is ready with catena_trace_export_enabled at want.
func (r *k8sRun) restartAgent(t *testing.T, want float64) time.Duration {
	t.Helper()
	return r.restartAgentUntil(t, fmt.Sprintf("catena_trace_export_enabled %v", want), func(fams metricFamilies) error {
		if got := sampleSum(fams, "catena_trace_export_enabled"); got != want {
			return fmt.Errorf("catena_trace_export_enabled %v", got)
		}
		return nil
	})
}

// restartAgentUntil restarts the agent's DaemonSet and waits until a new
// process's metrics pass cond and its pod is Ready.
func (r *k8sRun) restartAgentUntil(t *testing.T, what string, cond func(metricFamilies) error) time.Duration {
	t.Helper()
	before := r.agentStatus(t).started
	start := time.Now()
	r.c.kubectl(t, nil, "rollout", "restart", "daemonset/catena-agent", "-n", "catena-system")
	waitFor(t, "a new agent process: "+what, 2*time.Minute, 500*time.Millisecond, func() error {
		fams, err := tryScrape(agentMetricsURL)
		if err != nil {
			return err
		}
		started := sampleSum(fams, "process_start_time_seconds")
		if !time.Unix(0, int64(started*1e9)).After(before) {
			return fmt.Errorf("the agent started at %s still runs", before)
		}
		return cond(fams)
	}, r.n.kubelet)
	r.waitAgentReady(t, r.agentTag())
	return time.Since(start)
}
