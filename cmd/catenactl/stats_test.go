package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/internal/clitest"
	"github.com/catena-cni/catena/libchain/events"
)

const ms = time.Millisecond

// writeEvents fills the fixture's event journal with: 4 ADDs in the window
// (one failed and rolled back, bridge latencies 10..40ms), a DEL that waited
// 5ms for its lock, an ADD older than the window in the rotated file, and a
// torn last line.
func writeEvents(t *testing.T, f *fixture) {
	t.Helper()
	j := &events.Writer{CacheDir: f.cacheDir}
	at := func(ago time.Duration) time.Time { return f.now.Add(-ago) }
	add := func(ago, bridge time.Duration, fail bool) events.Op {
		op := events.Op{Verb: "ADD", Attachment: "podnet/c/eth0", Start: at(ago), Duration: bridge + 5*ms, Outcome: "ok",
			Calls: []events.OpCall{{Index: 0, Type: "bridge", Verb: "ADD", Duration: bridge}}}
		if fail {
			op.Outcome, op.Error, op.Rollback = "error", "delegate 1 (portmap) ADD failed: boom", true
			op.Calls = append(op.Calls,
				events.OpCall{Index: 1, Type: "portmap", Verb: "ADD", Duration: 2 * ms, Error: "boom"},
				events.OpCall{Index: 0, Type: "bridge", Verb: "DEL", Duration: 3 * ms})
		}
		return op
	}
	rotated := filepath.Join(f.cacheDir, "events", "events.jsonl.1")
	require.NoError(t, os.MkdirAll(filepath.Dir(rotated), 0o700))
	old, err := json.Marshal(add(2*time.Hour, time.Second, false))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(rotated, append(old, '\n'), 0o600))
	for _, op := range []events.Op{
		add(50*time.Minute, 10*ms, false), add(40*time.Minute, 20*ms, false),
		add(30*time.Minute, 30*ms, true), add(20*time.Minute, 40*ms, false),
		{Verb: "DEL", Attachment: "podnet/c/eth0", Start: at(10 * time.Minute), Duration: 8 * ms, LockWait: 5 * ms, Outcome: "ok",
			Calls: []events.OpCall{{Index: 0, Type: "bridge", Verb: "DEL", Duration: 1 * ms}}},
	} {
		require.NoError(t, j.Append(op))
	}
	fd, err := os.OpenFile(events.Path(f.cacheDir), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fd.WriteString(`{"verb":"ADD","start":"`)
	require.NoError(t, err)
	require.NoError(t, fd.Close())
}

func TestStatsJSON(t *testing.T) {
	f := newFixture(t)
	writeEvents(t, f)
	out, stderr, code := f.run("stats", "--json")
	require.Equal(t, 0, code, stderr)
	got := decodeJSON[map[string]any](t, out)
	assert.Equal(t, float64(3600), got["windowSeconds"])
	assert.Equal(t, []any{
		map[string]any{"verb": "ADD", "count": float64(4), "failures": float64(1), "rollbacks": float64(1),
			"durationP50Ns": float64(25 * ms), "durationP95Ns": float64(45 * ms), "durationSumNs": float64(120 * ms),
			"lockWaitP50Ns": float64(0), "lockWaitP95Ns": float64(0), "lockWaitMaxNs": float64(0), "lockWaitSumNs": float64(0)},
		map[string]any{"verb": "DEL", "count": float64(1), "failures": float64(0), "rollbacks": float64(0),
			"durationP50Ns": float64(8 * ms), "durationP95Ns": float64(8 * ms), "durationSumNs": float64(8 * ms),
			"lockWaitP50Ns": float64(5 * ms), "lockWaitP95Ns": float64(5 * ms), "lockWaitMaxNs": float64(5 * ms), "lockWaitSumNs": float64(5 * ms)},
	}, got["operations"])
	assert.Equal(t, []any{
		map[string]any{"index": float64(0), "type": "bridge", "verb": "ADD", "calls": float64(4), "failures": float64(0),
			"p50Ns": float64(20 * ms), "p95Ns": float64(40 * ms), "durationSumNs": float64(100 * ms)},
		map[string]any{"index": float64(0), "type": "bridge", "verb": "DEL", "calls": float64(2), "failures": float64(0),
			"p50Ns": float64(1 * ms), "p95Ns": float64(3 * ms), "durationSumNs": float64(4 * ms)},
		map[string]any{"index": float64(1), "type": "portmap", "verb": "ADD", "calls": float64(1), "failures": float64(1),
			"p50Ns": float64(2 * ms), "p95Ns": float64(2 * ms), "durationSumNs": float64(2 * ms)},
	}, got["delegates"])

	out, _, code = f.run("stats", "--json", "--window", "3h")
	require.Equal(t, 0, code)
	ops := decodeJSON[stats](t, out).Operations
	require.Len(t, ops, 2)
	assert.Equal(t, 5, ops[0].Count, "the rotated file's older ADD is in a 3h window")
}

