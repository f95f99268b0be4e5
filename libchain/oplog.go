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

type opKey struct{}

// opTrace collects an Op while it runs; calls may come from one goroutine
// at a time, but the mutex keeps that an implementation detail.
type opTrace struct {
	mu sync.Mutex
	op Op
}

// begin starts the trace of one operation and puts it in the context that
// the verb's delegate calls receive.
func (e *Engine) begin(ctx context.Context, verb string, key cache.Key) (context.Context, *opTrace) {
	t := &opTrace{op: Op{Verb: verb, Start: e.now()}}
	if key != (cache.Key{}) {
		t.op.Attachment = key.String()
	}
	return context.WithValue(ctx, opKey{}, t), t
}

func traceOf(ctx context.Context) *opTrace {
	t, _ := ctx.Value(opKey{}).(*opTrace)
	return t
}

// call records one delegate call; a nil trace records nothing.
func (t *opTrace) call(index int, typ, verb string, d time.Duration, err error) {
	if t == nil {
		return
	}
	c := OpCall{Index: index, Type: typ, Verb: verb, Duration: d}
	if err != nil {
		c.Error = BoundText(msgOf(err)) // the executor's own error
	}
	t.mu.Lock()
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
	attrs := []any{"verb", op.Verb, "attachment", op.Attachment, "outcome", op.Outcome,
		"duration", op.Duration, "lockWait", op.LockWait, "writes", op.Writes, "rollback", op.Rollback,
		"delegates", op.Calls, "error", op.Error, "slowThreshold", slow}
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
