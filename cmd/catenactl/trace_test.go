package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/clitest"
	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/libchain/tracectx"
)

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
	// testRootTraceID is tracectx.RootTraceID(testSpanID).
	testRootTraceID = "c808dd8484a83bf9224c1502b076b17e"
)

// waterfall renders op as trace's text output does.
func waterfall(op events.Op) string {
	var b bytes.Buffer
	p := &printer{w: &b}
	printWaterfall(p, traceOpOf(op))
	return b.String()
}

func TestWaterfall(t *testing.T) {
	start := time.Date(2026, 12, 3, 5, 40, 1, 123456789, time.FixedZone("CET", 3600))
	long := strings.Repeat("x", 100)
	tests := []struct {
		name string
		op   events.Op
		want []string
	}{{
		name: "lock wait, calls and writes; a sampled trace continued",
		op: events.Op{Verb: "ADD", Start: start, Duration: 80 * ms, LockWait: 2 * ms, Writes: 1900 * time.Microsecond, WriteCount: 3,
			Outcome: "ok", TraceID: testTraceID, Sampled: true, SpanID: testSpanID,
			Calls: []events.OpCall{
				{Index: 0, Type: "bridge", Verb: "ADD", StartOffset: 2 * ms, Duration: 40 * ms},
				{Index: 1, Type: "portmap", Verb: "ADD", StartOffset: 44 * ms, Duration: 30 * ms},
			}},
		want: []string{
			"ADD      2026-12-03T04:40:01.123Z  total 80ms  ok  trace " + testTraceID + " (continued, sampled)",
			"        +0s       2ms  lock wait                 [=                                       ]",
			"       +2ms      40ms  ADD bridge (0)            [ ====================                   ]  ok",
			"      +44ms      30ms  ADD portmap (1)           [                      ===============   ]  ok",
			"  writes 3, 1.9ms",
		},
	}, {
		name: "a failed ADD rolled back; the root trace of its span",
		op: events.Op{Verb: "ADD", Start: start, Duration: 50 * ms, Writes: ms, WriteCount: 2,
			Outcome: "error", Error: "delegate 1 (failer) ADD failed: boom", Rollback: true, SpanID: testSpanID,
			Calls: []events.OpCall{
				{Index: 0, Type: "bridge", Verb: "ADD", StartOffset: 5 * ms, Duration: 10 * ms},
				{Index: 1, Type: "failer", Verb: "ADD", StartOffset: 15 * ms, Duration: 5 * ms, Error: "boom\nsecond line"},
				{Index: 0, Type: "bridge", Verb: "DEL", StartOffset: 25 * ms, Duration: 20 * ms},
			}},
		want: []string{
			"ADD      2026-12-03T04:40:01.123Z  total 50ms  error, rolled back  trace " + testRootTraceID + " (root, if exported)",
			"        +0s        0s  lock wait                 [                                        ]",
			"       +5ms      10ms  ADD bridge (0)            [    ========                            ]  ok",
			"      +15ms       5ms  ADD failer (1)            [            ====                        ]  error: boom\\nsecond line",
			"      +25ms      20ms  DEL bridge (0)            [                    ================    ]  ok, rollback",
			"  writes 2, 1ms",
			"  error: delegate 1 (failer) ADD failed: boom",
		},
	}, {
		name: "no calls, no span",
		op:   events.Op{Verb: "DEL", Start: start, Duration: 3 * ms, Outcome: "ok"},
		want: []string{
			"DEL      2026-12-03T04:40:01.123Z  total 3ms  ok  trace -",
			"        +0s        0s  lock wait                 [                                        ]",
		},
	}, {
		name: "an unsampled trace continued",
		op: events.Op{Verb: "GC", Start: start, Duration: 4 * ms, LockWait: ms, Outcome: "ok", TraceID: testTraceID, SpanID: testSpanID,
			Calls: []events.OpCall{{Index: 0, Type: "bridge", Verb: "GC", StartOffset: ms, Duration: 3 * ms}}},
		want: []string{
			"GC       2026-12-03T04:40:01.123Z  total 4ms  ok  trace " + testTraceID + " (continued, unsampled)",
			"        +0s       1ms  lock wait                 [==========                              ]",
			"       +1ms       3ms  GC bridge (0)             [          ==============================]  ok",
		},
	}, {
		name: "a call past the operation's end widens the scale; a negative start is the start",
		op: events.Op{Verb: "CHECK", Start: start, Duration: 10 * ms, LockWait: 5 * ms, Outcome: "ok",
			Calls: []events.OpCall{
				{Index: 0, Type: "bridge", Verb: "CHECK", StartOffset: 5 * ms, Duration: 15 * ms},
				{Index: 1, Type: "tuning", Verb: "CHECK", StartOffset: -3 * ms, Duration: 2 * ms},
			}},
		want: []string{
			"CHECK    2026-12-03T04:40:01.123Z  total 10ms  ok  trace -",
			"        +0s       5ms  lock wait                 [==========                              ]",
			"       +5ms      15ms  CHECK bridge (0)          [          ==============================]  ok",
			"        +0s       2ms  CHECK tuning (1)          [====                                    ]  ok",
		},
	}, {
		name: "hostile and long texts escaped and cut",
		op: events.Op{Verb: "ADD\x1b[2J", Start: start, Duration: 2 * ms, Outcome: "error", Truncated: true,
			Error:   strings.Repeat("e", 300),
			TraceID: "\x1b]0;owned\x07" + long,
			Calls:   []events.OpCall{{Index: 0, Type: "evil\x1b]0;owned\x07", Verb: "ADD", Duration: 2 * ms, Error: long + "\x1b[2J"}}},
		want: []string{
			`ADD\x1b[2J  2026-12-03T04:40:01.123Z  total 2ms  error  trace \x1b]0;owned\x07xxxxxxxxxxxxx... (continued, unsampled)`,
			"  (the journal cut this operation's texts or dropped its calls to fit a line)",
			"        +0s        0s  lock wait                 [                                        ]",
			`        +0s       2ms  ADD evil\x1b]0;owned\...  [========================================]  error: ` + long[:77] + "...",
			"  error: " + strings.Repeat("e", 197) + "...",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := waterfall(tt.op)
			assert.Equal(t, strings.Join(tt.want, "\n")+"\n", got)
			clitest.AssertTerminalSafe(t, got, "the waterfall")
		})
	}
}

