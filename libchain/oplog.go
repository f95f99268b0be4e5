package libchain

import (
	"context"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/catena-cni/catena/cache"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/invoke"
	"github.com/catena-cni/catena/libchain/tracectx"
)

// DefaultSlowThreshold is when an operation is logged as slow, unless the
// config sets slowThreshold.
const DefaultSlowThreshold = 10 * time.Second

// Op, OpCall and OpPod are the event journal's (package journal): the
// engine fills one Op per operation, logs it as one line and hands it to
// Engine.OnOp (events.OnOp appends it to the journal) when set.
type (
	Op     = events.Op
	OpCall = events.OpCall
	OpPod  = events.OpPod
	// OpRelease and OpFailure: what a DEL with no record released.
	OpRelease = events.OpRelease
	OpFailure = events.OpFailure
)

// CNIArgs yields the key=value pairs of CNI_ARGS in order, skipping any
// part without "=".
func CNIArgs(cniArgs string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for kv := range strings.SplitSeq(cniArgs, ";") {
			k, v, ok := strings.Cut(kv, "=")
			if ok && !yield(k, v) {
				return
			}
		}
	}
}

// PodOf parses the K8S_POD_NAMESPACE, K8S_POD_NAME and K8S_POD_UID of
// CNI_ARGS; nil unless both namespace and name are there.
func PodOf(cniArgs string) *OpPod {
	var p OpPod
	for k, v := range CNIArgs(cniArgs) {
		switch k {
		case "K8S_POD_NAMESPACE":
			p.Namespace = v
		case "K8S_POD_NAME":
			p.Name = v
		case "K8S_POD_UID":
			p.UID = v
		}
	}
	if p.Namespace == "" || p.Name == "" {
		return nil
	}
	return &p
}

type (
	opKey    struct{}
	traceKey struct{}
)

// WithTrace returns ctx under which every operation the engine begins
// continues tc, the trace context its caller passed (catena: its
// TRACEPARENT, tracectx.FromEnv): the operation's parent span is tc's
// parent-id, and each of its delegates gets a TRACEPARENT naming its own
// call's span in tc's trace, with tc's flags, state and baggage. Without
// a valid tc, delegates get no trace context. An operation begun inside
// another one continues that one's instead.
func WithTrace(ctx context.Context, tc tracectx.Context) context.Context {
	return context.WithValue(ctx, traceKey{}, tc)
}

// opTrace collects an Op while it runs; calls may come from one goroutine
// at a time, but the mutex keeps that an implementation detail.
type opTrace struct {
	mu sync.Mutex
	op Op
	// span is the operation's own span; zero if no span ID could be made.
	span tracectx.SpanID
	// trace is the trace context the operation's calls continue, its
	// parent-id the operation's span; zero when it continues none.
	trace tracectx.Context
}

// begin starts the trace of one operation and puts it in the context that
// the verb's delegate calls receive. The operation gets a span of its
// own, under the operation ctx already traces, else under the context of
// WithTrace.
func (e *Engine) begin(ctx context.Context, verb string, key cache.Key) (context.Context, *opTrace) {
	t := &opTrace{op: Op{Verb: verb, Start: e.now()}}
	if key != (cache.Key{}) {
		t.op.Attachment = key.String()
	}
	t.span = e.spanID()
	t.op.SpanID = t.span.String()
	var in tracectx.Context
	var parent tracectx.SpanID
	if outer := traceOf(ctx); outer != nil {
		in, parent = outer.trace, outer.span
	} else if tc, ok := ctx.Value(traceKey{}).(tracectx.Context); ok && tc.Valid() {
		in, parent = tc, tc.Parent.SpanID
	}
	t.op.ParentSpanID = parent.String()
	if in.Valid() && !t.span.IsZero() {
		t.trace = in.WithSpan(t.span)
		t.op.TraceID, t.op.Sampled = in.Parent.TraceID.String(), in.Parent.Sampled()
	}
	return context.WithValue(ctx, opKey{}, t), t
}

// spanID is a new span ID from e.Rand; zero, logged, if it fails.
func (e *Engine) spanID() tracectx.SpanID {
	id, err := tracectx.NewSpanID(e.Rand)
	if err != nil {
		e.log().Warn("no span ID: the operation or call is not traced", "error", err)
	}
	return id
}

func traceOf(ctx context.Context) *opTrace {
	t, _ := ctx.Value(opKey{}).(*opTrace)
	return t
}

// callSpan is one delegate call's span while it runs.
type callSpan struct {
	id    tracectx.SpanID
	start time.Time
	// trace is what the delegate continues (Call.Trace): the
	// operation's trace, the call's span its parent-id; zero when the
	// operation continues no trace.
	trace tracectx.Context
}

