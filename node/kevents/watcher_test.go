package kevents

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/catena-cni/catena/libchain/events"
	"github.com/catena-cni/catena/node/nodeconf"
)

type recorded struct{ facts []Fact }

func (r *recorded) Emit(f Fact) { r.facts = append(r.facts, f) }

func (r *recorded) reasons() []string {
	var out []string
	for _, f := range r.facts {
		out = append(out, f.Reason)
	}
	return out
}

func heldDel(c string) events.Op {
	return events.Op{Verb: "DEL", Attachment: c, Start: t0, Outcome: "error", Pod: pod,
		Calls: []events.OpCall{call(0, "bridge", "DEL", "busy")}}
}

func TestWatcherStartsAtTheEndAndFollows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catena")
	j := &events.Writer{CacheDir: dir}
	require.NoError(t, j.Append(heldDel("n/old/eth0")), "history before the agent started")
	rec := &recorded{}
	w := &Watcher{CacheDir: dir, Node: "node1", HeldThreshold: 2, Emitter: rec}
	require.NoError(t, w.Start())
	require.NoError(t, w.Poll(t0))
	assert.Empty(t, rec.facts, "old history is not replayed")

	require.NoError(t, j.Append(heldDel("n/a/eth0")))
	require.NoError(t, w.Poll(t0))
	assert.Equal(t, []string{ReasonTeardownHeld}, rec.reasons())

	require.NoError(t, j.Append(heldDel("n/b/eth0")))
	require.NoError(t, w.Poll(t0))
	assert.Equal(t, []string{ReasonTeardownHeld, ReasonTeardownHeld, ReasonTeardownsHeld}, rec.reasons(), "threshold reached")
	require.NoError(t, w.Poll(t0.Add(time.Minute)))
	assert.Len(t, rec.facts, 3, "the Node warning is not repeated within its period")
	require.NoError(t, w.Poll(t0.Add(nodeHeldRepeat)))
	assert.Len(t, rec.facts, 4, "and is repeated after it")

	require.NoError(t, j.Append(events.Op{Verb: "RETRY", Attachment: "n/a/eth0", Start: t0, Outcome: "ok",
		Calls: []events.OpCall{call(0, "bridge", "DEL", "")}}))
	require.NoError(t, w.Poll(t0.Add(nodeHeldRepeat+time.Minute)))
	assert.Equal(t, ReasonTeardownReleased, rec.facts[4].Reason)
	assert.Equal(t, ref, rec.facts[4].Object, "the pod of the held DEL")
	assert.Len(t, rec.facts, 5, "below the threshold again")
}

type countObserver struct{ written, taken int }

func (c *countObserver) ConflistWritten()              { c.written++ }
func (c *countObserver) ConflistTaken(string)          { c.taken++ }
func (c *countObserver) ConflistBackoff(time.Duration) {}

func TestNodeObserver(t *testing.T) {
	rec, next := &recorded{}, &countObserver{}
	o := &NodeObserver{Next: next, Emitter: rec, Node: "node1"}
	o.ConflistWritten()
	o.ConflistTaken(nodeconf.TakenByCilium)
	o.ConflistBackoff(time.Second)
	assert.Equal(t, countObserver{1, 1}, *next, "passed on")
	require.Len(t, rec.facts, 2)
	assert.Equal(t, Fact{Object{Kind: "Node", Name: "node1"}, Normal, ReasonConflistWritten,
		"catena-agent wrote the generated conflist that wraps the node's primary CNI config"}, rec.facts[0])
	assert.Equal(t, Warning, rec.facts[1].Type)
	assert.Contains(t, rec.facts[1].Message, "cni.exclusive: false")

	silent := &NodeObserver{Emitter: rec}
	silent.ConflistWritten()
	assert.Len(t, rec.facts, 2, "no node name, no Node event")
}
