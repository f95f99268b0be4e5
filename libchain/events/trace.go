package events

import "github.com/catena-cni/catena/libchain/tracectx"

// TraceOf is the trace op's spans are exported in (by the agent's trace
// export, node/traces): the one it continues (continued: the runtime's,
// or that of the operation it ran inside); else, for an operation that ran
// inside a root operation (GC's teardown of one attachment), that root's
// trace; else its own root trace. A root trace's ID is
// tracectx.RootTraceID of the root operation's span. "" when op names no
// span.
func (op Op) TraceOf() (id string, continued bool) {
	switch {
	case op.TraceID != "":
		return op.TraceID, true
	case op.ParentSpanID != "":
		return tracectx.RootTraceID(op.ParentSpanID), false
	}
	return tracectx.RootTraceID(op.SpanID), false
}
