package events

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/internal/textbound"
)

// TestAppendBoundsLines: whatever texts an operation carries, Append
// writes it as one line of at most MaxLine bytes that Read
// reads back: a line that fits is written as is; else the texts are cut
// (a failed call keeps an error), else a minimal line keeps the verb,
// attachment, outcome and pod; a shrunk line says truncated.
func TestAppendBoundsLines(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lt := textbound.Cut(strings.Repeat("<", 10000), textBound) // as the engine keeps a delegate's error
	pod := &OpPod{Namespace: "ns", Name: "web", UID: "u1"}
	base := Op{Verb: "ADD", Attachment: "podnet/c1/eth0", Start: t0, Outcome: "error", Rollback: true, Pod: pod}
	withCalls := func(op Op, calls ...OpCall) Op { op.Calls = calls; return op }
	many := make([]OpCall, 2000)
	for i := range many {
		many[i] = OpCall{Index: i, Type: fmt.Sprintf("delegate-%d", i), Verb: "DEL", Error: "x"}
	}
	longKey := base
	longKey.Attachment = "podnet/" + strings.Repeat("a", 100<<10) + "/eth0"
	tests := []struct {
		name      string
		op        Op
		truncated bool
		calls     int // calls kept
	}{
		{"short", withCalls(base, OpCall{Type: "bridge", Verb: "ADD", Error: "boom"}), false, 1},
		{"long escaped errors", withCalls(func() Op { o := base; o.Error = lt + lt; return o }(),
			OpCall{Index: 0, Type: "bridge", Verb: "ADD"}, OpCall{Index: 1, Type: "seed", Verb: "ADD", Error: lt},
			OpCall{Index: 1, Type: "seed", Verb: "DEL", Error: lt}, OpCall{Index: 0, Type: "bridge", Verb: "DEL", Error: lt}), true, 4},
		{"thousands of calls", withCalls(base, many...), true, 0},
		{"an attachment longer than a line", longKey, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "catena")
			j := &Writer{CacheDir: dir}
			require.NoError(t, j.Append(tt.op))
			raw, err := afero.ReadFile(afero.NewOsFs(), Path(dir))
			require.NoError(t, err)
			t.Logf("%d bytes", len(raw))
			assert.LessOrEqual(t, len(raw), MaxLine+1)
			assert.Equal(t, 1, strings.Count(string(raw), "\n"))

			ops, skipped, err := Read(afero.NewOsFs(), dir, time.Time{})
			require.NoError(t, err)
			assert.Zero(t, skipped)
			require.Len(t, ops, 1)
			got := ops[0]
			assert.Equal(t, tt.truncated, got.Truncated)
			assert.Equal(t, tt.op.Verb, got.Verb)
			assert.Equal(t, tt.op.Outcome, got.Outcome)
			assert.Equal(t, tt.op.Rollback, got.Rollback)
			assert.True(t, tt.op.Start.Equal(got.Start))
			require.Equal(t, tt.calls, len(got.Calls), "calls kept")
			for i, c := range got.Calls {
				want := tt.op.Calls[i]
				assert.Equal(t, want.Error == "", c.Error == "", "call %d keeps whether it failed", i)
				if c.Error != want.Error {
					kept, _, cut := strings.Cut(c.Error, "... [truncated ")
					assert.True(t, cut && strings.HasPrefix(want.Error, kept), "call %d: %q is a cut of its error", i, c.Error)
				}
			}
			if tt.op.Attachment == longKey.Attachment {
				assert.True(t, strings.HasPrefix(got.Attachment, "podnet/aaa"), "cut, not dropped")
				return
			}
			assert.Equal(t, tt.op.Attachment, got.Attachment)
			assert.Equal(t, pod, got.Pod)
		})
	}
}

// TestEncodeEventCutsNoMoreThanNeeded: a line over the bound keeps as much
// of each text as fits at the largest cut that fits.
func TestEncodeEventCutsNoMoreThanNeeded(t *testing.T) {
	op := Op{Verb: "DEL", Attachment: "podnet/c1/eth0", Outcome: "error", Error: strings.Repeat("<", textBound),
		Calls: []OpCall{{Type: "bridge", Verb: "DEL", Error: strings.Repeat("<", textBound)}}}
	full, err := encode(op, 1<<20)
	require.NoError(t, err)
	require.Greater(t, len(full), 2*6*textBound, "two texts of textBound '<', six bytes each")

	line, err := encode(op, 2*6*textBound)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(line)-1, 2*6*textBound)
	assert.Contains(t, string(line), `"truncated":true`)
	assert.Contains(t, string(line), strings.Repeat(`\u003c`, textBound/2)+`... [truncated 2048 bytes]`, "cut to half, the first cut that fits")
}

