package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
)

// histogram returns the sample count and sum of the histogram of family
// name whose labels are exactly labels; 0, 0 when there is none.
func histogram(t *testing.T, m *Metrics, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	s := series(t, m, name, labels)
	return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum()
}

// call is an operation of network with one call of a delegate of typ.
func call(network, typ, verb string) events.Op {
	return events.Op{Verb: "ADD", Outcome: "ok", Attachment: network + "/c0ffee/eth0",
		Calls: []events.OpCall{{Type: typ, Verb: verb, Duration: time.Second}}}
}

// TestDelegateDurations: each call of an operation is one observation,
// by the attachment's network, the delegate's type and verb, and
// outcome; a hostile journal line gets bounded labels, and the distinct
// (network, type) pairs are capped.
func TestDelegateDurations(t *testing.T) {
	type series struct{ network, typ, verb, outcome string }
	type obs struct {
		count uint64
		sum   float64
	}
	var pairs []events.Op
	for i := range 10 { // hostile pairs are other/other and take no slot
		pairs = append(pairs, call(fmt.Sprintf("bad net %d", i), fmt.Sprintf("bad type %d", i), "ADD"))
	}
	for i := range maxDelegatePairs {
		pairs = append(pairs, call(fmt.Sprintf("net%d", i), "bridge", "ADD"))
	}
	pairs = append(pairs, call("late", "bridge", "ADD"), call("net0", "late", "ADD"), call("net0", "bridge", "ADD"))
	tests := []struct {
		name   string
		ops    []events.Op
		want   map[series]obs
		series int
	}{
		{
			name: "labels from the attachment and the call",
			ops: []events.Op{{Verb: "ADD", Outcome: "error", Attachment: "podnet/c0ffee/eth0", Calls: []events.OpCall{
				{Index: 0, Type: "bridge", Verb: "ADD", Duration: 20 * time.Millisecond},
				{Index: 1, Type: "portmap", Verb: "ADD", Duration: time.Second, Error: "iptables: resource temporarily unavailable"},
				{Index: 1, Type: "portmap", Verb: "DEL", Duration: 250 * time.Millisecond},
				{Index: 0, Type: "bridge", Verb: "DEL", Duration: 50 * time.Millisecond},
			}}},
			want: map[series]obs{
				{"podnet", "bridge", "add", "ok"}:     {1, .02},
				{"podnet", "portmap", "add", "error"}: {1, 1},
				{"podnet", "portmap", "del", "ok"}:    {1, .25},
				{"podnet", "bridge", "del", "ok"}:     {1, .05},
			},
			series: 4,
		},
		{
			name: "the network is empty without an attachment",
			ops: []events.Op{
				{Verb: "STATUS", Outcome: "ok", Calls: []events.OpCall{{Type: "bridge", Verb: "STATUS", Duration: time.Second}}},
				{Verb: "GC", Outcome: "ok", Attachment: "podnet", Calls: []events.OpCall{{Type: "host-local", Verb: "GC", Duration: time.Second}}},
			},
			want: map[series]obs{
				{"", "bridge", "status", "ok"}:       {1, 1},
				{"podnet", "host-local", "gc", "ok"}: {1, 1},
			},
			series: 2,
		},
		{
			name: "verbs are the CNI verbs, else other",
			ops: []events.Op{
				call("podnet", "bridge", "VERSION"), call("podnet", "bridge", "version"), call("podnet", "bridge", "Check"),
				call("podnet", "bridge", "REPAIR"), call("podnet", "bridge", "<script>"), call("podnet", "bridge", strings.Repeat("V", 1000)),
			},
			want: map[series]obs{
				{"podnet", "bridge", "version", "ok"}: {2, 2},
				{"podnet", "bridge", "check", "ok"}:   {1, 1},
				{"podnet", "bridge", "other", "ok"}:   {3, 3},
			},
			series: 3,
		},
		{
			name: "a network or type that is not a name is other",
			ops: []events.Op{
				call("podnet", "../../bin/sh", "ADD"), call("podnet", "a b", "ADD"), call("podnet", "\xff\xfe", "ADD"),
				call("podnet", "", "ADD"), call("podnet", strings.Repeat("a", maxNameLen+1), "ADD"),
				call("pod net", "bridge", "ADD"), call("pöd", "bridge", "ADD"),
				call("Pod_net.v2-x", "sbr", "ADD"), call("podnet", strings.Repeat("a", maxNameLen), "ADD"),
			},
			want: map[series]obs{
				{"podnet", "other", "add", "ok"}:                         {5, 5},
				{"other", "bridge", "add", "ok"}:                         {2, 2},
				{"Pod_net.v2-x", "sbr", "add", "ok"}:                     {1, 1},
				{"podnet", strings.Repeat("a", maxNameLen), "add", "ok"}: {1, 1},
			},
			series: 4,
		},
		{
			name: "past the cap a new pair is other, a pair seen keeps its series",
			ops:  pairs,
			want: map[series]obs{
				{"other", "other", "add", "ok"}:  {12, 12},
				{"net0", "bridge", "add", "ok"}:  {2, 2},
				{"net63", "bridge", "add", "ok"}: {1, 1},
				{"late", "bridge", "add", "ok"}:  {0, 0},
				{"net0", "late", "add", "ok"}:    {0, 0},
			},
			series: maxDelegatePairs + 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			for _, op := range tt.ops {
				m.ObserveOp(op)
			}
			for s, want := range tt.want {
				n, sum := histogram(t, m, "catena_delegate_duration_seconds",
					map[string]string{"network": s.network, "type": s.typ, "verb": s.verb, "outcome": s.outcome})
				assert.Equal(t, want.count, n, "%+v", s)
				assert.InDelta(t, want.sum, sum, 1e-9, "%+v", s)
			}
			n, err := testutil.GatherAndCount(m.Registry, "catena_delegate_duration_seconds")
			require.NoError(t, err)
			assert.Equal(t, tt.series, n)
		})
	}
}

