package kevents

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain"
	"github.com/catena-cni/catena/libchain/events"
)

var (
	t0  = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	pod = &events.OpPod{Namespace: "ns", Name: "web", UID: "u1"}
	ref = Object{Kind: "Pod", Namespace: "ns", Name: "web", UID: "u1"}
)

func call(i int, typ, verb, err string) events.OpCall {
	return events.OpCall{Index: i, Type: typ, Verb: verb, Error: err}
}

func TestMapperMap(t *testing.T) {
	rollback := events.Op{Verb: "ADD", Attachment: "n/c1/eth0", Start: t0, Rollback: true, Outcome: "error",
		Error: "boom", Pod: pod, Calls: []events.OpCall{call(0, "bridge", "ADD", ""), call(1, "seed", "ADD", "boom"),
			call(1, "seed", "DEL", ""), call(0, "bridge", "DEL", "")}}
	bestEffort := rollback // the failed delegate's own DEL failing holds nothing
	bestEffort.Calls = []events.OpCall{call(0, "bridge", "ADD", ""), call(1, "seed", "ADD", "boom"),
		call(1, "seed", "DEL", "also boom"), call(0, "bridge", "DEL", "")}
	rollbackHeld := rollback
	rollbackHeld.Calls = []events.OpCall{call(0, "bridge", "ADD", ""), call(1, "seed", "ADD", "boom"),
		call(0, "bridge", "DEL", "busy")}
	delHeld := events.Op{Verb: "DEL", Attachment: "n/c1/eth0", Start: t0, Outcome: "error", Error: "x", Pod: pod,
		Calls: []events.OpCall{call(2, "tuning", "DEL", "best effort"), call(1, "fw", "DEL", ""), call(0, "bridge", "DEL", "busy")}}
	retryOK := events.Op{Verb: "RETRY", Attachment: "n/c1/eth0", Start: t0.Add(time.Minute), Outcome: "ok",
		Calls: []events.OpCall{call(0, "bridge", "DEL", "")}}
	gcOK := events.Op{Verb: "GC", Attachment: "n/c1/eth0", Start: t0.Add(time.Minute), Outcome: "ok",
		Calls: []events.OpCall{call(0, "bridge", "DEL", "")}}
	gcHeld := events.Op{Verb: "GC", Attachment: "n/c1/eth0", Start: t0, Outcome: "error", Error: "x", Pod: pod,
		Calls: []events.OpCall{call(1, "fw", "DEL", ""), call(0, "bridge", "DEL", "busy")}}
	gcNetwork := events.Op{Verb: "GC", Start: t0.Add(time.Minute), Outcome: "ok",
		Calls: []events.OpCall{call(0, "bridge", "GC", "")}}
	reclaim := events.Op{Verb: "RECLAIM", Attachment: "n/c2/eth0", Start: t0, Outcome: "ok", Pod: pod,
		Calls: []events.OpCall{call(0, "bridge", "DEL", "")}}
	tests := []struct {
		name string
		ops  []events.Op
		want []Fact // of the last op
		held int
	}{
		{"rollback, nothing held", []events.Op{rollback}, []Fact{{ref, Warning, ReasonRolledBack,
			"ADD of n/c1/eth0 failed at delegate 1 (seed): boom; rolled back delegate 1 (seed), delegate 0 (bridge); nothing is held"}}, 0},
		{"rollback whose best-effort DEL failed", []events.Op{bestEffort}, []Fact{{ref, Warning, ReasonRolledBack,
			"ADD of n/c1/eth0 failed at delegate 1 (seed): boom; rolled back delegate 0 (bridge); nothing is held"}}, 0},
		{"rollback holding a delegate", []events.Op{rollbackHeld}, []Fact{{ref, Warning, ReasonRolledBack,
			"ADD of n/c1/eth0 failed at delegate 1 (seed): boom; rolled back nothing; still held: delegate 0 (bridge)"}}, 1},
		{"held DEL", []events.Op{delHeld}, []Fact{{ref, Warning, ReasonTeardownHeld,
			"DEL of n/c1/eth0: DEL of delegate 0 (bridge) failed: busy; held: delegate 0 (bridge) and the delegates before it; the agent's retry tries again"}}, 1},
		{"released by the retry, pod remembered", []events.Op{delHeld, retryOK}, []Fact{{ref, Normal, ReasonTeardownReleased,
			"RETRY of n/c1/eth0 released what was held since 2026-11-26T12:00:00Z"}}, 0},
		{"ok retry of nothing held", []events.Op{retryOK}, nil, 0},
		{"released by a GC's teardown of the attachment", []events.Op{delHeld, gcOK}, []Fact{{ref, Normal, ReasonTeardownReleased,
			"GC of n/c1/eth0 released what was held since 2026-11-26T12:00:00Z"}}, 0},
		{"a GC's teardown that fails holds", []events.Op{gcHeld}, []Fact{{ref, Warning, ReasonTeardownHeld,
			"GC of n/c1/eth0: DEL of delegate 0 (bridge) failed: busy; held: delegate 0 (bridge) and the delegates before it; the agent's retry tries again"}}, 1},
		{"the network's GC releases nothing", []events.Op{delHeld, gcNetwork}, nil, 1},
		{"reclaimed", []events.Op{reclaim}, []Fact{{ref, Normal, ReasonReclaimed,
			"the runtime no longer has the sandbox of n/c2/eth0: Catena tore it down (delegate 0 (bridge))"}}, 0},
		{"abandon forgets", []events.Op{delHeld, {Verb: "ABANDON", Attachment: "n/c1/eth0", Outcome: "ok"}}, nil, 0},
		{"no pod, no event", []events.Op{{Verb: "ADD", Attachment: "n/c/eth0", Rollback: true, Outcome: "error"}}, nil, 0},
		{"plain ADD", []events.Op{{Verb: "ADD", Attachment: "n/c/eth0", Outcome: "ok", Pod: pod}}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMapper()
			var got []Fact
			for _, op := range tt.ops {
				got = m.Map(op)
			}
			assert.Equal(t, tt.want, got)
			n, _, _ := m.Held()
			assert.Equal(t, tt.held, n)
		})
	}
}

func TestMapperNodeHeld(t *testing.T) {
	m := NewMapper()
	for i, c := range []string{"n/b/eth0", "n/a/eth0", "n/c/eth0"} {
		m.Map(events.Op{Verb: "DEL", Attachment: c, Start: t0.Add(time.Duration(3-i) * time.Minute), Outcome: "error",
			Calls: []events.OpCall{call(0, "bridge", "DEL", "busy")}})
	}
	_, ok := m.NodeHeld("node1", 4)
	assert.False(t, ok, "below the threshold")
	_, ok = m.NodeHeld("node1", 0)
	assert.False(t, ok, "disabled")
	f, ok := m.NodeHeld("node1", 3)
	require.True(t, ok)
	assert.Equal(t, Fact{Object{Kind: "Node", Name: "node1"}, Warning, ReasonTeardownsHeld,
		"3 teardowns are held (threshold 3); the oldest is n/c/eth0, since 2026-11-26T12:01:00Z"}, f)
}

func TestPodOf(t *testing.T) {
	tests := []struct {
		args string
		want *events.OpPod
	}{
		{"IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=c;K8S_POD_UID=u1", pod},
		{"K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web", &events.OpPod{Namespace: "ns", Name: "web"}},
		{"K8S_POD_NAME=web", nil},
		{"", nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, libchain.PodOf(tt.args), tt.args)
	}
}