// TestAppendKeepsNoRecordRelease: what a DEL with no record released
// survives the bound: as is when it fits; its failures' errors cut, each
// still a cut of its error, when they do not; in the minimal line, each
// failure kept with a marker for its error.
func TestAppendKeepsNoRecordRelease(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lt := textbound.Cut(strings.Repeat("<", 10000), textBound)
	release := func(errs ...string) *OpRelease {
		r := &OpRelease{Delegates: 3}
		for i, e := range errs {
			r.Failed = append(r.Failed, OpFailure{Index: i, Type: fmt.Sprintf("delegate-%d", i), Error: e})
		}
		return r
	}
	many := make([]OpCall, 2000)
	for i := range many {
		many[i] = OpCall{Index: i, Type: fmt.Sprintf("delegate-%d", i), Verb: "DEL", Error: "x"}
	}
	tests := []struct {
		name      string
		release   *OpRelease
		calls     []OpCall
		truncated bool
	}{
		{"fits", release("boom"), nil, false},
		{"long escaped failures", release(lt, lt, lt), nil, true},
		{"a minimal line", release(lt, "boom"), many, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "catena")
			op := Op{Verb: "DEL", Attachment: "podnet/c1/eth0", Start: t0, Outcome: "ok", Calls: tt.calls, NoRecordRelease: tt.release}
			require.NoError(t, (&Writer{CacheDir: dir}).Append(op))
			ops, skipped, err := Read(afero.NewOsFs(), dir, time.Time{})
			require.NoError(t, err)
			assert.Zero(t, skipped)
			require.Len(t, ops, 1)
			got := ops[0]
			assert.Equal(t, tt.truncated, got.Truncated)
			require.NotNil(t, got.NoRecordRelease, "the release is kept")
			assert.Equal(t, tt.release.Delegates, got.NoRecordRelease.Delegates)
			require.Len(t, got.NoRecordRelease.Failed, len(tt.release.Failed), "every failure is kept")
			for i, f := range got.NoRecordRelease.Failed {
				want := tt.release.Failed[i]
				assert.Equal(t, want.Index, f.Index)
				assert.Equal(t, want.Type, f.Type)
				require.NotEmpty(t, f.Error, "failure %d keeps an error", i)
				if f.Error != want.Error {
					kept, _, cut := strings.Cut(f.Error, "... [truncated ")
					assert.True(t, cut && strings.HasPrefix(want.Error, kept), "failure %d: %q is a cut of its error", i, f.Error)
				}
			}
		})
	}
}

// TestAppendKeepsTrace: an operation's trace fields and its calls' spans
// and offsets are read back as written; a line cut to its minimal form
// still keeps the operation's trace, span and parent, so that its span
// can be built even when its calls were dropped.
func TestAppendKeepsTrace(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	base := Op{Verb: "ADD", Attachment: "podnet/c1/eth0", Start: t0, Outcome: "ok",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", ParentSpanID: "b7ad6b7169203331", Sampled: true}
	many := make([]OpCall, 2000)
	for i := range many {
		many[i] = OpCall{Index: i, Type: fmt.Sprintf("delegate-%d", i), Verb: "ADD", StartOffset: time.Duration(i+1) * time.Millisecond,
			SpanID: fmt.Sprintf("%016x", i+1)}
	}
	tests := []struct {
		name      string
		calls     []OpCall
		truncated bool
	}{
		{"fits", many[:3], false},
		{"a minimal line", many, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "catena")
			op := base
			op.Calls = tt.calls
			require.NoError(t, (&Writer{CacheDir: dir}).Append(op))
			ops, skipped, err := Read(afero.NewOsFs(), dir, time.Time{})
			require.NoError(t, err)
			assert.Zero(t, skipped)
			require.Len(t, ops, 1)
			got := ops[0]
			assert.Equal(t, tt.truncated, got.Truncated)
			assert.Equal(t, base.TraceID, got.TraceID)
			assert.Equal(t, base.SpanID, got.SpanID)
			assert.Equal(t, base.ParentSpanID, got.ParentSpanID)
			assert.True(t, got.Sampled)
			if !tt.truncated {
				assert.Equal(t, tt.calls, got.Calls, "each call's span and start offset")
			}
		})
	}
}
