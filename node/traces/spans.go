package traces

import (
	"context"
	"crypto/sha256"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/tracectx"
)

// The attributes of Catena's spans beyond the semantic conventions'
// (k8s.pod.name, k8s.namespace.name, k8s.pod.uid, container.id,
// error.type, and the resource's k8s.node.name).
const (
	AttrVerb       = attribute.Key("catena.cni.verb")
	AttrNetwork    = attribute.Key("catena.network")
	AttrIfName     = attribute.Key("catena.ifname")
	AttrOutcome    = attribute.Key("catena.outcome")
	AttrRollback   = attribute.Key("catena.rollback")
	AttrTruncated  = attribute.Key("catena.truncated")
	AttrType       = attribute.Key("catena.delegate.type")
	AttrIndex      = attribute.Key("catena.delegate.index")
	AttrExit       = attribute.Key("catena.delegate.exit_status")
	AttrCode       = attribute.Key("catena.cni.error_code")
	AttrWrites     = attribute.Key("catena.record.writes")
	AttrWritesTime = attribute.Key("catena.record.writes_ms")
	AttrStartup    = attribute.Key("catena.process.startup_ms")
	AttrCPU        = attribute.Key("catena.process.cpu_ms")
	AttrRunDelay   = attribute.Key("catena.process.run_delay_ms")
)

// Span names of the children that are no delegate call.
const (
	SpanLockWait     = "lock wait"
	EventRecordWrite = "record writes"
)

// Builder makes the spans of journal operations with an OpenTelemetry
// SDK tracer whose IDs are the journal's and whose processor hands the
// ended, sampled spans to Take.
type Builder struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	sampler  sdktrace.Sampler
	ended    *collector
}

// NewBuilder is a Builder of spans under res, sampled by sampler.
func NewBuilder(res *resource.Resource, sampler sdktrace.Sampler) *Builder {
	c := &collector{}
	p := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sampler),
		sdktrace.WithIDGenerator(journalIDs{}), sdktrace.WithSpanProcessor(c),
		// An operation has at most MaxLine of text: its calls are bounded.
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeValueLengthLimit: 4096, AttributeCountLimit: 64,
			EventCountLimit: 8, LinkCountLimit: 0, AttributePerEventCountLimit: 8, AttributePerLinkCountLimit: 0}))
	return &Builder{provider: p, tracer: p.Tracer("github.com/catena-cni/catena/node/traces"), sampler: sampler, ended: c}
}

// Take returns the spans ended since the last Take, and forgets them.
func (b *Builder) Take() []sdktrace.ReadOnlySpan { return b.ended.take() }

// Add makes the spans of op, and reports whether it was sampled: only a
// sampled operation's spans reach Take. An operation without a span ID
// (a journal line from before Catena carried one) makes none.
func (b *Builder) Add(op events.Op) bool {
	parent, ok := b.parentOf(op)
	if !ok {
		return false
	}
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	opSpan, ok := spanIDOf(op.SpanID)
	if !ok {
		return false
	}
	ctx = withIDs(ctx, parent.TraceID(), opSpan)
	if !parent.IsValid() {
		ctx = withIDs(ctx, rootTrace(op.SpanID), opSpan)
	}
	ctx, span := b.tracer.Start(ctx, "CNI "+op.Verb, trace.WithTimestamp(op.Start), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(opAttributes(op)...))
	if !span.SpanContext().IsSampled() {
		span.End()
		return false
	}
	if op.WriteCount > 0 {
		span.AddEvent(EventRecordWrite, trace.WithTimestamp(op.Start.Add(op.LockWait)), trace.WithAttributes(
			AttrWrites.Int(op.WriteCount), AttrWritesTime.Float64(ms(op.Writes))))
	}
	if op.LockWait > 0 {
		_, lw := b.tracer.Start(withIDs(ctx, span.SpanContext().TraceID(), derivedSpanID(op.SpanID, "lock")), SpanLockWait,
			trace.WithTimestamp(op.Start))
		lw.End(trace.WithTimestamp(op.Start.Add(op.LockWait)))
	}
	for i, c := range op.Calls {
		id, ok := spanIDOf(c.SpanID)
		if !ok {
			id = derivedSpanID(op.SpanID, "call "+strconv.Itoa(i))
		}
		start := op.Start.Add(c.StartOffset)
		_, cs := b.tracer.Start(withIDs(ctx, span.SpanContext().TraceID(), id), c.Verb+" "+c.Type,
			trace.WithTimestamp(start), trace.WithAttributes(callAttributes(c)...))
		if c.Error != "" {
			cs.SetStatus(codes.Error, c.Error)
		}
		cs.End(trace.WithTimestamp(start.Add(c.Duration)))
	}
	if op.Outcome != "ok" {
		span.SetStatus(codes.Error, cmpOr(op.Error, op.Outcome))
	}
	span.End(trace.WithTimestamp(op.Start.Add(op.Duration)))
	return true
}

