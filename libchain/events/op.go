package events

import "time"

// Op is the summary of one operation: what was called, how long each call
// and the lock wait took, and how it ended. The engine (package libchain)
// fills one per operation, logs it as one line and hands it to its OnOp
// hook, which OnOp makes an Append to the journal.
type Op struct {
	Verb       string        `json:"verb"`
	Attachment string        `json:"attachment,omitempty"`
	Start      time.Time     `json:"start"`
	Duration   time.Duration `json:"durationNs"`
	LockWait   time.Duration `json:"lockWaitNs"`
	// Writes is the time the operation spent in durable writes and
	// removals of its record (each one a write or rename and an fsync),
	// WriteCount how many it made.
	Writes     time.Duration `json:"writesNs,omitempty"`
	WriteCount int           `json:"writes,omitempty"`
	Calls      []OpCall      `json:"calls,omitempty"`
	Rollback   bool          `json:"rollback,omitempty"`
	Outcome    string        `json:"outcome"`
	Error      string        `json:"error,omitempty"`
	// Truncated says that the journal's writer cut this Op's texts, or
	// dropped its calls, to fit MaxLine (encode).
	Truncated bool `json:"truncated,omitempty"`
	// Adopted names the source of the attachment that a DEL with no
	// record adopted and tore down.
	Adopted string `json:"adopted,omitempty"`
	// NetNSReplaced names the attachments this operation tore down
	// without CNI_NETNS because another namespace than the ADD's stood at
	// their netns path: their delegates freed IPs and rules and left that
	// namespace, another pod's, alone.
	NetNSReplaced []string `json:"netnsReplaced,omitempty"`
	// NoRecordRelease is set on a DEL that found no record and nothing
	// to adopt but a tombstone (Outcome "tombstone": nothing invoked), or
	// was handed the result of an ADD as its prevResult: it then DELed
	// every delegate of its config, best-effort and without CNI_NETNS
	// ("released", "partial", "failed"), or invoked nothing because
	// something else may hold what the result names ("kept"); it
	// succeeded whatever they answered.
	NoRecordRelease *OpRelease `json:"noRecordRelease,omitempty"`
	// Pod is the Kubernetes pod of the attachment, from the K8S_POD_*
	// CNI_ARGS that a CRI runtime passes; nil for any other caller.
	Pod *OpPod `json:"pod,omitempty"`
	// Process is what the operation's own process cost, from /proc; nil
	// when the operation ran in a process that makes more than one (the
	// agent, catenactl).
	Process *OpProcess `json:"process,omitempty"`

	// The operation's span, in W3C trace context terms (lowercase hex;
	// libchain/tracectx). Every operation has a SpanID, whether or not
	// it continues a trace: it names the operation in the journal, and a
	// trace started from the journal later (by the agent, for an
	// operation no runtime traced) can take it as its span's ID, which
	// no other process has seen. TraceID and Sampled are set only when
	// the operation continues a trace: the one its runtime passed catena
	// in TRACEPARENT, or that of the operation it ran inside;
	// ParentSpanID whenever the operation has a parent span.

	// TraceID is the trace the operation continues, 32 hex digits; ""
	// for none.
	TraceID string `json:"traceID,omitempty"`
	// SpanID is the operation's own span, 16 hex digits from
	// crypto/rand; its calls' spans are its children.
	SpanID string `json:"spanID,omitempty"`
	// ParentSpanID is the span the operation runs under, 16 hex digits:
	// the parent-id of the runtime's TRACEPARENT, or the SpanID of the
	// operation it ran inside (GC's teardown of one attachment runs
	// inside the network's GC). Set inside another operation whether or
	// not that one continues a trace.
	ParentSpanID string `json:"parentSpanID,omitempty"`
	// Sampled is the sampled flag of the trace continued: its caller
	// may record its own span, and asks its callees to record theirs.
	Sampled bool `json:"sampled,omitempty"`
}

// OpProcess is the catena process of one operation, as the kernel saw it
// just before the operation's end: how long the process ran before the
// operation began (exec, the Go runtime's start, reading the config;
// 10 ms resolution), the CPU its threads used and how long they waited,
// runnable, for a CPU.
type OpProcess struct {
	Startup  time.Duration `json:"startupNs"`
	CPU      time.Duration `json:"cpuNs"`
	RunDelay time.Duration `json:"runDelayNs"`
}

// OpPod names the Kubernetes pod of an operation.
type OpPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// OpRelease is what a DEL with no record released: how it ended, why
// when it invoked nothing, how many delegates it DELed, and each one
// whose DEL failed or could not be made.
type OpRelease struct {
	// Outcome: tombstone, kept, released, partial or failed.
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// WithNetNS: the delegates got the runtime's CNI_NETNS, its namespace
	// proven the ADD's (its ifname holds the result's address).
	WithNetNS bool        `json:"withNetNS,omitempty"`
	Delegates int         `json:"delegates"`
	Failed    []OpFailure `json:"failed,omitempty"`
}

// What a DEL with no record did, in OpRelease.Outcome.
const (
	// ReleaseTombstone: Catena had torn the attachment down already (a
	// tombstone said so); no delegate was invoked.
	ReleaseTombstone = "tombstone"
	// ReleaseKept: handed a result, it invoked no delegate, because
	// something else may hold what the result names (Reason says what).
	ReleaseKept = "kept"
	// ReleaseReleased: every delegate's DEL succeeded.
	ReleaseReleased = "released"
	// ReleasePartial: some delegates' DELs failed (OpRelease.Failed).
	ReleasePartial = "partial"
	// ReleaseFailed: every delegate's DEL failed.
	ReleaseFailed = "failed"
)

// ReleaseOutcomes lists every OpRelease.Outcome.
var ReleaseOutcomes = []string{ReleaseTombstone, ReleaseKept, ReleaseReleased, ReleasePartial, ReleaseFailed}

// OpFailure is one delegate's failed DEL within an OpRelease.
type OpFailure struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	Error string `json:"error"`
}

// OpCall is one delegate invocation within an Op.
type OpCall struct {
	Index    int           `json:"index"`
	Type     string        `json:"type"`
	Verb     string        `json:"verb"`
	Duration time.Duration `json:"durationNs"`
	Error    string        `json:"error,omitempty"`
	// Code is the CNI error code of a failed call (the delegate's, or
	// the one Catena gave a call it could not make); 0 for none.
	Code uint `json:"code,omitempty"`
	// Exit is the exit status of a delegate that ran and failed, -1 when
	// a signal ended it; 0 when it succeeded or did not run to its end
	// (not found, killed at its deadline).
	Exit int `json:"exit,omitempty"`
	// StartOffset is when the call began, from the operation's Start:
	// with Duration, the call's span in time.
	StartOffset time.Duration `json:"startNs,omitempty"`
	// SpanID is the call's own span, 16 hex digits from crypto/rand, a
	// child of its operation's. When the operation continues a trace,
	// the delegate was run with TRACEPARENT naming it as its parent-id,
	// so the delegate's own spans nest under the call. A VERSION call
	// has one too, but its delegate gets no trace context.
	SpanID string `json:"spanID,omitempty"`
}
