package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// TestFloors: the floor of an operation is the sum of its delegate calls;
// only successful ADDs and DELs inside the phase's window count.
func TestFloors(t *testing.T) {
	b := &bench{catena: &variant{cache: t.TempDir()}}
	j := &events.Writer{CacheDir: b.catena.cache}
	t0 := time.Now()
	op := func(verb string, at time.Duration, total time.Duration, outcome string, calls ...time.Duration) {
		o := events.Op{Verb: verb, Start: t0.Add(at), Duration: total, Outcome: outcome}
		for i, c := range calls {
			o.Calls = append(o.Calls, events.OpCall{Index: i, Type: "x", Verb: verb, Duration: c})
		}
		require.NoError(t, j.Append(o))
	}
	ms := time.Millisecond
	op("ADD", -time.Minute, 500*ms, "ok", 400*ms) // before the window
	op("ADD", 1*ms, 60*ms, "ok", 20*ms, 30*ms)
	op("ADD", 2*ms, 70*ms, "ok", 25*ms, 35*ms)
	op("ADD", 3*ms, 80*ms, "ok", 30*ms, 40*ms)
	op("ADD", 4*ms, 999*ms, "error", 1*ms) // failed: not counted
	op("DEL", 5*ms, 40*ms, "ok", 10*ms, 20*ms)
	op("CHECK", 6*ms, 40*ms, "ok", 10*ms)
	op("DEL", time.Hour, 500*ms, "ok", 400*ms) // after the window

	catena := latencies{add: []time.Duration{90 * ms}, del: []time.Duration{50 * ms}}
	plain := latencies{add: []time.Duration{85 * ms}, del: []time.Duration{45 * ms}}
	got, err := b.floors("(a) seq", t0, t0.Add(time.Minute), catena, plain)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, floor{phase: "(a) seq", verb: "ADD", n: 3, floor: 60 * ms, inside: 70 * ms, own: 10 * ms,
		endToEnd: 90 * ms, plain: 85 * ms}, got[0])
	assert.Equal(t, floor{phase: "(a) seq", verb: "DEL", n: 1, floor: 30 * ms, inside: 40 * ms, own: 10 * ms,
		endToEnd: 50 * ms, plain: 45 * ms}, got[1])
}