func TestBar(t *testing.T) {
	// cells renders the expected bar: '=' from cell from to cell to.
	cells := func(from, to int) string {
		return strings.Repeat(" ", from) + strings.Repeat("=", to-from) + strings.Repeat(" ", barWidth-to)
	}
	tests := []struct {
		name             string
		offset, d, scale time.Duration
		want             string
	}{
		{"no time taken", 10 * ms, 0, 100 * ms, cells(0, 0)},
		{"the whole operation", 0, 100 * ms, 100 * ms, cells(0, 40)},
		{"the cells it touches, partly or wholly", 10 * ms, 6 * ms, 100 * ms, cells(4, 7)},
		{"on cell boundaries", 25 * ms, 25 * ms, 100 * ms, cells(10, 20)},
		{"a negative start is the start", -5 * ms, 5 * ms, 100 * ms, cells(0, 2)},
		{"too short for float64 still one cell", 1 << 61, 1, 1 << 62, cells(20, 21)},
		{"no scale", 0, ms, 0, cells(0, 40)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, bar(tt.offset, tt.d, float64(tt.scale)))
		})
	}
}

func TestTraceOpOf(t *testing.T) {
	op := traceOpOf(events.Op{Verb: "ADD", Duration: 9 * ms, LockWait: ms, Outcome: "error", Rollback: true, SpanID: testSpanID,
		ParentSpanID: "b7ad6b7169203331",
		Calls: []events.OpCall{
			{Index: 0, Type: "bridge", Verb: "DEL", StartOffset: ms, Duration: ms, SpanID: "1111111111111111"}, // before the failure: not the rollback's
			{Index: 0, Type: "bridge", Verb: "ADD", StartOffset: 2 * ms, Duration: ms},
			{Index: 1, Type: "failer", Verb: "ADD", StartOffset: 3 * ms, Duration: ms, Error: "boom"},
			{Index: 0, Type: "bridge", Verb: "DEL", StartOffset: 4 * ms, Duration: ms},
		}})
	// It ran inside a root operation: that one's root trace.
	assert.Equal(t, &traceRef{ID: tracectx.RootTraceID("b7ad6b7169203331"), Kind: traceRoot}, op.Trace)
	assert.Equal(t, "b7ad6b7169203331", op.ParentSpanID)
	require.Len(t, op.Steps, 5)
	assert.Equal(t, traceStep{Kind: stepLockWait, Duration: ms}, op.Steps[0])
	zero, one := 0, 1
	assert.Equal(t, traceStep{Kind: stepCall, Offset: ms, Duration: ms, Index: &zero, Type: "bridge", Verb: "DEL", SpanID: "1111111111111111"}, op.Steps[1])
	assert.Equal(t, traceStep{Kind: stepCall, Offset: 3 * ms, Duration: ms, Index: &one, Type: "failer", Verb: "ADD", Error: "boom"}, op.Steps[3])
	assert.Equal(t, []bool{false, false, false, false, true}, []bool{op.Steps[0].Rollback, op.Steps[1].Rollback,
		op.Steps[2].Rollback, op.Steps[3].Rollback, op.Steps[4].Rollback}, "only the DEL after the failed ADD")
}

