package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/tracectx"
)

// traceWorld is a CNI_PATH holding catena and spy, and a conflist of
// catena over two spies that log their trace context.
type traceWorld struct {
	cniPath, cacheDir, logDir string
	delegates                 string // catena's delegates, a JSON list
	list                      *libcni.NetworkConfigList
}

func newTraceWorld(t *testing.T) traceWorld {
	t.Helper()
	w := traceWorld{cniPath: t.TempDir(), cacheDir: newCacheDir(t), logDir: t.TempDir()}
	out, err := exec.Command("go", "build", "-o", filepath.Join(w.cniPath, "catena"), ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	buildPlugin(t, w.cniPath, "spy")
	spy := fmt.Sprintf(`{"type":"spy","logDir":%q,"traceLog":true}`, w.logDir)
	w.delegates = "[" + spy + "," + spy + "]"
	list, err := libcni.NetworkConfFromBytes(fmt.Appendf(nil,
		`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"catena","cacheDir":%q,"delegates":%s}]}`, w.cacheDir, w.delegates))
	require.NoError(t, err)
	w.list = list
	// catena and the spies run in the test's own netns: nothing here
	// touches a network.
	t.Setenv("CNI_NETNS_OVERRIDE", "1")
	return w
}

// traceCalls are the lines of the spies' trace log, in order.
func (w traceWorld) traceCalls(t *testing.T) []struct {
	Verb string
	Env  []string
} {
	t.Helper()
	f, err := os.Open(filepath.Join(w.logDir, "trace.log"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	var out []struct {
		Verb string
		Env  []string
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c struct {
			Verb string
			Env  []string
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		out = append(out, c)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestRuntimeTraceReachesDelegatesThroughCatena: a runtime calls catena
// through libcni v1.3.1 with a context carrying a span of OpenTelemetry's
// trace API, and baggage; libcni passes it to catena as TRACEPARENT,
// TRACESTATE and BAGGAGE. Each operation's journal line continues that
// trace under the runtime's span, and each delegate gets exactly one
// TRACEPARENT: the same trace, the runtime's flags, and as its parent the
// span of its own call in that line, with the state and baggage
// unchanged. A runtime that traces nothing gets no trace through catena.
func TestRuntimeTraceReachesDelegatesThroughCatena(t *testing.T) {
	traceID := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	spanID := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	state, err := trace.ParseTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	require.NoError(t, err)
	member, err := baggage.NewMember("user", "alice")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, TraceState: state})
	require.True(t, sc.IsValid())

	tests := []struct {
		name   string
		ctx    context.Context
		traced bool
	}{
		{"traced", baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), bag), true},
		{"not traced", context.Background(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTraceWorld(t)
			cfg := libcni.NewCNIConfigWithCacheDir([]string{w.cniPath}, t.TempDir(), nil)
			rt := &libcni.RuntimeConf{ContainerID: "c1", NetNS: "/proc/self/ns/net", IfName: "eth0"}
			_, err := cfg.AddNetworkList(tt.ctx, w.list, rt)
			require.NoError(t, err)
			require.NoError(t, cfg.DelNetworkList(tt.ctx, w.list, rt))

			ops, skipped, err := events.Read(afero.NewOsFs(), w.cacheDir, time.Time{})
			require.NoError(t, err)
			require.Zero(t, skipped)
			require.Len(t, ops, 2)
			calls := w.traceCalls(t)
			require.Len(t, calls, 4, "two ADDs, two DELs")
			i := 0
			for _, op := range ops {
				require.Len(t, op.Calls, 2, op.Verb)
				assert.Regexp(t, `^[0-9a-f]{16}$`, op.SpanID, "%s: a span of its own", op.Verb)
				for _, c := range op.Calls {
					got := calls[i]
					i++
					assert.Equal(t, c.Verb, got.Verb)
					if !tt.traced {
						assert.Empty(t, op.TraceID, op.Verb)
						assert.Empty(t, op.ParentSpanID, op.Verb)
						assert.Empty(t, got.Env, "%s: no trace context reaches a delegate", c.Verb)
						continue
					}
					assert.Equal(t, traceID.String(), op.TraceID, op.Verb)
					assert.Equal(t, spanID.String(), op.ParentSpanID, "%s: under the runtime's span", op.Verb)
					assert.True(t, op.Sampled, op.Verb)
					var parents []string
					for _, kv := range got.Env {
						if v, ok := strings.CutPrefix(kv, tracectx.EnvTraceparent+"="); ok {
							parents = append(parents, v)
						}
					}
					require.Len(t, parents, 1, "%s: exactly one TRACEPARENT: %v", c.Verb, got.Env)
					p, err := tracectx.ParseTraceparent(parents[0])
					require.NoError(t, err)
					assert.Equal(t, traceID.String(), p.TraceID.String(), "%s: the runtime's trace", c.Verb)
					assert.Equal(t, c.SpanID, p.SpanID.String(), "%s: its parent is catena's span of this call", c.Verb)
					assert.NotEqual(t, spanID.String(), p.SpanID.String(), c.Verb)
					assert.True(t, p.Sampled(), c.Verb)
					assert.Contains(t, got.Env, "TRACESTATE="+state.String(), c.Verb)
					assert.Contains(t, got.Env, "BAGGAGE="+bag.String(), c.Verb)
				}
			}
		})
	}
}

// TestMalformedTraceContextIsDropped: a TRACEPARENT catena cannot parse
// fails nothing: the call succeeds, its log says once what was dropped,
// and no delegate gets that TRACEPARENT or the TRACESTATE and BAGGAGE
// that came with it.
func TestMalformedTraceContextIsDropped(t *testing.T) {
	w := newTraceWorld(t)
	stdin := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"podnet","type":"catena","cacheDir":%q,"delegates":%s}`, w.cacheDir, w.delegates)
	inv := runCatena(t, filepath.Join(w.cniPath, "catena"), map[string]string{
		"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/proc/self/ns/net", "CNI_NETNS_OVERRIDE": "1",
		"CNI_IFNAME": "eth0", "CNI_PATH": w.cniPath,
		"TRACEPARENT": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", "TRACESTATE": "rojo=1", "BAGGAGE": "user=alice",
	}, stdin)
	require.NoError(t, inv.err, "stderr: %s", inv.stderr)
	assert.Equal(t, 1, strings.Count(string(inv.stderr), "trace context of the environment dropped"), "one log line: %s", inv.stderr)
	assert.NotContains(t, string(inv.stdout), "trace context", "never on stdout")
	calls := w.traceCalls(t)
	require.Len(t, calls, 2)
	for _, c := range calls {
		assert.Empty(t, c.Env, "%s: none of the three reaches a delegate", c.Verb)
	}
}
