package libchain

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/tracectx"
)

// tickClock is a clock each reading of which is a millisecond after the
// one before: every span has a length, and the calls of an operation an
// order.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTickClock() *tickClock { return &tickClock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)} }

func (c *tickClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func (c *tickClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// incoming is a runtime's trace context, as catena reads it from its
// environment.
func incoming(t *testing.T, flags string) tracectx.Context {
	t.Helper()
	p, err := tracectx.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-" + flags)
	require.NoError(t, err)
	return tracectx.Context{Parent: p, State: "rojo=1", Baggage: "user=alice"}
}

var spanHex = regexp.MustCompile(`^[0-9a-f]{16}$`)

// assertTraced checks one operation that continues in's trace: its own
// span, under parent, and each call's span, distinct from every other,
// the one the fake delegate got as its TRACEPARENT's parent-id, with in's
// trace, flags, state and baggage; each call starts within the operation
// (the engine's clock ticking), after the one before it ended.
func assertTraced(t *testing.T, op Op, in tracectx.Context, parent string, calls []call) {
	t.Helper()
	assert.Equal(t, in.Parent.TraceID.String(), op.TraceID, "%s: the runtime's trace", op.Verb)
	assert.Equal(t, parent, op.ParentSpanID, "%s: its parent span", op.Verb)
	assert.Equal(t, in.Parent.Sampled(), op.Sampled, "%s: sampled", op.Verb)
	assert.Regexp(t, spanHex, op.SpanID, "%s: its own span", op.Verb)
	require.Len(t, calls, len(op.Calls), "%s: one delegate call per journaled call", op.Verb)
	seen := map[string]bool{op.SpanID: true, parent: true}
	for i, c := range op.Calls {
		assert.Regexp(t, spanHex, c.SpanID, "%s call %d", op.Verb, i)
		assert.False(t, seen[c.SpanID], "%s call %d: a span of its own", op.Verb, i)
		seen[c.SpanID] = true
		got := calls[i]
		assert.Equal(t, c.Verb+" "+c.Type, got.Verb+" "+got.Type, "%s call %d", op.Verb, i)
		assert.Equal(t, in.Parent.TraceID, got.Trace.Parent.TraceID, "%s call %d: the trace", op.Verb, i)
		assert.Equal(t, c.SpanID, got.Trace.Parent.SpanID.String(), "%s call %d: TRACEPARENT names the call's span", op.Verb, i)
		assert.Equal(t, in.Parent.Flags, got.Trace.Parent.Flags, "%s call %d: the flags passed on", op.Verb, i)
		assert.Equal(t, in.State, got.Trace.State, "%s call %d", op.Verb, i)
		assert.Equal(t, in.Baggage, got.Trace.Baggage, "%s call %d", op.Verb, i)
		assert.Positive(t, c.StartOffset, "%s call %d: the operation began first", op.Verb, i)
		assert.Positive(t, c.Duration, "%s call %d", op.Verb, i)
		assert.LessOrEqual(t, c.StartOffset+c.Duration, op.Duration, "%s call %d: within the operation", op.Verb, i)
		if i > 0 {
			assert.GreaterOrEqual(t, c.StartOffset, op.Calls[i-1].StartOffset+op.Calls[i-1].Duration, "%s call %d: after the one before", op.Verb, i)
		}
	}
}

// TestVerbsContinueTheRuntimesTrace: ADD, CHECK, DEL, STATUS and GC, under
// a trace context, each journal the runtime's trace, its parent-id as
// their parent span and their own span; each delegate they call gets a
// TRACEPARENT naming that call's own span, and the rolled-back DELs of a
// failed ADD have theirs too. GC's teardown of one attachment is an
// operation under the network's GC.
func TestVerbsContinueTheRuntimesTrace(t *testing.T) {
	for _, flags := range []string{"01", "00"} {
		t.Run("flags "+flags, func(t *testing.T) {
			in := incoming(t, flags)
			ctx := WithTrace(context.Background(), in)
			h := newHarness()
			c := newTickClock()
			h.eng.Now = c.now
			var ops []Op
			h.eng.OnOp = func(op Op) { ops = append(ops, op) }
			conf := chainConf(t, "1.1.0", dIPAM, dPort)
			r := req(conf, "c1")
			parent := in.Parent.SpanID.String()

			steps := []struct {
				name string
				run  func() error
				fail bool
			}{
				{"ADD", func() error { _, err := h.eng.Add(ctx, r); return err }, false},
				{"CHECK", func() error { return h.eng.Check(ctx, r) }, false},
				{"DEL", func() error { return h.eng.Del(ctx, r) }, false},
				{"STATUS", func() error { return h.eng.Status(ctx, gcReq(conf)) }, false},
				{"ADD rolled back", func() error {
					h.exec.set("portmap", behaviour{failAdd: true})
					_, err := h.eng.Add(ctx, req(conf, "c2"))
					h.exec.set("portmap", behaviour{})
					return err
				}, true},
			}
			for _, s := range steps {
				h.exec.reset()
				ops = nil
				err := s.run()
				require.Equal(t, s.fail, err != nil, "%s: %v", s.name, err)
				require.Len(t, ops, 1, s.name)
				assertTraced(t, ops[0], in, parent, h.exec.calls)
			}
			assert.Equal(t, []string{"ADD ipam", "ADD portmap", "DEL portmap", "DEL ipam"}, h.exec.seen(), "the rolled-back DELs")

			// GC: one attachment torn down, inside the network's GC
			_, err := h.eng.Add(ctx, req(conf, "dead"))
			require.NoError(t, err)
			c.advance(time.Hour)
			h.exec.reset()
			ops = nil
			conf.ValidAttachments = []byte(`[{"containerID":"live","ifname":"eth0"}]`)
			require.NoError(t, h.eng.GC(ctx, gcReq(conf)))
			require.Len(t, ops, 2)
			teardown, network := ops[0], ops[1]
			assert.Equal(t, "podnet/dead/eth0", teardown.Attachment)
			assertTraced(t, network, in, parent, h.exec.calls[2:])
			assertTraced(t, teardown, in, network.SpanID, h.exec.calls[:2])
		})
	}
}

// TestTeardownsNoRuntimeAskedForContinueTheTrace: REPAIR, RECLAIM and
// RETRY start operations of their own, each with its own span, under the
// trace context of their ctx, and their DELs get their calls' spans.
func TestTeardownsNoRuntimeAskedForContinueTheTrace(t *testing.T) {
	in := incoming(t, "01")
	tests := []struct {
		name string
		run  func(t *testing.T, h *harness, ctx context.Context, r Request)
		verb string
	}{
		{"repair", func(t *testing.T, h *harness, ctx context.Context, r Request) {
			_, err := h.eng.Repair(ctx, r, []cache.Key{r.Key()})
			require.NoError(t, err)
		}, "REPAIR"},
		{"reclaim", func(t *testing.T, h *harness, ctx context.Context, r Request) {
			_, err := h.eng.Reclaim(ctx, r.Key(), ReclaimOptions{Verb: "RECLAIM", Path: r.Args.Path})
			require.NoError(t, err)
		}, "RECLAIM"},
		{"retry", func(t *testing.T, h *harness, ctx context.Context, r Request) {
			rep, err := h.eng.RetryPending(ctx, gcReq(r.Conf), RetryOptions{Linger: -1})
			require.NoError(t, err)
			require.Equal(t, 1, rep.Released, "%+v", rep)
		}, "RETRY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness()
			c := newTickClock()
			h.eng.Now = c.now
			if tt.name == "retry" {
				h.eng.Store = diskStore(t.TempDir())
			}
			r := req(chainConf(t, "1.1.0", dIPAM, dFail), "c1")
			_, err := h.eng.Add(context.Background(), r)
			require.NoError(t, err)
			h.exec.set("failer", behaviour{failDel: true})
			require.Error(t, h.eng.Del(context.Background(), r), "the DEL fails: the record needs teardown")
			h.exec.set("failer", behaviour{})
			c.advance(time.Hour)
			h.exec.reset()
			var ops []Op
			h.eng.OnOp = func(op Op) { ops = append(ops, op) }

			tt.run(t, h, WithTrace(context.Background(), in), r)
			require.Len(t, ops, 1)
			assert.Equal(t, tt.verb, ops[0].Verb)
			assertTraced(t, ops[0], in, in.Parent.SpanID.String(), h.exec.calls)
			assert.NotEmpty(t, ops[0].Calls)
		})
	}
}

// TestNoTraceContextNoTraceEnv: without a trace context (none given, or
// one that is not valid), no delegate gets one; each operation and call
// still has its own span in the journal, and no trace, parent or sampled
// flag.
func TestNoTraceContextNoTraceEnv(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"none":      context.Background(),
		"not valid": WithTrace(context.Background(), tracectx.Context{State: "rojo=1", Baggage: "user=alice"}),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness()
			var ops []Op
			h.eng.OnOp = func(op Op) { ops = append(ops, op) }
			h.exec.set("portmap", behaviour{failAdd: true})
			_, err := h.eng.Add(ctx, req(chainConf(t, "1.0.0", dIPAM, dPort), "c1"))
			require.Error(t, err)
			require.Len(t, ops, 1)
			op := ops[0]
			assert.Empty(t, op.TraceID)
			assert.Empty(t, op.ParentSpanID)
			assert.False(t, op.Sampled)
			assert.Regexp(t, spanHex, op.SpanID)
			require.Len(t, op.Calls, 4, "two ADDs, two rollback DELs")
			for i, c := range h.exec.calls {
				assert.False(t, c.Trace.Valid(), "call %d gets no trace context", i)
				assert.Equal(t, tracectx.Context{}, c.Trace, "call %d: nor state or baggage", i)
				assert.Regexp(t, spanHex, op.Calls[i].SpanID, "call %d", i)
			}
		})
	}
}