// writeTraceEvents fills the fixture's event journal with operations of
// podnet/c1/eth0 (an ADD, an ADD that failed and was rolled back, a DEL
// that waited for its lock, a GC of it), one of podnet/c1/net1, one of
// podnet/c2/eth0 and a GC of the whole network; the DEL is journaled
// after the GC that started later.
func writeTraceEvents(t *testing.T, f *fixture) {
	t.Helper()
	j := &events.Writer{CacheDir: f.cacheDir}
	at := func(ago time.Duration) time.Time { return f.now.Add(-ago) }
	bridge := func(verb string, off, d time.Duration) events.OpCall {
		return events.OpCall{Index: 0, Type: "bridge", Verb: verb, StartOffset: off, Duration: d}
	}
	for _, op := range []events.Op{
		{Verb: "ADD", Attachment: "podnet/c1/eth0", Start: at(50 * time.Minute), Duration: 20 * ms, Outcome: "ok", SpanID: testSpanID,
			TraceID: testTraceID, Sampled: true, WriteCount: 3, Writes: 2 * ms, Calls: []events.OpCall{bridge("ADD", ms, 10*ms)}},
		{Verb: "ADD", Attachment: "podnet/c1/net1", Start: at(45 * time.Minute), Duration: 5 * ms, Outcome: "ok"},
		{Verb: "ADD", Attachment: "podnet/c1/eth0", Start: at(40 * time.Minute), Duration: 40 * ms, Outcome: "error", Rollback: true,
			Error: "delegate 1 (failer) ADD failed: boom", SpanID: testSpanID,
			Calls: []events.OpCall{bridge("ADD", 0, 10*ms),
				{Index: 1, Type: "failer", Verb: "ADD", StartOffset: 10 * ms, Duration: 10 * ms, Error: "boom"},
				bridge("DEL", 20*ms, 20*ms)}},
		{Verb: "ADD", Attachment: "podnet/c2/eth0", Start: at(35 * time.Minute), Duration: 5 * ms, Outcome: "ok"},
		{Verb: "GC", Start: at(30 * time.Minute), Duration: 5 * ms, Outcome: "ok"},
		{Verb: "GC", Attachment: "podnet/c1/eth0", Start: at(20 * time.Minute), Duration: 4 * ms, Outcome: "ok",
			Calls: []events.OpCall{bridge("DEL", ms, 3*ms)}},
		{Verb: "DEL", Attachment: "podnet/c1/eth0", Start: at(25 * time.Minute), Duration: 8 * ms, LockWait: 4 * ms, Outcome: "ok",
			Calls: []events.OpCall{bridge("DEL", 4*ms, 4*ms)}},
	} {
		require.NoError(t, j.Append(op))
	}
}

