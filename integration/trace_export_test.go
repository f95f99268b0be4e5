package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracedRuntime is a runtime's side of a traced pod start: an
// OpenTelemetry SDK tracer that sends its spans to a Jaeger, and libcni,
// which passes the span in a call's context to catena as TRACEPARENT
// (pkg/invoke injects it itself).
type tracedRuntime struct {
	t        *testing.T
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// newTracedRuntime sends spans of service to j, sampling those started
// under a context that asks for it (sampledCtx) and no others.
func newTracedRuntime(t *testing.T, j *jaeger, service string) *tracedRuntime {
	t.Helper()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(j.OTLPGRPC), otlptracegrpc.WithInsecure())
	require.NoError(t, err)
	p := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampledIfAsked{}),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return &tracedRuntime{t: t, provider: p, tracer: p.Tracer("integration/runtime")}
}

type sampleKey struct{}

// sampledIfAsked samples a root span when its context says so.
type sampledIfAsked struct{}

func (sampledIfAsked) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if v, _ := p.ParentContext.Value(sampleKey{}).(bool); v {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (sampledIfAsked) Description() string { return "sampledIfAsked" }

// span runs call under a new root span named name, sampled or not, and
// returns its context once it ended (sent, when sampled).
func (r *tracedRuntime) span(name string, sampled bool, call func(ctx context.Context) error) (trace.SpanContext, error) {
	ctx := context.WithValue(context.Background(), sampleKey{}, sampled)
	ctx, s := r.tracer.Start(ctx, name)
	err := call(ctx)
	s.End()
	require.Equal(r.t, sampled, s.SpanContext().IsSampled())
	require.True(r.t, s.SpanContext().IsValid(), "libcni passes an unsampled span too")
	return s.SpanContext(), err
}

// traceNode is a node whose agent exports to a private Jaeger, and a chain
// [bridge + host-local, portmap, spy with its trace log, failer failing ADD
// while a fault file exists] libcni runs through catena.
type traceNode struct {
	*agentNode
	j       *jaeger
	agent   *agentProc
	list    *libcni.NetworkConfigList
	spyDir  string
	fault   string
	service string
}

func newTraceNode(t *testing.T, sampler string) *traceNode {
	t.Helper()
	j := startJaeger(t)
	n := newAgentNode(t, nil)
	tn := &traceNode{agentNode: n, j: j, spyDir: t.TempDir(), fault: filepath.Join(t.TempDir(), "fault"), service: "catena-" + n.w.id}
	n.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + j.OTLPGRPC, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME=" + tn.service, "OTEL_TRACES_SAMPLER=" + sampler, "OTEL_EXPORTER_OTLP_TIMEOUT=2000",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=integration"}
	n.writePrimary(n.primary())
	tn.agent = n.startRun("--reconcile-interval", "0", "--node-name", "node-"+n.w.id)
	spy := fmt.Sprintf(`{"type":"spy","logDir":%q,"traceLog":true}`, tn.spyDir)
	failer := fmt.Sprintf(`{"type":"failer","failAdd":true,"faultFile":%q}`, tn.fault)
	tn.list = n.w.catenaList(n.net, "1.1.0", n.w.bridgeDelegate(), portmapDelegate, spy, failer)
	return tn
}

// rt is the runtime config of pod id, in a netns of its own.
func (tn *traceNode) rt(id string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: tn.w.addNetns(id), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "pod-" + id}, {"K8S_POD_UID", "uid-" + id}}}
}