// parentOf is the span context op continues: the runtime's, from its
// journal fields; for an operation that ran inside a root operation (GC's
// teardown of one attachment), that root's span in its root trace, sampled
// as the sampler samples roots; none for a root. false: op names no span.
func (b *Builder) parentOf(op events.Op) (trace.SpanContext, bool) {
	if op.SpanID == "" {
		return trace.SpanContext{}, false
	}
	if op.ParentSpanID == "" {
		return trace.SpanContext{}, true
	}
	psid, ok := spanIDOf(op.ParentSpanID)
	if !ok {
		return trace.SpanContext{}, true
	}
	var flags trace.TraceFlags
	var tid trace.TraceID
	if op.TraceID != "" {
		t, err := trace.TraceIDFromHex(op.TraceID)
		if err != nil {
			return trace.SpanContext{}, true
		}
		tid = t
		if op.Sampled {
			flags = trace.FlagsSampled
		}
	} else {
		tid = rootTrace(op.ParentSpanID)
		res := b.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tid, Name: "CNI " + op.Verb})
		if res.Decision == sdktrace.RecordAndSample {
			flags = trace.FlagsSampled
		}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: psid, TraceFlags: flags, Remote: true}), true
}

func opAttributes(op events.Op) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrVerb.String(op.Verb), AttrOutcome.String(op.Outcome)}
	if parts := strings.SplitN(op.Attachment, "/", 3); len(parts) == 3 {
		attrs = append(attrs, AttrNetwork.String(parts[0]), semconv.ContainerID(parts[1]), AttrIfName.String(parts[2]))
	} else if op.Attachment != "" {
		attrs = append(attrs, AttrNetwork.String(op.Attachment))
	}
	if p := op.Pod; p != nil {
		attrs = append(attrs, semconv.K8SNamespaceName(p.Namespace), semconv.K8SPodName(p.Name))
		if p.UID != "" {
			attrs = append(attrs, semconv.K8SPodUID(p.UID))
		}
	}
	if op.Rollback {
		attrs = append(attrs, AttrRollback.Bool(true))
	}
	if op.Truncated {
		attrs = append(attrs, AttrTruncated.Bool(true))
	}
	if p := op.Process; p != nil {
		attrs = append(attrs, AttrStartup.Float64(ms(p.Startup)), AttrCPU.Float64(ms(p.CPU)), AttrRunDelay.Float64(ms(p.RunDelay)))
	}
	return attrs
}

func callAttributes(c events.OpCall) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrVerb.String(c.Verb), AttrType.String(c.Type), AttrIndex.Int(c.Index)}
	if c.Error != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String("cni_error_"+strconv.FormatUint(uint64(c.Code), 10)), AttrCode.Int64(int64(c.Code)))
		if c.Exit != 0 {
			attrs = append(attrs, AttrExit.Int(c.Exit))
		}
	}
	return attrs
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func spanIDOf(s string) (trace.SpanID, bool) {
	id, err := trace.SpanIDFromHex(s)
	return id, err == nil && id.IsValid()
}

// rootTrace is tracectx.RootTraceID of span, as an OpenTelemetry ID.
func rootTrace(span string) trace.TraceID {
	id, _ := trace.TraceIDFromHex(tracectx.RootTraceID(span))
	return id
}

// derivedSpanID is the span ID of a child the journal names no span for
// (the lock wait), from its operation's span: the same on every export.
func derivedSpanID(opSpan, what string) trace.SpanID {
	sum := sha256.Sum256([]byte("catena span " + opSpan + " " + what))
	var id trace.SpanID
	copy(id[:], sum[:8])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// TraceIDOf is the trace op's spans are exported in (events.Op.TraceOf).
func TraceIDOf(op events.Op) string {
	id, _ := op.TraceOf()
	return id
}

// ids are the trace and span IDs the next span started under a context
// takes (journalIDs).
type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

type idsKey struct{}

func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, ids{trace: t, span: s})
}

// journalIDs is an IDGenerator that hands out the IDs its context holds:
// the journal's, never random ones.
type journalIDs struct{}

var _ sdktrace.IDGenerator = journalIDs{}

func (journalIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	v, _ := ctx.Value(idsKey{}).(ids)
	return v.trace, v.span
}

func (journalIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	v, _ := ctx.Value(idsKey{}).(ids)
	return v.span
}

// collector is a SpanProcessor that keeps the sampled spans that ended.
type collector struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

var _ sdktrace.SpanProcessor = (*collector)(nil)

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	c.mu.Lock()
	c.spans = append(c.spans, s)
	c.mu.Unlock()
}

func (c *collector) take() []sdktrace.ReadOnlySpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.spans
	c.spans = nil
	return s
}

func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }
