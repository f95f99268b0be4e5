package libchain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

func TestOperationSummary(t *testing.T) {
	tests := []struct {
		name      string
		failAdd   string
		fail      behaviour
		wantOut   string
		wantCalls []string
		// wantFailed is the failed call's error, code and exit status.
		wantFailed *OpCall
		rollback   bool
	}{
		{name: "success", wantOut: "ok", wantCalls: []string{"ADD ipam", "ADD portmap"}},
		{name: "failure and rollback", failAdd: "portmap", fail: behaviour{failAdd: true}, wantOut: "error",
			wantCalls: []string{"ADD ipam", "ADD portmap", "DEL portmap", "DEL ipam"}, rollback: true,
			wantFailed: &OpCall{Error: "portmap ADD failed on purpose", Code: 100}},
		{name: "a delegate's exit status and code", failAdd: "portmap", fail: behaviour{failAdd: true, code: 11, exit: 3}, wantOut: "error",
			wantCalls: []string{"ADD ipam", "ADD portmap", "DEL portmap", "DEL ipam"}, rollback: true,
			wantFailed: &OpCall{Error: "portmap ADD failed on purpose", Code: 11, Exit: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			var logs bytes.Buffer
			h.eng.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			var ops []Op
			h.eng.OnOp = func(op Op) { ops = append(ops, op) }
			if tc.failAdd != "" {
				h.exec.set(tc.failAdd, tc.fail)
			}
			r := req(chainConf(t, "1.0.0", dIPAM, dPort), "c1")
			_, err := h.eng.Add(context.Background(), r)
			require.Equal(t, tc.failAdd != "", err != nil, "err: %v", err)

			require.Len(t, ops, 1)
			op := ops[0]
			assert.Equal(t, "ADD", op.Verb)
			assert.Equal(t, r.Key().String(), op.Attachment)
			assert.Equal(t, tc.wantOut, op.Outcome)
			assert.Equal(t, tc.rollback, op.Rollback)
			var calls []string
			for _, c := range op.Calls {
				calls = append(calls, c.Verb+" "+c.Type)
			}
			assert.Equal(t, tc.wantCalls, calls)
			for _, c := range op.Calls {
				if c.Verb == "ADD" && c.Type == tc.failAdd {
					require.NotNil(t, tc.wantFailed)
					assert.Equal(t, *tc.wantFailed, OpCall{Error: c.Error, Code: c.Code, Exit: c.Exit}, "the failed call")
					continue
				}
				assert.Equal(t, OpCall{}, OpCall{Error: c.Error, Code: c.Code, Exit: c.Exit}, "%s %s succeeded", c.Verb, c.Type)
			}
			saves, removes := h.store.counts()
			assert.Positive(t, saves)
			assert.Equal(t, saves+removes, op.WriteCount, "every durable write and removal of the record is counted")
			assert.GreaterOrEqual(t, op.Writes, time.Duration(0))

			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			var last map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
			assert.Equal(t, "ADD", last["verb"])
			assert.Equal(t, tc.wantOut, last["outcome"])
			assert.Len(t, last["delegates"], len(tc.wantCalls))
		})
	}
}

// TestOperationsNameThePod: ADD, CHECK and DEL each journal the pod that
// CNI_ARGS names.
func TestOperationsNameThePod(t *testing.T) {
	h := newHarness()
	var ops []Op
	h.eng.OnOp = func(op Op) { ops = append(ops, op) }
	r := req(chainConf(t, "1.0.0", dIPAM, dPort), "c1")
	r.Args.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_UID=u1"
	_, err := h.eng.Add(context.Background(), r)
	require.NoError(t, err)
	require.NoError(t, h.eng.Check(context.Background(), r))
	require.NoError(t, h.eng.Del(context.Background(), r))
	require.Len(t, ops, 3)
	for i, verb := range []string{"ADD", "CHECK", "DEL"} {
		assert.Equal(t, verb, ops[i].Verb)
		if assert.NotNil(t, ops[i].Pod, verb) {
			assert.Equal(t, "default", ops[i].Pod.Namespace, verb)
			assert.Equal(t, "web-1", ops[i].Pod.Name, verb)
		}
	}
}

func TestSlowOperationWarns(t *testing.T) {
	h := newHarness()
	var logs bytes.Buffer
	h.eng.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.eng.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	conf := chainConf(t, "1.0.0", dIPAM)
	conf.SlowThreshold = 3 * time.Second
	_, err := h.eng.Add(context.Background(), req(conf, "c1"))
	require.NoError(t, err)
	assert.Contains(t, logs.String(), `"msg":"slow operation"`)

	logs.Reset()
	conf.SlowThreshold = time.Hour
	require.NoError(t, h.eng.Del(context.Background(), req(conf, "c1")))
	assert.Empty(t, logs.String(), "a fast, successful operation logs nothing at warn level")
}

// TestJournalHalvesBoundTexts: an operation whose delegate texts are each
// bounded to MaxText, too long for a journal line as it is but not once
// they are cut to half of that, is journaled with each cut to half of
// MaxText, no shorter: the journal's first cut follows the engine's bound.
func TestJournalHalvesBoundTexts(t *testing.T) {
	dir := t.TempDir()
	text := BoundText(strings.Repeat("<", 2*MaxText)) // written \u003c: six bytes each
	op := Op{Verb: "ADD", Attachment: "podnet/c1/eth0", Outcome: "error", Error: text}
	for i := range 2 {
		op.Calls = append(op.Calls, OpCall{Index: i, Type: "bridge", Verb: "DEL", Error: text})
	}
	require.Greater(t, 3*6*MaxText, events.MaxLine, "too long as it is")
	require.Less(t, 3*6*MaxText/2+1024, events.MaxLine, "short enough once halved")
	require.NoError(t, (&events.Writer{CacheDir: dir}).Append(op))
	ops, skipped, err := events.Read(afero.NewOsFs(), dir, time.Time{})
	require.NoError(t, err)
	require.Zero(t, skipped.Lines)
	require.Len(t, ops, 1)
	half := strings.Repeat("<", MaxText/2) + fmt.Sprintf("... [truncated %d bytes]", len(text)-MaxText/2)
	assert.True(t, ops[0].Truncated)
	assert.Equal(t, half, ops[0].Error)
	for _, c := range ops[0].Calls {
		assert.Equal(t, half, c.Error)
	}
}
