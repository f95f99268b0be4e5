package traces

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/tracectx"
)

const (
	runtimeTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	runtimeSpan  = "00f067aa0ba902b7"
)

var t0 = time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)

// failedAdd is an ADD whose portmap failed, and was rolled back, in the
// runtime's trace.
func failedAdd() events.Op {
	return events.Op{Verb: "ADD", Attachment: "podnet/c1/eth0", Start: t0, Duration: 80 * time.Millisecond,
		LockWait: 2 * time.Millisecond, Writes: 3 * time.Millisecond, WriteCount: 3, Outcome: "error", Error: "portmap failed",
		Rollback: true, Pod: &events.OpPod{Namespace: "default", Name: "web-1", UID: "u1"},
		TraceID: runtimeTrace, SpanID: "1111111111111111", ParentSpanID: runtimeSpan, Sampled: true,
		Calls: []events.OpCall{
			{Index: 0, Type: "bridge", Verb: "ADD", StartOffset: 3 * time.Millisecond, Duration: 40 * time.Millisecond, SpanID: "2222222222222222"},
			{Index: 1, Type: "portmap", Verb: "ADD", StartOffset: 44 * time.Millisecond, Duration: 10 * time.Millisecond, SpanID: "3333333333333333",
				Error: "portmap failed", Code: 11, Exit: 1},
			{Index: 0, Type: "bridge", Verb: "DEL", StartOffset: 55 * time.Millisecond, Duration: 20 * time.Millisecond, SpanID: "4444444444444444"},
		}}
}

type span struct {
	name, parent string
	start, end   time.Duration // from t0
}

