package events

import (
	"encoding/json"
	"fmt"

	"github.com/catena-cni/catena/libchain/internal/textbound"
)

// textBound is the bound to which the engine cuts each text a delegate
// controls before it reaches an Op (libchain.MaxText): encode's first cut
// keeps half of it.
const textBound = textbound.Max

// encode returns op's journal line, newline included, of at most limit
// bytes before the newline. An Op is a few hundred bytes plus the texts
// delegates control, each bounded to textBound before it is encoded;
// escaping can grow a text sixfold (a '<' is written \u003c), and an
// operation carries one per failed call and its own error. When op does
// not fit, its error texts are cut shorter and shorter: each keeps a
// marker of what was dropped, and a failed call keeps a non-empty error,
// so that a reader still sees which delegate failed. If even that does
// not fit (a chain of hundreds of delegates), a minimal line keeps what
// the readers count and map the operation by: verb, attachment, start,
// durations, rollback, outcome, pod, its trace and span IDs and a
// release's count of delegates (with its failures, their errors cut to a
// marker, while they fit). A line the writer shrank says so: its
// Truncated is set.
func encode(op Op, limit int) ([]byte, error) {
	line, err := json.Marshal(op)
	if err != nil {
		return nil, fmt.Errorf("encoding %s of %s: %w", op.Verb, op.Attachment, err)
	}
	if len(line) <= limit {
		return append(line, '\n'), nil
	}
	op.Truncated = true
	for keep := textBound / 2; ; keep /= 2 {
		if line, err = fitEvent(cutTexts(op, keep), limit); line != nil || err != nil {
			return line, err
		}
		if keep == 0 {
			break
		}
	}
	minimal := Op{Verb: op.Verb, Attachment: op.Attachment, Start: op.Start, Duration: op.Duration,
		LockWait: op.LockWait, Rollback: op.Rollback, Outcome: op.Outcome, Error: textbound.Cut(op.Error, 0),
		Adopted: op.Adopted, Pod: op.Pod, NoRecordRelease: cutRelease(op.NoRecordRelease, 0), Truncated: true,
		TraceID: op.TraceID, SpanID: op.SpanID, ParentSpanID: op.ParentSpanID, Sampled: op.Sampled}
	if line, err = fitEvent(minimal, limit); line != nil || err != nil {
		return line, err
	}
	// The attachment (a container ID has no bound), the pod (from
	// CNI_ARGS) or a release's failures are what does not fit.
	minimal.Attachment, minimal.Adopted, minimal.Pod = textbound.Cut(op.Attachment, textBound), "", nil
	if r := op.NoRecordRelease; r != nil {
		minimal.NoRecordRelease = &OpRelease{Outcome: r.Outcome, Delegates: r.Delegates}
	}
	if line, err = fitEvent(minimal, limit); line != nil || err != nil {
		return line, err
	}
	return nil, fmt.Errorf("%s of %s does not fit in a line of %d bytes", op.Verb, textbound.Cut(op.Attachment, 64), limit)
}

// fitEvent returns op's line if it is at most limit bytes, else nil.
func fitEvent(op Op, limit int) ([]byte, error) {
	line, err := json.Marshal(op)
	if err != nil {
		return nil, fmt.Errorf("encoding %s of %s: %w", op.Verb, op.Attachment, err)
	}
	if len(line) > limit {
		return nil, nil
	}
	return append(line, '\n'), nil
}

// cutTexts returns op with its error, each call's error and each of its
// release's failures cut to keep bytes (textbound.Cut); op's calls and
// release are not changed.
func cutTexts(op Op, keep int) Op {
	op.Error = textbound.Cut(op.Error, keep)
	calls := make([]OpCall, len(op.Calls))
	for i, c := range op.Calls {
		c.Error = textbound.Cut(c.Error, keep)
		calls[i] = c
	}
	if op.Calls != nil {
		op.Calls = calls
	}
	op.NoRecordRelease = cutRelease(op.NoRecordRelease, keep)
	return op
}

// cutRelease returns a copy of r with its reason and each failure's error
// cut to keep bytes; nil for nil.
func cutRelease(r *OpRelease, keep int) *OpRelease {
	if r == nil {
		return nil
	}
	out := &OpRelease{Outcome: r.Outcome, Reason: textbound.Cut(r.Reason, keep), Delegates: r.Delegates}
	for _, f := range r.Failed {
		f.Error = textbound.Cut(f.Error, keep)
		out.Failed = append(out.Failed, f)
	}
	return out
}