// TestSpanIDsFromEngineRand: span IDs come from Engine.Rand, in the order
// the operation and its calls begin; a source that fails leaves the
// operation without a span or a trace, its delegates without a trace
// context, and says so in the log.
func TestSpanIDsFromEngineRand(t *testing.T) {
	in := incoming(t, "01")
	t.Run("from the source", func(t *testing.T) {
		h := newHarness()
		h.eng.Rand = bytes.NewReader([]byte{
			1, 1, 1, 1, 1, 1, 1, 1, // the operation
			2, 2, 2, 2, 2, 2, 2, 2, // ADD ipam
			3, 3, 3, 3, 3, 3, 3, 3, // ADD portmap
		})
		var ops []Op
		h.eng.OnOp = func(op Op) { ops = append(ops, op) }
		_, err := h.eng.Add(WithTrace(context.Background(), in), req(chainConf(t, "1.0.0", dIPAM, dPort), "c1"))
		require.NoError(t, err)
		require.Len(t, ops, 1)
		assert.Equal(t, "0101010101010101", ops[0].SpanID)
		assert.Equal(t, []string{"0202020202020202", "0303030303030303"}, []string{ops[0].Calls[0].SpanID, ops[0].Calls[1].SpanID})
		assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-0303030303030303-01", h.exec.calls[1].Trace.Parent.String())
	})
	t.Run("a failing source", func(t *testing.T) {
		h := newHarness()
		h.eng.Rand = io.MultiReader()
		var logs bytes.Buffer
		h.eng.Log = slog.New(slog.NewJSONHandler(&logs, nil))
		var ops []Op
		h.eng.OnOp = func(op Op) { ops = append(ops, op) }
		_, err := h.eng.Add(WithTrace(context.Background(), in), req(chainConf(t, "1.0.0", dIPAM), "c1"))
		require.NoError(t, err, "no span ID fails nothing")
		require.Len(t, ops, 1)
		assert.Empty(t, ops[0].SpanID)
		assert.Empty(t, ops[0].TraceID)
		assert.Empty(t, ops[0].Calls[0].SpanID)
		assert.False(t, h.exec.calls[0].Trace.Valid())
		assert.Contains(t, logs.String(), "no span ID")
	})
}

// BenchmarkCallSpan is what the engine adds to each delegate call: the
// call's span ID from crypto/rand, its trace context and its journal
// entry, in an operation with and without a trace context.
func BenchmarkCallSpan(b *testing.B) {
	p, err := tracectx.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		b.Fatal(err)
	}
	for name, in := range map[string]tracectx.Context{"untraced": {}, "traced": {Parent: p, State: "rojo=1", Baggage: "user=alice"}} {
		b.Run(name, func(b *testing.B) {
			e := &Engine{}
			ctx, t := e.begin(WithTrace(context.Background(), in), "ADD", cache.Key{})
			b.ReportAllocs()
			for b.Loop() {
				sp := e.startCall(ctx)
				e.endCall(ctx, sp, 0, "bridge", "ADD", nil)
				if len(t.op.Calls) > 64 {
					t.op.Calls = t.op.Calls[:0]
				}
			}
		})
	}
}