func TestStatsTable(t *testing.T) {
	f := newFixture(t)
	writeEvents(t, f)
	out, stderr, code := f.run("stats")
	require.Equal(t, 0, code, stderr)
	rows := tableRows(out)
	assert.Equal(t, []string{"5", "operation(s)", "in", "the", "last", "1h0m0s", "(since", timestamp(f.now.Add(-time.Hour)) + ")"}, rows[0])
	assert.Contains(t, rows, []string{"VERB", "OPS", "FAILED", "ROLLBACKS", "P50", "P95", "LOCK-WAIT-P50", "LOCK-WAIT-P95", "LOCK-WAIT-MAX"})
	assert.Contains(t, rows, []string{"ADD", "4", "1", "1", "25ms", "45ms", "0s", "0s", "0s"})
	assert.Contains(t, rows, []string{"DEL", "1", "0", "0", "8ms", "8ms", "5ms", "5ms", "5ms"})
	assert.Contains(t, rows, []string{"DELEGATE", "VERB", "CALLS", "FAILED", "P50", "P95"})
	assert.Contains(t, rows, []string{"0", "(bridge)", "ADD", "4", "0", "20ms", "40ms"})
	assert.Contains(t, rows, []string{"1", "(portmap)", "ADD", "1", "1", "2ms", "2ms"})

	out, _, code = f.run("stats", "--window", "1m")
	require.Equal(t, 0, code)
	assert.Equal(t, "0 operation(s) in the last 1m0s (since "+timestamp(f.now.Add(-time.Minute))+")\n"+
		"1 unreadable event line(s) skipped\n\n", out, "the torn last line is counted")

	_, stderr, code = f.run("stats", "--window", "-1m")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--window must be positive")
}

func TestQuantile(t *testing.T) {
	ds := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n)
		}
		return out
	}
	tests := []struct {
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ds(7), 0.95, 7},
		{ds(4, 1, 3, 2), 0.5, 2},
		{ds(4, 1, 3, 2), 0.95, 4},
		{ds(10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200), 0.95, 190},
		{ds(3, 1, 2), 1, 3},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, quantile(tt.in, tt.q), "q%v of %v", tt.q, tt.in)
	}
}

// TestStatsSurvivesJunkLines: stats and metrics read past any line of the
// journal (a 40 MB line, invalid JSON, invalid UTF-8, binary junk, a torn
// last line), count what they skipped and still summarise the rest.
func TestStatsSurvivesJunkLines(t *testing.T) {
	f := newFixture(t)
	writeEvents(t, f) // ends with a torn line
	huge := make([]byte, 40<<20)
	for i := range huge {
		huge[i] = 'x'
	}
	good, err := json.Marshal(events.Op{Verb: "DEL", Attachment: "podnet/c/eth0", Start: f.now.Add(-time.Minute),
		Duration: 2 * ms, Outcome: "ok", Calls: []events.OpCall{{Index: 0, Type: "bridge\x1b[2J", Verb: "DEL", Duration: ms}}})
	require.NoError(t, err)
	fd, err := os.OpenFile(events.Path(f.cacheDir), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	for _, line := range [][]byte{
		{'\n'},                              // ends the torn line: unreadable
		append(huge, '\n'),                  // 40 MB
		[]byte("not json\n"),                // invalid JSON
		[]byte("\x00\x01\xfe\xff\x1b[2J\n"), // binary junk
		append([]byte(`{"verb":"ADD","start":"`+f.now.Format(time.RFC3339)+`","outcome":"ok","error":"a`+"\xff"+`b"}`), '\n'), // invalid UTF-8, still an op
		append(good, '\n'),
		[]byte(`{"verb":"DEL"`), // torn last line
	} {
		_, err = fd.Write(line)
		require.NoError(t, err)
	}
	require.NoError(t, fd.Close())

	out, stderr, code := f.run("stats", "--json")
	require.Equal(t, 0, code, stderr)
	s := decodeJSON[stats](t, out)
	assert.Equal(t, 5, s.Skipped, "the torn line, the 40 MB line, not json, junk, the torn last line")
	require.Len(t, s.Operations, 2)
	assert.Equal(t, 5, s.Operations[0].Count, "the 4 ADDs of writeEvents and the one with invalid UTF-8")
	assert.Equal(t, 2, s.Operations[1].Count, "the DEL of writeEvents and the one after the junk")

	out, stderr, code = f.run("stats")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "7 operation(s) in the last 1h0m0s")
	assert.Contains(t, out, "5 unreadable event line(s) skipped")

	out, stderr, code = f.run("metrics")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "catena_events_unreadable_lines 5\n")
	assert.Contains(t, out, `catena_operations{outcome="ok",verb="DEL"} 2`)
	assert.Contains(t, out, `catena_delegate_calls{index="0",type="bridge\\x1b[2J",verb="DEL"} 1`, "ESC in a label is escaped")
	clitest.AssertTerminalSafe(t, out, "metrics")
}
