package tracectx

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envOf is a lookup over m, as os.LookupEnv over an environment.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// TestFromEnv: a valid TRACEPARENT is a context, with TRACESTATE and
// BAGGAGE when they are valid; a missing or empty one is no context and no
// error; a malformed one is no context, whatever comes with it, and an
// error naming it; a malformed or oversized TRACESTATE or BAGGAGE is
// dropped alone, with an error naming it and not its value.
func TestFromEnv(t *testing.T) {
	tp := "00-" + traceHex + "-" + spanHex + "-01"
	parent := Parent{TraceID: traceID, SpanID: spanID, Flags: 1}
	tests := []struct {
		name    string
		env     map[string]string
		want    Context
		wantErr []string // what the error says, each
	}{
		{"nothing", nil, Context{}, nil},
		{"empty traceparent", map[string]string{EnvTraceparent: ""}, Context{}, nil},
		{"state and baggage without a traceparent", map[string]string{EnvTracestate: "k=v", EnvBaggage: "k=v"}, Context{}, nil},
		{"traceparent alone", map[string]string{EnvTraceparent: tp}, Context{Parent: parent}, nil},
		{"all three", map[string]string{EnvTraceparent: tp, EnvTracestate: "rojo=1, congo=2", EnvBaggage: "user=alice"},
			Context{Parent: parent, State: "rojo=1, congo=2", Baggage: "user=alice"}, nil},
		{"malformed traceparent drops the rest", map[string]string{EnvTraceparent: strings.ToUpper(tp), EnvTracestate: "k=v", EnvBaggage: "k=v"},
			Context{}, []string{"TRACEPARENT \"00-4BF9", "ignored, and with it any TRACESTATE and BAGGAGE", "malformed"}},
		{"malformed tracestate", map[string]string{EnvTraceparent: tp, EnvTracestate: "K=secret", EnvBaggage: "user=alice"},
			Context{Parent: parent, Baggage: "user=alice"}, []string{"TRACESTATE ignored: malformed"}},
		{"oversized baggage", map[string]string{EnvTraceparent: tp, EnvBaggage: "k=" + strings.Repeat("s", MaxBaggage)},
			Context{Parent: parent}, []string{"BAGGAGE ignored: malformed: 8194 bytes, over the 8192 carried"}},
		{"both lists malformed", map[string]string{EnvTraceparent: tp, EnvTracestate: "=", EnvBaggage: "secret"},
			Context{Parent: parent}, []string{"TRACESTATE ignored", "BAGGAGE ignored"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnv(envOf(tt.env))
			assert.Equal(t, tt.want, got)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "secret", "no value of a list is logged")
			assert.NotContains(t, err.Error(), "alice")
		})
	}
}

// TestAppendEnv: a valid context appends TRACEPARENT as version 00, then
// TRACESTATE and BAGGAGE when it has them, without writing to the
// caller's slice; a context that is not valid appends nothing.
func TestAppendEnv(t *testing.T) {
	parent := Parent{TraceID: traceID, SpanID: spanID, Flags: 1}
	tests := []struct {
		name string
		c    Context
		want []string
	}{
		{"no trace", Context{State: "k=v", Baggage: "k=v"}, nil},
		{"traceparent only", Context{Parent: parent}, []string{"TRACEPARENT=00-" + traceHex + "-" + spanHex + "-01"}},
		{"all three", Context{Parent: parent, State: "k=v", Baggage: "b=1"},
			[]string{"TRACEPARENT=00-" + traceHex + "-" + spanHex + "-01", "TRACESTATE=k=v", "BAGGAGE=b=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := make([]string, 1, 8)
			base[0] = "PATH=/bin"
			got := tt.c.AppendEnv(base[:1:1])
			assert.Equal(t, append([]string{"PATH=/bin"}, tt.want...), got)
			assert.Equal(t, "PATH=/bin", base[0])
			for _, kv := range tt.want {
				assert.True(t, IsCarrier(kv), kv)
			}
		})
	}
}

// TestWithSpan: a callee's context is the caller's with the callee's span
// as its parent-id: same trace, flags, state and baggage.
func TestWithSpan(t *testing.T) {
	c := Context{Parent: Parent{TraceID: traceID, SpanID: spanID, Flags: 1}, State: "k=v", Baggage: "b=1"}
	child := SpanID{9, 9, 9, 9, 9, 9, 9, 9}
	got := c.WithSpan(child)
	assert.Equal(t, Context{Parent: Parent{TraceID: traceID, SpanID: child, Flags: 1}, State: "k=v", Baggage: "b=1"}, got)
	assert.Equal(t, spanID, c.Parent.SpanID, "c is unchanged")
}

// TestIsCarrier: only the three names, exactly, are carriers.
func TestIsCarrier(t *testing.T) {
	for kv, want := range map[string]bool{
		"TRACEPARENT=x": true, "TRACESTATE=": true, "BAGGAGE=a=b": true, "TRACEPARENT": true,
		"traceparent=x": false, "TRACEPARENTS=x": false, "XTRACESTATE=x": false, "PATH=/bin": false, "": false,
	} {
		assert.Equal(t, want, IsCarrier(kv), "%q", kv)
	}
}

// BenchmarkFromEnv is what a catena process spends reading its caller's
// context, once per process.
func BenchmarkFromEnv(b *testing.B) {
	env := envOf(map[string]string{EnvTraceparent: "00-" + traceHex + "-" + spanHex + "-01", EnvTracestate: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", EnvBaggage: "user=alice,region=eu"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromEnv(env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallEnv is what each delegate call adds: a span ID from
// crypto/rand and the carriers appended to a clipped environment.
func BenchmarkCallEnv(b *testing.B) {
	c := Context{Parent: Parent{TraceID: traceID, SpanID: spanID, Flags: 1}, State: "rojo=00f067aa0ba902b7", Baggage: "user=alice"}
	base := make([]string, 40)
	b.ReportAllocs()
	for b.Loop() {
		id, err := NewSpanID(nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.WithSpan(id).AppendEnv(base)
	}
}