func TestTraceText(t *testing.T) {
	f := newFixture(t)
	writeTraceEvents(t, f)
	hdr := func(ago time.Duration) string {
		return f.now.Add(-ago).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	out, stderr, code := f.run("trace", "c1", "--ifname", "eth0", "--last", "3")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, strings.Join([]string{
		"podnet/c1/eth0: the last 3 of 4 operation(s) in the event journal",
		"",
		"ADD      " + hdr(40*time.Minute) + "  total 40ms  error, rolled back  trace " + testRootTraceID + " (root, if exported)",
		"        +0s        0s  lock wait                 [                                        ]",
		"        +0s      10ms  ADD bridge (0)            [==========                              ]  ok",
		"      +10ms      10ms  ADD failer (1)            [          ==========                    ]  error: boom",
		"      +20ms      20ms  DEL bridge (0)            [                    ====================]  ok, rollback",
		"  error: delegate 1 (failer) ADD failed: boom",
		"",
		"DEL      " + hdr(25*time.Minute) + "  total 8ms  ok  trace -",
		"        +0s       4ms  lock wait                 [====================                    ]",
		"       +4ms       4ms  DEL bridge (0)            [                    ====================]  ok",
		"",
		"GC       " + hdr(20*time.Minute) + "  total 4ms  ok  trace -",
		"        +0s        0s  lock wait                 [                                        ]",
		"       +1ms       3ms  DEL bridge (0)            [          ==============================]  ok",
		"",
	}, "\n"), out, "the last 3 by start, the GC of the attachment included")

	out, stderr, code = f.run("trace", "c1", "--network", "podnet", "--ifname", "eth0")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "podnet/c1/eth0: the last 4 of 4 operation(s) in the event journal\n\nADD      "+hdr(50*time.Minute)+
		"  total 20ms  ok  trace "+testTraceID+" (continued, sampled)\n", "--last 5 by default")
	assert.Contains(t, out, "  writes 3, 2ms\n")

	out, stderr, code = f.run("trace", "c2", "--since", "30m")
	require.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, `catenactl: no operation of container "c2" that started within the last 30m0s in the event journal `+
		events.Path(f.cacheDir)+" (it keeps only its latest 4 to 8 MiB)\n", stderr)

	out, stderr, code = f.run("trace", "c2", "--since", "40m")
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(out, "podnet/c2/eth0: the last 1 of 1 operation(s) in the event journal\n"), out)
}

func TestTraceJSON(t *testing.T) {
	f := newFixture(t)
	writeTraceEvents(t, f)
	out, stderr, code := f.run("trace", "c1", "--ifname", "eth0", "--last", "2", "--json")
	require.Equal(t, 0, code, stderr)
	got := decodeJSON[map[string]any](t, out)
	assert.Equal(t, "podnet/c1/eth0", got["attachment"])
	assert.Equal(t, float64(4), got["matched"])
	assert.Equal(t, float64(0), got["unreadableEventLines"])
	ops := got["operations"].([]any)
	require.Len(t, ops, 2)
	del := ops[0].(map[string]any)
	assert.Equal(t, "DEL", del["verb"])
	assert.Equal(t, f.now.Add(-25*time.Minute).UTC().Format(time.RFC3339Nano), del["start"])
	assert.Equal(t, []any{
		map[string]any{"kind": "lock-wait", "startNs": float64(0), "durationNs": float64(4 * ms)},
		map[string]any{"kind": "call", "startNs": float64(4 * ms), "durationNs": float64(4 * ms), "index": float64(0), "type": "bridge", "verb": "DEL"},
	}, del["steps"])
	assert.NotContains(t, del, "trace", "an operation without a span has no trace")

	out, stderr, code = f.run("trace", "c1", "--ifname", "eth0", "--last", "10", "--json")
	require.Equal(t, 0, code, stderr)
	var all traceOutput
	require.NoError(t, json.Unmarshal([]byte(out), &all))
	require.Len(t, all.Operations, 4)
	assert.Equal(t, &traceRef{ID: testTraceID, Kind: traceContinued, Sampled: true}, all.Operations[0].Trace)
	assert.Equal(t, &traceRef{ID: testRootTraceID, Kind: traceRoot}, all.Operations[1].Trace)
	assert.Equal(t, "delegate 1 (failer) ADD failed: boom", all.Operations[1].Error)
	assert.True(t, all.Operations[1].Steps[3].Rollback)
	assert.Equal(t, 3, all.Operations[0].WriteCount)
}

