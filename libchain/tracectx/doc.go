// Package tracectx reads and writes the W3C trace context a process is
// handed in its environment, as OpenTelemetry's environment carriers
// (OTEP 0258) put it and libcni passes it to every plugin it runs:
// TRACEPARENT (Trace Context's traceparent: version, trace-id, parent-id,
// trace-flags), TRACESTATE and BAGGAGE. It parses them strictly, bounds
// what it carries (MaxTracestate, MaxBaggage), makes span IDs from
// crypto/rand, and writes the carriers of a context for a child process.
//
// It is a leaf: it imports only the standard library, and no
// OpenTelemetry package. It records no span and sends nothing anywhere;
// the engine (libchain) uses it to continue its caller's trace through
// its delegates and to name each operation's and each call's span in the
// event journal.
//
// Files:
//
//	doc.go          this comment
//	traceparent.go  TraceID, SpanID, Parent: ParseTraceparent, the version-00 text, NewSpanID
//	lists.go        ParseTracestate and ParseBaggage: the W3C list grammars and the bounds carried
//	env.go          Context, FromEnv, AppendEnv and IsCarrier: the environment carriers
//	root.go         RootTraceID: the trace of an operation that continues none
package tracectx
