// Package traces turns the operations of the event journal into
// OpenTelemetry spans and sends them to a collector over OTLP: the
// agent's half of the trace context the catena plugin carries through its
// chain (libchain/tracectx). The plugin records no span and links no
// OpenTelemetry SDK; each journal line holds the IDs, the start and the
// duration of an operation and of each delegate call inside it, and this
// package builds the spans from them after the fact, with the IDs the
// delegates already saw in their TRACEPARENT.
//
// An operation is one span, named "CNI <verb>" (its verb: ADD, DEL, CHECK,
// GC, STATUS, REPAIR, RETRY, RECLAIM); the lock wait and each delegate
// call are its children, in the order they ran; the record writes are an
// event on it. An operation that continues a trace (the runtime's
// TRACEPARENT) is a child of the runtime's span, and is exported when the
// sampler says so (by default: when the runtime sampled its span). An
// operation that continues none is a root span of the trace
// tracectx.RootTraceID names, exported when the sampler samples roots
// (OTEL_TRACES_SAMPLER=parentbased_always_on, say).
//
// The export is bounded: at most MaxQueue operations wait in memory, a
// batch is at most BatchSize of them, and each export call at most
// Timeout; a collector that is down or slow makes the exporter back off
// and stop reading the journal, never touches a CNI call (the plugin only
// appends to the journal), and costs the agent at most the queue. Before
// each batch is sent, a checkpoint naming its last operation is written
// durably (checkpoint.go): after a restart, the exporter skips what the
// checkpoint says was sent, so no operation is exported twice, and at
// most one batch (the one in flight when the agent stopped) is lost.
//
// Files:
//
//	doc.go         this comment
//	config.go      Config from the OTEL_* environment: FromEnv, ParseSampler, Resource, NewClient
//	spans.go       Builder: the spans of one operation, with the journal's IDs
//	checkpoint.go  the last operation exported, in <cacheDir>/events/traces.exported
//	exporter.go    Exporter: the journal's tail, the queue, batches, backoff; Metrics
package traces