func TestTraceErrors(t *testing.T) {
	f := newFixture(t)
	writeTraceEvents(t, f)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"an unknown container", []string{"trace", "nope"}, 1,
			`no operation of container "nope" in the event journal ` + events.Path(f.cacheDir)},
		{"an unknown ifname", []string{"trace", "c1", "--ifname", "eth9"}, 1,
			`no operation of container "c1" with ifname "eth9" in the event journal`},
		{"an unknown network", []string{"trace", "c1", "--network", "other", "--ifname", "eth0"}, 1,
			`no operation of container "c1" on network "other" with ifname "eth0" in the event journal`},
		{"several attachments", []string{"trace", "c1"}, 2,
			`the event journal holds operations of 2 attachments of container "c1": pass --network or --ifname (one of: podnet/c1/eth0, podnet/c1/net1)`},
		{"no container", []string{"trace"}, 2, "accepts 1 arg(s), received 0"},
		{"--last 0", []string{"trace", "c1", "--last", "0"}, 2, "--last must be at least 1, not 0"},
		{"a negative --since", []string{"trace", "c1", "--since", "-1m"}, 2, "--since must not be negative, not -1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := f.run(tt.args...)
			assert.Equal(t, tt.wantCode, code, stderr)
			assert.Empty(t, out)
			assert.Contains(t, stderr, "catenactl: "+tt.wantErr)
		})
	}

	t.Run("no journal", func(t *testing.T) {
		g := newFixture(t)
		_, stderr, code := g.run("trace", "c1")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, `no operation of container "c1" in the event journal`)
	})
	t.Run("many attachments: the first named, the rest counted", func(t *testing.T) {
		g := newFixture(t)
		j := &events.Writer{CacheDir: g.cacheDir}
		for i := range 10 {
			require.NoError(t, j.Append(events.Op{Verb: "ADD", Attachment: fmt.Sprintf("podnet/c1/net%d", i), Start: g.now, Outcome: "ok"}))
		}
		_, stderr, code := g.run("trace", "c1")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "holds operations of 10 attachments of container \"c1\": pass --network or --ifname (one of: "+
			"podnet/c1/net0, podnet/c1/net1, podnet/c1/net2, podnet/c1/net3, podnet/c1/net4, podnet/c1/net5, podnet/c1/net6, podnet/c1/net7 and 2 more)\n")
	})
	t.Run("a journal that is not catena's", func(t *testing.T) {
		g := newFixture(t)
		writeTraceEvents(t, g)
		require.NoError(t, os.Chmod(events.Path(g.cacheDir), 0o666))
		_, stderr, code := g.run("trace", "c1", "--ifname", "eth0")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "read event journal "+events.Path(g.cacheDir))
	})
}

// TestTraceHostileText: what the journal holds reaches the terminal escaped
// and cut, on stdout and stderr; JSON carries it whole.
func TestTraceHostileText(t *testing.T) {
	f := newFixture(t)
	ifname := "e\x1b[31m\u202e"
	j := &events.Writer{CacheDir: f.cacheDir}
	require.NoError(t, j.Append(events.Op{Verb: "ADD", Attachment: "podnet/c-evil/" + ifname, Start: f.now.Add(-time.Minute),
		Duration: 3 * ms, Outcome: "error", Error: hostile,
		Calls: []events.OpCall{{Index: 0, Type: "evil\x1b]0;owned\x07", Verb: "ADD", Duration: 2 * ms, Error: hostile}}}))
	require.NoError(t, j.Append(events.Op{Verb: "ADD", Attachment: "podnet/c-evil/eth0", Start: f.now, Outcome: "ok"}))

	out, stderr, code := f.run("trace", "c-evil", "--ifname", ifname)
	require.Equal(t, 0, code, stderr)
	clitest.AssertTerminalSafe(t, out, "trace")
	assert.Contains(t, out, `podnet/c-evil/e\x1b[31m\u202e: the last 1 of 1`)
	assert.Contains(t, out, `ADD evil\x1b]0;owned\...  [`, "the label cut to its column")
	assert.Contains(t, out, `  error: boom\x1b]0;owned\x07\x1b[2J\rhidden`)
	for _, line := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len(line), 300, "every line bounded: %q", line)
	}

	_, stderr, code = f.run("trace", "c-evil")
	assert.Equal(t, 2, code)
	clitest.AssertTerminalSafe(t, stderr, "trace's error")
	assert.Contains(t, stderr, `podnet/c-evil/e\x1b[31m\u202e`)

	out, stderr, code = f.run("trace", "c-evil", "--ifname", ifname, "--json")
	require.Equal(t, 0, code, stderr)
	clitest.AssertTerminalSafe(t, out, "trace --json")
	got := decodeJSON[traceOutput](t, out)
	assert.Equal(t, "podnet/c-evil/"+ifname, got.Attachment)
	assert.Equal(t, string([]rune(hostile)), got.Operations[0].Error, "JSON carries the text exactly")
}
