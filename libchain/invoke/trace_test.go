//go:build linux

package invoke

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/tracectx"
)

// The trace context catena itself was run with, which no delegate gets as
// it is.
const (
	inheritedParent = "00-11111111111111111111111111111111-2222222222222222-01"
	inheritedState  = "inherited=1"
	inheritedBag    = "inherited=1"
)

// callTrace is the trace context of one call: the inherited trace, the
// call's own span.
func callTrace(t *testing.T, span byte) tracectx.Context {
	t.Helper()
	p, err := tracectx.ParseTraceparent(inheritedParent)
	require.NoError(t, err)
	return tracectx.Context{Parent: p, State: inheritedState, Baggage: inheritedBag}.WithSpan(tracectx.SpanID{span, span, span, span, span, span, span, span})
}

// inherit sets the carriers in catena's own environment for t.
func inherit(t *testing.T) {
	t.Setenv(tracectx.EnvTraceparent, inheritedParent)
	t.Setenv(tracectx.EnvTracestate, inheritedState)
	t.Setenv(tracectx.EnvBaggage, inheritedBag)
}

// carriers are env's trace context carriers, sorted.
func carriers(env []string) []string {
	var out []string
	for _, kv := range env {
		if tracectx.IsCarrier(kv) {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

// TestCallEnvCarriesOnlyItsTrace: whatever trace context catena inherited,
// each delegate call's environment holds exactly its own Call.Trace (one
// TRACEPARENT naming its span, the state and baggage unchanged), or, for
// a call without one and for VERSION, none of the three; the rest is the
// environment the CNI invoke package would give it. The memo shared by
// calls of one verb never leaks one call's trace into the next.
func TestCallEnvCarriesOnlyItsTrace(t *testing.T) {
	inherit(t)
	args := RuntimeArgs{ContainerID: "c1", NetNS: "/var/run/netns/c1", IfName: "eth0", Path: "/opt/cni/bin"}
	calls := []Call{
		{Verb: "ADD", Type: "bridge", Config: []byte(`{"cniVersion":"1.0.0"}`), Args: args, Trace: callTrace(t, 0xa1)},
		{Verb: "ADD", Type: "tuning", Config: []byte(`{"cniVersion":"1.0.0"}`), Args: args, Trace: callTrace(t, 0xa2)},
		{Verb: "DEL", Type: "tuning", Args: args, Trace: callTrace(t, 0xd1)},
		{Verb: "DEL", Type: "bridge", Args: args},
		{Verb: "DEL", Type: "bridge", Args: args, Trace: callTrace(t, 0xd2)},
	}
	proc := &envProc{}
	e := &Exec{Proc: proc}
	for _, c := range calls {
		if c.Verb == "ADD" {
			_, err := e.Add(context.Background(), c)
			// envProc prints nothing: not a result, once it ran
			require.Error(t, err)
		} else {
			require.NoError(t, e.Run(context.Background(), c))
		}
	}
	_, err := e.Version(context.Background(), "/opt/cni/bin/bridge")
	require.NoError(t, err)
	require.Len(t, proc.envs, len(calls)+1)

	for i, c := range calls {
		got := proc.envs[i]
		want := c.Trace.AppendEnv(nil)
		slices.Sort(want)
		assert.Equal(t, want, carriers(got), "call %d (%s %s): its own trace only", i, c.Verb, c.Type)
		rest := slices.DeleteFunc(slices.Clone(got), tracectx.IsCarrier)
		wantRest := slices.DeleteFunc(c.invokeArgs().AsEnv(), tracectx.IsCarrier)
		slices.Sort(rest)
		slices.Sort(wantRest)
		assert.Equal(t, wantRest, rest, "call %d: the rest is the CNI invoke package's", i)
	}
	assert.Empty(t, carriers(proc.envs[len(calls)]), "VERSION gets no trace context")
	assert.Contains(t, proc.envs[len(calls)], "CNI_COMMAND=VERSION")
}

// envScript is a delegate that writes the carriers in its own environment
// as the kernel handed it to its exec (/proc/$$/environ, duplicates
// included) to <dir>/<verb>.env, and answers ADD and VERSION.
const envScript = `tr '\0' '\n' </proc/$$/environ | grep -E '^(TRACEPARENT|TRACESTATE|BAGGAGE)=' | sort >"$(dirname "$0")/$CNI_COMMAND.env"
case "$CNI_COMMAND" in
ADD) echo '{"cniVersion":"1.0.0"}' ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}' ;;
esac
exit 0
`

// TestDelegateProcessGetsItsCallsTrace: a real delegate process, run by
// the executor catena uses, finds in its environment exactly one
// TRACEPARENT, its call's, and never the one catena inherited; without a
// call trace, and for VERSION, it finds none of the three carriers.
func TestDelegateProcessGetsItsCallsTrace(t *testing.T) {
	inherit(t)
	dir := t.TempDir()
	writeScript(t, dir, "envdump", envScript)
	args := RuntimeArgs{ContainerID: "c1", IfName: "eth0", Path: dir}
	exec := NewExec(nil)
	conf := []byte(`{"cniVersion":"1.0.0","name":"n","type":"envdump"}`)

	add, check := callTrace(t, 0xa1), callTrace(t, 0xc1)
	_, err := exec.Add(context.Background(), Call{Verb: "ADD", Type: "envdump", Config: conf, Args: args, Trace: add})
	require.NoError(t, err)
	require.NoError(t, exec.Run(context.Background(), Call{Verb: "CHECK", Type: "envdump", Config: conf, Args: args, Trace: check}))
	require.NoError(t, exec.Run(context.Background(), Call{Verb: "DEL", Type: "envdump", Config: conf, Args: args}))
	_, err = exec.Version(context.Background(), filepath.Join(dir, "envdump"))
	require.NoError(t, err)

	seen := func(verb string) []string {
		raw, err := os.ReadFile(filepath.Join(dir, verb+".env"))
		require.NoError(t, err, "the delegate ran %s", verb)
		return strings.Fields(string(raw))
	}
	assert.Equal(t, []string{
		"BAGGAGE=" + inheritedBag,
		"TRACEPARENT=00-11111111111111111111111111111111-a1a1a1a1a1a1a1a1-01",
		"TRACESTATE=" + inheritedState,
	}, seen("ADD"), "ADD: its call's span, the state and baggage unchanged")
	assert.Equal(t, []string{
		"BAGGAGE=" + inheritedBag,
		"TRACEPARENT=00-11111111111111111111111111111111-c1c1c1c1c1c1c1c1-01",
		"TRACESTATE=" + inheritedState,
	}, seen("CHECK"), "CHECK: its own call's span")
	assert.Empty(t, seen("DEL"), "a call without a trace gets no carrier")
	assert.Empty(t, seen("VERSION"), "VERSION gets no carrier")
}

// BenchmarkCallEnv is the environment of one delegate call of a chain:
// the memo hit of the second delegate of a verb, with and without a
// trace context appended.
func BenchmarkCallEnv(b *testing.B) {
	args := RuntimeArgs{ContainerID: "c1", NetNS: "/var/run/netns/c1", IfName: "eth0", Path: "/opt/cni/bin"}
	p, err := tracectx.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		trace tracectx.Context
	}{
		{"untraced", tracectx.Context{}},
		{"traced", tracectx.Context{Parent: p}},
		{"traced with state and baggage", tracectx.Context{Parent: p, State: "rojo=00f067aa0ba902b7", Baggage: "user=alice"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var m envMemo
			c := Call{Verb: "DEL", Args: args, Trace: bc.trace}
			_ = m.of(c)
			b.ReportAllocs()
			for b.Loop() {
				id, err := tracectx.NewSpanID(nil)
				if err != nil {
					b.Fatal(err)
				}
				if bc.trace.Valid() {
					c.Trace = bc.trace.WithSpan(id)
				}
				_ = m.of(c)
			}
		})
	}
}
