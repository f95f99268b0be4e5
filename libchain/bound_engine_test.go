package libchain

import (
	"context"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/invoke"
)

// loudExec is an Executor whose every call but the ADD of "ipam" fails
// with a 1 MiB message and 1 MiB details.
type loudExec struct{}

var _ Executor = loudExec{}

func loudErr(c Call) error {
	return types.NewError(100, c.Verb+" "+strings.Repeat("m", 1<<20), strings.Repeat("d", 1<<20))
}

func (loudExec) Add(ctx context.Context, c Call) (types.Result, error) {
	if err := invoke.AwaitStdinGate(ctx); err != nil {
		return nil, err
	}
	if c.Type == "ipam" {
		return &current.Result{CNIVersion: "1.0.0"}, nil
	}
	return nil, loudErr(c)
}

func (loudExec) Run(_ context.Context, c Call) error { return loudErr(c) }

// TestDelegateTextBoundedEverywhere: whatever an executor returns, the
// engine keeps and repeats at most about MaxText of it per delegate call:
// in the record (step errors, addError, lastError), the Op of the event
// journal, and the error it returns.
func TestDelegateTextBoundedEverywhere(t *testing.T) {
	const limit = MaxText + 64 // the marker
	h := newHarness()
	h.eng.Exec = loudExec{}
	var ops []Op
	h.eng.OnOp = func(op Op) { ops = append(ops, op) }
	r := req(chainConf(t, "1.0.0", dIPAM, dPort), "c1")

	_, err := h.eng.Add(context.Background(), r)
	require.Error(t, err)
	// Two delegates' messages: the ADD's and the failed rollback's.
	assert.Less(t, len(err.Error()), 3*limit, "the error ADD returns")
	assert.Contains(t, err.Error(), "... [truncated ")

	rec := h.record(t, r)
	texts := map[string]string{"addError": rec.AddError, "lastError": rec.LastError}
	texts["delegate 1 error"] = rec.Steps[1].Error
	texts["delegate 1 delError"] = rec.Steps[1].DelError // best-effort
	texts["delegate 0 delError"] = rec.Steps[0].DelError // required
	require.Len(t, ops, 1)
	require.NotEmpty(t, ops[0].Calls)
	for _, c := range ops[0].Calls {
		texts["op call "+c.Verb] = c.Error
	}
	for what, text := range texts {
		assert.NotEmpty(t, text, what)
		assert.Less(t, len(text), 2*limit, "%s: %.100s", what, text)
	}
	assert.Less(t, len(ops[0].Error), 3*limit, "op error")
}