// startCall starts the span of one delegate call of ctx's operation,
// now; outside an operation, a span without an ID.
func (e *Engine) startCall(ctx context.Context) callSpan {
	t := traceOf(ctx)
	if t == nil {
		return callSpan{start: e.now()}
	}
	id := e.spanID()
	sp := callSpan{id: id, start: e.now()}
	if t.trace.Valid() && !id.IsZero() {
		sp.trace = t.trace.WithSpan(id)
	}
	return sp
}

// endCall records the delegate call of sp, ended now with err.
func (e *Engine) endCall(ctx context.Context, sp callSpan, index int, typ, verb string, err error) {
	traceOf(ctx).call(sp, index, typ, verb, e.now(), err)
}

// call records one delegate call, ended at end; a nil trace records
// nothing.
func (t *opTrace) call(sp callSpan, index int, typ, verb string, end time.Time, err error) {
	if t == nil {
		return
	}
	c := OpCall{Index: index, Type: typ, Verb: verb, Duration: end.Sub(sp.start), SpanID: sp.id.String()}
	if err != nil {
		c.Error = BoundText(msgOf(err)) // the executor's own error
		c.Code = codeOf(err, 0)
		c.Exit, _ = invoke.ExitStatus(err)
	}
	t.mu.Lock()
	c.StartOffset = sp.start.Sub(t.op.Start)
	t.op.Calls = append(t.op.Calls, c)
	t.mu.Unlock()
}

// wrote adds the time of one durable write or removal of a record.
func (t *opTrace) wrote(d time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.op.Writes += d
	t.op.WriteCount++
	t.mu.Unlock()
}

func (t *opTrace) lockWaited(d time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.op.LockWait = d
	t.mu.Unlock()
}

func (t *opTrace) rolledBack() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.op.Rollback = true
	t.mu.Unlock()
}

// pod names the operation's pod from CNI_ARGS, once: the first caller
// (the verb's own request) wins.
func (t *opTrace) pod(cniArgs string) {
	if t == nil {
		return
	}
	p := PodOf(cniArgs)
	t.mu.Lock()
	if t.op.Pod == nil {
		t.op.Pod = p
	}
	t.mu.Unlock()
}

func (t *opTrace) netnsReplaced(key cache.Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.op.NetNSReplaced = append(t.op.NetNSReplaced, key.String())
	t.mu.Unlock()
}

func (t *opTrace) adopted(source string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.op.Adopted = source
	t.mu.Unlock()
}

// verb is the operation's verb; "" for a nil trace.
func (t *opTrace) verb() string {
	if t == nil {
		return ""
	}
	return t.op.Verb
}

// released records what a DEL with no record released (norecord.go).
func (t *opTrace) released(r OpRelease) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.op.NoRecordRelease = &r
	t.mu.Unlock()
}

// finish closes the trace with the verb's error, logs the one summary line
// (a warning past slowThreshold or on failure) and passes the Op on.
func (e *Engine) finish(t *opTrace, slow time.Duration, err error) {
	t.mu.Lock()
	op := t.op
	op.Calls = append([]OpCall(nil), t.op.Calls...)
	op.NetNSReplaced = append([]string(nil), t.op.NetNSReplaced...)
	t.mu.Unlock()
	op.Duration = e.now().Sub(op.Start)
	op.Outcome = "ok"
	if err != nil {
		op.Outcome, op.Error = "error", msgOf(err)
	}
	if slow <= 0 {
		slow = DefaultSlowThreshold
	}
	level := slog.LevelInfo
	msg := "operation"
	switch {
	case err != nil:
		level = slog.LevelWarn
		msg = "operation failed"
	case op.Duration > slow:
		level = slog.LevelWarn
		msg = "slow operation"
	}
	attrs := []any{"verb", op.Verb, "attachment", op.Attachment, "spanID", op.SpanID, "outcome", op.Outcome,
		"duration", op.Duration, "lockWait", op.LockWait, "writes", op.Writes, "rollback", op.Rollback,
		"delegates", op.Calls, "error", op.Error, "slowThreshold", slow}
	if op.TraceID != "" {
		attrs = append(attrs, "traceID", op.TraceID)
	}
	if op.Adopted != "" {
		attrs = append(attrs, "adopted", op.Adopted)
	}
	if len(op.NetNSReplaced) > 0 {
		attrs = append(attrs, "netnsReplaced", op.NetNSReplaced)
	}
	if op.NoRecordRelease != nil {
		attrs = append(attrs, "noRecordRelease", *op.NoRecordRelease)
	}
	e.log().Log(context.Background(), level, msg, attrs...)
	if e.OnOp != nil {
		e.OnOp(op)
	}
}