// spyTraceparents are the TRACEPARENTs the spy was run with, by verb and
// container.
func (tn *traceNode) spyTraceparents(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(tn.spyDir, "trace.log"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c struct {
			Verb, ContainerID string
			Env               []string
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		for _, kv := range c.Env {
			if v, ok := strings.CutPrefix(kv, "TRACEPARENT="); ok {
				out[c.Verb+" "+c.ContainerID] = v
			}
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// spanTree renders spans as an indented tree, children in start order,
// each with its offset from the root's start and its duration.
func spanTree(spans []jaegerSpan) string {
	byParent := map[string][]jaegerSpan{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []jaegerSpan
	for _, s := range spans {
		if !ids[s.ParentSpanID] {
			roots = append(roots, s)
			continue
		}
		byParent[s.ParentSpanID] = append(byParent[s.ParentSpanID], s)
	}
	var b strings.Builder
	var walk func(s jaegerSpan, depth int, t0 time.Time)
	walk = func(s jaegerSpan, depth int, t0 time.Time) {
		status := ""
		if s.Error {
			status = "  ERROR " + s.StatusMessage
		}
		fmt.Fprintf(&b, "%s%-*s %-22s +%7.2fms %7.2fms  span %s%s\n", strings.Repeat("  ", depth), 24-2*depth, s.Name,
			"["+s.Service+"]", float64(s.Start.Sub(t0).Microseconds())/1000, float64(s.Duration.Microseconds())/1000, s.SpanID, status)
		kids := byParent[s.SpanID]
		slices.SortStableFunc(kids, func(a, b jaegerSpan) int { return a.Start.Compare(b.Start) })
		for _, k := range kids {
			walk(k, depth+1, t0)
		}
	}
	for _, r := range roots {
		walk(r, 0, r.Start)
	}
	return b.String()
}

// children are the spans whose parent is id, in start order.
func children(spans []jaegerSpan, id string) []jaegerSpan {
	var out []jaegerSpan
	for _, s := range spans {
		if s.ParentSpanID == id {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b jaegerSpan) int { return a.Start.Compare(b.Start) })
	return out
}

func spanNames(spans []jaegerSpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

func spanNamed(t *testing.T, spans []jaegerSpan, name string) jaegerSpan {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q in\n%s", name, spanTree(spans))
	return jaegerSpan{}
}

// TestTraceThroughCatenaInJaeger: a runtime on libcni with a traced
// context starts and stops pods through catena; the agent exports the
// journal to Jaeger, and Jaeger's query API shows the runtime's span, then
// catena's operation, then one child per delegate call, in order, with
// their attributes; each delegate's TRACEPARENT names its call's span; a
// failed ADD shows the failing call and the rollback's DELs; a parent
// that is not sampled exports nothing.
func TestTraceThroughCatenaInJaeger(t *testing.T) {
	tn := newTraceNode(t, "parentbased_always_off")
	rt := newTracedRuntime(t, tn.j, "runtime-"+tn.w.id)
	okID, failID, quietID := tn.w.id+"-ok", tn.w.id+"-fail", tn.w.id+"-quiet"

	// A pod that starts.
	okRT := tn.rt(okID)
	okSpan, err := rt.span("RunPodSandbox", true, func(ctx context.Context) error {
		_, err := tn.w.cni.AddNetworkList(ctx, tn.list, okRT)
		return err
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tn.w.cni.DelNetworkList(context.Background(), tn.list, okRT) })
	// runtime, CNI ADD, lock wait, 4 calls
	spans := tn.j.WaitTrace(t, okSpan.TraceID().String(), 7)
	t.Logf("the trace of a pod's ADD, from Jaeger's query API:\n%s", spanTree(spans))
	op := spanNamed(t, spans, "CNI ADD")
	assert.Equal(t, okSpan.SpanID().String(), op.ParentSpanID, "catena's operation is a child of the runtime's span")
	assert.Equal(t, tn.service, op.Service)
	for k, v := range map[string]string{"catena.cni.verb": "ADD", "catena.outcome": "ok", "catena.network": tn.net, "catena.ifname": "eth0",
		"container.id": okID, "k8s.pod.name": "pod-" + okID, "k8s.namespace.name": "default", "k8s.pod.uid": "uid-" + okID} {
		assert.Equal(t, v, op.Attributes[k], "CNI ADD's %s", k)
	}
	assert.False(t, op.Error)
	assert.Contains(t, op.Events, "record writes")
	kids := children(spans, op.SpanID)
	assert.Equal(t, []string{"lock wait", "ADD bridge", "ADD portmap", "ADD spy", "ADD failer"}, spanNames(kids), "one child per step, in order")
	for i, k := range kids[1:] {
		assert.Equal(t, fmt.Sprint(i), k.Attributes["catena.delegate.index"], k.Name)
		assert.False(t, k.Error, k.Name)
		assert.True(t, !k.Start.Before(op.Start) && !k.Start.Add(k.Duration).After(op.Start.Add(op.Duration)), "%s within its operation", k.Name)
	}
	for i := 2; i < len(kids); i++ {
		assert.False(t, kids[i].Start.Before(kids[i-1].Start.Add(kids[i-1].Duration)), "%s after %s", kids[i].Name, kids[i-1].Name)
	}
	tp := tn.spyTraceparents(t)
	assert.Equal(t, fmt.Sprintf("00-%s-%s-01", okSpan.TraceID(), spanNamed(t, kids, "ADD spy").SpanID), tp["ADD "+okID],
		"the spy's TRACEPARENT names its own call's span")

	// A pod whose ADD fails at its last delegate: rolled back.
	require.NoError(t, os.WriteFile(tn.fault, nil, 0o600))
	failSpan, err := rt.span("RunPodSandbox", true, func(ctx context.Context) error {
		_, err := tn.w.cni.AddNetworkList(ctx, tn.list, tn.rt(failID))
		return err
	})
	require.Error(t, err)
	require.NoError(t, os.Remove(tn.fault))
	// runtime, CNI ADD, lock wait, 4 ADDs, 4 rollback DELs (the failed
	// delegate's too: it may have done part of its work)
	spans = tn.j.WaitTrace(t, failSpan.TraceID().String(), 11)
	t.Logf("the trace of a failed ADD, from Jaeger's query API:\n%s", spanTree(spans))
	op = spanNamed(t, spans, "CNI ADD")
	assert.True(t, op.Error, "the operation failed")
	assert.Equal(t, "true", op.Attributes["catena.rollback"])
	kids = children(spans, op.SpanID)
	assert.Equal(t, []string{"lock wait", "ADD bridge", "ADD portmap", "ADD spy", "ADD failer", "DEL failer", "DEL spy", "DEL portmap", "DEL bridge"}, spanNames(kids))
	failed := spanNamed(t, kids, "ADD failer")
	assert.True(t, failed.Error)
	assert.Contains(t, failed.StatusMessage, "injected ADD failure")
	assert.Equal(t, "100", failed.Attributes["catena.cni.error_code"])
	assert.Equal(t, "cni_error_100", failed.Attributes["error.type"])
	assert.NotEmpty(t, failed.Attributes["catena.delegate.exit_status"])
	for _, k := range kids[5:] {
		assert.False(t, k.Error, k.Name)
	}
	// The trace as Jaeger returns it, for the docs' picture
	// (tools/traceplot).
	artifact := filepath.Join(binDirOf(t), "trace-failed-add.json")
	require.NoError(t, os.WriteFile(artifact, tn.j.TraceJSON(t, failSpan.TraceID().String()), 0o644))
	t.Logf("the failed ADD's trace, as Jaeger's query API returns it: %s", artifact)

	// A parent that is not sampled: catena's operation is not exported.
	quietRT := tn.rt(quietID)
	quietSpan, err := rt.span("RunPodSandbox", false, func(ctx context.Context) error {
		_, err := tn.w.cni.AddNetworkList(ctx, tn.list, quietRT)
		return err
	})
	require.NoError(t, err)
	// The pod's stop, sampled: once Jaeger holds it, the agent has read
	// the journal past the unsampled ADD.
	delSpan, err := rt.span("StopPodSandbox", true, func(ctx context.Context) error {
		return tn.w.cni.DelNetworkList(ctx, tn.list, quietRT)
	})
	require.NoError(t, err)
	spans = tn.j.WaitTrace(t, delSpan.TraceID().String(), 6)
	assert.Equal(t, []string{"lock wait", "DEL failer", "DEL spy", "DEL portmap", "DEL bridge"}, spanNames(children(spans, spanNamed(t, spans, "CNI DEL").SpanID)))
	_, err = tn.j.Trace(t, quietSpan.TraceID().String())
	assert.ErrorIs(t, err, errNoTrace, "an unsampled parent's operation is not exported")
	tp = tn.spyTraceparents(t)
	assert.Equal(t, fmt.Sprintf("00-%s-", quietSpan.TraceID()), tp["ADD "+quietID][:36], "the unsampled trace still reached the delegates")
	assert.True(t, strings.HasSuffix(tp["ADD "+quietID], "-00"), "with its flags")

	// catenactl shows the same trace from the journal.
	out := run(t, filepath.Join(tn.src, "catenactl"), "trace", "--cache-dir", tn.w.cacheDir, "--last", "2", failID)
	t.Logf("catenactl trace of the failed ADD's pod:\n%s", out)
	assert.Contains(t, out, failSpan.TraceID().String())
	assert.Contains(t, out, "injected ADD failure")
	out = run(t, filepath.Join(tn.src, "catenactl"), "trace", "--cache-dir", tn.w.cacheDir, okID)
	assert.Contains(t, out, okSpan.TraceID().String())
	assert.Contains(t, out, "ADD spy")
	assert.Equal(t, 1.0, tn.agent.metric("catena_trace_export_enabled"))
	assert.Positive(t, tn.agent.metric("catena_trace_operations_unsampled_total"))
}