func spansOf(t *testing.T, got []sdktrace.ReadOnlySpan, trace string) []span {
	t.Helper()
	var out []span
	for _, s := range got {
		assert.Equal(t, trace, s.SpanContext().TraceID().String(), "%s: trace", s.Name())
		out = append(out, span{name: s.Name() + " " + s.SpanContext().SpanID().String(), parent: s.Parent().SpanID().String(),
			start: s.StartTime().Sub(t0), end: s.EndTime().Sub(t0)})
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func builder(t *testing.T, sampler string) *Builder {
	t.Helper()
	s, err := ParseSampler(sampler, "")
	require.NoError(t, err)
	return NewBuilder(resource.NewSchemaless(attribute.String("service.name", "catena")), s)
}

// TestBuilderSpans: an operation is its span under the runtime's, its lock
// wait and its calls children in order, with the journal's IDs and times,
// the pod's attributes, and error statuses where a call failed.
func TestBuilderSpans(t *testing.T) {
	b := builder(t, DefaultSampler)
	require.True(t, b.Add(failedAdd()))
	got := b.Take()
	require.Len(t, got, 5)
	lock := derivedSpanID("1111111111111111", "lock").String()
	// The SDK ends children first.
	assert.ElementsMatch(t, []span{
		{name: "CNI ADD 1111111111111111", parent: runtimeSpan, start: 0, end: 80 * time.Millisecond},
		{name: SpanLockWait + " " + lock, parent: "1111111111111111", start: 0, end: 2 * time.Millisecond},
		{name: "ADD bridge 2222222222222222", parent: "1111111111111111", start: 3 * time.Millisecond, end: 43 * time.Millisecond},
		{name: "ADD portmap 3333333333333333", parent: "1111111111111111", start: 44 * time.Millisecond, end: 54 * time.Millisecond},
		{name: "DEL bridge 4444444444444444", parent: "1111111111111111", start: 55 * time.Millisecond, end: 75 * time.Millisecond},
	}, spansOf(t, got, runtimeTrace))

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range got {
		byName[s.Name()] = s
	}
	op := byName["CNI ADD"]
	assert.Equal(t, map[string]string{"catena.cni.verb": "ADD", "catena.outcome": "error", "catena.network": "podnet",
		"container.id": "c1", "catena.ifname": "eth0", "k8s.namespace.name": "default", "k8s.pod.name": "web-1", "k8s.pod.uid": "u1",
		"catena.rollback": "true"}, attrs(op))
	assert.Equal(t, codes.Error, op.Status().Code)
	assert.Equal(t, "portmap failed", op.Status().Description)
	require.Len(t, op.Events(), 1)
	assert.Equal(t, EventRecordWrite, op.Events()[0].Name)
	assert.True(t, op.Parent().IsRemote(), "the runtime's span")

	pm := byName["ADD portmap"]
	assert.Equal(t, map[string]string{"catena.cni.verb": "ADD", "catena.delegate.type": "portmap", "catena.delegate.index": "1",
		"error.type": "cni_error_11", "catena.cni.error_code": "11", "catena.delegate.exit_status": "1"}, attrs(pm))
	assert.Equal(t, codes.Error, pm.Status().Code)
	assert.Equal(t, codes.Unset, byName["ADD bridge"].Status().Code)
	assert.Equal(t, "catena", op.Resource().Attributes()[0].Value.AsString())
	assert.Empty(t, b.Take(), "Take forgets")
}

// TestBuilderSampling: which operations are exported, by sampler and
// parent.
func TestBuilderSampling(t *testing.T) {
	continued := failedAdd()
	unsampled := failedAdd()
	unsampled.Sampled = false
	root := events.Op{Verb: "DEL", Attachment: "podnet/c1/eth0", Start: t0, Duration: time.Millisecond, Outcome: "ok", SpanID: "5555555555555555"}
	inRoot := events.Op{Verb: "DEL", Attachment: "podnet/c2/eth0", Start: t0, Duration: time.Millisecond, Outcome: "ok",
		SpanID: "6666666666666666", ParentSpanID: "5555555555555555"}
	old := events.Op{Verb: "ADD", Start: t0, Outcome: "ok"}
	tests := []struct {
		sampler string
		op      events.Op
		want    bool
		trace   string
	}{
		{DefaultSampler, continued, true, runtimeTrace},
		{DefaultSampler, unsampled, false, ""},
		{DefaultSampler, root, false, ""},
		{DefaultSampler, inRoot, false, ""},
		{"parentbased_always_on", unsampled, false, ""},
		{"parentbased_always_on", root, true, tracectx.RootTraceID("5555555555555555")},
		{"parentbased_always_on", inRoot, true, tracectx.RootTraceID("5555555555555555")},
		{"always_on", unsampled, true, runtimeTrace},
		{"always_off", continued, false, ""},
		{"always_on", old, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.sampler+" "+tt.op.SpanID+" "+map[bool]string{true: "sampled", false: "unsampled"}[tt.op.Sampled], func(t *testing.T) {
			b := builder(t, tt.sampler)
			assert.Equal(t, tt.want, b.Add(tt.op))
			got := b.Take()
			if !tt.want {
				assert.Empty(t, got)
				return
			}
			require.NotEmpty(t, got)
			for _, s := range got {
				assert.Equal(t, tt.trace, s.SpanContext().TraceID().String())
			}
			assert.Equal(t, tt.trace, TraceIDOf(tt.op), "TraceIDOf names the trace exported")
			if tt.op.ParentSpanID != "" {
				assert.Equal(t, tt.op.ParentSpanID, got[len(got)-1].Parent().SpanID().String())
			} else {
				assert.False(t, got[len(got)-1].Parent().IsValid(), "a root")
			}
		})
	}
}

// TestBuilderSameIDsTwice: the spans of an operation built twice (an
// export repeated) have the same IDs.
func TestBuilderSameIDsTwice(t *testing.T) {
	ids := func() []string {
		b := builder(t, "always_on")
		op := failedAdd()
		op.Calls[0].SpanID = "" // a call the journal names no span for
		require.True(t, b.Add(op))
		var out []string
		for _, s := range b.Take() {
			out = append(out, s.SpanContext().SpanID().String())
		}
		return out
	}
	assert.Equal(t, ids(), ids())
}

func TestParseSampler(t *testing.T) {
	tests := []struct {
		name, arg, wantErr string
		desc               string
	}{
		{name: "always_on", desc: "AlwaysOnSampler"},
		{name: "parentbased_always_off", desc: "ParentBased{root:AlwaysOffSampler"},
		{name: "traceidratio", arg: "0.25", desc: "TraceIDRatioBased{0.25}"},
		{name: "parentbased_traceidratio", desc: "ParentBased{root:TraceIDRatioBased{1}"},
		{name: "traceidratio", arg: "2", wantErr: `OTEL_TRACES_SAMPLER_ARG "2"`},
		{name: "jaeger_remote", wantErr: `OTEL_TRACES_SAMPLER "jaeger_remote"`},
	}
	for _, tt := range tests {
		t.Run(tt.name+tt.arg, func(t *testing.T) {
			s, err := ParseSampler(tt.name, tt.arg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, s.Description(), tt.desc)
		})
	}
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr string
	}{
		{name: "no endpoint: off", env: map[string]string{"OTEL_TRACES_SAMPLER": "always_on"}},
		{name: "disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "defaults", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
			want: Config{Enabled: true, Endpoint: "http://c:4318", Protocol: ProtocolHTTP, SamplerName: DefaultSampler, Timeout: 10 * time.Second}},
		{name: "grpc, traces endpoint, timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TIMEOUT": "500", "OTEL_TRACES_SAMPLER": "always_on"},
			want: Config{Enabled: true, Endpoint: "http://c:4317", Protocol: ProtocolGRPC, SamplerName: "always_on", Timeout: 500 * time.Millisecond}},
		{name: "json", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL "http/json"`},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
			wantErr: `OTEL_EXPORTER_OTLP_TIMEOUT "10s"`},
		{name: "bad sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_SAMPLER": "sometimes"},
			wantErr: `OTEL_TRACES_SAMPLER "sometimes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromEnv(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.False(t, c.Enabled)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want.Enabled, c.Enabled)
			if c.Enabled {
				assert.NotNil(t, c.Sampler)
				c.Sampler = nil
			}
			assert.Equal(t, tt.want, c)
		})
	}
}

func TestResource(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=lab,k8s.node.name=override")
	t.Setenv("OTEL_SERVICE_NAME", "catena-lab")
	r, err := Resource(context.Background(), "node-1", "v1")
	require.NoError(t, err)
	got := map[string]string{}
	for _, kv := range r.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	assert.Equal(t, map[string]string{"service.name": "catena-lab", "service.version": "v1", "k8s.node.name": "override",
		"host.name": "node-1", "deployment.environment.name": "lab"}, got)
}