// TestLockWaitAndRecordWrites: every operation's lock wait is observed,
// its record writes only when it made some, by its bounded verb.
func TestLockWaitAndRecordWrites(t *testing.T) {
	tests := []struct {
		name       string
		op         events.Op
		verb       string
		lockWait   float64
		writeTime  float64 // the catena_record_write_seconds sum; no series when writes is 0
		writes     int
		wantWrites bool
	}{
		{name: "an ADD that waited and wrote", op: events.Op{Verb: "ADD", Outcome: "ok", LockWait: 30 * time.Millisecond, Writes: 2 * time.Millisecond, WriteCount: 3},
			verb: "add", lockWait: .03, writeTime: .002, writes: 3, wantWrites: true},
		{name: "a CHECK that wrote nothing", op: events.Op{Verb: "CHECK", Outcome: "ok", LockWait: time.Millisecond},
			verb: "check", lockWait: .001},
		{name: "a hostile verb", op: events.Op{Verb: "<junk>", Outcome: "ok", LockWait: time.Second, Writes: time.Millisecond, WriteCount: 1},
			verb: "other", lockWait: 1, writeTime: .001, writes: 1, wantWrites: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			m.ObserveOp(tt.op)
			n, sum := histogram(t, m, "catena_lock_wait_seconds", map[string]string{"verb": tt.verb})
			assert.Equal(t, uint64(1), n)
			assert.InDelta(t, tt.lockWait, sum, 1e-9)
			n, sum = histogram(t, m, "catena_record_write_seconds", map[string]string{"verb": tt.verb})
			writeSeries, err := testutil.GatherAndCount(m.Registry, "catena_record_write_seconds", "catena_record_writes_total")
			require.NoError(t, err)
			if !tt.wantWrites {
				assert.Zero(t, writeSeries, "no write, no series")
				return
			}
			assert.Equal(t, 2, writeSeries)
			assert.Equal(t, uint64(1), n, "one observation per operation")
			assert.InDelta(t, tt.writeTime, sum, 1e-9)
			assert.Equal(t, float64(tt.writes), testutil.ToFloat64(m.times.writes.WithLabelValues(tt.verb)))
		})
	}
}
